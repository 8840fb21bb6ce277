"""Empirical privacy audit of ldpfed's randomizers (spec: audit.md).

    >>> from ldpfed.audit import audit
    >>> result = audit("laplace", epsilon=1.0, samples=200_000, seed=0)
    >>> result.verdict, result.epsilon_lower, result.event

A failed audit is a proof (at the stated confidence) that the claimed guarantee is false; a passed
one proves nothing. Modules: `bounds` (Clopper–Pearson, eps_lower), `events` (event families
chosen on a selection half), `floating_point` (which floats an input can produce), `subjects` (the
plug-in interface and the built-in mechanisms), `auditor` (the procedure and its result).
"""

from ldpfed.audit.auditor import AuditResult, audit, run_audit
from ldpfed.audit.subjects import AuditSubject, available, build_subject, gaussian_vector_subject

__all__ = ["AuditResult", "AuditSubject", "audit", "available", "build_subject", "gaussian_vector_subject", "run_audit"]

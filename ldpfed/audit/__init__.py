"""Empirical privacy audit of ldpfed's randomizers (spec: audit.md).

    >>> from ldpfed.audit import audit
    >>> result = audit("laplace", epsilon=1.0, samples=200_000, seed=0)
    >>> result.verdict, result.epsilon_lower, result.event

A failed audit is a proof (at the stated confidence) that the claimed guarantee is false; a passed
one proves nothing. Modules: `bounds` (Clopper–Pearson, eps_lower), `events` (event families
chosen on a selection half), `floating_point` (which floats an input can produce), `subjects` (the
plug-in interface and the built-in mechanisms), `auditor` (the procedure and its result).

The audit of a training run from canaries: `one_run` (the one-run lower bound of Steinke, Nasr &
Jagielski 2023 from canary scores and secret coins), `canaries` (canary directions, their cosines
and the one-shot estimate of Andrew et al. 2024), `verdict` (accounted eps beside both, and the
failed/suspect flags), `in_run` (from what a run recorded to the verdict).
"""

from ldpfed.audit.auditor import AuditResult, audit, run_audit
from ldpfed.audit.canaries import (
    CosineEstimate,
    all_iterates_estimate,
    canary_cosines,
    canary_directions,
    epsilon_two_gaussians,
    final_model_estimate,
    final_model_lower_limit,
    inclusion_coins,
    max_over_rounds,
)
from ldpfed.audit.in_run import CanaryRecord, canary_audit
from ldpfed.audit.one_run import OneRunBound, count_correct, one_run_audit, one_run_epsilon, one_run_p_value
from ldpfed.audit.subjects import AuditSubject, available, build_subject, gaussian_vector_subject
from ldpfed.audit.verdict import AuditVerdict, audit_verdict

__all__ = [
    "AuditResult",
    "AuditSubject",
    "AuditVerdict",
    "CanaryRecord",
    "CosineEstimate",
    "OneRunBound",
    "all_iterates_estimate",
    "audit",
    "audit_verdict",
    "available",
    "build_subject",
    "canary_audit",
    "canary_cosines",
    "canary_directions",
    "count_correct",
    "epsilon_two_gaussians",
    "final_model_estimate",
    "final_model_lower_limit",
    "gaussian_vector_subject",
    "inclusion_coins",
    "max_over_rounds",
    "one_run_audit",
    "one_run_epsilon",
    "one_run_p_value",
    "run_audit",
]

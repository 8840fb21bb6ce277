"""LDPVec as a subject of ldpfed's privacy auditor (`ldpfed.audit`, spec: audit.md; issue 13).

The auditor needs a sampler on two neighbouring inputs and, where known, the density ratio. The
subject draws what a client sends, the Cartesian update y = perturb(x), at the worst-case
neighbours of `neighbours.py` (norm C vs ~0, every angle at opposite window edges). Its vector
event families include the output norm, and ||y|| = |r*| whatever the angles: with magnitude
"exact-unsafe" the two inputs' outputs have norms C and ~0, so the audit fails (the thesis'
Algorithm 6 as printed is not private). With `release="polar"` the subject draws the polar
release (r*, theta*) instead and supplies its exact log density ratio (sound modes only), the
most powerful event for them.

`ldpfed.audit` is imported lazily: it ships with the audit issue, not with this package.
"""

from __future__ import annotations

import numpy as np

from ldpfed.directional.ldpvec import LDPVec
from ldpfed.directional.neighbours import polar_log_ratio, polar_release, worst_case_neighbours
from ldpfed.validation import LDPValueError, check_positive_int

RELEASES = ("cartesian", "polar")


def ldpvec_subject(base: str, epsilon: float, delta: float | None = None, *, magnitude: str = "split",
                   dims: int = 4, beta: float = 0.5, window: str = "fixed", release: str = "cartesian",
                   **options):
    """The AuditSubject of LDPVec(base, epsilon, delta) with clip 1 in `dims` dimensions; the claim
    audited is (epsilon, delta) per update, also for exact-unsafe (which claims it wrongly)."""
    from ldpfed.audit.subjects import AuditSubject

    dims = check_positive_int(dims, "dims", minimum=2)
    if release not in RELEASES:
        raise LDPValueError(f"release must be one of {RELEASES}, got {release!r}")
    vec = LDPVec(base, epsilon, clip=1.0, delta=delta, beta=beta, window=window, magnitude=magnitude, options=options)
    if release == "polar" and not vec.private:
        raise LDPValueError("exact-unsafe has no density ratio; audit it with release='cartesian'")
    x, x_other = worst_case_neighbours(vec, dims)
    if release == "polar":
        centres = tuple(np.r_[radius, angles[0]] for radius, angles in (vec.clipped_polar(v) for v in (x, x_other)))

        def draw(which, n, rng):
            return polar_release(vec, (x, x_other)[which], n, rng)

        def log_ratio(y):
            return polar_log_ratio(vec, x, x_other, y)
    else:
        centres = (vec.preprocess(x)[0], vec.preprocess(x_other)[0])
        log_ratio = None

        def draw(which, n, rng):
            rows = np.broadcast_to((x, x_other)[which], (n, dims))
            return vec.perturb(rows, rng)

    split = vec.budget(dims)
    return AuditSubject(
        name="ldpvec", epsilon=vec.epsilon, delta=vec.delta or 0.0,
        sampler=str(getattr(vec._randomizers(dims)[2], "sampler", "continuous")),
        inputs=("x: norm C, angles at the low window edges", "x': norm ~0, angles at the high window edges"),
        draw=draw, output="vector", log_ratio=log_ratio, centres=centres,
        options={"base": vec.base, "magnitude": vec.magnitude, "dims": dims, "beta": vec.beta,
                 "window": vec.window, "release": release, "private": vec.private,
                 "spent_epsilon": split.spent_epsilon, **vec.options},
    )

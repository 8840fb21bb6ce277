"""LDPVec as a subject of ldpfed's privacy auditor (`ldpfed.audit`, spec: audit.md).

The auditor needs a sampler on two neighbouring inputs and, where known, the density ratio. The
subject draws what a client sends, the Cartesian update y = perturb(x), at the worst-case
neighbours of `neighbours.py` (norm C vs ~0, every angle at opposite window edges). Its vector
event families include the output norm, and ||y|| = |r*| whatever the angles: with magnitude
"exact-unsafe" the two inputs' outputs have norms C and ~0, so the audit fails (the thesis'
Algorithm 6 as printed is not private). With `release="polar"` the subject draws the polar
release (r*, theta*) instead and supplies its exact log density ratio (sound modes only), the
most powerful event for them.

`release="offsets"` (base gaussian) audits the angle randomizer itself, its noisy window offsets
before the float conversion to angles (which any release is a post-processing of), for the
floating-point event of audit.md. The neighbours are x = C e_(d-1), whose last angle is 0 exactly
(offset 0 under both window kinds), and the worst-case x' (offsets at the window edges, +-1). The
continuous sampler releases y = fl(t + fl(sd n)): from t = 0 any float, from t = +-1 a y with
|y| < 1/2 is a multiple of 2^-53 (`continuous_producible`), so outputs off that lattice are never
produced by x' and the event fires (Mironov 2012). The safe sampler releases fl(fl(m g) / half)
for integers m whatever the input: the same test for both inputs, the event cannot fire.

"""

from __future__ import annotations

import functools

import numpy as np

from ldpfed.audit.gradient_noise_subject import continuous_producible
from ldpfed.audit.subject import vector_subject
from ldpfed.directional.ldpvec import LDPVec
from ldpfed.directional.neighbours import polar_log_ratio, polar_release, worst_case_neighbours
from ldpfed.validation import LDPValueError, check_positive_int

RELEASES = ("cartesian", "polar", "offsets")


def ldpvec_subject(
    base: str,
    epsilon: float,
    delta: float | None = None,
    *,
    magnitude: str = "split",
    dims: int = 4,
    beta: float = 0.5,
    window: str = "fixed",
    release: str = "cartesian",
    **options,
):
    """The AuditSubject of LDPVec(base, epsilon, delta) with clip 1 in `dims` dimensions; the claim
    audited is (epsilon, delta) per update, also for exact-unsafe (which claims it wrongly)."""

    dims = check_positive_int(dims, "dims", minimum=2)
    if release not in RELEASES:
        raise LDPValueError(f"release must be one of {RELEASES}, got {release!r}")
    vec = LDPVec(base, epsilon, clip=1.0, delta=delta, beta=beta, window=window, magnitude=magnitude, options=options)
    if release == "polar" and not vec.private:
        raise LDPValueError("exact-unsafe has no density ratio; audit it with release='cartesian'")
    if release == "polar" and vec.angle_sampler == "safe":
        raise LDPValueError(
            "the safe gaussian angles (a mixture over roundings) have no density ratio here; audit them "
            "with release='cartesian' or 'offsets', or the polar release with sampler='continuous'"
        )
    x, x_other = worst_case_neighbours(vec, dims)
    producible = None
    if release == "offsets":
        if vec.base != "gaussian":
            raise LDPValueError("release='offsets' audits the gaussian angle samplers; use cartesian or polar")
        x = np.zeros(dims)
        x[-2] = vec.clip  # last angle exactly 0: offset 0 (fixed and centred windows)
        centres = (vec.angle_offsets(x)[0], vec.angle_offsets(x_other)[0])
        producible = _offsets_producible(vec, dims, centres)
        perturb, log_ratio = vec.perturb_angle_offsets, None
    elif release == "polar":
        centres = tuple(np.r_[radius, angles[0]] for radius, angles in (vec.clipped_polar(v) for v in (x, x_other)))
        perturb = functools.partial(polar_release, vec)

        def log_ratio(y):
            return polar_log_ratio(vec, x, x_other, y)
    else:
        centres = (vec.preprocess(x)[0], vec.preprocess(x_other)[0])
        perturb, log_ratio = vec.perturb, None

    split = vec.budget(dims)
    return vector_subject(
        perturb,
        (x, x_other),
        centres,
        name="ldpvec",
        epsilon=vec.epsilon,
        delta=vec.delta or 0.0,
        sampler=str(getattr(vec._randomizers(dims)[2], "sampler", "continuous")),
        inputs=(
            ("x: C e_(d-1), last angle 0" if release == "offsets" else "x: norm C, angles at the low window edges"),
            "x': norm ~0, angles at the high window edges",
        ),
        log_ratio=log_ratio,
        producible=producible,
        options={
            "base": vec.base,
            "magnitude": vec.magnitude,
            "dims": dims,
            "beta": vec.beta,
            "window": vec.window,
            "release": release,
            "private": vec.private,
            "spent_epsilon": split.spent_epsilon,
            **vec.options,
        },
    )


def _offsets_producible(vec: LDPVec, dims: int, centres):
    """producible(y, which) for the gaussian angle offsets (module docstring): exact for both samplers."""

    randomizer = vec._randomizers(dims)[2]
    if randomizer.sampler == "safe":
        step, half = randomizer.step, randomizer.half

        def on_grid(reports):
            y = np.atleast_2d(reports)
            m = np.rint(y * half / step)
            return np.all((m * step) / half == y, axis=-1)

        tests = (on_grid, on_grid)
    else:
        tests = tuple(continuous_producible(centre) for centre in centres)

    def producible(reports, which):
        return tests[which](np.asarray(reports, dtype=float))

    return producible

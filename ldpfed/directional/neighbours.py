"""Worst-case neighbouring inputs of LDPVec and the density of its release, for privacy audits
(spec: audit.md; directional.md, LDPVec).

What LDPVec releases before the (post-processing) conversion back to Cartesian coordinates is the
polar vector (r*, theta*_1..theta*_(D-1)). Its privacy is what the budget accounts, so an audit of
the polar release is the most powerful one. The worst case of the sensitivity is
    x  : norm C, every angle at the low edge of its window,
    x' : norm ~0 (C 2^-60, which maps to the end of [0, C] exactly), every angle at the high edge,
which differ by the full window width in every angle and by C in the magnitude. An inner angle
at 0 or pi would zero every later coordinate (the later angles would then be lost), so edges at
0 or pi are moved inward by the least angle a with sin(a)^(d-2) >= 1e-250 (representable), and
at least 64 ulps of pi. With
magnitude "exact-unsafe" r is released as it is: the two inputs' releases have disjoint
magnitudes, so no finite epsilon holds (an audit must fail).
"""

from __future__ import annotations

import numpy as np

import ldpfed.directional.windows as win
from ldpfed.directional.ldpvec import LDPVec
from ldpfed.directional.spherical import from_spherical
from ldpfed.validation import LDPValueError

TINY_NORM = 2.0**-60  # 2 r / C - 1 rounds to -1 exactly: the low end of the magnitude range


def worst_case_neighbours(vec: LDPVec, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, x'), each of shape (dims,), at the worst case of the sensitivity (module docstring).
    Centred windows are taken without a reference (centred on pi/2 and 0). Without rotation only:
    a public rotation is a fixed norm-preserving bijection of the inputs, so it changes no
    guarantee, while its rounding would blur inputs built at the edges of the windows."""
    if vec.rotation != "none":
        raise LDPValueError("audit LDPVec with rotation='none' (the rotation does not change the guarantee)")
    size = vec.converted_dims(dims)
    centre = win.centres(vec.window, vec.beta, size)
    low = win.from_offsets(-np.ones(size - 1), centre, vec.beta)
    high = win.from_offsets(np.ones(size - 1), centre, vec.beta)
    if size > 2:
        inward = max(np.arcsin(10.0 ** (-250.0 / (size - 2))), 64 * np.spacing(np.pi))  # > pi's ulp
        for angles in (low, high):
            angles[:-1] = np.clip(angles[:-1], inward, np.pi - inward)
    return from_spherical(np.asarray(vec.clip), low), from_spherical(np.asarray(vec.clip * TINY_NORM), high)


def polar_release(vec: LDPVec, rows, rng: np.random.Generator) -> np.ndarray:
    """The release (r*, theta*) of each row of `rows` (n, d), shape (n, d)."""
    radius, angles = vec.perturb_polar(np.asarray(rows, dtype=np.float64), rng)
    return np.column_stack([radius, angles])


def polar_log_ratio(vec: LDPVec, x, x_other, releases) -> np.ndarray:
    """log p(release | x) - log p(release | x') for polar releases (rows of `releases`); sound
    magnitude modes only (exact-unsafe has no density ratio: it is infinite on every release).
    Uses the base mechanisms' `log_density`: the law of their continuous samplers (build the LDPVec
    with options={"sampler": "continuous"}); the safe samplers' outputs live on grids."""
    if not vec.private:
        raise LDPValueError("exact-unsafe releases the magnitude exactly: the density ratio is infinite")
    releases = np.atleast_2d(releases)
    size = releases.shape[-1]
    split, magnitude, inner, last = vec._randomizers(size)
    (r, angles), (r_other, angles_other) = (vec.clipped_polar(v) for v in (x, x_other))
    centre = win.centres(vec.window, vec.beta, size)
    t, t_other = win.to_offsets(angles, centre, vec.beta), win.to_offsets(angles_other, centre, vec.beta)
    released = win.to_offsets_unclipped(releases[:, 1:], centre, vec.beta)
    total = np.zeros(releases.shape[0])
    # A release outside both inputs' supports (both densities 0, or underflowed to 0) has no ratio:
    # NaN, which the audit's threshold events count as 0, no evidence either way (an event built on
    # any statistic is still a valid event, so this costs power, never soundness).
    with np.errstate(invalid="ignore"):
        for columns, mechanism in ((slice(0, size - 2), inner), (slice(size - 2, size - 1), last)):
            total += np.sum(
                mechanism.log_density(released[:, columns], t[:, columns])
                - mechanism.log_density(released[:, columns], t_other[:, columns]),
                axis=1,
            )
        if magnitude is not None:
            scale = lambda radius: 2.0 * np.asarray(radius) / vec.clip - 1.0  # noqa: E731
            t_r = np.clip(scale(r), -1, 1)
            t_r_other = np.clip(scale(r_other), -1, 1)
            total += magnitude.log_density(scale(releases[:, 0]), t_r) - magnitude.log_density(
                scale(releases[:, 0]), t_r_other
            )
    return total

"""Angle clipping into windows of width beta*pi (spec: directional.md, Angle clipping).

theta_z (z <= d-2, range [0, pi]) is clipped into a window of width beta*pi and the last angle
theta_(d-1) (range (-pi, pi], a circle) into one of width 2*beta*pi. Two kinds of windows:
- "fixed" (the thesis): [(1-beta) pi, pi] and [-beta pi, beta pi], data-independent;
- "centred": centred on the angles of a public reference direction (e.g. the previous global
  update, which every client already has), the inner windows shifted to stay inside [0, pi]; the
  last window is centred on the circle. Without a reference (or a zero one) the windows are
  centred on pi/2 and 0, the middle of the angle ranges.
Either way the window depends on no private data, so clipping into it is deterministic
pre-processing: the sensitivity of each angle is its window width, and no extra delta is needed.

Inside a window an angle is written as its offset t in [-1, 1] from the window's centre,
theta = centre + half_width * t, which is the domain of ldpfed's scalar randomizers.
"""

from __future__ import annotations

import numpy as np

from ldpfed.directional.spherical import PI, to_spherical
from ldpfed.validation import LDPValueError

WINDOWS = ("fixed", "centred")
TWO_PI = 2.0 * np.pi


def check_beta(beta: float) -> float:
    """The bounding factor beta in (0, 1]."""
    try:
        value = float(beta)
    except (TypeError, ValueError):
        raise LDPValueError(f"beta must be a number in (0, 1], got {beta!r}") from None
    if not (0.0 < value <= 1.0):
        raise LDPValueError(f"beta must be in (0, 1], got {beta!r}")
    return value


def check_window(window: str) -> str:
    key = str(window).strip().lower().replace("centered", "centred")
    if key not in WINDOWS:
        raise LDPValueError(f"window must be one of {WINDOWS}, got {window!r}")
    return key


def half_widths(beta: float, dims: int) -> np.ndarray:
    """Half-width of each of the d-1 windows: beta*pi/2 for theta_1..theta_(d-2), beta*pi for the last."""
    widths = np.full(dims - 1, beta * PI / 2.0)
    widths[-1] = beta * PI
    return widths


def sensitivities(beta: float, dims: int) -> tuple[float, float]:
    """(L1, L2) sensitivity of the clipped angle vector: beta*d*pi and beta*pi*sqrt(d+2)."""
    widths = 2.0 * half_widths(beta, dims)
    return float(np.sum(widths)), float(np.sqrt(np.sum(widths**2)))


def centres(window: str, beta: float, dims: int, reference=None) -> np.ndarray:
    """Centre of each of the d-1 windows (shape (d-1,), or (rows, d-1) for a batch of references)."""
    window, beta = check_window(window), check_beta(beta)
    if window == "fixed":
        out = np.full(dims - 1, (1.0 - beta / 2.0) * PI)
        out[-1] = 0.0
        return out
    if reference is None:
        out = np.full(dims - 1, PI / 2.0)
        out[-1] = 0.0
        return out
    reference = np.asarray(reference, dtype=np.float64)
    if reference.shape[-1] != dims:
        raise LDPValueError(f"reference direction must have {dims} coordinates, got shape {reference.shape}")
    radius, angles = to_spherical(reference)
    inner = beta * PI / 2.0
    angles[..., :-1] = np.clip(angles[..., :-1], inner, PI - inner)  # keep the window inside [0, pi]
    zero = np.asarray(radius == 0)
    if np.any(zero):  # no direction to centre on: the middle of the ranges
        angles[zero, :-1], angles[zero, -1] = PI / 2.0, 0.0
    return angles


def _wrap(offset: np.ndarray) -> np.ndarray:
    """offset reduced to [-pi, pi] (exact for offsets already there)."""
    return offset - TWO_PI * np.round(offset / TWO_PI)


def _scale_by_half_widths(values: np.ndarray, beta: float, power: float) -> np.ndarray:
    """values * half_width**power, in place, angle by angle along the last axis (no (d-1) temporary)."""
    values[..., :-1] *= (beta * PI / 2.0) ** power
    values[..., -1] *= (beta * PI) ** power
    return values


def to_offsets(angles, centre, beta: float) -> np.ndarray:
    """Clip each angle into its window and return its offset t in [-1, 1] from the centre."""
    offsets = np.subtract(angles, centre, dtype=np.float64)
    offsets[..., -1] = _wrap(offsets[..., -1])  # the last angle lives on a circle
    _scale_by_half_widths(offsets, beta, -1.0)
    return np.clip(offsets, -1.0, 1.0, out=offsets)


def to_offsets_unclipped(angles, centre, beta: float) -> np.ndarray:
    """Offsets (angle - centre) / half_width of released angles, without wrapping or clipping
    (a perturbed angle is a real number, not a point on the circle)."""
    return _scale_by_half_widths(np.subtract(angles, centre, dtype=np.float64), beta, -1.0)


def from_offsets(offsets, centre, beta: float, *, overwrite: bool = False) -> np.ndarray:
    """Angles centre + half_width * t (any real t: perturbed offsets leave [-1, 1]); with
    `overwrite`, computed in the offsets' own array."""
    angles = np.asarray(offsets, dtype=np.float64) if overwrite else np.array(offsets, dtype=np.float64)
    _scale_by_half_widths(angles, beta, 1.0)
    angles += centre
    return angles


def clip_angles(angles, centre, beta: float) -> np.ndarray:
    """The angles clipped into their windows (unchanged when already inside)."""
    return from_offsets(to_offsets(angles, centre, beta), centre, beta)

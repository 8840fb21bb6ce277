"""Exact hyperspherical coordinates of a batch of vectors (spec: directional.md, Coordinates;
thesis Eq. 5.14-5.17).

For g in R^d (d >= 2): r = ||g||,
    theta_z     = atan2(||g_(z+1..d)||, g_z)  in [0, pi]      for z = 1..d-2,
    theta_(d-1) = atan2(g_d, g_(d-1))        in (-pi, pi],
and back: g_z = r (prod_{i<z} sin theta_i) cos theta_z, g_d = r prod_{i<d} sin theta_i.

O(d) per vector and vectorized over a batch (rows): the tail norms come from one reverse
cumulative sum of squares (the public reference code is O(d^2) and divides by zero on zero
coordinates). atan2 is defined everywhere, so zeros, negative zeros and zero tails give finite
angles (a zero tail gives theta = 0 or pi and the rest of the product is exactly 0).

Same result for one row and for many: every transcendental (arctan2, sin) runs on C-contiguous
arrays made for it, so numpy runs the same kernel on every element whatever the number of rows.
On a strided or reversed view numpy may pick the C library's function for a one-row batch and its
own SIMD kernel for a larger one (AVX-512), which differ in the last bit; the rest is exactly
rounded arithmetic and sequential cumulative sums and products along each row.

Float precision: rows are scaled by a power of two (exact) before squaring, so no square
overflows; sin and cos are evaluated as sin(min(|a|, pi - |a|)) and sin(pi/2 - |a|), which are
exactly 0 at the angles atan2 returns for zero coordinates (np.cos(pi/2) is 6e-17, not 0), so
zeros and zero tails round-trip to exact zeros. Each of the d-1 angles is rounded once and the
inverse multiplies up to d-1 sines, so the round-trip error of coordinate z is a random walk of
about sqrt(z) roundings of |g_z|: at most about sqrt(d) u ||g|| (u = 2.2e-16), reached only when
the last coordinates carry the norm; a few u ||g|| for typical vectors (tests/test_directional.py).
"""

from __future__ import annotations

import numpy as np

from ldpfed.validation import LDPValueError

PI = np.pi
HALF_PI = np.pi / 2.0
TWO_PI = 2.0 * np.pi


def _as_batch(vectors, name: str) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float64)
    if array.ndim not in (1, 2):
        raise LDPValueError(f"{name} must be a vector (d,) or a batch (rows, d), got shape {array.shape}")
    if array.shape[-1] < 2:
        raise LDPValueError(f"{name} needs d >= 2 coordinates for hyperspherical coordinates, got {array.shape[-1]}")
    if not np.all(np.isfinite(array)):
        raise LDPValueError(f"{name} contains NaN or inf")
    return array


def to_spherical(vectors) -> tuple[np.ndarray, np.ndarray]:
    """(r, angles) of a vector (d,) or batch (rows, d): r has shape () or (rows,), angles (..., d-1)."""
    g = _as_batch(vectors, "vectors")
    # Power-of-two scale per row (exact division): the largest |g_z| lands in [0.5, 1).
    _, exponent = np.frexp(np.max(np.abs(g), axis=-1, keepdims=True))
    scale = np.ldexp(1.0, exponent)
    y = g / scale
    reversed_tail = np.square(y[..., ::-1])  # contiguous, so the cumulative sum runs at full speed
    np.cumsum(reversed_tail, axis=-1, out=reversed_tail)
    np.sqrt(reversed_tail, out=reversed_tail)  # reversed_tail[..., d-1-z] = ||y_(z..d)||
    d = g.shape[-1]
    # theta_z = atan2(||y_(z+1..d)||, y_z) for z < d-1 and atan2(y_d, y_(d-1)): one arctan2 on
    # contiguous operands (module docstring)
    numerator = np.empty(g.shape[:-1] + (d - 1,))
    numerator[..., : d - 2] = reversed_tail[..., d - 2 : 0 : -1]
    numerator[..., d - 2] = y[..., d - 1]
    angles = np.arctan2(numerator, np.ascontiguousarray(y[..., : d - 1]))
    radius = reversed_tail[..., d - 1] * scale[..., 0]
    return radius, angles


def _reduced(angles) -> np.ndarray:
    """Angles moved into [-pi, pi] by multiples of 2 pi (unchanged when already there).

    Perturbed angles can be huge (Laplace noise at eps/d); sin and cos are faster on a reduced
    argument, and the reduction loses nothing that the float angle still held.
    """
    theta = np.ascontiguousarray(angles, dtype=np.float64)  # contiguous for np.sin (module docstring)
    if theta.size and np.max(np.abs(theta)) > PI:
        theta = theta - TWO_PI * np.round(theta / TWO_PI)
    return theta


def exact_sin_cos(angles) -> tuple[np.ndarray, np.ndarray]:
    """(sin, cos) of the angles, exactly 0 at the angles atan2 gives zeros (0, -0, pi/2, pi):
    sin(a) = sign(a) sin(min(|a|, pi - |a|)) and cos(a) = sin(pi/2 - |a|) on a in [-pi, pi]."""
    theta = _reduced(angles)
    magnitude = np.abs(theta, out=np.empty_like(theta))
    cos = np.subtract(HALF_PI, magnitude, out=np.empty_like(theta))
    np.sin(cos, out=cos)
    np.minimum(magnitude, PI - magnitude, out=magnitude)
    sin = np.sin(magnitude, out=magnitude)
    np.copysign(sin, theta, out=sin)  # sin(|a|) >= 0 on [-pi, pi]: the sign is the angle's
    return sin, cos


def exact_sin(angles) -> np.ndarray:
    return exact_sin_cos(angles)[0]


def exact_cos(angles) -> np.ndarray:
    return exact_sin_cos(angles)[1]


def from_spherical(radius, angles) -> np.ndarray:
    """The vectors with magnitudes `radius` (shape () or (rows,)) and `angles` (..., d-1); any
    real angles are accepted (perturbed angles leave their ranges)."""
    theta = np.asarray(angles, dtype=np.float64)
    if theta.ndim not in (1, 2) or theta.shape[-1] < 1:
        raise LDPValueError(f"angles must have shape (d-1,) or (rows, d-1), got {theta.shape}")
    r = np.asarray(radius, dtype=np.float64)
    if r.shape != theta.shape[:-1]:
        raise LDPValueError(f"radius shape {r.shape} does not match angles shape {theta.shape}")
    d = theta.shape[-1] + 1
    sines, cosines = exact_sin_cos(theta)
    prefix = np.empty(theta.shape)  # prefix[z] = r * prod_{i<z} sin theta_i
    prefix[..., 0] = r
    if d > 2:
        np.cumprod(sines[..., : d - 2], axis=-1, out=prefix[..., 1:])
        prefix[..., 1:] *= r[..., None]
    out = np.empty(theta.shape[:-1] + (d,))
    np.multiply(prefix, cosines, out=out[..., : d - 1])
    np.multiply(prefix[..., d - 2], sines[..., d - 2], out=out[..., d - 1])
    return out

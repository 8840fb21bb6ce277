"""Public random rotation: the randomized Hadamard transform (spec: directional.md, last section).

Angle noise on the first angles multiplies every later coordinate, so after the inverse
hyperspherical transform most of the output's energy sits in the first coordinates. Rotating the
clipped vector by a data-independent orthogonal R before the conversion and applying R^T after
spreads that concentration over all coordinates. R = H diag(s) / sqrt(D): s is a vector of random
signs, H the D x D Walsh-Hadamard matrix, D = the next power of two >= d (the vector is padded
with zeros; the noisy padding coordinates are dropped after R^T, which is post-processing).
O(D log D) per vector: log2(D) vectorized butterfly stages.

R depends on no data, so any random source will do for privacy; the signs are drawn from a
seed the caller gives (public randomness of the round), so every client of a round can use the
same R and a run is reproducible.
"""

from __future__ import annotations

import numpy as np

from ldpfed.validation import LDPValueError, check_choice

ROTATIONS = ("none", "hadamard")


def check_rotation(rotation: str) -> str:
    return check_choice(rotation, ROTATIONS, "rotation")


def padded_dims(dims: int) -> int:
    """D, the smallest power of two >= d."""
    return 1 << max(1, int(dims - 1).bit_length())


def random_signs(dims: int, rng: np.random.Generator) -> np.ndarray:
    """The diagonal of diag(s): D random signs."""
    return np.where(rng.random(padded_dims(dims)) < 0.5, -1.0, 1.0)


def _hadamard(x: np.ndarray) -> np.ndarray:
    """H x along the last axis (length a power of two), unnormalized; a new array.

    log2(D) butterfly stages (a + b, a - b on pairs at distance h = 1, 2, 4, ...), each written
    into the other of two buffers, so a stage reads and writes every value once.
    """
    rows, size = x.shape
    source, target = x.copy(), np.empty_like(x)
    half = 1
    while half < size:
        pairs = source.reshape(rows, size // (2 * half), 2, half)
        out = target.reshape(rows, size // (2 * half), 2, half)
        np.add(pairs[:, :, 0, :], pairs[:, :, 1, :], out=out[:, :, 0, :])
        np.subtract(pairs[:, :, 0, :], pairs[:, :, 1, :], out=out[:, :, 1, :])
        source, target = target, source
        half *= 2
    return source


def rotate(vectors, signs: np.ndarray) -> np.ndarray:
    """R x = H diag(s) x / sqrt(D) for a batch (rows, d), padded to (rows, D)."""
    x = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    size = signs.size
    if x.shape[-1] > size:
        raise LDPValueError(f"rotation of size {size} cannot hold vectors of {x.shape[-1]} coordinates")
    padded = np.zeros((x.shape[0], size))
    padded[:, : x.shape[-1]] = x
    padded *= signs
    out = _hadamard(padded)
    out *= 1.0 / np.sqrt(size)
    return out


def unrotate(vectors, signs: np.ndarray, dims: int) -> np.ndarray:
    """R^T y = diag(s) H y / sqrt(D), truncated to the first `dims` coordinates."""
    y = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    out = _hadamard(y)
    out *= signs / np.sqrt(signs.size)
    return out[:, :dims]

"""Per-coordinate sensitivity profiles D_i (spec: gradient-noise.md, i.n.i.d. Gaussian and Laplace).

Per-layer clipping clips layer l (d_l parameters) to L2 norm C_l, so D_i = C_l / sqrt(d_l) on its
coordinates. Because the profile is constant within a layer, so is the noise, and the i.n.i.d.
conditions bound the worst case of the layer-wise L2 balls, not only of the box |Delta_i| <= D_i:
Gaussian, sum_l ||Delta_l||^2 / s_l^2 <= sum_l C_l^2 / s_l^2 = sum_i D_i^2 / s_i^2; Laplace,
sum_l ||Delta_l||_1 / b_l <= sum_l sqrt(d_l) C_l / b_l = sum_i D_i / b_i. An arbitrary
per-coordinate profile (a file) is sound only as a box bound (coordinate-wise clipping to D_i).
"""

from __future__ import annotations

import numpy as np

from ldpfed.validation import LDPValueError, check_memory, check_positive, check_positive_int

# float64 arrays of the profile's length that calibrating, accounting or sampling a noise holds at once
PROFILE_ARRAYS = 6


def check_profile(profile) -> np.ndarray:
    """A non-empty 1-d array of finite D_i > 0."""
    array = np.asarray(profile, dtype=np.float64).reshape(-1) if np.ndim(profile) <= 1 else None
    if array is None or array.size == 0:
        raise LDPValueError("a sensitivity profile must be a non-empty vector of D_i > 0")
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise LDPValueError("every sensitivity D_i must be a finite number > 0")
    return array


def layer_profile(clips, sizes) -> np.ndarray:
    """D_i = C_l / sqrt(d_l) repeated over the d_l coordinates of each layer l."""
    clips = [check_positive(c, "layer clip C_l") for c in clips]
    sizes = [check_positive_int(s, "layer size d_l") for s in sizes]
    if len(clips) != len(sizes) or not clips:
        raise LDPValueError("give one clip C_l per layer size d_l (at least one layer)")
    check_memory(8.0 * PROFILE_ARRAYS * sum(sizes), f"a profile of {sum(sizes):,} coordinates", "use smaller layers")
    return np.repeat(np.asarray(clips) / np.sqrt(sizes), sizes)


def parse_layers(text: str) -> np.ndarray:
    """'C1:d1,C2:d2,...' (e.g. '1.0:784,0.5:10') -> the per-coordinate profile."""
    pairs = [item.strip() for item in str(text).split(",") if item.strip()]
    try:
        split = [pair.split(":") for pair in pairs]
        clips = [float(c) for c, _ in split]
        sizes = [int(s) for _, s in split]
    except ValueError:
        raise LDPValueError(f"--layers must be C1:d1,C2:d2,... (clip:size per layer), got {text!r}") from None
    return layer_profile(clips, sizes)


def read_profile(path) -> np.ndarray:
    """A profile file: .npy, or text with one D_i per line / comma- or space-separated."""
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise LDPValueError(f"profile file {str(path)!r} does not exist")
    try:
        values = (
            np.load(file)
            if file.suffix == ".npy"
            else np.loadtxt(file, delimiter=None if file.suffix != ".csv" else ",", ndmin=1)
        )
    except ValueError as error:
        raise LDPValueError(f"cannot read profile {str(path)!r}: {error}") from None
    return check_profile(values)


def clip_layers(rows, sizes, clips) -> np.ndarray:
    """Each row's layer blocks (consecutive `sizes` coordinates) scaled to L2 norm <= their clip."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    starts = np.cumsum([0] + list(sizes))[:-1]
    if rows.shape[0] == 0:
        return rows.copy()
    norms = np.sqrt(np.add.reduceat(rows**2, starts, axis=1))
    factors = np.minimum(1.0, np.asarray(clips, dtype=float) / np.maximum(norms, np.finfo(float).tiny))
    return rows * np.repeat(factors, sizes, axis=1)

"""The thesis' synthetic tuple data sets, generated offline from a seed (users x dims in [-1, 1]).

- gaussian: each entry N(mu_j, (1/16)^2); the first ceil(d/10) dimensions have mu_j = 0.9, the
  rest 0. About 5.5% of the entries of the 0.9 columns would exceed 1; they are clipped to the
  domain [-1, 1] (a documented, explicit policy: the data model is "Gaussian on [-1, 1]").
- uniform: each entry U[-1, 1].
- poisson: column j is Poisson(lam_j) with lam_j drawn uniformly from the integers 1..99, then
  min-max normalized to [-1, 1] per column (a constant column maps to 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ldpfed.validation import LDPValueError, check_memory, check_positive_int

# The default data set of ldpfed's commands (the README's default job, configs/default.toml):
# `ldpfed predict -m laplace -e 1` with no data predicts for it.
DEFAULT_SET, DEFAULT_USERS, DEFAULT_DIMS = "gaussian", 10_000, 10

GAUSSIAN_SD = 1.0 / 16.0
GAUSSIAN_HIGH_MEAN = 0.9
GAUSSIAN_HIGH_FRACTION = 0.10


def gaussian(users: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    means = np.zeros(dims)
    means[: math.ceil(GAUSSIAN_HIGH_FRACTION * dims)] = GAUSSIAN_HIGH_MEAN
    values = rng.normal(means, GAUSSIAN_SD, size=(users, dims))
    return np.clip(values, -1.0, 1.0, out=values)


def uniform(users: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=(users, dims))


def poisson(users: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    rates = rng.integers(1, 100, size=dims)
    counts = rng.poisson(rates, size=(users, dims)).astype(float)
    low, high = counts.min(axis=0), counts.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    scaled = 2.0 * (counts - low) / span - 1.0
    return np.where(high > low, scaled, 0.0)


# float64 arrays of users x dims alive at once while a set is generated and then used (poisson
# holds its counts, their float copy and the scaled result; every set one working copy downstream)
WORKING_ARRAYS = {"gaussian": 2, "uniform": 2, "poisson": 5}

SYNTHETIC_SETS: dict[str, Callable[[int, int, np.random.Generator], np.ndarray]] = {
    "gaussian": gaussian,
    "uniform": uniform,
    "poisson": poisson,
}


def available_synthetic() -> list[str]:
    return list(SYNTHETIC_SETS)


def generate(name: str, users: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    """users x dims array of the synthetic set `name`, values in [-1, 1]."""
    if name not in SYNTHETIC_SETS:
        raise LDPValueError(f"unknown synthetic data set {name!r}; available: {', '.join(SYNTHETIC_SETS)}")
    users = check_positive_int(users, "users")
    dims = check_positive_int(dims, "dims")
    check_memory(
        8.0 * users * dims * WORKING_ARRAYS[name],
        f"{users:,} users x {dims:,} dimensions of synthetic {name} data",
        "lower --users or --dims",
    )
    return SYNTHETIC_SETS[name](users, dims, rng)

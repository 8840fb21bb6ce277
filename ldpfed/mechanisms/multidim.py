"""Multi-dimensional reporting: each user reports m of her d dimensions (mechanisms.md, Several
dimensions).

A user samples m of d dimensions uniformly without replacement and reports each with budget
eps/m (and delta/m for approximate mechanisms: basic composition gives the user (eps, delta) in
total). The collector only needs per-dimension report counts, sums and sums of squares
(`ReportSums`), which are additive: chunks of users and Flower clients send them and the server
adds them up. Estimators:
- `mean_estimate`: the mean of the r_j reports received in dimension j (the thesis estimator);
- `scaled_estimate`: (d / (n m)) * sum of reports (Wang et al.), unbiased without needing r_j.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import ldpfed.mechanisms as mechanisms
from ldpfed.mechanisms.base import Mechanism
from ldpfed.validation import (
    LDPValueError,
    OutOfDomain,
    check_delta,
    check_epsilon,
    check_generator,
    check_positive_int,
    check_report_dims,
    check_values,
)


def wang_report_dims(epsilon: float, dims: int) -> int:
    """Wang et al.'s choice m = max(1, min(d, floor(eps / 2.5)))."""
    epsilon = check_epsilon(epsilon)
    dims = check_positive_int(dims, "dims")
    return max(1, min(dims, math.floor(epsilon / 2.5)))


def per_value_mechanism(
    name: str, epsilon: float, report_dims: int, delta: float | None = None, **options
) -> Mechanism:
    """The scalar mechanism each reported value uses: budget eps/m (and delta/m)."""
    epsilon = check_epsilon(epsilon)  # name the user's total budget in errors, not eps/m
    report_dims = check_positive_int(report_dims, "report_dims")
    # Validate the total delta before dividing (delta=1.5, m=3 must fail, not become 0.5).
    delta = check_delta(delta, approximate=mechanisms.get_class(name).approximate, mechanism=str(name))
    per_value_delta = None if delta is None else delta / report_dims
    try:
        return mechanisms.get(name, epsilon / report_dims, per_value_delta, **options)
    except LDPValueError as error:
        if "epsilon" not in str(error) or report_dims == 1:
            raise
        raise LDPValueError(  # the user typed the total: say which total gave the per-value budget
            f"epsilon {epsilon:g} (a user's total) is {epsilon / report_dims:g} per reported value "
            f"(eps/m, m = {report_dims}): {error}"
        ) from None


def sample_report_mask(users: int, dims: int, report_dims: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean (users, dims) mask with exactly `report_dims` True per row, uniform without replacement."""
    users = check_positive_int(users, "users")
    dims = check_positive_int(dims, "dims")
    m = check_report_dims(report_dims, dims)
    check_generator(rng)
    if m == dims:
        return np.ones((users, dims), dtype=bool)
    return _mask_of_smallest(rng.random((users, dims)), m)


def sample_report_masks(dims: int, report_dims: int, rngs) -> np.ndarray:
    """One row per generator in `rngs`: row i is `sample_report_mask(1, dims, report_dims, rngs[i])`
    (bit for bit), each user's mask from her own stream; the selection runs once over the block."""
    dims = check_positive_int(dims, "dims")
    m = check_report_dims(report_dims, dims)
    if m == dims:
        return np.ones((len(rngs), dims), dtype=bool)
    draws = np.empty((len(rngs), dims))
    for row, rng in enumerate(rngs):  # one vectorized draw per user, from her own generator
        draws[row] = rng.random(dims)
    return _mask_of_smallest(draws, m)


def _mask_of_smallest(draws: np.ndarray, m: int) -> np.ndarray:
    """True at the m smallest uniforms of each row: a uniform m-subset per row. Each row's m-th
    smallest value by a partial sort, then one comparison (2x quicker than placing argpartition's
    indices); where a row ties at that value (equal uniforms: about never), by argpartition."""
    mask = draws <= np.partition(draws, m - 1, axis=1)[:, m - 1 : m]
    if np.count_nonzero(mask) == draws.shape[0] * m:
        return mask
    chosen = np.argpartition(draws, m - 1, axis=1)[:, :m]
    mask = np.zeros(draws.shape, dtype=bool)
    np.put_along_axis(mask, chosen, True, axis=1)
    return mask


@dataclass(frozen=True)
class ReportSums:
    """Per-dimension count r_j, sum and sum of squares of the reports (additive over users)."""

    count: np.ndarray
    total: np.ndarray
    total_sq: np.ndarray
    users: int

    def __add__(self, other: ReportSums) -> ReportSums:
        return ReportSums(
            self.count + other.count,
            self.total + other.total,
            self.total_sq + other.total_sq,
            self.users + other.users,
        )

    @classmethod
    def zeros(cls, dims: int) -> ReportSums:
        return cls(np.zeros(dims), np.zeros(dims), np.zeros(dims), 0)

    @property
    def dims(self) -> int:
        return self.count.shape[0]

    def sample_variance(self) -> np.ndarray:
        """Unbiased sample variance of the reports in each dimension (NaN where r_j < 2)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = self.total / self.count
            variance = (self.total_sq - self.count * mean**2) / (self.count - 1)
        return np.where(self.count >= 2, np.maximum(variance, 0.0), np.nan)


def perturb_tuples(
    values,
    mechanism: Mechanism,
    report_dims: int,
    rng: np.random.Generator,
    *,
    out_of_domain: OutOfDomain = "raise",
) -> tuple[np.ndarray, np.ndarray]:
    """Each row (user) reports `report_dims` sampled dimensions through `mechanism`.

    `mechanism` is the per-value mechanism (budget eps/m; see `per_value_mechanism`).
    Returns (mask, reports): reports[i, j] is user i's report in dimension j where mask[i, j],
    and 0 elsewhere. Only the reported entries are perturbed.
    """
    table = check_values(values, out_of_domain=out_of_domain)
    if table.ndim != 2:
        raise LDPValueError(f"values must be a 2-D (users, dims) array, got shape {table.shape}")
    users, dims = table.shape
    mask = sample_report_mask(users, dims, report_dims, rng)
    if mask.all():
        return mask, mechanism.perturb(table, rng)
    reports = np.zeros_like(table)
    reports[mask] = mechanism.perturb(table[mask], rng)
    return mask, reports


def summarize(mask: np.ndarray, reports: np.ndarray) -> ReportSums:
    """Collapse (mask, reports) to per-dimension counts, sums and sums of squares."""
    reports = np.where(mask, reports, 0.0)
    return ReportSums(
        count=mask.sum(axis=0).astype(float),
        total=reports.sum(axis=0),
        total_sq=np.einsum("ij,ij->j", reports, reports),
        users=mask.shape[0],
    )


def mean_estimate(sums: ReportSums) -> np.ndarray:
    """theta_hat_j = mean of the r_j reports in dimension j (0 where no user reported j)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sums.count > 0, sums.total / sums.count, 0.0)


def scaled_estimate(sums: ReportSums, report_dims: int) -> np.ndarray:
    """Wang et al.'s theta_j = (d / (n m)) * sum of reports in dimension j."""
    return sums.dims / (sums.users * report_dims) * sums.total

"""How good the normal approximation of a dimension's deviation is: the Berry–Esseen bound
(analysis.md, "How good the normal approximation is"; thesis Theorem 2).

    sup_x |F_true(x) - F_normal(x)| <= 0.33554 (rho + 0.415 s^3) / (s^3 sqrt(r_j))

with s^2 the mean per-report variance and rho the mean per-report third absolute central moment
E|t* - E[t*|t]|^3 (Shevtsova 2011). For Laplace rho = 6 lam^3 (the thesis prints 3 lam^3: at
r = 1000 the bound is 2.69%, not 1.57%).

What the bound covers (an ldpfed decision; the spec is silent):
- It bounds the randomizer noise of the r_j reports, *given which users reported* dimension j.
  With m = d every user reports, so this is the whole deviation and the normal it is compared to
  is exactly N(delta_j, sigma_j^2). With m < d the deviation also carries the sampling term (a
  mean of r_j of n bounded values drawn without replacement); its own normality is the
  finite-population CLT, which this bound does not quantify.
- s and rho are averaged over the whole column (the expectation over which users report).
- Shevtsova's constants 0.33554/0.415 are proven for identically distributed summands: exact here
  for Laplace and Gaussian (noise independent of t) or a constant column. Reports of different
  values are not identically distributed; for them the proven bound is the Lyapunov-fraction form
  0.5600 rho / (s^3 sqrt(r_j)) (Shevtsova 2010), reported alongside as `non_identical`.
  (rho >= s^3 always, so the spec's form never exceeds 0.4748 rho/(s^3 sqrt r).)
- rho is averaged over the data when the values are at hand (O(nd), E|t* - E t*|^3 interpolated
  from a 4001-point grid); from summary moments only it is the worst case max_t E|t* - E t*|^3 over
  that grid of t in [-1, 1], which keeps the bound valid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.analysis.moments import ColumnMoments
from ldpfed.mechanisms.base import Mechanism

SHEVTSOVA_CONSTANT = 0.33554  # identically distributed summands (Shevtsova 2011)
SHEVTSOVA_SHIFT = 0.415
LYAPUNOV_CONSTANT = 0.5600  # non-identically distributed summands (Shevtsova 2010)
WORST_CASE_GRID = np.linspace(-1.0, 1.0, 4001)  # includes -1, 0 and 1
# Above this Kolmogorov distance a prediction says its normal model is poor (an ldpfed choice,
# docs/decisions.md): a 95% interval could then cover as little as 1 - 0.05 - 2 * 0.1 = 75%.
POOR_NORMAL_APPROXIMATION = 0.1

COVERS = (
    "randomizer noise of the r_j reports given which users reported; the whole deviation when "
    "m = d, without the data-sampling term when m < d"
)


@dataclass(frozen=True, eq=False)
class BerryEsseenBound:
    """Per-dimension Kolmogorov-distance bounds between a deviation and its normal model."""

    bound: np.ndarray  # the spec's form, 0.33554 (rho + 0.415 s^3) / (s^3 sqrt r)
    non_identical: np.ndarray  # 0.5600 rho / (s^3 sqrt r), proven for non-identical reports
    report_variance: np.ndarray  # s^2 per dimension
    third_moment: np.ndarray  # rho per dimension
    third_moment_source: str  # "data", "exact (constant in t)" or "worst case over t in [-1, 1]"

    @property
    def max(self) -> float:
        return float(np.max(self.bound))

    @property
    def max_non_identical(self) -> float:
        return float(np.max(self.non_identical))

    def summary(self) -> dict:
        return {
            "max": self.max,
            "max_non_identical": self.max_non_identical,
            "third_moment": self.third_moment_source,
            "covers": COVERS,
        }


def bound_from_moments(report_variance, third_moment, reports, source: str) -> BerryEsseenBound:
    """Both bounds from per-dimension s^2, rho and r_j (vectorized)."""
    s2 = np.asarray(report_variance, float)
    rho = np.asarray(third_moment, float)
    r = np.asarray(reports, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        s3_root_r = s2**1.5 * np.sqrt(r)
        shevtsova = SHEVTSOVA_CONSTANT * (rho + SHEVTSOVA_SHIFT * s2**1.5) / s3_root_r
        lyapunov = LYAPUNOV_CONSTANT * rho / s3_root_r
    # A Kolmogorov distance never exceeds 1; s = 0 or r = 0 leaves nothing random to bound.
    defined = (s2 > 0) & (r > 0)
    shevtsova = np.where(defined, np.minimum(shevtsova, 1.0), 0.0)
    lyapunov = np.where(defined, np.minimum(lyapunov, 1.0), 0.0)
    return BerryEsseenBound(shevtsova, lyapunov, s2, rho, source)


def column_third_moment(mechanism: Mechanism, moments: ColumnMoments) -> tuple[np.ndarray, str]:
    """rho_j = (1/n) sum_i E|t* - E[t*|t_ij]|^3, or its worst case over t without the data."""
    grid_values = mechanism.third_abs_central_moment(WORST_CASE_GRID)
    if np.ptp(grid_values) == 0.0:  # Laplace, Gaussian: does not depend on t
        return np.full(moments.dims, float(grid_values[0])), "exact (constant in t)"
    if moments.has_values:
        # g(t) = E|t* - E t*|^3 is continuous and piecewise smooth in t: linear interpolation on the
        # 4001-point grid is exact to ~1e-6 relative and costs O(nd) at memory speed, where calling
        # the mechanism on all n*d values costs ~25x more (PM: 6 s at n*d = 4e7).
        return _column_means_interpolated(moments.values, grid_values), "data"
    return np.full(moments.dims, float(grid_values.max())), "worst case over t in [-1, 1]"


def _column_means_interpolated(values: np.ndarray, grid_values: np.ndarray, block: int = 1 << 20) -> np.ndarray:
    """(1/n) sum_i g(t_ij) per column, g linearly interpolated on the uniform WORST_CASE_GRID.

    The grid is uniform, so the cell index is arithmetic (no search); rows go in cache-sized blocks.
    """
    steps = grid_values.size - 1
    slopes = np.diff(grid_values)
    users, dims = values.shape
    rows = max(1, block // dims)
    total = np.zeros(dims)
    for start in range(0, users, rows):
        position = (values[start : start + rows] + 1.0) * (steps / 2.0)
        cell = np.minimum(position.astype(np.intp), steps - 1)
        position -= cell  # the fraction within the cell
        total += (grid_values[cell] + position * slopes[cell]).sum(axis=0)
    return total / users


def berry_esseen(mechanism: Mechanism, moments: ColumnMoments, reports) -> BerryEsseenBound:
    """The bound per dimension for `mechanism` (per-value) on columns `moments` with r_j reports."""
    v0, v1, v2 = mechanism.variance_coefficients
    s2 = np.maximum(v0 + v1 * moments.mean + v2 * moments.mean_sq, 0.0)
    rho, source = column_third_moment(mechanism, moments)
    return bound_from_moments(s2, rho, reports, source)

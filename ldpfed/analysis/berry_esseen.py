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
- rho_j is bounded from above, which keeps the bound valid: g(t) = E|t* - E[t*|t]|^3 (not a
  polynomial for bounded mechanisms) is replaced by the polynomial q >= g in the powers the
  column moments know with the smallest integral over [-1, 1] (a small linear program on the
  4001-point grid, cached per mechanism), and rho_j <= (1/n) sum_i q(t_ij) = sum_k q_k (1/n)
  sum_i t_ij^k needs only the column's power means (moments.py). From an array the powers are
  1, t, t^2, t^4 (g is even in t for every registered mechanism, so t^3 adds nothing): for every
  mechanism and eps checked (0.1 to 50) q exceeds g by at most 0.1% (a few % where g ~ 1e-11 at
  eps 50), so rho_j is the data's own third moment to that precision, computed in the data pass
  the moments need anyway. From summary moments 1, t, t^2 (up to 17% above g
  for hybrid, more for duchi at large eps; never above the worst case max_t g): looser, still
  valid. Laplace and Gaussian have a constant g: exact. The source string says which, and
  the largest relative excess of q over g on the grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy.optimize import linprog

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
    third_moment_source: str  # "exact (constant in t)", or which polynomial upper bound (from data or summary moments)

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
    r = np.asarray(reports, float)  # one count for every dimension stays a scalar
    with np.errstate(divide="ignore", invalid="ignore"):
        lyapunov_fraction = rho / (s2 * np.sqrt(s2 * r))  # rho / (s^3 sqrt r), with square roots only (no pow)
        shevtsova = SHEVTSOVA_CONSTANT * (lyapunov_fraction + SHEVTSOVA_SHIFT / np.sqrt(r))
        lyapunov = LYAPUNOV_CONSTANT * lyapunov_fraction
    # A Kolmogorov distance never exceeds 1; s = 0 or r = 0 leaves nothing random to bound.
    if r.ndim == 0 and r > 0 and s2.size and s2.min() > 0:  # every dimension defined (one count r > 0)
        shevtsova, lyapunov = np.minimum(shevtsova, 1.0, out=shevtsova), np.minimum(lyapunov, 1.0, out=lyapunov)
    else:
        defined = (s2 > 0) & (r > 0)
        shevtsova = np.where(defined, np.minimum(shevtsova, 1.0), 0.0)
        lyapunov = np.where(defined, np.minimum(lyapunov, 1.0), 0.0)
    return BerryEsseenBound(shevtsova, lyapunov, np.broadcast_to(s2, shevtsova.shape), rho, source)


class ThirdMomentLaw(NamedTuple):
    """rho_j's upper bound as a function of the column power means (column_third_moment)."""

    coefficients: np.ndarray  # q_k for k in the exponents (read-only); constant: (g,)
    cap: float  # max_t g(t): rho_j never exceeds it
    constant: bool  # g does not depend on t (Laplace, Gaussian): rho_j = coefficients[0] exactly
    source: str


def column_third_moment(mechanism: Mechanism, moments: ColumnMoments) -> tuple[np.ndarray, str]:
    """Upper bounds of rho_j = (1/n) sum_i E|t* - E[t*|t_ij]|^3 from the column's power means (module
    docstring), and where they come from."""
    law = third_moment_law(mechanism, moments.exponents)
    if law.constant:
        return np.full(moments.dims, law.coefficients[0]), law.source
    coefficients = law.coefficients
    powers = moments.power_means()[1:]  # the power 0 (ones) adds its coefficient as a scalar
    bound = coefficients[0] + coefficients[1] * powers[0]
    for coefficient, power in zip(coefficients[2:], powers[1:]):
        bound += coefficient * power
    rho = np.minimum(bound, law.cap, out=bound)  # both are upper bounds (bound: a fresh array)
    if not (isinstance(rho, np.ndarray) and rho.shape == (moments.dims,)):
        rho = np.broadcast_to(rho, (moments.dims,)).astype(float)
    return rho, law.source


@lru_cache(maxsize=256)
def third_moment_law(mechanism: Mechanism, exponents: tuple[int, ...]) -> ThirdMomentLaw:
    """The polynomial (or constant) bounding g(t) = E|t* - E[t*|t]|^3 in the powers `exponents`,
    its cap and its source line: once per mechanism and powers (a prediction asks again and again)."""
    grid_values = grid_third_moment(mechanism)
    if np.ptp(grid_values) == 0.0:  # Laplace, Gaussian: does not depend on t
        constant = np.array([float(grid_values[0])])
        constant.flags.writeable = False
        return ThirdMomentLaw(constant, float(grid_values[0]), True, "exact (constant in t)")
    coefficients, excess = upper_polynomial(mechanism, exponents)
    origin = "data" if 4 in exponents else "summary moments"
    powers = ", ".join("1" if k == 0 else "t" if k == 1 else f"t^{k}" for k in exponents)
    source = f"{origin}: polynomial upper bound in {powers} (at most {excess:.2%} above the exact third moment)"
    return ThirdMomentLaw(coefficients, float(grid_values.max()), False, source)


@lru_cache(maxsize=128)
def grid_third_moment(mechanism: Mechanism) -> np.ndarray:
    """g(t) = E|t* - E[t*|t]|^3 on WORST_CASE_GRID (read-only), once per mechanism: the safe
    samplers' exact sums over their lattice cost milliseconds per call."""
    g = np.asarray(mechanism.third_abs_central_moment(WORST_CASE_GRID), dtype=float)
    g.flags.writeable = False
    return g


@lru_cache(maxsize=128)
def upper_polynomial(mechanism: Mechanism, exponents: tuple[int, ...]) -> tuple[np.ndarray, float]:
    """(q_k for k in exponents, largest relative excess of q over g on the grid): q(t) = sum_k q_k t^k
    >= g(t) = E|t* - E[t*|t]|^3 on WORST_CASE_GRID with the least mean there (a linear program)."""
    g = grid_third_moment(mechanism)
    scale = float(g.max())
    basis = WORST_CASE_GRID[:, None] ** np.array(exponents)
    solution = linprog(
        basis.mean(axis=0), A_ub=-basis, b_ub=-g / scale, bounds=[(None, None)] * len(exponents), method="highs"
    )
    coefficients = solution.x * scale if solution.success else np.r_[scale, np.zeros(len(exponents) - 1)]
    # Solver tolerance: lift q until it is >= g at every grid point, plus a margin for between them.
    gap = basis @ coefficients - g
    coefficients[0] += max(0.0, -float(gap.min())) + 1e-9 * scale
    q = basis @ coefficients
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = float(np.max(np.where(g > 0, (q - g) / g, 0.0)))
    return coefficients, excess


def berry_esseen(mechanism: Mechanism, moments: ColumnMoments, reports, report_variance=None) -> BerryEsseenBound:
    """The bound per dimension for `mechanism` (per-value) on columns `moments` with r_j reports
    (an array, or one count for every dimension); `report_variance`: s_j^2 if already computed
    (max(v0 + v1 mean + v2 mean_sq, 0), as the predictor has it)."""
    if report_variance is None:
        v0, v1, v2 = mechanism.variance_coefficients
        report_variance = np.maximum(v0 + v1 * moments.mean + v2 * moments.mean_sq, 0.0)
    rho, source = column_third_moment(mechanism, moments)
    return bound_from_moments(report_variance, rho, reports, source)

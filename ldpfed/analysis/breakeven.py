"""Break-even population between two mechanisms (analysis.md, "Break-even"; thesis Algorithm 3).

With r_j = n m / d, each mechanism's error in dimension j is a line in 1/n:

    MSE_X(n) = A_X / n + delta_X^2,   A_X = E[V_X] d/m + (1 + b1_X)^2 S_j^2 (d/m - 1),

so A and B cross at n'_j = (A_B - A_A) / (delta_A^2 - delta_B^2). With equal sampling terms (both
unbiased, or m = d) this is the spec's n'_j = (E[V_B] - E[V_A]) / (delta_A^2 - delta_B^2) * d/m;
ldpfed keeps the sampling term, which differs when one mechanism is biased with b1 != 0 (square
wave, raw). S_j^2 is held at its value for the given population.

Below n'_j the mechanism with the smaller A (variance) wins, above it the one with the smaller
bias; n'_j <= 0 (or equal biases) means one mechanism wins at every n. The same logic on the
sums over dimensions gives the crossing of the d-dimensional MSE.

(mechanisms.md erratum: the thesis' Piecewise variance is wrong, so its case-study numbers
"27.08" and "n' = 26960" are not reproduced.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.analysis.predictor import Prediction
from ldpfed.validation import LDPValueError

TIE = "tie"


@dataclass(frozen=True, eq=False)
class BreakEven:
    """Where mechanisms `a` and `b` cross, per dimension and for the whole MSE, and who wins at N."""

    a: str
    b: str
    users: int
    n_prime: np.ndarray  # per dimension; NaN where the biases are equal (no crossing)
    winner: np.ndarray  # per dimension at `users`: a, b or "tie"
    total_n_prime: float
    mse_a: float
    mse_b: float

    @property
    def total_winner(self) -> str:
        return _pick(self.mse_a, self.mse_b, self.a, self.b)

    @property
    def total_dominates(self) -> bool:
        """True when one mechanism wins at every population size."""
        return not (np.isfinite(self.total_n_prime) and self.total_n_prime > 0)

    def to_dict(self, per_dimension: bool = True) -> dict:
        summary = {
            "a": self.a,
            "b": self.b,
            "users": self.users,
            "mse_a": self.mse_a,
            "mse_b": self.mse_b,
            "winner": self.total_winner,
            "break_even_users": self.total_n_prime if not self.total_dominates else None,
            "dominates": self.total_dominates,
        }
        if per_dimension:
            summary["per_dimension"] = {"break_even_users": self.n_prime, "winner": self.winner.tolist()}
        return summary


def crossing(variance_a, variance_b, bias_sq_a, bias_sq_b) -> np.ndarray:
    """n' = (A_B - A_A) / (delta_A^2 - delta_B^2); NaN where the squared biases are equal."""
    numerator = np.asarray(variance_b, float) - np.asarray(variance_a, float)
    denominator = np.asarray(bias_sq_a, float) - np.asarray(bias_sq_b, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator != 0, numerator / denominator, np.nan)


def break_even(a: Prediction, b: Prediction) -> BreakEven:
    """Compare two predictions made for the same users, dims, report_dims and data."""
    if (a.users, a.dims, a.report_dims) != (b.users, b.dims, b.report_dims):
        raise LDPValueError("break-even needs two predictions for the same users, dims and report_dims")
    ratio = a.dims / a.report_dims  # d/m
    scale_a = a.mean_report_variance * ratio + a.sampling_coefficient * (ratio - 1.0)
    scale_b = b.mean_report_variance * ratio + b.sampling_coefficient * (ratio - 1.0)
    bias_sq_a, bias_sq_b = a.report_bias**2, b.report_bias**2  # delta_j: the lines in 1/n of the module docstring
    n = a.users
    mse_a = scale_a / n + bias_sq_a
    mse_b = scale_b / n + bias_sq_b
    name_a, name_b = _label(a), _label(b)
    if name_a == name_b:
        name_a, name_b = f"A: {name_a}", f"B: {name_b}"
    winner = np.where(mse_a < mse_b, name_a, np.where(mse_b < mse_a, name_b, TIE))
    return BreakEven(
        a=name_a,
        b=name_b,
        users=n,
        n_prime=crossing(scale_a, scale_b, bias_sq_a, bias_sq_b),
        winner=winner,
        total_n_prime=float(crossing(scale_a.sum(), scale_b.sum(), bias_sq_a.sum(), bias_sq_b.sum())),
        mse_a=float(np.mean(mse_a)),
        mse_b=float(np.mean(mse_b)),
    )


def _label(prediction: Prediction) -> str:
    description = prediction.mechanism
    options = ", ".join(f"{k}={v}" for k, v in description.get("options", {}).items())
    return f"{description['name']}({options})" if options else description["name"]


def _pick(error_a: float, error_b: float, a: str, b: str) -> str:
    if error_a < error_b:
        return a
    return b if error_b < error_a else TIE

"""Confidence statements from a predicted deviation model (analysis.md, "Confidence supremum").

P(|theta_hat_j - theta_bar_j| <= xi) = Phi((xi - delta_j)/sigma_j) - Phi((-xi - delta_j)/sigma_j);
xi_j(alpha) is the xi where that probability reaches alpha (`DeviationModel.supremum`).
Because the dimensions are independent under the CLT model (thesis Theorem 1), the error bound
holding in every dimension at once is the xi with prod_j P_j(xi) = alpha.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.validation import check_fraction

BISECTION_STEPS = 64


@dataclass(frozen=True, eq=False)
class ErrorSupremum:
    """xi_j(alpha) per dimension, its maximum, and the simultaneous bound over all dimensions."""

    alpha: float
    per_dimension: np.ndarray
    simultaneous: float

    @property
    def max(self) -> float:
        return float(np.max(self.per_dimension))

    def to_dict(self, per_dimension: bool = True) -> dict:
        summary = {"alpha": self.alpha, "max": self.max, "simultaneous": self.simultaneous}
        if per_dimension:
            summary["per_dimension"] = self.per_dimension
        return summary


def check_alpha(alpha: float) -> float:
    return check_fraction(alpha, "confidence alpha")


def simultaneous_supremum(model: DeviationModel, alpha: float) -> float:
    """The smallest xi with prod_j P(|deviation_j| <= xi) >= alpha (bisection).

    Upper bracket: if every dimension holds with probability alpha^(1/d), the product is alpha,
    and |delta_j| + sigma_j z_((1 + alpha^(1/d))/2) achieves that in dimension j.
    """
    alpha = check_alpha(alpha)
    per_dimension_level = alpha ** (1.0 / model.delta.size)
    low, high = 0.0, float(np.max(np.abs(model.delta) + model.sigma * ndtri((1.0 + per_dimension_level) / 2.0)))
    for _ in range(BISECTION_STEPS):
        middle = 0.5 * (low + high)
        # Sum of logs: a product of 10^5 probabilities would underflow only far below alpha.
        if np.sum(np.log(np.maximum(model.within_probability(middle), 1e-300))) >= np.log(alpha):
            high = middle
        else:
            low = middle
    return high


def error_supremum(model: DeviationModel, alpha: float = 0.95) -> ErrorSupremum:
    """xi_j(alpha) per dimension and the simultaneous bound (pass `prediction.deviation_model()`)."""
    alpha = check_alpha(alpha)
    return ErrorSupremum(alpha, model.supremum(alpha), simultaneous_supremum(model, alpha))

"""The per-dimension deviation model N(delta_j, sigma_j^2) of the collector's estimate.

By the CLT, theta_hat_j - theta_bar_j ~ N(delta_j, sigma_j^2) independently over j (analysis.md,
thesis Theorem 1). The predictor builds this model from the data distribution ("model"); the
server can also build it from the reports alone ("plug-in", recalibration.md). Recalibration and
confidence statements only need the two vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from ldpfed.validation import LDPValueError, check_fraction

DEVIATION_SOURCES = ("model", "plug-in")


@dataclass(frozen=True)
class DeviationModel:
    """theta_hat_j - theta_bar_j ~ N(delta[j], sigma[j]^2), independent over dimensions j."""

    delta: np.ndarray
    sigma: np.ndarray
    source: str = "model"

    def __post_init__(self) -> None:
        delta, sigma = np.broadcast_arrays(np.asarray(self.delta, float), np.asarray(self.sigma, float))
        if np.any(sigma < 0) or not np.all(np.isfinite(sigma)) or not np.all(np.isfinite(delta)):
            raise LDPValueError("sigma must be finite and >= 0, delta finite")
        if self.source not in DEVIATION_SOURCES:
            raise LDPValueError(f"source must be one of {DEVIATION_SOURCES}, got {self.source!r}")
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "sigma", sigma)

    @property
    def mse(self) -> float:
        """Predicted mean squared error (1/d) sum_j (sigma_j^2 + delta_j^2)."""
        return float(np.mean(self.sigma**2 + self.delta**2))

    def within_probability(self, xi) -> np.ndarray:
        """P(|theta_hat_j - theta_bar_j| <= xi) per dimension (analysis.md, confidence)."""
        xi = np.asarray(xi, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            upper = (xi - self.delta) / self.sigma
            lower = (-xi - self.delta) / self.sigma
        probability = ndtr(upper) - ndtr(lower)
        # sigma = 0: the deviation is exactly delta.
        point_mass = (np.abs(self.delta) <= xi).astype(float)
        return np.where(self.sigma > 0, probability, point_mass)

    def supremum(self, alpha: float = 0.95, *, iterations: int = 64) -> np.ndarray:
        """xi_j(alpha): the smallest xi with P(|deviation_j| <= xi) >= alpha, per dimension.

        Bisection on [0, |delta| + sigma z_((1+alpha)/2)], an upper bracket because the event
        |dev - delta| <= xi - |delta| implies |dev| <= xi. 64 halvings reach float precision.
        """
        alpha = check_fraction(alpha, "alpha")
        low = np.zeros_like(self.sigma)
        high = np.abs(self.delta) + self.sigma * ndtri((1.0 + alpha) / 2.0)
        for _ in range(iterations):
            middle = 0.5 * (low + high)
            enough = self.within_probability(middle) >= alpha
            high = np.where(enough, middle, high)
            low = np.where(enough, low, middle)
        return high

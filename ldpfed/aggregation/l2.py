"""L2 re-calibration: shrinking towards 0 (recalibration.md; thesis Eq. 4.60 and Lemma 5).

theta_j = theta_hat_j / (2 lam2_j + 1) with lam2_j = xi_j(alpha) / (2 |m_j|). The thesis' m_j is
the unknown true mean; ldpfed's default reference is the domain bound m_j = h (so on [-1, 1],
theta_j = theta_hat_j / (1 + xi_j)), the data-free choice that keeps |theta_j| <= 1 with
confidence alpha. The option "estimate" uses m_j = |theta_hat_j| (it under-shrinks when noise
dominates). The choice is recorded in every result.
"""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass

import numpy as np

from ldpfed.aggregation.base import ConfidenceAggregator, check_l2_reference


def l2_weight(theta_hat: np.ndarray, xi: np.ndarray, halfwidth: float, reference: str) -> np.ndarray:
    """lam2_j = xi_j / (2 |m_j|), m_j = h ("bound") or |theta_hat_j| ("estimate"; inf where 0).

    xi_j = 0 (sigma_j = 0, no deviation) gives lam2_j = 0 even where theta_hat_j = 0 (not 0/0 = NaN)."""
    if reference == "bound":
        return xi / (2.0 * halfwidth)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(xi == 0, 0.0, xi / (2.0 * np.abs(theta_hat)))


def shrink(theta_hat: np.ndarray, lam2: np.ndarray) -> np.ndarray:
    """theta_j = theta_hat_j / (2 lam2_j + 1) (an infinite weight gives 0)."""
    return theta_hat / (2.0 * lam2 + 1.0)


@dataclass(frozen=True)
class ShrinkingAggregator(ConfidenceAggregator, ABC):
    """A confidence aggregator that uses the L2 shrink, with its reference m_j as an option."""

    l2_reference: str = "bound"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_l2_reference(self.l2_reference)

    def l2_weight(self, theta_hat: np.ndarray, xi: np.ndarray, halfwidth: float) -> np.ndarray:
        return l2_weight(theta_hat, xi, halfwidth, self.l2_reference)


@dataclass(frozen=True)
class Shrink(ShrinkingAggregator):
    name = "l2"

    def _recalibrate(self, theta_hat, deviation, halfwidth):
        lam2 = self.l2_weight(theta_hat, self.supremum(deviation, theta_hat.shape), halfwidth)
        return shrink(theta_hat, lam2), {"lam2": lam2}

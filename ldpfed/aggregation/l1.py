"""L1 re-calibration: soft thresholding by the confidence supremum (recalibration.md; thesis
Eq. 4.52 and Lemma 4)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.aggregation.base import ConfidenceAggregator


def soft_threshold(theta_hat: np.ndarray, lam1: np.ndarray) -> np.ndarray:
    """theta_j = sign(theta_hat_j) * max(|theta_hat_j| - lam1_j, 0)."""
    return np.sign(theta_hat) * np.maximum(np.abs(theta_hat) - lam1, 0.0)


@dataclass(frozen=True)
class SoftThreshold(ConfidenceAggregator):
    """lam1_j = xi_j(alpha), the alpha-confidence supremum of |theta_hat_j - theta_bar_j|."""

    name = "l1"

    def _recalibrate(self, theta_hat, deviation, halfwidth):
        lam1 = self.supremum(deviation, theta_hat.shape)
        return soft_threshold(theta_hat, lam1), {"lam1": lam1}

"""HDR4ME*: the per-dimension mixture of none, L1 and L2 weighted by how likely the deviation is
small, moderate or large (recalibration.md, HDR4ME*; thesis Algorithm 4).

p1 = P(|dev_j| <= h), p2 = P(h < |dev_j| <= 2h), p3 = P(|dev_j| > 2h) under N(delta_j, sigma_j^2),
theta*_j = p1 none_j + p2 L1_j + p3 L2_j. The thresholds 1 and 2 of the thesis come from the
domain [-1, 1]; they scale with the domain half-width h.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.aggregation.l1 import soft_threshold
from ldpfed.aggregation.l2 import ShrinkingAggregator, shrink


def mixture_weights(deviation: DeviationModel, halfwidth: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p1, p2, p3): probabilities that |dev_j| is in [0, h], (h, 2h] and (2h, inf)."""
    within_one = deviation.within_probability(halfwidth)
    within_two = deviation.within_probability(2.0 * halfwidth)
    p1 = within_one
    p2 = np.clip(within_two - within_one, 0.0, 1.0)
    p3 = np.clip(1.0 - within_two, 0.0, 1.0)
    return p1, p2, p3


@dataclass(frozen=True)
class HDR4MEStar(ShrinkingAggregator):
    name = "hdr4me"

    def _recalibrate(self, theta_hat, deviation, halfwidth):
        xi = self.supremum(deviation, theta_hat.shape)
        l1 = soft_threshold(theta_hat, xi)
        l2 = shrink(theta_hat, self.l2_weight(theta_hat, xi, halfwidth))
        p1, p2, p3 = (np.broadcast_to(p, theta_hat.shape) for p in mixture_weights(deviation, halfwidth))
        combined = p1 * theta_hat + p2 * l1 + p3 * l2
        return combined, {"p1": p1, "p2": p2, "p3": p3, "l1": l1, "l2": l2}

"""The plain per-dimension mean: theta_j = theta_hat_j (recalibration.md, "none")."""

from __future__ import annotations

from dataclasses import dataclass

from ldpfed.aggregation.base import Aggregator


@dataclass(frozen=True)
class PlainMean(Aggregator):
    name = "mean"
    uses_deviation = False

    def _recalibrate(self, theta_hat, deviation, halfwidth):
        return theta_hat.copy(), {}

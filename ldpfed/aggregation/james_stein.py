"""Positive-part James–Stein style shrinkage, a principled comparator (recalibration.md, last
paragraph): theta_j = theta_hat_j * max(0, 1 - sigma_j^2 / theta_hat_j^2), 0 where theta_hat_j = 0.

It uses sigma_j only, as the spec writes it (a biased mechanism's delta_j is not subtracted; none
of the other candidates corrects the bias either)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.aggregation.base import Aggregator


@dataclass(frozen=True)
class JamesStein(Aggregator):
    name = "james-stein"

    def _recalibrate(self, theta_hat, deviation, halfwidth):
        variance = np.broadcast_to(deviation.sigma**2, theta_hat.shape)
        square = theta_hat**2
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(square > 0, np.maximum(0.0, 1.0 - variance / square), 0.0)
        # sigma = 0 leaves every estimate (even 0) unchanged.
        factor = np.where(variance == 0, 1.0, factor)
        return theta_hat * factor, {"factor": factor}

"""Euclidean projection of each attribute's frequency estimates onto the probability simplex: the
standard consistency post-processing of frequency oracles (compared with its variants in Wang et
al., "Locally Differentially Private Frequency Estimation with Consistency", NDSS 2020); the
algorithm is Duchi, Shalev-Shwartz, Singer and Chandra, ICML 2008, Figure 1.

For one attribute with estimates v (k entries): sort u = v descending, rho = the largest j with
u_j - (sum_{i<=j} u_i - 1) / j > 0, tau = (sum_{i<=rho} u_i - 1) / rho, and w = max(v - tau, 0).
w is the point of {w >= 0, sum w = 1} closest to v (KKT: w_i = v_i - tau where w_i > 0 and
v_i <= tau where w_i = 0). Vectorized over attributes by padding every block to the largest k.
It is post-processing of released estimates, so it costs no privacy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpfed.aggregation.base import Aggregator
from ldpfed.aggregation.deviation import DeviationModel


def project_to_simplex(values, categories) -> np.ndarray:
    """Project each block of `values` (blocks of sizes `categories`, concatenated) onto the simplex."""
    values = np.asarray(values, dtype=float)
    counts = np.asarray(categories, dtype=np.int64)
    blocks, width = counts.size, int(counts.max())
    valid = np.arange(width)[None, :] < counts[:, None]  # (blocks, width)
    padded = np.full((blocks, width), -np.inf)
    padded[valid] = values
    ordered = -np.sort(-padded, axis=1)  # descending; padding (-inf) last
    cumulative = np.cumsum(np.where(valid, ordered, 0.0), axis=1)
    positions = np.arange(1, width + 1)
    positive = valid & (ordered - (cumulative - 1.0) / positions > 0)
    rho = positive.sum(axis=1)  # the condition holds on a prefix; rho >= 1 (j = 1 gives 1 > 0)
    tau = (cumulative[np.arange(blocks), rho - 1] - 1.0) / rho
    return np.maximum(padded - tau[:, None], 0.0)[valid]


@dataclass(frozen=True)
class SimplexProjection(Aggregator):
    """Each attribute's block of frequency estimates projected onto the probability simplex
    (frequency task only). `categories`: the blocks' sizes, in order (empty: one block of all)."""

    name: ClassVar[str] = "simplex"
    tasks: ClassVar[tuple[str, ...]] = ("frequency",)
    uses_deviation: ClassVar[bool] = False
    elementwise: ClassVar[bool] = False
    categories: tuple[int, ...] = ()

    def _recalibrate(self, theta_hat: np.ndarray, deviation: DeviationModel, halfwidth: float):
        blocks = self.categories or (theta_hat.size,)
        return project_to_simplex(theta_hat, blocks), {}

    def options(self) -> dict:
        return {}  # the block sizes are the data's layout, not an option of the estimate

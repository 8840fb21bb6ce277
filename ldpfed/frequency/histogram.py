"""Histogram encoding (mechanisms.md, Frequency estimation by histogram encoding): the one-hot vector
in {0,1}^k is mapped to {-1,+1}^k (0 -> -1, 1 -> +1) and every entry is perturbed independently by
a scalar randomizer of `ldpfed.mechanisms` with budget eps/2. The spec writes eps/(2m); here m = 1
categorical value per report. Changing the category changes exactly two entries, so two entries at
eps/2 each give eps in total (for an approximate mechanism, two entries at (eps/2, delta/2) give
(eps, delta) by basic composition).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.frequency.base import FrequencyOracle, check_frequencies
from ldpfed.mechanisms.base import Mechanism
from ldpfed.validation import LDPValueError, check_positive_int


@dataclass(frozen=True)
class HistogramEncoding(FrequencyOracle):
    """One-hot in {-1,+1}^k, each entry perturbed by `entry` (the scalar mechanism at eps/2).

    Entry means: E[t*] = b0 + (1 + b1) t with t = 2 f_c - 1 on average over users, hence
    f_hat_c = ((mean_c - b0) / (1 + b1) + 1) / 2, exact for biased (square-wave raw) mechanisms too.
    Var(f_hat_c) = (f_c V(1) + (1 - f_c) V(-1)) / (4 n (1 + b1)^2).
    """

    entry: Mechanism  # the per-entry randomizer, budget eps/2 (and delta/2); see `get`

    name = "histogram"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.entry, Mechanism):
            raise LDPValueError("histogram encoding needs a scalar mechanism; build it with ldpfed.frequency.get")

    def _sample(self, categories, rng):
        one_hot = np.full((categories.size, self.k), -1.0)
        one_hot[np.arange(categories.size), categories] = 1.0
        return self.entry.perturb(one_hot, rng)

    def contributions(self, reports) -> np.ndarray:
        reports = np.asarray(reports, dtype=float)
        if reports.ndim != 2 or reports.shape[1] != self.k or reports.shape[0] == 0:
            raise LDPValueError(f"reports must be an (n, k={self.k}) array, got shape {reports.shape}")
        if not np.all(np.isfinite(reports)):
            raise LDPValueError("reports contain NaN or inf")
        b0, b1 = self.entry.bias_coefficients
        return ((reports - b0) / (1.0 + b1) + 1.0) / 2.0

    def variance(self, frequencies, n: int) -> np.ndarray:
        f = check_frequencies(frequencies, self.k)
        n = check_positive_int(n, "n")
        _, b1 = self.entry.bias_coefficients
        v_one, v_minus_one = self.entry.variance(1.0), self.entry.variance(-1.0)
        return (f * v_one + (1 - f) * v_minus_one) / (4 * n * (1.0 + b1) ** 2)

    def log_probability(self, reports, category):
        reports = np.asarray(reports, dtype=float)
        one_hot = np.where(np.arange(self.k) == category, 1.0, -1.0)
        return np.sum(self.entry.log_density(reports, one_hot), axis=-1)

    @property
    def delta(self) -> float | None:
        return None if self.entry.delta is None else 2 * self.entry.delta

    @property
    def guarantee(self) -> str:
        if self.entry.approximate:
            return f"({self.epsilon:g}, {self.delta:g})-LDP per categorical value ({self.entry.name} per entry)"
        return f"{self.epsilon:g}-LDP per categorical value ({self.entry.name} at eps/2 per entry)"

    def describe(self) -> dict:
        return {**super().describe(), "delta": self.delta, "entry": self.entry.describe()}

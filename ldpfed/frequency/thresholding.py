"""Summation and thresholding with histogram encoding, SHE and THE (Wang, Blocki, Li and Jha, USENIX
Security 2017, Section 4.2), on ldpfed's floating-point-safe Laplace mechanism.

Both encode the category as a one-hot vector, mapped to {-1, +1}^k, and perturb every entry with
`ldpfed.mechanisms`' Laplace at eps/2 (its safe sampler by default: reports on the grid 1/J plus
exact discrete Laplace-like noise; `histogram.HistogramEncoding`). On the {0, 1} scale of Wang et
al. that is Lap(2/eps) per entry.
- SHE reports the noisy vector and the server sums: Var = 8 / (n eps^2) for continuous Laplace; the
  exact variance is the safe sampler's (`HistogramEncoding.variance`).
- THE reports, per entry, whether the noisy value exceeds theta (on the {0, 1} scale; 2 theta - 1 on
  the {-1, +1} scale): post-processing of SHE's report, so it keeps SHE's guarantee, and the client
  sends k bits. theta minimizes Wang et al.'s variance q (1 - q) / (p - q)^2 with
  p = 1 - e^(eps (theta - 1) / 2) / 2 and q = e^(-eps theta / 2) / 2 over (1/2, 1). The p and q
  used by the estimator are exact for the sampler: sums of its exact mass (`Mechanism.log_density`)
  over the grid values above the threshold, given an entry of +1 and of -1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

import ldpfed.mechanisms as mechanisms
from ldpfed.frequency.base import CountingOracle, check_bit_rows, check_categories
from ldpfed.frequency.histogram import HistogramEncoding
from ldpfed.validation import check_epsilon

_TAIL_DEVIATIONS = 50  # sum the exact mass over 50 noise standard deviations (the rest is below e^-70)


@dataclass(frozen=True)
class SummationHistogramEncoding(HistogramEncoding):
    """SHE: histogram encoding with the Laplace mechanism at eps/2 per entry (module docstring)."""

    name = "she"

    @classmethod
    def build(cls, epsilon: float, k: int) -> SummationHistogramEncoding:
        epsilon = check_epsilon(epsilon)
        return cls(epsilon, k, mechanisms.get("laplace", epsilon / 2))


@lru_cache(maxsize=64)
def optimal_threshold(epsilon: float) -> float:
    """theta in (1/2, 1) minimizing THE's variance (Wang et al. 2017, Section 4.2)."""

    from scipy.optimize import minimize_scalar  # here: scipy.optimize costs a process' start 0.3-0.4 s

    def variance(theta):
        p = 1.0 - 0.5 * math.exp(epsilon * (theta - 1.0) / 2.0)
        q = 0.5 * math.exp(-epsilon * theta / 2.0)
        return q * (1.0 - q) / (p - q) ** 2

    return float(minimize_scalar(variance, bounds=(0.5, 1.0), method="bounded", options={"xatol": 1e-10}).x)


@lru_cache(maxsize=64)
def threshold_probabilities(epsilon: float) -> tuple[float, float]:
    """THE's (p, q) at eps: P(entry > 2 theta - 1) for the entry +1 and for -1, from the exact mass
    of the safe Laplace sampler at eps/2 on its grid."""
    entry = mechanisms.get("laplace", epsilon / 2)
    theta = optimal_threshold(epsilon)
    sampler = entry.safe_sampler
    steps = sampler.grid_steps
    cut = math.floor((2.0 * theta - 1.0) * steps)  # report code > cut <=> value > 2 theta - 1
    span = math.ceil(_TAIL_DEVIATIONS * math.sqrt(sampler.noise_variance)) + 2 * steps + 4
    codes = np.arange(cut + 1, cut + 1 + 2 * span, dtype=float)
    p, q = (float(np.exp(entry.log_density(codes / steps, t)).sum()) for t in (1.0, -1.0))
    return p, q


@dataclass(frozen=True)
class ThresholdingHistogramEncoding(CountingOracle):
    """THE: the bits [SHE entry > theta] of each one-hot entry (module docstring)."""

    name = "the"

    @classmethod
    def build(cls, epsilon: float, k: int) -> ThresholdingHistogramEncoding:
        return cls(epsilon, k)

    @cached_property
    def entry(self):
        """The per-entry Laplace mechanism at eps/2 (safe sampler)."""
        return mechanisms.get("laplace", self.epsilon / 2)

    @cached_property
    def theta(self) -> float:
        return optimal_threshold(self.epsilon)

    @property
    def _probabilities(self) -> tuple[float, float]:
        return threshold_probabilities(self.epsilon)

    @property
    def p(self) -> float:
        return self._probabilities[0]

    @property
    def q(self) -> float:
        return self._probabilities[1]

    def _sample(self, categories, rng):
        signs = np.full((categories.size, self.k), -1.0)
        signs[np.arange(categories.size), categories] = 1.0
        return self.entry.perturb(signs, rng) > 2.0 * self.theta - 1.0

    def _supports(self, reports):
        return check_bit_rows(reports, self.k)

    def _supports_first_two(self, reports):
        return np.asarray(reports, dtype=bool)[:, :2]

    def log_probability(self, reports, category):
        category = check_categories([category], self.k, name="category")[0]
        bits = np.asarray(reports, dtype=bool)
        p_one = np.where(np.arange(self.k) == category, self.p, self.q)
        return np.sum(np.where(bits, np.log(p_one), np.log1p(-p_one)), axis=-1)

    @property
    def guarantee(self) -> str:
        return f"{self.epsilon:g}-LDP per categorical value (thresholded laplace at eps/2 per entry)"

    def describe(self) -> dict:
        return {**super().describe(), "theta": self.theta, "p": self.p, "q": self.q}

"""Duchi et al.'s mechanism: outputs +-B, bounded, unbiased (mechanisms.md, Duchi et al.)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpfed.mechanisms.base import Mechanism


@dataclass(frozen=True)
class Duchi(Mechanism):
    name = "duchi"

    @property
    def output_bound(self) -> float:
        return 1.0 / math.tanh(self.epsilon / 2.0)  # B = (e^e + 1)/(e^e - 1)

    @property
    def _slope(self) -> float:
        return 0.5 * math.tanh(self.epsilon / 2.0)  # P(+B) = 1/2 + t (e^e - 1)/(2 e^e + 2)

    def probability_plus(self, t) -> np.ndarray:
        """P(t* = +B | t) = 1/2 + t (e^e - 1)/(2e^e + 2)."""
        return 0.5 + self._slope * np.asarray(t, dtype=float)

    def _sample(self, t, rng):
        # +B when u < P(+B | t): the sign of P - u picks the output in one pass.
        threshold = self._slope * t
        threshold += 0.5
        threshold -= rng.random(t.shape)
        return np.copysign(self.output_bound, threshold, out=threshold)

    @property
    def bias_coefficients(self):
        return (0.0, 0.0)

    @property
    def variance_coefficients(self):
        return (self.output_bound**2, 0.0, -1.0)  # V(t) = B^2 - t^2

    def third_abs_central_moment(self, t):
        t = np.asarray(t, dtype=float)
        bound, plus = self.output_bound, self.probability_plus(t)
        return plus * (bound - t) ** 3 + (1.0 - plus) * (bound + t) ** 3

    def log_density(self, y, t):
        """log pmf on {-B, +B} (-inf elsewhere), in log space so that large eps stays finite:
        P(+-B | t) = ((1 +- t) + (1 -+ t) e^-e) / (2 (1 + e^-e))."""
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        bound, e = self.output_bound, self.epsilon
        sign = np.where(y == bound, 1.0, -1.0)
        with np.errstate(divide="ignore"):
            log_mass = np.logaddexp(np.log1p(sign * t), np.log1p(-sign * t) - e)
        log_mass = log_mass - math.log(2.0) - math.log1p(math.exp(-e))
        return np.where(np.abs(y) == bound, log_mass, -np.inf)

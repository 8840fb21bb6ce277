"""A biased test mechanism for the analysis tests: t* = offset + shrink t + Lap(scale).

Its bias b(t) = offset + (shrink - 1) t has a slope, like square wave's raw estimator, so the
tests exercise the biased paths of the predictor before (and independently of) the real ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.mechanisms.base import Mechanism


@dataclass(frozen=True)
class ShrunkLaplace(Mechanism):
    shrink: float = 0.3
    offset: float = 0.05
    scale: float = 0.1

    name = "test-shrunk-laplace"

    def _sample(self, t, rng):
        return self.offset + self.shrink * t + rng.laplace(0.0, self.scale, size=t.shape)

    @property
    def bias_coefficients(self):
        return (self.offset, self.shrink - 1.0)

    @property
    def variance_coefficients(self):
        return (2.0 * self.scale**2, 0.0, 0.0)

    def third_abs_central_moment(self, t):
        return np.full(np.shape(t), 6.0 * self.scale**3)

    def log_density(self, y, t):
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        return -np.log(2 * self.scale) - np.abs(y - self.offset - self.shrink * t) / self.scale

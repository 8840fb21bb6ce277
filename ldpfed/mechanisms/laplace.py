"""Laplace mechanism on [-1, 1]: t* = t + Lap(2/e). Unbounded, unbiased (mechanisms.md, Laplace)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.mechanisms.base import Mechanism

SENSITIVITY = 2.0  # width of [-1, 1]


@dataclass(frozen=True)
class Laplace(Mechanism):
    name = "laplace"

    @property
    def scale(self) -> float:
        return SENSITIVITY / self.epsilon

    def _sample(self, t, rng):
        return t + rng.laplace(0.0, self.scale, size=t.shape)

    @property
    def bias_coefficients(self):
        return (0.0, 0.0)

    @property
    def variance_coefficients(self):
        return (2.0 * self.scale**2, 0.0, 0.0)  # 8 / e^2

    def third_abs_central_moment(self, t):
        # E|Lap(b)|^3 = 6 b^3 (the thesis prints 3 b^3: analysis.md erratum).
        return np.full(np.shape(t), 6.0 * self.scale**3)

    def log_density(self, y, t):
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        return -np.log(2.0 * self.scale) - np.abs(y - t) / self.scale

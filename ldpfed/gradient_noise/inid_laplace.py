"""i.n.i.d. Laplace noise matched to a sensitivity profile D_i (spec: gradient-noise.md, i.n.i.d.
Gaussian and Laplace).

b_i = D_i^(1/3) S / eps with S = sum_j D_j^(2/3): the condition sum_i D_i / b_i <= eps holds with
equality and the MSE sum_i 2 b_i^2 = 2 S^3 / eps^2 is minimal (Lagrange). For (eps, delta), eps is
replaced by eps - ln(1 - delta): a pure eps'-DP release is (eps, delta)-DP for that eps' (P(S) <=
min(1, e^eps' P'(S)) <= e^eps P'(S) + delta), so the round is charged as pure eps'-DP. A uniform
profile D_i = D gives b = d D / eps, the i.i.d. Laplace mechanism of L1 sensitivity d D.
The profile bounds |Delta_i| <= D_i (coordinate-wise clipping), which is what the condition needs.
"""

from __future__ import annotations

import math

import numpy as np

from ldpfed.accounting import pure_round
from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.gradient_noise.profile import check_profile
from ldpfed.validation import LDPValueError, check_epsilon


def effective_epsilon(epsilon: float, delta: float | None) -> float:
    """eps - ln(1 - delta): the pure budget an (eps, delta) target allows (delta = 0: eps)."""
    delta = 0.0 if delta is None else float(delta)
    if not (0.0 <= delta < 1.0):
        raise LDPValueError(f"delta must be in [0, 1), got {delta!r}")
    return check_epsilon(epsilon) - math.log1p(-delta)


class InidLaplace(GradientNoise):
    """Independent Laplace(0, b_i) with b_i = D_i^(1/3) (sum_j D_j^(2/3)) / eps'."""

    name = "inid-laplace"

    def __init__(self, profile, *, epsilon: float, delta: float | None = None) -> None:
        self.profile = check_profile(profile)
        self.dims = self.profile.size
        self.epsilon = check_epsilon(epsilon)
        self.delta = None if not delta else float(delta)
        self.pure_epsilon = effective_epsilon(self.epsilon, self.delta)
        self.scales = np.cbrt(self.profile) * np.sum(self.profile ** (2.0 / 3.0)) / self.pure_epsilon

    def condition(self) -> float:
        """sum_i D_i / b_i, which must be <= eps' (equal at the optimum)."""
        return float(np.sum(self.profile / self.scales))

    def mse(self) -> float:
        """E||noise||^2 = 2 (sum_j D_j^(2/3))^3 / eps'^2."""
        return float(2.0 * np.sum(self.profile ** (2.0 / 3.0)) ** 3 / self.pure_epsilon**2)

    def sample(self, count, rng):
        return rng.laplace(0.0, 1.0, (count, self.dims)) * self.scales

    def coordinate_variance(self):
        return 2.0 * self.scales**2

    def parameters(self):
        return {"epsilon": self.epsilon, "delta": self.delta, "pure_epsilon": self.pure_epsilon,
                "scales": self.scales.tolist() if self.dims <= 16 else None,
                "scale_min": float(self.scales.min()), "scale_max": float(self.scales.max()), "mse": self.mse()}

    @property
    def claim(self):
        if self.delta:
            return f"({self.epsilon:g}, {self.delta:g})-DP per release (pure {self.pure_epsilon:.6g}-DP)"
        return f"{self.epsilon:g}-DP per release"

    def _private_event(self):
        return pure_round(self.pure_epsilon)

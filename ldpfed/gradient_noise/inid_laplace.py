"""i.n.i.d. Laplace noise matched to a sensitivity profile D_i (spec: gradient-noise.md, i.n.i.d.
Gaussian and Laplace).

b_i = D_i^(1/3) S / eps with S = sum_j D_j^(2/3): the condition sum_i D_i / b_i <= eps holds with
equality and the MSE sum_i 2 b_i^2 = 2 S^3 / eps^2 is minimal (Lagrange). For (eps, delta), eps is
replaced by eps - ln(1 - delta): a pure eps'-DP release is (eps, delta)-DP for that eps' (P(S) <=
min(1, e^eps' P'(S)) <= e^eps P'(S) + delta), so the round is charged as pure eps'-DP. A uniform
profile D_i = D gives b = d D / eps, the i.i.d. Laplace mechanism of L1 sensitivity d D.
The profile bounds |Delta_i| <= D_i (coordinate-wise clipping), which is what the condition needs.

Samplers. "safe" (default): each coordinate on its own grid g_i = b_i gamma with exact integer
discrete Laplace noise (safe_grid.py); the release costs eps' = (1 + 2^-50) sum_i D_i / b_i +
d (gamma^2/8 + 2 gamma 2^-22) (interpolation bound plus float slack, safe_grid.py), so the scales are
the optimal ones for eps0 = (eps' - d (...)) / (1 + 2^-50): the condition holds with equality at
eps0 and the realized eps' equals the requested budget. "continuous": rng.laplace, NOT
floating-point safe (Mironov 2012), for comparisons only.
"""

from __future__ import annotations

import math

import numpy as np

from ldpfed.accounting import pure_round
from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.gradient_noise.profile import check_profile
from ldpfed.samplers.safe_grid import (
    LAPLACE_INPUT_BITS,
    check_sampler,
    grid_inputs,
    laplace_integers,
    laplace_second_moment,
    laplace_step_ratio,
    rounding_slack,
    rounding_variance,
)
from ldpfed.validation import LDPValueError, check_epsilon

_DIVISION_SLACK = 2.0**-50  # relative float error of sum_i |x_i - x'_i| / g_i


def effective_epsilon(epsilon: float, delta: float | None) -> float:
    """eps - ln(1 - delta): the pure budget an (eps, delta) target allows (delta = 0: eps)."""
    delta = 0.0 if delta is None else float(delta)
    if not (0.0 <= delta < 1.0):
        raise LDPValueError(f"delta must be in [0, 1), got {delta!r}")
    return check_epsilon(epsilon) - math.log1p(-delta)


class InidLaplace(GradientNoise):
    """Independent Laplace(0, b_i) with b_i = D_i^(1/3) (sum_j D_j^(2/3)) / eps'."""

    name = "inid-laplace"
    samplers = ("safe", "continuous")
    takes_profile = True

    def __init__(self, profile, *, epsilon: float, delta: float | None = None, sampler: str = "safe") -> None:
        self.profile = check_profile(profile)
        self.dims = self.profile.size
        self.epsilon = check_epsilon(epsilon)
        self.delta = None if not delta else float(delta)
        self.pure_epsilon = effective_epsilon(self.epsilon, self.delta)
        self.sampler = check_sampler(sampler)
        self.calibration_epsilon = self.pure_epsilon
        if self.floating_point_safe:
            self.gamma = laplace_step_ratio()
            # (1 - 2^-40): the float evaluation of realized_epsilon stays <= the budget
            self.calibration_epsilon = (
                (self.pure_epsilon - self.grid_cost()) / (1.0 + _DIVISION_SLACK) * (1.0 - 2.0**-40)
            )
            if self.calibration_epsilon < 0.5 * self.pure_epsilon:
                raise LDPValueError(
                    f"inid-laplace's safe grid costs {self.grid_cost():.3g} of eps = {self.pure_epsilon:g} "
                    f"at d = {self.dims}: use fewer coordinates, a larger eps, or sampler='continuous'"
                )
        self.scales = np.cbrt(self.profile) * np.sum(self.profile ** (2.0 / 3.0)) / self.calibration_epsilon
        if self.floating_point_safe:
            self.steps = self.scales * self.gamma  # g_i = b_i gamma: the integer noise has scale b_i

    def grid_cost(self) -> float:
        """d (gamma^2 / 8 + 2 gamma slack): what the grid adds to sum_i D_i / b_i (safe_grid.py)."""
        return self.dims * (self.gamma**2 / 8.0 + 2.0 * self.gamma * rounding_slack(LAPLACE_INPUT_BITS))

    def realized_epsilon(self) -> float:
        """The pure eps of what is sampled: the condition plus the grid's cost (safe), else the condition."""
        if not self.floating_point_safe:
            return self.condition()
        return (1.0 + _DIVISION_SLACK) * self.condition() + self.grid_cost()

    def condition(self) -> float:
        """sum_i D_i / b_i, which must be <= eps0 (equal at the optimum; eps0 = eps' for continuous)."""
        return float(np.sum(self.profile / self.scales))

    def mse(self) -> float:
        """E||noise||^2 = 2 (sum_j D_j^(2/3))^3 / eps0^2 (continuous; the safe law is within 1e-5 of it)."""
        return float(2.0 * np.sum(self.profile ** (2.0 / 3.0)) ** 3 / self.calibration_epsilon**2)

    def sample(self, count, rng):
        if self.floating_point_safe:
            return laplace_integers((count, self.dims), rng) * self.steps
        return rng.laplace(0.0, 1.0, (count, self.dims)) * self.scales

    def _release(self, rows, rng):
        if not self.floating_point_safe:
            return super()._release(rows, rng)
        grid = grid_inputs(rows, self.steps, rng, LAPLACE_INPUT_BITS)
        grid += laplace_integers(grid.shape, rng)
        grid *= self.steps
        return grid

    def coordinate_variance(self):
        if self.floating_point_safe:
            return self.steps**2 * (laplace_second_moment() + 0.25)
        return 2.0 * self.scales**2

    def release_variance(self, rows):
        if not self.floating_point_safe:
            return super().release_variance(rows)
        return self.steps**2 * laplace_second_moment() + rounding_variance(rows, self.steps)

    def parameters(self):
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "pure_epsilon": self.pure_epsilon,
            "calibration_epsilon": self.calibration_epsilon,
            "realized_epsilon": self.realized_epsilon(),
            "scales": self.scales.tolist() if self.dims <= 16 else None,
            "scale_min": float(self.scales.min()),
            "scale_max": float(self.scales.max()),
            "mse": self.mse(),
        }

    @property
    def claim(self):
        if self.delta:
            return f"({self.epsilon:g}, {self.delta:g})-DP per release (pure {self.pure_epsilon:.6g}-DP)"
        return f"{self.epsilon:g}-DP per release"

    def _private_event(self):
        return pure_round(self.pure_epsilon)

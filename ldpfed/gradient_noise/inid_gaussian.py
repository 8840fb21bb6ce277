"""i.n.i.d. Gaussian noise: independent, non-identically distributed coordinates with variances
matched to a sensitivity profile D_i (spec: gradient-noise.md, i.n.i.d. Gaussian and Laplace).

eta* is the root of h(eta) = Q(eps/eta - eta/2) - e^eps Q(eps/eta + eta/2) = delta (h increases
from 0 to 1; the analytic Gaussian mechanism of Balle & Wang 2018 with eta = D/sigma), solved by
brentq on log eta and nudged until h(eta) <= delta holds in floating point. The optimal variances
s_i^2 = D_i ||D||_1 / eta*^2 meet the condition sum_i D_i^2 / s_i^2 <= eta*^2 with equality and
minimise the MSE sum_i s_i^2 = ||D||_1^2 / eta*^2. A uniform profile (one layer, D_i = C/sqrt(d))
gives s_i = C / eta*, the i.i.d. analytic Gaussian of L2 sensitivity C.

Privacy: the Mahalanobis sensitivity is sqrt(sum D_i^2/s_i^2) = eta*, so one release is the
Gaussian mechanism with noise multiplier z = 1/eta*; with s_i^2 = z^2 D_i ||D||_1 for a given z
(DP-SGD) it is GaussianDpEvent(z), whatever the profile (the profile sets only the magnitudes).

Samplers. "safe" (default): coordinate i on the grid g_i = u_i / J with u_i = sqrt(D_i ||D||_1)
(Mahalanobis sensitivity 1 in units of u) and J = 2^ceil(log2(2^10 sqrt(d))), plus discrete
Gaussian noise N_Z(0, s^2), s = z (J (1 + 2^-40) + sqrt(d) (1 + 2^-11)) grid steps (safe_grid.py:
the rounding adds sqrt(d) steps to the L2 sensitivity, the float rounding 2^-11 of a step per
coordinate). Its Renyi curve is the continuous Gaussian's of noise multiplier z, so z is
calibrated to (eps, delta) by dp_accounting's RdpAccountant (`rdp_noise_multiplier`), after the
float slack of the discrete Gaussian sampler (`gaussian_float_slack`) is set aside; the optimal
profile shape s_i ~ sqrt(D_i) is kept. It costs: RDP instead of the analytic Gaussian (about
+15-25% noise sd at eps = 1, delta = 1e-5) and (1 + sqrt(d)/J) <= 1 + 2^-10 for the grid.
Its event is `DiscreteGaussianVectorDpEvent(z)` (RDP, basic/advanced via the calibrated (eps, delta);
no PLD), carrying the sampler's float slack over the d coordinates (`gaussian_sampler_slack`), which
the rdp accountant composes into its result (ldpfed.samplers.float_slack): given a noise
multiplier, the reported eps is the ideal curve's plus the slack, never the ideal curve alone.
"continuous": rng.standard_normal at eta*, NOT floating-point safe (Mironov 2012).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtr

from ldpfed.accounting import CalibratedDpEvent, DiscreteGaussianVectorDpEvent, gaussian_round
from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.gradient_noise.profile import check_profile
from ldpfed.samplers.safe_grid import (
    GAUSSIAN_GRID_FACTOR,
    GAUSSIAN_INPUT_BITS,
    check_sampler,
    gaussian_float_slack,
    gaussian_integers,
    gaussian_sampler_slack,
    grid_inputs,
    rounding_slack,
    rounding_variance,
)
from ldpfed.validation import LDPValueError, check_epsilon, check_fraction, check_positive


def h(eta: float, epsilon: float) -> float:
    """Q(eps/eta - eta/2) - e^eps Q(eps/eta + eta/2), the e^eps term in log space."""
    a, b = epsilon / eta, eta / 2.0
    return float(ndtr(b - a) - math.exp(epsilon + log_ndtr(-a - b)))


def optimal_eta(epsilon: float, delta: float) -> float:
    """eta* with h(eta*) = delta (the largest eta with h(eta) <= delta in floating point)."""
    from scipy.optimize import brentq  # here: scipy.optimize costs a process' start 0.3-0.4 s

    epsilon, delta = check_epsilon(epsilon), check_fraction(delta, "delta")

    def excess(log_eta: float) -> float:
        return h(math.exp(log_eta), epsilon) - delta

    low, high = -10.0, 10.0
    while excess(low) > 0:
        low -= 10.0
    while excess(high) <= 0:
        high += 10.0
    eta = math.exp(brentq(excess, low, high, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500))
    while h(eta, epsilon) > delta:
        eta = math.nextafter(eta, 0.0)
    return eta


def rdp_epsilon(noise_multiplier: float, delta: float) -> float:
    """eps at delta of one Gaussian release with noise multiplier z, by dp_accounting's RdpAccountant."""
    from dp_accounting import GaussianDpEvent
    from dp_accounting.rdp import RdpAccountant

    return float(RdpAccountant().compose(GaussianDpEvent(noise_multiplier)).get_epsilon(delta))


def rdp_noise_multiplier(epsilon: float, delta: float) -> float:
    """The smallest z (to 1e-10 relative) with rdp_epsilon(z, delta) <= epsilon (eps falls as z grows)."""
    from scipy.optimize import brentq

    def excess(log_z: float) -> float:
        return rdp_epsilon(math.exp(log_z), delta) - epsilon

    low, high = -5.0, 5.0
    while excess(low) <= 0:
        low -= 5.0
    while excess(high) > 0:
        high += 5.0
    z = math.exp(brentq(excess, low, high, xtol=1e-10))
    while rdp_epsilon(z, delta) > epsilon:
        z *= 1.0 + 1e-10
    return z


class InidGaussian(GradientNoise):
    """N(0, diag(s_i^2)) with s_i^2 = D_i ||D||_1 / eta^2; eta = eta*(eps, delta) or 1/z (continuous);
    the safe sampler's discrete analogue at the RDP-calibrated z (module docstring)."""

    name = "inid-gaussian"
    samplers = ("safe", "continuous")
    takes_profile = True

    def __init__(
        self,
        profile,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        noise_multiplier: float | None = None,
        sampler: str = "safe",
    ) -> None:
        self.profile = check_profile(profile)
        self.dims = self.profile.size
        self.sampler = check_sampler(sampler)
        if (epsilon is None) == (noise_multiplier is None):
            raise LDPValueError("inid-gaussian needs exactly one of epsilon (with delta) or noise_multiplier")
        self.float_slack = (0.0, 0.0)
        unit = np.sqrt(self.profile * self.profile.sum())  # Mahalanobis sensitivity 1 in these units
        if self.floating_point_safe:
            self.grid_steps = 2 ** math.ceil(math.log2(GAUSSIAN_GRID_FACTOR * math.sqrt(self.dims)))
            slack = 2.0 * rounding_slack(GAUSSIAN_INPUT_BITS)
            self.grid_sensitivity = self.grid_steps * (1.0 + 2.0**-40) + math.sqrt(self.dims) * (1.0 + slack)
            self.steps = unit / self.grid_steps
        if noise_multiplier is not None:
            self.epsilon, self.delta = None, None
            self.eta = 1.0 / check_positive(noise_multiplier, "noise_multiplier")
        elif not self.floating_point_safe:
            self.epsilon, self.delta = check_epsilon(epsilon), check_fraction(delta, "delta")
            self.eta = optimal_eta(self.epsilon, self.delta)
        else:
            self.epsilon, self.delta = check_epsilon(epsilon), check_fraction(delta, "delta")
            z = rdp_noise_multiplier(self.epsilon, self.delta)  # a first guess to size the float slack
            slack_eps, slack_delta = gaussian_float_slack(
                z * self.grid_sensitivity, self.dims, self.grid_steps, self.delta
            )
            if slack_eps > 0.01 * self.epsilon or slack_delta > 0.01 * self.delta:
                raise LDPValueError(
                    f"inid-gaussian's safe sampler: float slack ({slack_eps:.3g}, {slack_delta:.3g}) too "
                    f"large for ({self.epsilon:g}, {self.delta:g}) at d = {self.dims}"
                )
            self.calibration_slack = (1.01 * slack_eps, 1.01 * slack_delta)
            self.eta = 1.0 / rdp_noise_multiplier(
                self.epsilon - self.calibration_slack[0], self.delta - self.calibration_slack[1]
            )
        if self.floating_point_safe:
            self.sigma_steps = self.grid_sensitivity / self.eta  # s = z (J + sqrt(d)) in grid steps
            self.float_slack = gaussian_float_slack(self.sigma_steps, self.dims, self.grid_steps, self.delta or 1.0)
            self.sampler_slack = gaussian_sampler_slack(self.sigma_steps, self.dims, self.grid_steps)
            if self.epsilon is not None and (
                self.float_slack[0] > self.calibration_slack[0] or self.float_slack[1] > self.calibration_slack[1]
            ):
                raise AssertionError("the realized float slack exceeds the one calibrated for")  # never: 1% margin
            self.scales = self.steps * self.sigma_steps  # Var N_Z = s^2 to double precision for s >= 10
        else:
            self.scales = unit / self.eta

    @property
    def noise_multiplier(self) -> float:
        return 1.0 / self.eta

    def condition(self) -> float:
        """sum_i D_i^2 / s_i^2, which must be <= eta^2 (equal at the optimum; the safe sampler leaves
        the factor (J / (J + sqrt(d)))^2 of eta^2 for its rounding)."""
        return float(np.sum((self.profile / self.scales) ** 2))

    def mse(self) -> float:
        """E||noise||^2 = sum_i s_i^2 (= ||D||_1^2 / eta^2 for the continuous sampler)."""
        return float(np.sum(self.scales**2))

    def sample(self, count, rng):
        if self.floating_point_safe:
            return gaussian_integers(self.sigma_steps, (count, self.dims), rng) * self.steps
        noise = rng.standard_normal((count, self.dims))
        noise *= self.scales
        return noise

    def _release(self, rows, rng):
        if not self.floating_point_safe:
            return super()._release(rows, rng)
        grid = grid_inputs(rows, self.steps, rng, GAUSSIAN_INPUT_BITS)
        grid += gaussian_integers(self.sigma_steps, grid.shape, rng)
        grid *= self.steps
        return grid

    def coordinate_variance(self):
        if self.floating_point_safe:
            return self.scales**2 + 0.25 * self.steps**2
        return self.scales**2

    def release_variance(self, rows):
        if not self.floating_point_safe:
            return super().release_variance(rows)
        return self.scales**2 + rounding_variance(rows, self.steps)

    def parameters(self):
        record = {
            "eta": self.eta,
            "noise_multiplier": self.noise_multiplier,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "l1_profile": float(self.profile.sum()),
            "scale_min": float(self.scales.min()),
            "scale_max": float(self.scales.max()),
            "mse": self.mse(),
        }
        if self.floating_point_safe:
            if self.epsilon is not None:  # the paper's eta* (continuous sampler), for checking against the paper
                record["eta_star_continuous"] = optimal_eta(self.epsilon, self.delta)
            record.update(
                accountant="rdp (dp_accounting RdpAccountant; discrete Gaussian, CKS 2020)",
                grid_steps=self.grid_steps,
                grid_sensitivity=self.grid_sensitivity,
                sigma_steps=self.sigma_steps,
                float_slack_epsilon=self.float_slack[0],
                float_slack_delta=self.float_slack[1],
            )
        else:
            record["accountant"] = "analytic Gaussian (Balle & Wang 2018)"
        return record

    @property
    def claim(self):
        if self.epsilon is None:
            return f"Gaussian mechanism with noise multiplier {self.noise_multiplier:.6g} (Mahalanobis sensitivity eta)"
        if self.floating_point_safe:
            return f"({self.epsilon:g}, {self.delta:g})-DP per release (discrete Gaussian on a grid, RDP-calibrated)"
        return f"({self.epsilon:g}, {self.delta:g})-DP per release (analytic Gaussian at Mahalanobis sensitivity eta*)"

    def _private_event(self):
        if self.floating_point_safe:
            slack = self.sampler_slack
            event = DiscreteGaussianVectorDpEvent(self.noise_multiplier, slack.over, slack.under, slack.mass)
            return event if self.epsilon is None else CalibratedDpEvent(event, self.epsilon, self.delta)
        if self.epsilon is None:
            return gaussian_round(self.noise_multiplier)
        return gaussian_round(self.noise_multiplier, epsilon=self.epsilon, delta=self.delta)

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
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from ldpfed.accounting import gaussian_round
from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.gradient_noise.profile import check_profile
from ldpfed.validation import LDPValueError, check_epsilon, check_fraction, check_positive


def h(eta: float, epsilon: float) -> float:
    """Q(eps/eta - eta/2) - e^eps Q(eps/eta + eta/2), the e^eps term in log space."""
    a, b = epsilon / eta, eta / 2.0
    return float(ndtr(b - a) - math.exp(epsilon + log_ndtr(-a - b)))


def optimal_eta(epsilon: float, delta: float) -> float:
    """eta* with h(eta*) = delta (the largest eta with h(eta) <= delta in floating point)."""
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


class InidGaussian(GradientNoise):
    """N(0, diag(s_i^2)) with s_i^2 = D_i ||D||_1 / eta^2; eta = eta*(eps, delta) or 1/z."""

    name = "inid-gaussian"

    def __init__(self, profile, *, epsilon: float | None = None, delta: float | None = None,
                 noise_multiplier: float | None = None) -> None:
        self.profile = check_profile(profile)
        self.dims = self.profile.size
        if (epsilon is None) == (noise_multiplier is None):
            raise LDPValueError("inid-gaussian needs exactly one of epsilon (with delta) or noise_multiplier")
        if noise_multiplier is not None:
            self.epsilon, self.delta = None, None
            self.eta = 1.0 / check_positive(noise_multiplier, "noise_multiplier")
        else:
            self.epsilon, self.delta = check_epsilon(epsilon), check_fraction(delta, "delta")
            self.eta = optimal_eta(self.epsilon, self.delta)
        self.scales = np.sqrt(self.profile * self.profile.sum()) / self.eta

    @property
    def noise_multiplier(self) -> float:
        return 1.0 / self.eta

    def condition(self) -> float:
        """sum_i D_i^2 / s_i^2, which must be <= eta^2 (equal at the optimum)."""
        return float(np.sum((self.profile / self.scales) ** 2))

    def mse(self) -> float:
        """E||noise||^2 = ||D||_1^2 / eta^2."""
        return float(self.profile.sum() ** 2 / self.eta**2)

    def sample(self, count, rng):
        noise = rng.standard_normal((count, self.dims))
        noise *= self.scales
        return noise

    def coordinate_variance(self):
        return self.scales**2

    def parameters(self):
        return {"eta": self.eta, "noise_multiplier": self.noise_multiplier, "epsilon": self.epsilon,
                "delta": self.delta, "l1_profile": float(self.profile.sum()), "scale_min": float(self.scales.min()),
                "scale_max": float(self.scales.max()), "mse": self.mse()}

    @property
    def claim(self):
        if self.epsilon is None:
            return f"Gaussian mechanism with noise multiplier {self.noise_multiplier:.6g} (Mahalanobis sensitivity eta)"
        return f"({self.epsilon:g}, {self.delta:g})-DP per release (analytic Gaussian at Mahalanobis sensitivity eta*)"

    def _private_event(self):
        if self.epsilon is None:
            return gaussian_round(self.noise_multiplier)
        return gaussian_round(self.noise_multiplier, epsilon=self.epsilon, delta=self.delta)

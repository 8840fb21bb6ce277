"""R1SMG, the rank-1 singular multivariate Gaussian noise, as published (spec: gradient-noise.md,
R1SMG). Its published (eps, delta)-DP guarantee does NOT hold.

n = sqrt(sigma*) z v with z ~ N(0, 1) and v uniform on the unit sphere of R^M (v never released);
sigma* = 2 D^2 / (eps psi) with
    ln psi = (2/(M-2)) [ln delta + lnGamma((M-1)/2) - 0.5 ln pi - lnGamma(M/2)]   (M > 2).
Marginally the noise is spherically symmetric with a chi_1 radius, so its privacy loss grows like
sqrt(M) D / sqrt(sigma*): a nearest-centre test at M = 100, D = 1, eps = 0.005, delta = 1e-5 shows
delta near 0.36. ldpfed implements it faithfully for reproduction and charges it as not private.
Moments: E[n] = 0, Cov(n) = (sigma*/M) I, E||n||^2 = sigma*.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.validation import LDPValueError, check_epsilon, check_fraction, check_positive, check_positive_int


def log_psi(dims: int, delta: float) -> float:
    """ln psi of the published calibration (M = dims > 2)."""
    if dims <= 2:
        raise LDPValueError(f"r1smg needs dims M > 2, got {dims}")
    return 2.0 / (dims - 2) * (math.log(delta) + gammaln((dims - 1) / 2) - 0.5 * math.log(math.pi) - gammaln(dims / 2))


class R1SMG(GradientNoise):
    """n = sqrt(sigma*) z v (published guarantee does not hold)."""

    name = "r1smg"
    guarantee_holds = False

    def __init__(self, dims: int, *, epsilon: float, delta: float, sensitivity: float = 1.0) -> None:
        self.dims = check_positive_int(dims, "dims", minimum=3)
        self.epsilon, self.delta = check_epsilon(epsilon), check_fraction(delta, "delta")
        self.sensitivity = check_positive(sensitivity, "sensitivity (clip)")
        self.inv_psi = math.exp(-log_psi(self.dims, self.delta))
        self.sigma = 2.0 * self.sensitivity**2 * self.inv_psi / self.epsilon  # sigma*, a variance

    def sample(self, count, rng):
        directions = rng.standard_normal((count, self.dims))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        directions *= math.sqrt(self.sigma) * rng.standard_normal((count, 1))
        return directions

    def coordinate_variance(self):
        return np.full(self.dims, self.sigma / self.dims)

    def parameters(self):
        return {
            "inv_psi": self.inv_psi,
            "psi": 1.0 / self.inv_psi,
            "sigma": self.sigma,
            "noise_sd": math.sqrt(self.sigma),
            "epsilon": self.epsilon,
            "delta": self.delta,
            "sensitivity": self.sensitivity,
        }

    @property
    def claim(self):
        return f"({self.epsilon:g}, {self.delta:g})-DP per release (published; does not hold)"

"""Gaussian mechanism, approximate (eps, delta)-LDP: t* = t + N(0, sigma^2) (mechanisms.md, Gaussian).

sigma is calibrated for sensitivity D = 2 (the width of [-1, 1]) by the analytic Gaussian
mechanism (Balle & Wang 2018; option calibration="analytic", the default): the smallest sigma with
    Phi(D/(2s) - e s/D) - e^e Phi(-D/(2s) - e s/D) <= delta,
valid for every eps > 0, or by the classic sigma = D sqrt(2 ln(1.25/delta))/eps (calibration=
"classic"), valid only for eps < 1 and kept for comparison.

Floating-point safety: NOT done yet. ldpfed has no safe Gaussian sampler (a discrete Gaussian on
the grid with its exact (eps, delta), mechanisms.md); the only sampler is t + sigma *
standard_normal, NOT floating-point safe, so sampler="continuous" is the default here and says so
in describe(), in the guarantee and in every label; sampler="safe" is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from ldpfed.mechanisms.base import Mechanism
from ldpfed.validation import LDPValueError

SENSITIVITY = 2.0  # width of [-1, 1]
CALIBRATIONS = ("analytic", "classic")


def analytic_delta(sigma: float, epsilon: float, sensitivity: float = SENSITIVITY) -> float:
    """delta achieved by N(0, sigma^2) noise at eps (Balle & Wang 2018, Theorem 8).

    The e^eps Phi(.) term is evaluated in log space, so eps up to 10^3 does not overflow.
    """
    a, b = sensitivity / (2.0 * sigma), epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b)))


def analytic_sigma(epsilon: float, delta: float, sensitivity: float = SENSITIVITY) -> float:
    """Smallest sigma with analytic_delta(sigma) <= delta.

    analytic_delta decreases in sigma from 1 (sigma -> 0) to 0 (sigma -> inf); the root is
    bracketed on a log scale and solved by brentq, then nudged up to the first sigma that
    satisfies the condition in floating point (so the guarantee holds as computed).
    """

    def excess(log_sigma: float) -> float:
        return analytic_delta(math.exp(log_sigma), epsilon, sensitivity) - delta

    low, high = math.log(sensitivity) - 10.0, math.log(sensitivity) + 10.0
    while excess(low) <= 0:
        low -= 10.0
    while excess(high) > 0:
        high += 10.0
    sigma = math.exp(brentq(excess, low, high, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500))
    while analytic_delta(sigma, epsilon, sensitivity) > delta:
        sigma = math.nextafter(sigma, math.inf) * (1.0 + 1e-15)
    return sigma


def classic_sigma(epsilon: float, delta: float, sensitivity: float = SENSITIVITY) -> float:
    """sigma = D sqrt(2 ln(1.25/delta)) / eps (Dwork & Roth 2014, Theorem A.1; eps < 1 only)."""
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


@dataclass(frozen=True)
class Gaussian(Mechanism):
    sampler: str = "continuous"  # no safe sampler yet (module docstring)
    calibration: str = "analytic"

    name = "gaussian"
    option_choices = {"calibration": CALIBRATIONS}
    approximate = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sampler == "safe":
            raise LDPValueError(
                "gaussian has no floating-point-safe sampler yet; use sampler='continuous' "
                "(NOT floating-point safe) or a pure mechanism such as 'laplace'"
            )
        if self.calibration not in CALIBRATIONS:
            raise LDPValueError(
                f"gaussian calibration must be one of {CALIBRATIONS}, got {self.calibration!r}"
            )
        if self.calibration == "classic":
            if self.epsilon >= 1.0:
                raise LDPValueError(
                    f"the classic Gaussian calibration is valid only for epsilon < 1, got {self.epsilon:g}; "
                    "use calibration='analytic' (valid for every epsilon)"
                )
            sigma = classic_sigma(self.epsilon, self.delta)
        else:
            sigma = analytic_sigma(self.epsilon, self.delta)
        object.__setattr__(self, "_sigma", sigma)  # derived, not a field: computed once, validated here

    @property
    def sigma(self) -> float:
        """Standard deviation of the added noise."""
        return self._sigma

    @property
    def guarantee(self) -> str:
        return (
            f"({self.epsilon:g}, {self.delta:g})-LDP per value "
            f"({self.calibration} calibration, sigma={self.sigma:.4g}); NOT floating-point safe (continuous sampler)"
        )

    def _sample_continuous(self, t, rng):
        noise = rng.standard_normal(t.shape)
        noise *= self.sigma
        noise += t
        return noise

    @property
    def _continuous_bias_coefficients(self):
        return (0.0, 0.0)

    @property
    def _continuous_variance_coefficients(self):
        return (self.sigma**2, 0.0, 0.0)

    def _continuous_third_abs_central_moment(self, t):
        return np.full(np.shape(t), 2.0 * math.sqrt(2.0 / math.pi) * self.sigma**3)  # E|N(0,s^2)|^3

    def _continuous_log_density(self, y, t):
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        z = (y - t) / self.sigma
        return -0.5 * z * z - math.log(self.sigma * math.sqrt(2.0 * math.pi))

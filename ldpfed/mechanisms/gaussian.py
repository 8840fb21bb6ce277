"""Gaussian mechanism, approximate (eps, delta)-LDP: t* = t + N(0, sigma^2) (mechanisms.md, Gaussian).

sigma is calibrated for sensitivity D = 2 (the width of [-1, 1]) by the analytic Gaussian
mechanism (Balle & Wang 2018; option calibration="analytic", the default): the smallest sigma with
    Phi(D/(2s) - e s/D) - e^e Phi(-D/(2s) - e s/D) <= delta,
valid for every eps > 0, or by the classic sigma = D sqrt(2 ln(1.25/delta))/eps (calibration=
"classic"), valid only for eps < 1 and kept for comparison.

Samplers (mechanisms.md, Floating-point safety): "safe" (the default) rounds t to the grid K / J and
adds exact discrete Gaussian noise N_Z(0, s^2) on the grid (`ldpfed.samplers.discrete_gaussian`);
s is calibrated with dp-accounting's DiscreteGaussianPrivacyLoss for the grid sensitivity 2J + 2,
so that the realized mechanism's delta at eps (`exact_delta`, float decisions included) is <= the
requested delta. `sigma` is then s / J on the t scale; the variance is that of what is sampled.
sampler="continuous": t + sigma * standard_normal, NOT floating-point safe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import log_ndtr, ndtr

from ldpfed.mechanisms.base import Mechanism
from ldpfed.samplers.discrete_gaussian import MIN_SAFE_DELTA, DiscreteGaussianSampler
from ldpfed.validation import LDPValueError

SENSITIVITY = 2.0  # width of [-1, 1]
CALIBRATIONS = ("analytic", "classic")


def analytic_delta(sigma: float, epsilon: float, sensitivity: float = SENSITIVITY) -> float:
    """delta achieved by N(0, sigma^2) noise at eps (Balle & Wang 2018, Theorem 8).

    The e^eps Phi(.) term is evaluated in log space, so eps up to 10^3 does not overflow.
    """
    a, b = sensitivity / (2.0 * sigma), epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b)))


@lru_cache(maxsize=256)
def analytic_sigma(epsilon: float, delta: float, sensitivity: float = SENSITIVITY) -> float:
    """Smallest sigma with analytic_delta(sigma) <= delta (cached: a root search, and mechanisms
    with the same parameters are built many times, e.g. by the predictor).

    analytic_delta decreases in sigma from 1 (sigma -> 0) to 0 (sigma -> inf); the root is
    bracketed on a log scale and solved by brentq, then nudged up to the first sigma that
    satisfies the condition in floating point (so the guarantee holds as computed).
    """
    from scipy.optimize import brentq  # here: scipy.optimize costs a process' start 0.3-0.4 s

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
    calibration: str = "analytic"

    name = "gaussian"
    option_choices = {"calibration": CALIBRATIONS}
    approximate = True
    # The safe sampler's accounting arrays grow as 1/eps (s ~ 128 sigma grid steps at J = 128).
    epsilon_range = (1e-2, 1e4)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sampler == "safe" and self.delta < MIN_SAFE_DELTA:
            raise LDPValueError(
                f"the safe gaussian sampler needs delta >= {MIN_SAFE_DELTA:g} (its float acceptance "
                f"test costs up to 2^-52 of delta), got {self.delta:g}"
            )
        if self.calibration not in CALIBRATIONS:
            raise LDPValueError(f"gaussian calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")
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
        safe = None
        if self.sampler == "safe":
            safe = DiscreteGaussianSampler.shared(
                self.epsilon, self.delta, sigma, classic=self.calibration == "classic"
            )
        object.__setattr__(self, "_safe", safe)

    @property
    def safe_sampler(self):
        return self._safe

    @property
    def sigma(self) -> float:
        """The noise parameter on the t scale: the continuous standard deviation, or s / J of the
        discrete Gaussian (whose standard deviation is slightly below s, CKS Proposition 19)."""
        return self._sigma if self._safe is None else self._safe.sigma / self._safe.grid_steps

    @property
    def noise_multiplier(self) -> float:
        """Noise parameter / sensitivity, for RDP accounting: sigma / 2, or s / (2J + 2) on the
        grid (the discrete Gaussian's Renyi divergence is at most the continuous one's, CKS)."""
        return self._sigma / SENSITIVITY if self._safe is None else self._safe.noise_multiplier

    @property
    def exact_delta(self) -> float:
        """The delta at eps of what is sampled (the safe sampler's full bound; for the continuous
        sampler the real-number value, which its floats do not honour)."""
        return self.delta if self._safe is None else self._safe.delta_bound

    @property
    def guarantee(self) -> str:
        if self._safe is None:
            return (
                f"({self.epsilon:g}, {self.delta:g})-LDP per value "
                f"({self.calibration} calibration, sigma={self.sigma:.4g}); NOT floating-point safe (continuous "
                "sampler)"
            )
        return (
            f"({self.epsilon:g}, {self.delta:g})-LDP per value (discrete Gaussian on a 1/{self._safe.grid_steps} grid, "
            f"{self.calibration} calibration, exactly delta <= {self.exact_delta:.6g} at eps; "
            f"s={self._safe.sigma:.6g} steps)"
        )

    def describe(self) -> dict:
        return {**super().describe(), "exact_delta": self.exact_delta}

    def _sample_continuous(self, t, rng):
        noise = rng.standard_normal(t.shape)
        noise *= self.sigma
        noise += t
        return noise

    @property
    def _continuous_variance_coefficients(self):
        return (self.sigma**2, 0.0, 0.0)

    def _continuous_third_abs_central_moment(self, t):
        return np.full(np.shape(t), 2.0 * math.sqrt(2.0 / math.pi) * self.sigma**3)  # E|N(0,s^2)|^3

    def _continuous_log_density(self, y, t):
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        z = (y - t) / self.sigma
        return -0.5 * z * z - math.log(self.sigma * math.sqrt(2.0 * math.pi))

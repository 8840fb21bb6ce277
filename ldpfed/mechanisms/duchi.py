"""Duchi et al.'s mechanism: outputs +-B, bounded, unbiased (mechanisms.md, Duchi et al.).

Floating-point safety (mechanisms.md): the outputs +-B are a fixed set, but the decision
"u < P(+B|t)" with a float P can leak: at eps > ~37, 1/(e^eps + 1) < 2^-53 and the float
comparison gives P(+B | t = -1) = 0, an infinite ratio. The safe sampler (the default) writes
P(+B|t) = b' + (1 - 2b')(1 + t)/2 with b' = 1/(e^eps + 1) rounded UP to a multiple of 2^-53 (what a
53-bit uniform resolves), and outputs +B exactly when u < p(t), the float threshold (a tie u = p(t)
gives -B). With u = k 2^-53, the realized P(+B | t) is ceil(p(t) 2^53) 2^-53; p(t) is monotone in t
and equals b' at t = -1 and 1 - b' at t = 1 exactly (both multiples of 2^-53), so the realized
probability lies in [b', 1 - b'] for every t: exactly eps'-LDP with eps' = ln((1 - b')/b') <= eps,
computed from the integer counts and rounded up. Rounding b' up costs eps - eps' < (e^eps + 1)
2^-53 (4e-8 at eps 20, 2e-4 at 30, 0.055 at 35), and from eps ~ 36.74 on, b' = 2^-53 caps eps' at
ln(2^53 - 1) ~ 36.74. A decision u <= p(t) would realize b' + 2^-53 at
t = -1 and 1 - b' + 2^-53 at t = 1: a larger ratio, and P(-B | t = 1) = 0 at the cap.
B = 1/(1 - 2b') keeps it unbiased, and V(t) = B^2 - t^2 with B^2 - 1 = 4 b'(1 - b')/(1 - 2b')^2 (no
cancellation). The bias from the 2^-53 resolution of the threshold is below B 2^-52.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ldpfed.mechanisms.base import Mechanism
from ldpfed.samplers.grid import log_ratio_upper

_RESOLUTION = 2.0**53  # rng.random() returns k / 2^53


@dataclass(frozen=True)
class DuchiSafe:
    """The safe Duchi sampler with its exact statistics (module docstring)."""

    flip: float  # b', a multiple of 2^-53 in (0, 1/2]

    @classmethod
    def for_epsilon(cls, epsilon: float) -> DuchiSafe:
        small = math.exp(-epsilon) / (1.0 + math.exp(-epsilon))  # 1/(e^eps + 1), within 2 ulp
        return cls(min(0.5, max(1, math.ceil(small * (1.0 + 2.0**-50) * _RESOLUTION)) / _RESOLUTION))

    @property
    def epsilon(self) -> float:
        """eps' from the realized counts: P(-B | t = 1) = P(+B | t = -1) = n 2^-53 (n = b' 2^53),
        the other outcomes (2^53 - n) 2^-53; rounded up (never below the true ln ratio)."""
        count = int(self.flip * _RESOLUTION)
        return log_ratio_upper(int(_RESOLUTION) - count, count)

    @property
    def output_bound(self) -> float:
        return 1.0 / (1.0 - 2.0 * self.flip)  # exact: 1 - 2b' is a float

    def probability_plus(self, t) -> np.ndarray:
        return self.flip + (1.0 - 2.0 * self.flip) * ((1.0 + np.asarray(t, dtype=float)) / 2.0)

    def sample(self, t, rng):
        # +B exactly when u < p(t): u - p(t) is negative then, and +0.0 on a tie (u = p(t)), which
        # copysign turns into +B before the negation makes it -B (module docstring).
        difference = rng.random(t.shape)
        difference -= self.probability_plus(t)
        np.copysign(self.output_bound, difference, out=difference)
        return np.negative(difference, out=difference)

    @property
    def bias_coefficients(self):
        return (0.0, 0.0)

    @property
    def variance_coefficients(self):
        b = self.flip
        return (1.0 + 4.0 * b * (1.0 - b) / (1.0 - 2.0 * b) ** 2, 0.0, -1.0)  # B^2 - t^2

    def realized_plus(self, t) -> np.ndarray:
        """The probability the sampler realizes: P(+B | t) = P(u < p(t)) = ceil(p(t) 2^53) 2^-53."""
        return np.ceil(self.probability_plus(t) * _RESOLUTION) / _RESOLUTION

    def third_abs_central_moment(self, t):
        t = np.asarray(t, dtype=float)
        excess = 2.0 * self.flip / (1.0 - 2.0 * self.flip)  # B - 1, without cancellation
        plus = self.probability_plus(t)
        minus = self.flip + (1.0 - 2.0 * self.flip) * ((1.0 - t) / 2.0)  # 1 - plus, without cancellation
        return plus * (excess + (1.0 - t)) ** 3 + minus * (excess + (1.0 + t)) ** 3

    def log_mass(self, y, t):
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        bound = self.output_bound
        plus = self.realized_plus(t)
        mass = np.where(y == bound, plus, np.where(y == -bound, 1.0 - plus, 0.0))
        with np.errstate(divide="ignore"):
            return np.log(mass)


@dataclass(frozen=True)
class Duchi(Mechanism):
    name = "duchi"

    @cached_property
    def safe_sampler(self):
        return DuchiSafe.for_epsilon(self.epsilon) if self.sampler == "safe" else None

    @property
    def _continuous_output_bound(self) -> float:
        return 1.0 / math.tanh(self.epsilon / 2.0)  # B = (e^e + 1)/(e^e - 1)

    @property
    def _slope(self) -> float:
        return 0.5 * math.tanh(self.epsilon / 2.0)  # P(+B) = 1/2 + t (e^e - 1)/(2 e^e + 2)

    def probability_plus(self, t) -> np.ndarray:
        """P(t* = +B | t) = 1/2 + t (e^e - 1)/(2e^e + 2)."""
        return 0.5 + self._slope * np.asarray(t, dtype=float)

    def _sample_continuous(self, t, rng):
        # +B when u < P(+B | t): the sign of P - u picks the output in one pass.
        threshold = self._slope * t
        threshold += 0.5
        threshold -= rng.random(t.shape)
        return np.copysign(self._continuous_output_bound, threshold, out=threshold)

    @property
    def _continuous_variance_coefficients(self):
        # V(t) = B^2 - t^2, with B^2 = 1 + 4e^eps/(e^eps - 1)^2 = 1 + 1/sinh(eps/2)^2: the
        # subtraction-free form (B^2 - 1 by subtraction is 0 above eps ~ 37).
        return (1.0 + (2.0 * math.exp(-self.epsilon / 2.0) / -math.expm1(-self.epsilon)) ** 2, 0.0, -1.0)

    def variance(self, t) -> np.ndarray:
        """V(t) = (B^2 - 1) + (1 - t)(1 + t): exact at t = +-1 for every eps."""
        safe = self.safe_sampler
        if safe:
            b = safe.flip
            excess = 4.0 * b * (1.0 - b) / (1.0 - 2.0 * b) ** 2
        else:
            excess = (2.0 * math.exp(-self.epsilon / 2.0) / -math.expm1(-self.epsilon)) ** 2  # 1/sinh^2(e/2)
        t = np.asarray(t, dtype=float)
        return excess + (1.0 - t) * (1.0 + t)

    def _continuous_third_abs_central_moment(self, t):
        # P(+-B | t) = ((1 +- t) + (1 -+ t) e^-e) / (2 (1 + e^-e)) and B - 1 = 2/(e^e - 1): no
        # cancellation at t = +-1 or at large eps
        t = np.asarray(t, dtype=float)
        small = math.exp(-self.epsilon)
        plus = ((1.0 + t) + (1.0 - t) * small) / (2.0 * (1.0 + small))
        minus = ((1.0 - t) + (1.0 + t) * small) / (2.0 * (1.0 + small))
        excess = 2.0 * small / -math.expm1(-self.epsilon)  # B - 1 = 2/(e^e - 1)
        return plus * (excess + (1.0 - t)) ** 3 + minus * (excess + (1.0 + t)) ** 3

    def _continuous_log_density(self, y, t):
        """log pmf on {-B, +B} (-inf elsewhere), in log space so that large eps stays finite:
        P(+-B | t) = ((1 +- t) + (1 -+ t) e^-e) / (2 (1 + e^-e))."""
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        bound, e = self._continuous_output_bound, self.epsilon
        sign = np.where(y == bound, 1.0, -1.0)
        with np.errstate(divide="ignore"):
            log_mass = np.logaddexp(np.log1p(sign * t), np.log1p(-sign * t) - e)
        log_mass = log_mass - math.log(2.0) - math.log1p(math.exp(-e))
        return np.where(np.abs(y) == bound, log_mass, -np.inf)

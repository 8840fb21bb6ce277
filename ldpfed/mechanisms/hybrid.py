"""Hybrid mechanism (Wang et al. 2019): PM with probability alpha, else Duchi (mechanisms.md, Hybrid).

Safe sampler (the default; mechanisms.md, Floating-point safety): for eps > e_star, the discrete
PM of `ldpfed.samplers.grid` and a Duchi on the grid input share ONE integer draw: integer
weights A/B on the PM indices and E0 + E1 (J + 1 +- K) on the two Duchi atoms, all summing to a
total that does not depend on K. Each part's ratio is <= e^eps in exact integers, so Hybrid is
exactly eps'-LDP (eps' the larger of the two parts' ln ratios, <= eps). alpha (the PM share) is
1/(1 + v2_PM) for the discrete PM, the exact analogue of Wang et al.'s 1 - e^(-eps/2): the
variance stays independent of t. For eps <= e_star Hybrid is Duchi, and uses Duchi's safe sampler.
sampler="continuous": the float formulas, NOT floating-point safe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ldpfed.mechanisms.base import Mechanism
from ldpfed.mechanisms.duchi import Duchi
from ldpfed.mechanisms.piecewise import Piecewise
from ldpfed.samplers.grid import window_sampler

_ROOT_241 = math.sqrt(241.0)
EPSILON_STAR = math.log(
    (-5.0 + 2.0 * math.cbrt(6353.0 - 405.0 * _ROOT_241) + 2.0 * math.cbrt(6353.0 + 405.0 * _ROOT_241)) / 27.0
)  # ~0.6094: below it Hybrid is Duchi


@dataclass(frozen=True)
class _GridDuchiAtoms:
    """Where the safe Hybrid's Duchi atoms lie (+-output_bound)."""

    output_bound: float


@dataclass(frozen=True)
class Hybrid(Mechanism):
    name = "hybrid"

    @cached_property
    def safe_sampler(self):
        """Discrete PM + grid Duchi in one integer draw (module docstring); Duchi's safe sampler
        up to e_star; None for sampler="continuous"."""
        if self.sampler != "safe":
            return None
        if self.epsilon <= EPSILON_STAR:
            return Duchi(self.epsilon).safe_sampler
        return window_sampler(self.epsilon, 2.0 * math.exp(-self.epsilon / 2.0), rescale=True, atom_share=1.0)

    @cached_property
    def pm(self) -> Piecewise:
        """The continuous PM component (continuous sampler's formulas)."""
        return Piecewise(self.epsilon, sampler="continuous")

    @cached_property
    def duchi(self) -> Duchi:
        """The Duchi component: its atoms are +-duchi.output_bound."""
        if self.sampler == "safe" and self.epsilon > EPSILON_STAR:
            return _GridDuchiAtoms(self.safe_sampler.atom_value)
        return Duchi(self.epsilon, sampler=self.sampler)

    @property
    def alpha(self) -> float:
        """Probability of using PM: 1 - e^(-e/2) if e > e_star, else 0 (continuous); the discrete
        PM's share of the integer weights (safe)."""
        if self.epsilon <= EPSILON_STAR:
            return 0.0
        if self.sampler == "safe":
            return self.safe_sampler.law.window_share
        return -math.expm1(-self.epsilon / 2.0)

    @property
    def _duchi_weight(self) -> float:
        """1 - alpha, computed directly (1.0 - alpha loses its digits when alpha is near 1)."""
        return math.exp(-self.epsilon / 2.0) if self.epsilon > EPSILON_STAR else 1.0

    @property
    def _continuous_output_bound(self) -> float:
        return self.pm.output_bound if self.alpha > 0 else self.duchi.output_bound  # C >= B

    @cached_property
    def _duchi_threshold(self) -> tuple[float, float]:
        """(slope, intercept) of alpha + (1 - alpha) P(+B | t), with P(+B | t) = 1/2 + slope_D t."""
        weight = self._duchi_weight
        return weight * self.duchi._slope, self.alpha + 0.5 * weight

    def _sample_continuous(self, t, rng):
        # One uniform per value: u < alpha gives PM (as the first alpha of the mixture); otherwise
        # Duchi outputs +B when (u - alpha)/(1 - alpha) < P(+B | t), i.e. u < alpha + (1 - alpha) P.
        alpha = self.alpha
        slope, intercept = self._duchi_threshold
        u = rng.random(t.shape)
        duchi = np.multiply(t, slope)
        duchi += intercept
        duchi -= u
        np.copysign(self.duchi.output_bound, duchi, out=duchi)
        if alpha == 0.0:
            return duchi
        # Select without np.where (its unpredictable branch costs more than the PM sampler here):
        # pm * [u < alpha] + duchi * [u >= alpha] is exact, as one of the two terms is zero. The
        # indicators are written straight to float (half the cost of multiplying by a bool array).
        indicator = np.greater_equal(u, alpha, out=np.empty_like(u), casting="unsafe")
        duchi *= indicator
        np.less(u, alpha, out=indicator, casting="unsafe")
        pm = self.pm._quantile(u, t, weight=alpha)  # overwrites u
        pm *= indicator
        pm += duchi
        return pm

    @property
    def _continuous_variance_coefficients(self):
        # V = alpha V_PM + (1 - alpha) V_Duchi; for e > e_star the t^2 terms cancel
        # (alpha w/(1-w) - (1 - alpha) = 0 with 1 - alpha = w), up to rounding.
        alpha, weight = self.alpha, self._duchi_weight
        pm, duchi = self.pm.variance_coefficients, self.duchi.variance_coefficients
        return tuple(alpha * a + weight * b for a, b in zip(pm, duchi))

    def _continuous_third_abs_central_moment(self, t):
        # Both components are centred at t, so the mixture's moment is the mixture of moments.
        alpha = self.alpha
        moment = self._duchi_weight * self.duchi.third_abs_central_moment(t)
        if alpha > 0.0:
            moment = moment + alpha * self.pm.third_abs_central_moment(t)
        return moment

    def _continuous_log_density(self, y, t):
        """log density w.r.t. Lebesgue measure plus unit atoms at +-B: the Duchi mass
        (1 - alpha) P(+-B | t) at +-B, the PM density alpha f_PM(y | t) elsewhere. The e^eps ratio
        bound of each component then bounds the ratio of this density."""
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        alpha = self.alpha
        with np.errstate(divide="ignore"):
            log_atom = np.log(self._duchi_weight) + self.duchi.log_density(y, t)
            log_continuous = math.log(alpha) + self.pm.log_density(y, t) if alpha > 0 else np.full(y.shape, -np.inf)
        # (Once 1 - alpha underflows, at eps > ~1490, B = C = 1.0 in floating point and no atom is left.)
        is_atom = (np.abs(y) == self.duchi.output_bound) & (self._duchi_weight > 0)
        return np.where(is_atom, log_atom, log_continuous)

"""Piecewise mechanism (PM; Wang et al. 2019): bounded, unbiased (mechanisms.md, Piecewise).

Every quantity is written with w = e^(-eps/2) = 1/z, which lies in [0, 1): nothing overflows, and
eps = 5000 (w = 0) degenerates cleanly to t* = t.

Safe sampler (the default; mechanisms.md, Floating-point safety): the discrete PM of
`ldpfed.samplers.grid`. The input is rounded to the grid t = K / J (J = 2^16, unbiased, constant
variance J^-2/4), and the report index is drawn from integer weights: A on the 2 w J + 1 indices of
the plateau centred on K, B on the other indices of [-I, I], with A/B <= e^eps in exact integer
arithmetic; the report is index * step, step chosen so that E[t*|t] = t. Guarantee: exactly
eps'-LDP with eps' = ln(A/B) <= eps (eps' within 1e-10 of eps up to eps ~ 36.7; the integer
weights sum to at most 2^53 with B >= 1, which caps eps' at ln(2^53 - M + 1) ~ 36.74 for the M ~
2^17 indices: above that, more private than asked, with the variance of what is sampled).
Why this design: the reports form a fixed set by construction and the guarantee is an integer
inequality, so no float argument is needed; the moments stay affine/quadratic in t (closed forms
in the integers), which keeps the predictor exact. The continuous inverse CDF stays available as
sampler="continuous" (NOT floating-point safe).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ldpfed.mechanisms.base import Mechanism, plateau_quantile, uniform_abs_cube_mean
from ldpfed.samplers.grid import window_sampler


@dataclass(frozen=True)
class Piecewise(Mechanism):
    name = "piecewise"

    @cached_property
    def safe_sampler(self):
        """Discrete PM on the grid (module docstring); None for sampler="continuous"."""
        if self.sampler != "safe":
            return None
        return window_sampler(self.epsilon, 2.0 * self._w, rescale=True)  # plateau width / span: 2w

    @cached_property
    def _w(self) -> float:
        return math.exp(-self.epsilon / 2.0)  # 1/z

    @cached_property
    def _one_minus_w(self) -> float:
        return -math.expm1(-self.epsilon / 2.0)  # exact for small eps

    @property
    def _continuous_output_bound(self) -> float:
        return 1.0 / math.tanh(self.epsilon / 4.0)  # C = (z+1)/(z-1)

    # --- geometry: plateau [l(t), r(t)] of width C - 1 -------------------------------------------
    def plateau(self, t) -> tuple[np.ndarray, np.ndarray]:
        """(l(t), r(t)) = ((t - w)/(1 - w), (t + w)/(1 - w)), the spec's l, r rewritten with w."""
        t = np.asarray(t, dtype=float)
        return (t - self._w) / self._one_minus_w, (t + self._w) / self._one_minus_w

    @cached_property
    def _plateau_mass(self) -> float:
        return 1.0 / (1.0 + self._w)  # z/(z+1)

    @cached_property
    def _log_plateau_density(self) -> float:
        # log[(e^e - e^(e/2)) / (2 e^(e/2) + 2)] = log[(1-w) / (2 w (1+w))]
        return math.log(self._one_minus_w) - math.log(2.0) + self.epsilon / 2.0 - math.log1p(self._w)

    @cached_property
    def _log_tail_density(self) -> float:
        # log[(1 - e^(-e/2)) / (2 e^(e/2) + 2)] = log[w (1-w) / (2 (1+w))]; ratio to plateau: e^eps
        return self._log_plateau_density - self.epsilon

    @cached_property
    def _sampler_constants(self) -> tuple[float, float, float]:
        """(left-mass slope, 1/plateau density, 1/tail density) for the inverse CDF."""
        w, one_minus_w = self._w, self._one_minus_w
        left_slope = w / (2.0 * (1.0 + w))  # tail density * (l(t) + C) = left_slope * (t + 1)
        inv_high = 2.0 * w * (1.0 + w) / one_minus_w
        # 1/tail density is inf once w underflows (eps > ~1490); the tails then have no mass and
        # the sampler multiplies it by exact zeros, so the largest finite float stands in for inf.
        inv_low = sys.float_info.max
        if w > 0:
            inv_low = min(2.0 * (1.0 + w) / (w * one_minus_w), inv_low)
        return left_slope, inv_high, inv_low

    # --- sampling: one uniform per value through the inverse CDF -----------------------------------
    def _quantile(self, u, t, weight: float = 1.0):
        """Inverse CDF at uniforms u in [0, weight) (overwritten): PM as the first `weight` of a
        mixture (Hybrid passes its alpha; u >= weight extrapolates past C)."""
        left_slope, inv_high, inv_low = self._sampler_constants
        w, one_minus_w = self._w, self._one_minus_w
        return plateau_quantile(
            u,
            t,
            start=(1.0 / one_minus_w, -w / one_minus_w),  # l(t) = (t - w)/(1 - w)
            left_mass=(weight * left_slope, weight * left_slope),
            plateau_mass=weight * self._plateau_mass,
            inv_low=min(inv_low / weight, sys.float_info.max),
            inv_high=inv_high / weight,
        )

    def _sample_continuous(self, t, rng):
        return self._quantile(rng.random(t.shape), t)

    # --- exact statistics --------------------------------------------------------------------------
    @property
    def _continuous_variance_coefficients(self):
        # V(t) = t^2/(z-1) + (z+3)/(3(z-1)^2), with 1/(z-1) = w/(1-w) (corrected form; the thesis'
        # printed t/(z-1) + e^(e/2+3)/(3(z-1)^2) is wrong: mechanisms.md erratum).
        k = self._w / self._one_minus_w
        return ((1.0 + 3.0 * self._w) * self._w / (3.0 * self._one_minus_w**2), 0.0, k)

    def _continuous_third_abs_central_moment(self, t):
        t = np.asarray(t, dtype=float)
        bound = self._continuous_output_bound
        left, right = self.plateau(t)
        tail_density = math.exp(self._log_tail_density)
        return (
            tail_density * (left + bound) * uniform_abs_cube_mean(-bound, left, t)
            + self._plateau_mass * uniform_abs_cube_mean(left, right, t)
            + tail_density * (bound - right) * uniform_abs_cube_mean(right, bound, t)
        )

    def _continuous_log_density(self, y, t):
        y, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        left, right = self.plateau(t)
        bound = self._continuous_output_bound
        on_plateau = (y >= left) & (y <= right)
        inside = np.abs(y) <= bound
        return np.where(on_plateau, self._log_plateau_density, np.where(inside, self._log_tail_density, -np.inf))

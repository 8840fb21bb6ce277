"""Square wave mechanism (SW; Li et al. 2020): bounded (mechanisms.md, Square wave).

SW works on v = (t+1)/2 in [0, 1] and reports y with density p on [v - b_w, v + b_w] and q on the
rest of [-b_w, 1 + b_w]. ldpfed reports on the t scale, with one of two estimators (option
`estimator`, always recorded in `describe()`):
- "raw" (the thesis' setting): t* = 2y - 1, biased;
- "debiased": t* = 2 v_hat - 1 with v_hat = (y - q(b_w + 1/2)) / (2 b_w (p - q)), unbiased.

Every constant is written with e^(-eps) so that nothing overflows: at eps = 5000, b_w underflows
to 0 and the report is v with probability ~1 - 1/eps, uniform on [0, 1] otherwise.

Safe sampler (the default; mechanisms.md, Floating-point safety): the discrete SW of
`ldpfed.samplers.grid`, the same construction as Piecewise's: input rounded to K / J (J = 2^16),
report index drawn with integer weight A on the 4 b_w J + 1 indices of the wave centred on K and B
elsewhere on [-I, I] (I = J + 1 + 2 b_w J), A/B <= e^eps exactly. "raw" reports index / J (biased:
E[t*|t] = kappa t with kappa = (A - B) W / T), "debiased" reports index / (kappa J). Guarantee:
exactly eps'-LDP, eps' = ln(A/B) <= eps. Same reasons as Piecewise; at large eps the discrete wave
is one index wide and the background mass is (M - 1) B / T, far below SW's ~1/eps: the discrete
form is then more accurate than SW, with exact moments. sampler="continuous": the inverse CDF, NOT
floating-point safe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ldpfed.mechanisms.base import Mechanism, plateau_quantile, uniform_abs_cube_mean
from ldpfed.samplers.grid import window_sampler
from ldpfed.validation import LDPValueError

ESTIMATORS = ("raw", "debiased")


def _expm1_minus_x(x: float) -> float:
    """e^x - 1 - x without cancellation for small |x| (Taylor series below 0.1)."""
    if abs(x) < 0.1:
        term, total = x * x / 2.0, 0.0
        for k in range(3, 14):
            total += term
            term *= x / k
        return total
    return math.expm1(x) - x


@dataclass(frozen=True)
class SquareWave(Mechanism):
    estimator: str = "raw"

    name = "square-wave"
    option_choices = {"estimator": ESTIMATORS}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.estimator not in ESTIMATORS:
            raise LDPValueError(f"square-wave estimator must be one of {ESTIMATORS}, got {self.estimator!r}")

    @cached_property
    def safe_sampler(self):
        """Discrete SW on the grid (module docstring); None for sampler="continuous"."""
        if self.sampler != "safe":
            return None
        # the wave is 4 b_w wide on the t scale, whose input span is 2 (J steps per unit)
        return window_sampler(self.epsilon, 4.0 * self.half_width, rescale=self.estimator == "debiased")

    # --- the constants of the spec, overflow-free -------------------------------------------------
    @cached_property
    def _constants(self) -> tuple[float, float, float]:
        """(b_w, rho = 2 b_w e^eps, kappa = 2 b_w (p - q)); q = 1/(1 + rho), p = e^eps q."""
        e = self.epsilon
        h = _expm1_minus_x(-e)  # e - 1 + e^-e  (the spec's numerator / e^e)
        # g = (e^e - 1 - e) / e^e, the spec's denominator / (2 e^(2e))
        g = _expm1_minus_x(e) * math.exp(-e) if e <= 1.0 else -math.expm1(-e) - e * math.exp(-e)
        half_width = h * math.exp(-e) / (2.0 * g)
        rho = h / g
        kappa = rho / (1.0 + rho) * -math.expm1(-e)  # 2 b_w q (e^e - 1)
        return half_width, rho, kappa

    @property
    def half_width(self) -> float:
        """b_w = (e e^e - e^e + 1) / (2 e^e (e^e - 1 - e)) (mechanisms.md, Square wave)."""
        return self._constants[0]

    @cached_property
    def _q(self) -> float:
        return 1.0 / (1.0 + self._constants[1])

    @cached_property
    def _raw_mean_offset(self) -> float:
        """m0 = q (1 + 2 b_w)/2, so that E[y] = m0 + kappa v (spec moments)."""
        return self._q * (1.0 + 2.0 * self.half_width) / 2.0

    @cached_property
    def _report_affine(self) -> tuple[float, float]:
        """(scale, shift): report = scale * y + shift on the t scale."""
        if self.estimator == "raw":
            return 2.0, -1.0
        kappa = self._constants[2]
        return 2.0 / kappa, -2.0 * self._raw_mean_offset / kappa - 1.0

    @property
    def _continuous_output_bound(self) -> float:
        scale, shift = self._report_affine
        b = self.half_width
        return max(abs(scale * -b + shift), abs(scale * (1.0 + b) + shift))

    # --- sampling: one uniform per value through the inverse CDF -----------------------------------
    @cached_property
    def _sampler_constants(self) -> dict:
        """plateau_quantile's arguments for the report (t scale): y's density p on
        [v - b_w, v + b_w], q elsewhere, with v = (t+1)/2 and mass q v left of the plateau."""
        b, rho, _ = self._constants
        q = self._q
        scale, shift = self._report_affine
        return dict(
            start=(scale / 2.0, scale * (0.5 - b) + shift),  # scale (v - b_w) + shift
            left_mass=(q / 2.0, q / 2.0),
            plateau_mass=rho * q,
            inv_low=scale * (1.0 + rho),  # scale / q
            inv_high=scale * math.exp(-self.epsilon) * (1.0 + rho),  # scale / p
        )

    def _sample_continuous(self, t, rng):
        return plateau_quantile(rng.random(t.shape), t, **self._sampler_constants)

    # --- exact statistics (spec moments of y, mapped to the t scale) -------------------------------
    @cached_property
    def _raw_variance_in_v(self) -> tuple[float, float, float]:
        """(w0, w1, w2) with Var(y | v) = w0 + w1 v + w2 v^2, from E[y] and E[y^2] of the spec."""
        b, _, kappa = self._constants
        q, m0 = self._q, self._raw_mean_offset
        # E[y^2] = q((1+b)^3 + b^3)/3 + kappa (v^2 + b^2/3);  E[y]^2 = (m0 + kappa v)^2
        w0 = q * ((1.0 + b) ** 3 + b**3) / 3.0 + kappa * b * b / 3.0 - m0 * m0
        return w0, -2.0 * m0 * kappa, kappa * (1.0 - kappa)

    @property
    def _continuous_bias_coefficients(self):
        if self.estimator == "debiased":
            return (0.0, 0.0)
        kappa = self._constants[2]
        # 2(E[y] - v) = 2 m0 + (kappa - 1)(t + 1)
        return (2.0 * self._raw_mean_offset + kappa - 1.0, kappa - 1.0)

    @property
    def _continuous_variance_coefficients(self):
        w0, w1, w2 = self._raw_variance_in_v
        # 4 Var(y) with v = (t+1)/2, times (1/kappa)^2 for the debiased estimator.
        coefficients = (4.0 * w0 + 2.0 * w1 + w2, 2.0 * w1 + 2.0 * w2, w2)
        if self.estimator == "debiased":
            kappa = self._constants[2]
            return tuple(c / kappa**2 for c in coefficients)
        return coefficients

    def _continuous_third_abs_central_moment(self, t):
        t = np.asarray(t, dtype=float)
        b, rho, kappa = self._constants
        q = self._q
        v = (t + 1.0) / 2.0
        mean_y = self._raw_mean_offset + kappa * v
        moment_y = (
            q * v * uniform_abs_cube_mean(-b, v - b, mean_y)
            + rho * q * uniform_abs_cube_mean(v - b, v + b, mean_y)
            + q * (1.0 - v) * uniform_abs_cube_mean(v + b, 1.0 + b, mean_y)
        )
        return abs(self._report_affine[0]) ** 3 * moment_y

    def _continuous_log_density(self, y, t):
        """log density of the report (t scale), including the Jacobian of y -> report."""
        report, t = np.broadcast_arrays(np.asarray(y, float), np.asarray(t, float))
        scale, shift = self._report_affine
        raw = (report - shift) / scale
        v = (t + 1.0) / 2.0
        b = self.half_width
        log_q = -math.log1p(self._constants[1]) - math.log(abs(scale))
        on_plateau = np.abs(raw - v) <= b
        inside = (raw >= -b) & (raw <= 1.0 + b)
        return np.where(on_plateau, log_q + self.epsilon, np.where(inside, log_q, -np.inf))

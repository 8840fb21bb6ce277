"""The interface every scalar randomizer implements (spec: mechanisms.md).

A mechanism is immutable: constructed once with its budget, it perturbs whole arrays and carries
its own exact statistics. Its conditional bias b(t) = E[t*|t] - t is a polynomial of degree <= 1
and its conditional variance V(t) = Var(t*|t) one of degree <= 2 in t (on the [-1, 1] scale of
the estimate), so they are exposed as coefficients: the predictor then needs only each column's
first two moments (analysis.md).

Samplers (option `sampler`, mechanisms.md Floating-point safety): "safe" (the default) releases
only values of a fixed set, with an exact guarantee (`ldpfed.samplers.grid` and each module's
docstring); "continuous" is the textbook float formula, NOT floating-point safe (its output floats
reveal the input; Mironov 2012), kept for speed comparisons and labelled as such everywhere. The
statistics (bias, variance, third moment, log density or mass) are those of the chosen sampler.
"""

from __future__ import annotations

import math
from abc import ABC
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from ldpfed.validation import (
    LDPValueError,
    OutOfDomain,
    check_budget_range,
    check_delta,
    check_epsilon,
    check_generator,
    check_values,
)

SAMPLERS = ("safe", "continuous")


_BLOCK = 16384  # values per sampling block (128 KiB of float64; 1.1-1.2x faster than 8192, 32768 spills the L2)


@dataclass(frozen=True)
class Mechanism(ABC):
    """A scalar LDP randomizer on [-1, 1] with budget `epsilon` per value."""

    epsilon: float
    delta: float | None = None
    sampler: str = "safe"

    name: ClassVar[str]
    approximate: ClassVar[bool] = False  # (eps, delta)-LDP rather than pure eps-LDP
    option_choices: ClassVar[dict[str, tuple]] = {}  # each option's allowed values (see `variants`)
    # Budgets per value where the formulas and samplers are exact and finite.
    epsilon_range: ClassVar[tuple[float, float]] = (1e-4, 1e4)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        check_budget_range(self.epsilon, self.epsilon_range, mechanism=self.name)
        object.__setattr__(self, "delta", check_delta(self.delta, approximate=self.approximate, mechanism=self.name))
        if self.sampler not in SAMPLERS:
            raise LDPValueError(f"{self.name} sampler must be one of {SAMPLERS}, got {self.sampler!r}")

    @property
    def floating_point_safe(self) -> bool:
        """True when the safe sampler is chosen and exists (a mechanism without one is not)."""
        return self.sampler == "safe" and self.safe_sampler is not None

    @property
    def safe_sampler(self):
        """The grid sampler with its exact statistics (ldpfed.samplers.grid), or None when the
        continuous sampler is chosen; mechanisms without a separate safe form return None too."""
        return None

    @property
    def exact_epsilon(self) -> float:
        """The worst log probability ratio of what is actually sampled (<= epsilon; for the
        continuous samplers, the real-number value, which their floats do not honour)."""
        safe = self.safe_sampler
        return self.epsilon if safe is None else min(self.epsilon, safe.epsilon)

    # --- sampling -------------------------------------------------------------------------------
    def perturb(self, values, rng: np.random.Generator, *, out_of_domain: OutOfDomain = "raise") -> np.ndarray:
        """Randomize every entry of `values` (any shape) independently; returns the same shape."""
        check_generator(rng)
        t = check_values(values, out_of_domain=out_of_domain)
        return self._sample_rows(t.reshape(1, -1), [rng]).reshape(t.shape)

    def perturb_rows(self, values, rngs) -> np.ndarray:
        """Row i of `values` (clients, k) randomized with its own generator `rngs[i]`: bit for bit
        `perturb(values[i], rngs[i])` row by row, so each client's noise comes from its own stream
        however clients are batched (spec: scale.md). Values must lie in [-1, 1]. One compiled
        pass over the block where the sampler has one (every safe sampler but Duchi's), else a
        loop over the rows (each a vectorized draw)."""
        table = np.asarray(values, dtype=float)
        if table.ndim != 2 or len(rngs) != table.shape[0]:
            raise LDPValueError(
                f"perturb_rows needs a (rows, k) array and one generator per row, got shape "
                f"{table.shape} and {len(rngs)} generators"
            )
        check_generator(*rngs)
        return self._sample_rows(check_values(table), rngs)

    def perturb_streams(self, values, streams) -> np.ndarray:
        """Row i of `values` (rows, k) randomized from row i of `streams`
        (ldpfed.samplers.streams.RowStreams): bit for bit `perturb_rows` with Generators in those
        states, without building them; one compiled pass where the sampler has one, else each row
        from a Generator continuing its stream. Advances the streams."""
        table = check_values(np.asarray(values, dtype=float))
        if table.ndim != 2 or len(streams) != table.shape[0]:
            raise LDPValueError(f"perturb_streams needs one stream per row, got {table.shape} and {len(streams)}")
        compiled = getattr(self.safe_sampler, "sample_handles", None)
        if compiled is not None:
            return compiled(table, streams.handles, _BLOCK)
        rngs = [streams.generator(row) for row in range(len(streams))]
        out = self._sample_rows(table, rngs)
        streams.advance_to(rngs)
        return out

    def _sample_rows(self, t: np.ndarray, rngs) -> np.ndarray:
        """Validated rows, each in blocks of _BLOCK values. Cache blocking, not a loop over users:
        each block's temporaries stay in the CPU cache (and below malloc's mmap threshold), which
        made the numpy samplers 1.3-2x faster at 10^7 values than whole-array passes
        (benchmarks/bench_mechanisms.py). Blocks draw from their row's Generator in order, so
        runs stay reproducible from the seed (and the compiled samplers keep the same blocks, so
        they draw the same words)."""
        compiled = getattr(self.safe_sampler, "sample_rows", None)  # the compiled safe samplers
        if compiled is not None:
            return compiled(t, rngs, _BLOCK)
        out = np.empty(t.shape)
        for row, target, rng in zip(t, out, rngs):  # the numpy samplers (continuous, Duchi's)
            for start in range(0, row.size, _BLOCK):
                target[start : start + _BLOCK] = self._sample(row[start : start + _BLOCK], rng)
        return out

    def _sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Vectorized sampler on validated inputs in [-1, 1]."""
        safe = self.safe_sampler
        return self._sample_continuous(t, rng) if safe is None else safe.sample(t, rng)

    def _sample_continuous(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The real-number formula of the mechanism, evaluated in floating point."""
        raise NotImplementedError

    # --- exact statistics (of the chosen sampler) -------------------------------------------------
    @property
    def bias_coefficients(self) -> tuple[float, float]:
        """(b0, b1) with b(t) = E[t*|t] - t = b0 + b1 t."""
        safe = self.safe_sampler
        return self._continuous_bias_coefficients if safe is None else safe.bias_coefficients

    @property
    def variance_coefficients(self) -> tuple[float, float, float]:
        """(v0, v1, v2) with V(t) = Var(t*|t) = v0 + v1 t + v2 t^2."""
        safe = self.safe_sampler
        return self._continuous_variance_coefficients if safe is None else safe.variance_coefficients

    def bias(self, t) -> np.ndarray:
        """Conditional bias b(t) = E[t*|t] - t, vectorized over t."""
        b0, b1 = self.bias_coefficients
        return b0 + b1 * np.asarray(t, dtype=float)

    def variance(self, t) -> np.ndarray:
        """Conditional variance V(t) = Var(t*|t), vectorized over t."""
        v0, v1, v2 = self.variance_coefficients
        t = np.asarray(t, dtype=float)
        return v0 + t * (v1 + v2 * t)

    def third_abs_central_moment(self, t) -> np.ndarray:
        """E|t* - E[t*|t]|^3 given t, vectorized (the Berry–Esseen rho; analysis.md)."""
        safe = self.safe_sampler
        return self._continuous_third_abs_central_moment(t) if safe is None else safe.third_abs_central_moment(t)

    # The real-number formulas. Not abstract, so that a subclass may instead override the public
    # methods above directly (a mechanism without a separate safe sampler, e.g. a test double).
    @property
    def _continuous_bias_coefficients(self) -> tuple[float, float]:
        """Unbiased, as every randomizer here is but square wave's raw estimator (which overrides this;
        tests/test_mechanisms.py checks each mechanism's bias against Monte Carlo)."""
        return (0.0, 0.0)

    @property
    def _continuous_variance_coefficients(self) -> tuple[float, float, float]:
        raise NotImplementedError

    def _continuous_third_abs_central_moment(self, t) -> np.ndarray:
        raise NotImplementedError

    # --- privacy --------------------------------------------------------------------------------
    @property
    def output_bound(self) -> float:
        """Largest |t*| the mechanism can output (inf for unbounded noise)."""
        safe = self.safe_sampler
        return self._continuous_output_bound if safe is None else safe.output_bound

    @property
    def _continuous_output_bound(self) -> float:
        return math.inf

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.output_bound)

    @property
    def unbiased(self) -> bool:
        return all(c == 0 for c in self.bias_coefficients)

    @property
    def guarantee(self) -> str:
        if self.approximate:
            text = f"({self.epsilon:g}, {self.delta:g})-LDP per value"
        elif self.floating_point_safe and self.exact_epsilon < self.epsilon * (1 - 1e-9):
            text = f"{self.epsilon:g}-LDP per value (exactly {self.exact_epsilon:.6g}: probability ratio <= e^eps')"
        else:
            ratio = "probability" if self.floating_point_safe else "density"
            text = f"{self.epsilon:g}-LDP per value ({ratio} ratio <= e^eps)"
        if not self.floating_point_safe:
            text += "; NOT floating-point safe (continuous sampler)"
        return text

    def log_density(self, y, t) -> np.ndarray:
        """log of the output density (continuous sampler) or mass (safe samplers: a fixed grid)
        at y given input t. Used to check the guarantee: max over y, t, t' of
        log p(y|t) - log p(y|t') <= epsilon. Returns -inf outside the support.
        """
        safe = self.safe_sampler
        return self._continuous_log_density(y, t) if safe is None else safe.log_mass(y, t)

    def _continuous_log_density(self, y, t) -> np.ndarray:
        raise NotImplementedError

    def options(self) -> dict:
        """Constructor options beyond epsilon/delta (for records and `get`); the sampler only when
        it is not the class default (describe() always reports it)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("epsilon", "delta") and not (f.name == "sampler" and self.sampler == f.default)
        }

    def describe(self) -> dict:
        """A JSON-ready summary: name, parameters, guarantee and properties."""
        return {
            "name": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "options": self.options(),
            "guarantee": self.guarantee,
            "privacy": "approximate (eps, delta)" if self.approximate else "pure eps",
            "bounded": self.bounded,
            "output_bound": self.output_bound if self.bounded else None,
            "unbiased": self.unbiased,
            "sampler": self.sampler,
            "floating_point_safe": self.floating_point_safe,
            "exact_epsilon": self.exact_epsilon,
        }


# --- helpers shared by the bounded mechanisms with a piecewise-constant density (PM, SW) ----------
_ANCHOR_RATIO = 2.0**20  # density ratio (e^eps) up to which the cheaper form is exact enough


def plateau_quantile(u, t, *, start, left_mass, plateau_mass, inv_low, inv_high) -> np.ndarray:
    """Inverse CDF at uniforms `u` (overwritten) of a step density, for inputs `t`.

    The density is 1/inv_high on the plateau [s(t), s(t) + plateau_mass * inv_high] and 1/inv_low
    on the rest of its support, with mass m(t) below the plateau; s(t) = start[0] t + start[1] and
    m(t) = left_mass[0] t + left_mass[1] (PM and SW samplers, mechanisms.md: one uniform per value).

    With x = u - m(t) and c = clip(x, 0, plateau_mass):
        F^-1(u) = s(t) + c inv_high + (x - c) inv_low                      (plateau-anchored)
                = s(0) - m(0) inv_low + u inv_low + c (inv_high - inv_low)  (support-anchored).
    The support-anchored form needs 3 fewer array passes but loses about log2(e^eps) bits of the
    position on the plateau; it is used while the density ratio inv_low/inv_high = e^eps is at
    most 2^20 (error < 2^-33 of the plateau width), the plateau-anchored form beyond (large eps,
    where the plateau is tiny and the tails carry almost no mass). Written in place: it is the
    samplers' hot loop.
    """
    (s1, s0), (m1, m0) = start, left_mass  # s1 = m1 inv_low: the plateau starts where the left tail ends
    x = np.multiply(t, -m1)
    x += u  # x + m0 = u - m(t) + m0: the constant m0 moves into the clip bounds
    if inv_low <= _ANCHOR_RATIO * inv_high:
        on_plateau = np.clip(x, m0, m0 + plateau_mass, out=x)
        on_plateau *= inv_high - inv_low
        u *= inv_low
        u += on_plateau
        u += s0 - m0 * inv_high  # no t term: s1 t - m1 t inv_low = 0
        return u
    on_plateau = np.clip(x, m0, m0 + plateau_mass, out=u)
    x -= on_plateau
    x *= inv_low
    on_plateau *= inv_high
    x += on_plateau
    np.multiply(t, s1, out=on_plateau)
    x += on_plateau
    x += s0 - m0 * inv_high
    return x


def uniform_abs_cube_mean(low, high, centre) -> np.ndarray:
    """E|Y - centre|^3 for Y uniform on [low, high] (a point when low == high), vectorized.

    With midpoint m, half-width h and d = |m - centre|: d (d^2 + h^2) when the centre lies outside
    the interval, (h^4 + 6 h^2 d^2 + d^4) / (4h) inside (from the antiderivative
    sign(y-c)|y-c|^4/4, rearranged to avoid cancellation when h is tiny).
    """
    low, high, centre = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (low, high, centre)))
    h = (high - low) / 2.0
    d = np.abs((high + low) / 2.0 - centre)
    outside = d * (d * d + h * h)
    safe_h = np.where(h > 0, h, 1.0)
    inside = (h**4 + 6.0 * h * h * d * d + d**4) / (4.0 * safe_h)
    return np.where(d >= h, outside, inside)

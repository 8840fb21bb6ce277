"""Floating-point-safe sampling on a fixed grid (mechanisms.md, Floating-point safety; Mironov 2012).

A sampler written as a float formula of t (t + noise, an inverse CDF) emits floats whose set
depends on t, so the real-number guarantee says nothing about what is released. The safe samplers
of ldpfed release only values of a FIXED set (integer multiples of a constant), chosen by two
steps whose exact law is known:

1. Input rounding. x = t J (J = 2^k grid steps per unit; exact in floats) is rounded with a
   triangular dither, K = floor(x + 1/2 + U1 - U2) (non-subtractive TPDF dither; Wannamaker,
   Lipshitz and Vanderkooy 2000): E[K] = x and Var(K) = 1/4 for EVERY t (plain randomized
   rounding has the t-periodic variance f(1 - f), which would break the quadratic form of V(t)
   that the predictor relies on). K stays in [-J - 1, J + 1]. The law of the output given t is a
   mixture over grid inputs K, so a ratio bound that holds between any two K holds between any
   two t. U1 and U2 are the two 32-bit halves of one raw 64-bit word (over 2^32; one word per
   value instead of two 53-bit uniforms, for speed): P(K = k) is within 2^-32 of the continuous
   triangular weights (`rounding_weights`) and |E[K] - x| <= 2^-33 (Hermite's identity), with
   the float rounding of the sum (<= 2^-35 of a step) a bias below 2^-48 on the t scale, far
   below any randomizer noise; the guarantee does not depend on the law of K at all.
2. An exact discrete law given K. `WindowLaw` draws ONE uniform integer r in [0, T), T <= 2^53
   (from a 53-bit uniform, rejection for the rare r >= T) and maps it to an output index by exact
   integer arithmetic in floats with integer weights: every point of a window of W indices around
   K weighs A, every other index of [-I, I] weighs B (a discrete Piecewise / Square wave), plus
   optional Duchi atoms +-B_D with weights E0 + E1 (J + 1 +- K) (Hybrid). The normalizer T does
   not depend on K and A/B <= e^eps (and the atoms' ratio too) holds in exact integer arithmetic,
   so the mechanism is eps'-LDP with eps' = ln(A/B) <= eps EXACTLY, whatever the floats do
   (floor(r / A) of integers below 2^53 is exact in floats: the quotient is correctly rounded).
   With 53 bits, eps' is within 1e-10 of eps up to eps ~ 36.7 and capped at ln(2^53 - M + 1)
   ~ 36.74 (B = 1, M the number of output indices); `log_ratio_upper` rounds eps' up.

Moments are exact for what is sampled (closed forms in the integers A, B, W, I, E0, E1); they
converge to the continuous mechanism's as J -> infinity. Reports are index * step: a fixed set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

import numpy as np

from ldpfed.samplers.words import UNIT, compiled, draw_words, handles, kernel, locked, next_word, redraw_at_or_above

GRID_BITS = 16  # J = 2^16 input steps per unit: rounding variance J^-2/4 ~ 6e-11
_TOTAL_BITS = 53  # integer weights sum to at most 2^53 (one 53-bit uniform per value)
_MARGIN = 1.0 - 4.0 * 2.0**-52  # covers the rounding of math.exp when checking A/B <= e^eps


# --- step 1: input rounding with constant variance ------------------------------------------------
def rounding_weights(x) -> tuple[np.ndarray, list[np.ndarray]]:
    """(floor(x), [w_-1, w_0, w_1, w_2]): P(K = floor(x) + d) for d = -1..2 under the TPDF dither.

    With f = x - floor(x) and D = U1 - U2 triangular on (-1, 1) (CDF F), K = floor(x) + d where
    d = round(f + D): w_-1 = (1/2 - f)^2/2 [f < 1/2], w_2 = (f - 1/2)^2/2 [f > 1/2],
    w_0 = F(1/2 - f) - w_-1, w_1 = 1 - w_-1 - w_0 - w_2. E[K] = x and Var(K) = 1/4.
    """
    x = np.asarray(x, dtype=float)
    low = np.floor(x)
    f = x - low  # exact
    below = np.where(f < 0.5, 0.5 * (0.5 - f) ** 2, 0.0)
    above = np.where(f > 0.5, 0.5 * (f - 0.5) ** 2, 0.0)
    z = 0.5 - f  # in (-1/2, 1/2]: F(z) = (1 + z)^2/2 below 0, 1 - (1 - z)^2/2 above
    cdf = np.where(z <= 0, 0.5 * (1 + z) ** 2, 1 - 0.5 * (1 - z) ** 2)
    return low, [below, cdf - below, 1.0 - cdf - above, above]


def round_to_grid(x: np.ndarray, rng: np.random.Generator, shift: float = 0.0) -> np.ndarray:
    """Integers K + shift (as floats; `shift` an integer) with the law of `rounding_weights`:
    K = floor(x + 1/2 + U1 - U2), U1 and U2 the two 32-bit halves of ONE raw 64-bit word over 2^32.

    One word instead of two 53-bit uniforms (half the raw draws): the dither is then the triangular
    law on the lattice 2^-32 Z, so P(K = k) is within 2^-32 of `rounding_weights` and
    |E[K] - x| <= 2^-33 (Hermite's identity: E[floor(y + a/N)] = floor(N y)/N over a uniform a),
    below the float rounding of the sum (2^-35 of a step for |x + shift| <= 2^17).
    """
    compiled()
    flat = np.ascontiguousarray(x, dtype=float).reshape(-1)
    out = np.empty(flat.size)
    with locked([rng]):
        _round_kernel(flat, out, handles([rng])[0], 0.5 + shift)
    return out.reshape(np.shape(x))


@kernel(inline=True)
def tpdf_round(word, x, offset):
    """floor(x + offset + U1 - U2) from one raw word (round_to_grid's law): U1 - U2 is the low
    half minus the high half, times 2^-32, added in this order (bit-identical to the numpy form)."""
    dither = np.float64(word & np.uint64(0xFFFFFFFF)) - np.float64(word >> np.uint64(32))
    dither *= 2.0**-32
    dither += x
    dither += offset
    return np.floor(dither)


@kernel
def _round_kernel(x, out, handle, offset):
    for i in range(x.size):
        out[i] = tpdf_round(next_word(handle), x[i], offset)


def uniform_below(total: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Exactly uniform integers k in [0, total), total <= 2^53, returned as k / 2^53 (callers scale
    their integer constants by 2^-53 instead, exactly: one array pass fewer). rng.random() is
    k / 2^53 with k uniform; the rare k >= total are drawn again."""
    draws = rng.random(size)
    if total < 2**53 and size and draws.max() >= total * 2.0**-53:  # one cheap pass; a redraw is rare (~1e-6)
        bad = np.flatnonzero(draws >= total * 2.0**-53)
        while bad.size:
            draws[bad] = rng.random(bad.size)
            bad = bad[draws[bad] >= total * 2.0**-53]
    return draws


def abs_cube_sum(low, high, x) -> np.ndarray:
    """sum_{i=low}^{high} |i - x|^3 for integers low <= high and real x, in closed form.

    Split at x; each side is sum_{k=0}^{n-1} (d + k)^3 = n d^3 + 3 d^2 S1 + 3 d S2 + S3 with d >= 0
    the distance of its nearest term, S1 = n(n-1)/2, S2 = (n-1)n(2n-1)/6, S3 = S1^2: only positive
    terms, so no cancellation.
    """
    low, high, x = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (low, high, x)))
    split = np.floor(x)

    def side(n, d):
        n = np.maximum(n, 0.0)
        s1 = n * (n - 1) / 2
        s2 = (n - 1) * n * (2 * n - 1) / 6
        return n * d**3 + 3 * d * d * s1 + 3 * d * s2 + s1 * s1

    below_top = np.minimum(high, split)  # terms i <= floor(x): distances x - i
    above_bottom = np.maximum(low, split + 1)  # terms i > floor(x): distances i - x
    return side(below_top - low + 1, x - below_top) + side(high - above_bottom + 1, above_bottom - x)


def integer_ratio_weights(epsilon: float, count_high: int, count_low: int, extra: int = 0) -> tuple[int, int]:
    """(A, B): integer weights with A/B <= e^eps, as close to it as count_high A + count_low B +
    extra <= 2^53 allows (B >= 1; for e^eps beyond ~2^53 / count_high, A/B is capped there)."""
    limit = 2**_TOTAL_BITS - extra
    ratio = math.exp(min(epsilon, 700.0)) * _MARGIN
    low = max(1, int(limit / (count_high * ratio + count_low)))
    while low > 1 and count_high * math.floor(low * ratio) + count_low * low > limit:
        low -= 1  # float rounding of the guess
    high = min(math.floor(low * ratio), (limit - count_low * low) // count_high)
    return max(high, low), low


def log_ratio_upper(high: int, low: int) -> float:
    """A float >= ln(high / low) for integers high >= low >= 1, within 2^-49 relative: the eps' of
    integer weights, rounded up so that no guarantee is understated. log1p of (high - low) / low
    (exact numerator below 2^53, one rounding in the division) is within ~2 ulp of the true value;
    the factor 1 + 2^-50 covers that (a plain ln(high) - ln(low) loses digits when eps' is small)."""
    return math.log1p((high - low) / low) * (1.0 + 2.0**-50)


# --- step 2: an exact discrete law given the grid input -------------------------------------------
@dataclass(frozen=True)
class WindowLaw:
    """Output index i in [-I, I] (+ optional atoms) given grid input K in [-J-1, J+1]:
    weight A on the window |i - K| <= P, B elsewhere; atoms +-1 (as codes) with E0 + E1 (J+1 +- K).

    `window_half` P, `half_range` I = J + 1 + P, integer weights; see the module docstring.
    """

    grid_steps: int  # J
    window_half: int  # P (window width W = 2P + 1)
    high: int  # A
    low: int  # B
    atom_base: int = 0  # E0
    atom_slope: int = 0  # E1

    @property
    def width(self) -> int:
        return 2 * self.window_half + 1

    @property
    def half_range(self) -> int:
        return self.grid_steps + 1 + self.window_half

    @property
    def points(self) -> int:
        return 2 * self.half_range + 1

    @property
    def window_total(self) -> int:
        return self.width * self.high + (self.points - self.width) * self.low

    @property
    def atom_total(self) -> int:
        return 2 * self.atom_base + 2 * (self.grid_steps + 1) * self.atom_slope

    @property
    def total(self) -> int:
        return self.window_total + self.atom_total

    @cached_property
    def window_share(self) -> float:
        """P(the report comes from the window law), alpha for Hybrid, 1 without atoms."""
        return self.window_total / self.total

    @property
    def log_ratio(self) -> float:
        """eps' = the exact worst log probability ratio between any two grid inputs."""
        ratios = [log_ratio_upper(self.high, self.low)]
        if self.atom_slope:
            ratios.append(log_ratio_upper(self.atom_base + 2 * (self.grid_steps + 1) * self.atom_slope, self.atom_base))
        return max(ratios)

    # --- sampling: index codes; atoms are returned as index -I-1 (minus) and I+1 (plus) ---------
    def map_constants(self, step: float = 1.0, atom_value: float | None = None) -> tuple[float, ...]:
        """The constants of `window_report`, computed as the numpy sampler did: every integer
        constant scaled by 2^-53 like r (exact), the atom value +-(I+1) step by default. A tuple:
        numba keeps it in registers (read from an array, the map ran 3x slower, unvectorized)."""
        unit = UNIT
        value = (self.half_range + 1) * step if atom_value is None else atom_value
        plus = (self.window_total + self.atom_base + self.atom_slope * (self.grid_steps + 1 + self.window_half)) * unit
        return (
            self.high * unit,
            self.width * (self.high - self.low) * unit,
            self.low * unit,
            1.0 / self.points,
            float(self.points),
            float(step),
            float(self.atom_total > 0),
            self.window_total * unit,
            self.atom_slope * unit,
            plus,
            float(value),
        )

    def sample(
        self, window_start: np.ndarray, rng: np.random.Generator, step: float = 1.0, atom_value: float | None = None
    ) -> np.ndarray:
        """Reports given the window starts K - P (integer floats, K the grid input): index * step
        for a window/background index in [-I, I], +-atom_value for the atoms (default: the atom
        codes +-(I+1) * step). With the defaults the reports are the codes themselves.

        r = `uniform_below(total)` (rng.random: tests feed every r through a stand-in), mapped
        by the compiled `window_report` that the fused GridSampler kernel uses too.
        """
        compiled()
        r = uniform_below(self.total, window_start.size, rng)
        start = np.ascontiguousarray(window_start, dtype=float)
        _map_kernel(r, start, self.map_constants(step, atom_value))
        return r

    def probability(self, index, grid_input) -> np.ndarray:
        """P(code | K), vectorized."""
        index, k = np.broadcast_arrays(np.asarray(index, dtype=float), np.asarray(grid_input, dtype=float))
        code = self.half_range + 1
        in_window = np.abs(index - k) <= self.window_half
        weight = np.where(in_window, float(self.high), float(self.low))
        weight = np.where(np.abs(index) <= self.half_range, weight, 0.0)
        if self.atom_total:
            atom = self.atom_base + self.atom_slope * (self.grid_steps + 1 + np.sign(index) * k)
            weight = np.where(np.abs(index) == code, atom, weight)
        return weight / self.total

    # --- exact moments of the window part, per grid input K (index units) -----------------------
    @cached_property
    def window_mean_slope(self) -> float:
        """kappa with E[i | K, window part] = kappa K: (A - B) W / T_window."""
        return (self.high - self.low) * self.width / self.window_total

    @cached_property
    def window_one_minus_slope(self) -> float:
        """1 - kappa = M B / T_window, without cancellation."""
        return self.points * self.low / self.window_total

    @cached_property
    def window_variance_constant(self) -> float:
        """V0 with Var(i | K, window part) = V0 + kappa (1 - kappa) K^2."""
        w, i_max = self.width, self.half_range
        return (
            (self.high - self.low) * w * (w * w - 1) / 12.0 + self.low * i_max * (i_max + 1) * (2 * i_max + 1) / 3.0
        ) / self.window_total

    def window_abs_cube(self, grid_input, centre) -> np.ndarray:
        """E|i - centre|^3 given K under the window part."""
        k = np.asarray(grid_input, dtype=float)
        half, i_max = self.window_half, self.half_range
        return (
            self.low * abs_cube_sum(-i_max, i_max, centre)
            + (self.high - self.low) * abs_cube_sum(k - half, k + half, centre)
        ) / self.window_total


@kernel(inline=True)
def window_report(r, start, c):
    """The report of one draw r (k / 2^53, k < T) given the window start K - P; c = map_constants.

    Slots z in [0, M) counted from K - P, cyclically over [-I, I]: r < W A gives the window slot
    z = floor(r / A), else the background slot z = W + floor((r - W A) / B) = floor((r - W (A - B))
    / B). Both lines are increasing in r and meet at r = W A (slope 1/B > 1/A), so
    z = floor(max(r / A, (r - W (A - B)) / B)): no branch on the law. Every division is of integers
    below 2^53 (both scaled by 2^-53: the same quotient), whose floor is exact in floats (a
    quotient within half an ulp below an integer k would need a numerator >= 2^53). The index is
    (K - P + z) mod M, mapped to [-I, I]: v = K - P + z lies in [-I, I + M), and rint(v / M) is 1
    exactly when v > I (M odd: v / M is never near 1/2 within rounding). Atoms (Hybrid): r >= T_w,
    plus when r - T_w < E0 + E1 (J + 1 + K). The float operations and their order are those of
    the numpy sampler, so reports are bit-identical.
    """
    slot = r / c[0]
    background = (r - c[1]) / c[2]
    if background > slot:
        slot = background
    slot = np.floor(slot)
    slot += start
    wrap = np.rint(slot * c[3])
    wrap *= c[4]
    slot -= wrap
    slot *= c[5]
    if c[6] != 0.0 and r >= c[7]:
        limit = start * c[8]
        limit += c[9]
        slot = c[10] if r < limit else -c[10]
    return slot


@kernel
def _map_kernel(r, start, constants):
    for i in range(r.size):
        r[i] = window_report(r[i], start[i], constants)


@kernel
def _grid_kernel(t, out, rows, block, scale, offset, total, constants):
    """GridSampler.sample_rows: per row and block, the dither words, then the draws
    k = word >> 11 (r = k 2^-53) with k >= T drawn again after the block, in index order."""
    size = min(block, t.shape[1])
    dither = np.empty(size, dtype=np.uint64)
    draws = np.empty(size, dtype=np.uint64)
    scratch = np.empty(size, dtype=np.int64)
    for row in range(t.shape[0]):
        handle, inputs, reports = rows[row], t[row], out[row]
        for first in range(0, t.shape[1], block):
            count = min(block, t.shape[1] - first)
            draw_words(handle, dither, count)
            draw_words(handle, draws, count)
            for i in range(count):
                draws[i] >>= np.uint64(11)
            redraw_at_or_above(handle, draws, count, np.uint64(total), np.uint64(11), scratch)
            for i in range(count):
                start = tpdf_round(dither[i], inputs[first + i] * scale, offset)
                reports[first + i] = window_report(np.float64(draws[i]) * UNIT, start, constants)


# --- a whole safe mechanism: rounding + window law + report values ------------------------------
class RowSampler:
    """Reports drawn row by row from per-row streams by one compiled pass: a subclass defines
    `_sample_rows_kernel(t, out, row_handles, block)`, filling out from t in the streams' order."""

    def sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Reports for the inputs t (one block)."""
        return self.sample_rows(t.reshape(1, -1), [rng], max(t.size, 1)).reshape(t.shape)

    def sample_rows(self, t: np.ndarray, rngs, block: int) -> np.ndarray:
        """Reports for the rows of t (c, k), row i from rngs[i], in blocks of `block` values."""
        with locked(rngs):
            return self.sample_handles(t, handles(rngs), block)

    def sample_handles(self, t: np.ndarray, row_handles: np.ndarray, block: int) -> np.ndarray:
        """`sample_rows` with each row's stream given as a kernel handle (`words.handles`, or
        ldpfed.samplers.streams.RowStreams.handles); the caller holds whatever locks they need."""
        compiled()
        t = np.ascontiguousarray(t, dtype=float)
        out = np.empty(t.shape)
        self._sample_rows_kernel(t, out, row_handles, block)
        return out


@dataclass(frozen=True)
class GridSampler(RowSampler):
    """The safe sampler of PM, SW and Hybrid with its exact statistics on the report scale.

    Report = code * step for window codes, +-atom_value for the atom codes. `law.window_share` is
    Hybrid's alpha; the atom part (if any) is an unbiased Duchi on the grid input (E[atom|K] =
    K / J), the window part has E[report | K] = step kappa K.
    """

    law: WindowLaw
    step: float
    atom_value: float = 0.0
    rescaled: bool = True  # step = 1/(kappa J): unbiased by construction

    @property
    def grid_steps(self) -> int:
        return self.law.grid_steps

    @property
    def output_bound(self) -> float:
        return max(self.law.half_range * self.step, self.atom_value)

    @property
    def epsilon(self) -> float:
        return self.law.log_ratio

    def _sample_rows_kernel(self, t: np.ndarray, out: np.ndarray, row_handles: np.ndarray, block: int) -> None:
        """Per row and block of `block` values: the dither words of all its values, then their
        draws r (with the rare redraws r >= T), as the numpy sampler drew them (`_grid_kernel`)."""
        constants = self.law.map_constants(self.step, self.atom_value)
        _grid_kernel(
            t,
            out,
            row_handles,
            block,
            float(self.grid_steps),
            0.5 - self.law.window_half,
            self.law.total,
            constants,
        )

    @cached_property
    def _shares(self) -> tuple[float, float]:
        law = self.law
        return law.window_total / law.total, law.atom_total / law.total

    @property
    def mean_slope(self) -> float:
        """c with E[report | t] = c t."""
        window, atoms = self._shares
        law = self.law
        slope = window * self.step * law.window_mean_slope * law.grid_steps
        if law.atom_total:
            slope += atoms * self.atom_value * 2.0 * law.atom_slope * law.grid_steps / law.atom_total
        return slope

    @property
    def bias_coefficients(self) -> tuple[float, float]:
        if self.rescaled:  # PM, SW debiased, Hybrid: unbiased by construction of step (and atoms)
            return (0.0, 0.0)
        return (0.0, -self.law.window_one_minus_slope)  # SW raw: E[t*|t] = kappa t

    @property
    def variance_coefficients(self) -> tuple[float, float, float]:
        """Var = E[Var(report | K)] + Var(E[report | K]) with E[K] = x = J t, Var(K) = 1/4."""
        law = self.law
        window, atoms = self._shares
        kappa, one_minus = law.window_mean_slope, law.window_one_minus_slope
        j2 = float(law.grid_steps) ** 2
        v0 = window * self.step**2 * (law.window_variance_constant + kappa / 4.0) + atoms * self.atom_value**2
        if law.atom_total:  # unbiased mixture: alpha (1 - kappa)/kappa - (1 - alpha), in exact rationals
            exact = Fraction(law.window_total * law.points * law.low, (law.high - law.low) * law.width)
            v2 = float((exact - law.atom_total) / law.total)
        else:
            v2 = self.step**2 * j2 * kappa * one_minus
        return (v0, 0.0, v2)

    def third_abs_central_moment(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        law = self.law
        window, atoms = self._shares
        x = t * law.grid_steps
        centre = self.mean_slope * t
        low, weights = rounding_weights(x)
        moment = np.zeros(np.shape(t))
        for offset, weight in zip((-1, 0, 1, 2), weights):
            moment = moment + weight * law.window_abs_cube(low + offset, centre / self.step)
        moment = window * self.step**3 * moment
        if law.atom_total:  # P(+atom | K) is linear in K, so its mean over K is its value at x
            plus = (law.atom_base + law.atom_slope * (law.grid_steps + 1 + x)) / law.atom_total
            moment = moment + atoms * (
                plus * np.abs(self.atom_value - centre) ** 3 + (1 - plus) * np.abs(self.atom_value + centre) ** 3
            )
        return moment

    def log_mass(self, y, t) -> np.ndarray:
        """log P(report = y | t); -inf off the output set."""
        y, t = np.broadcast_arrays(np.asarray(y, dtype=float), np.asarray(t, dtype=float))
        law = self.law
        code = np.rint(y / self.step)
        valid = (code * self.step == y) & (np.abs(code) <= law.half_range)
        if law.atom_total:
            atom = np.abs(y) == self.atom_value
            code = np.where(atom, np.sign(y) * (law.half_range + 1), code)
            valid |= atom
        low, weights = rounding_weights(t * law.grid_steps)
        mass = sum(weight * law.probability(code, low + offset) for offset, weight in zip((-1, 0, 1, 2), weights))
        with np.errstate(divide="ignore"):
            return np.where(valid & (mass > 0), np.log(np.where(mass > 0, mass, 1.0)), -np.inf)


@lru_cache(maxsize=256)
def window_sampler(
    epsilon: float, window_fraction: float, *, rescale: bool, atom_share: float = 0.0, grid_bits: int = GRID_BITS
) -> GridSampler:
    """The safe sampler of a sliding-window mechanism: window width ~ window_fraction * J indices,
    density ratio e^eps' <= e^eps; reports unbiased (`rescale`) or index / J (SW raw). Cached: one
    immutable sampler per parameters, its exact moments computed once.

    atom_share > 0 (Hybrid): the window part's share is chosen so that the mixture's variance does
    not depend on t (alpha = 1 / (1 + v2_window), the exact analogue of alpha = 1 - e^(-eps/2)).
    """
    j = 2**grid_bits
    half = max(0, int(round((window_fraction * j - 1.0) / 2.0)))
    width, points = 2 * half + 1, 2 * (j + 1 + half) + 1
    if not atom_share:
        high, low = integer_ratio_weights(epsilon, width, points - width)
        law = WindowLaw(j, half, high, low)
        step = 1.0 / (law.window_mean_slope * j) if rescale else 1.0 / j
        return GridSampler(law, step, rescaled=rescale)
    # Hybrid: the window part gets alpha of the 2^62 total, the Duchi atoms the rest, with
    # alpha = 1/(1 + v2_window) and v2_window = (1 - kappa)/kappa = M B / ((A - B) W).
    ratio = math.exp(min(epsilon, 700.0)) * _MARGIN
    v2_guess = points / (max(ratio - 1.0, 1e-300) * width)
    extra = int(2**_TOTAL_BITS * v2_guess / (1.0 + v2_guess) * (1.0 + 1e-6)) + 4 * (j + 1)
    high, low = integer_ratio_weights(epsilon, width, points - width, extra=extra)
    window = WindowLaw(j, half, high, low)
    # Duchi atoms: 2 E0 + span E1 = atom_total with (E0 + span E1)/E0 = e^eps (Duchi's ratio)
    span = 2 * (j + 1)
    # atom total = window total * v2_window = T_w M B / ((A - B) W), rounded in integers
    target = round(Fraction(window.window_total * points * low, (high - low) * width))
    first = max(1, math.ceil(target / (1.0 + ratio)))
    slope = max(1, (target - 2 * first) // span)
    base = max(first, (target - span * slope) // 2)  # absorbs the remainder: total = target (+-1)
    while base + span * slope > ratio * base:  # float rounding of the guesses
        slope -= 1
    law = WindowLaw(j, half, high, low, atom_base=base, atom_slope=slope)
    assert law.total <= 2**_TOTAL_BITS and slope >= 1
    step = 1.0 / (law.window_mean_slope * j)
    atom_value = law.atom_total / (2.0 * law.atom_slope * j)
    return GridSampler(law, step, atom_value)

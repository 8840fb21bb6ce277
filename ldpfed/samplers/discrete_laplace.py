"""Exact discrete Laplace-like noise with integer weights: the safe sampler of Laplace
(mechanisms.md, Floating-point safety; discrete Laplace as in Canonne, Kamath and Steinke 2020).

Report = (K + N) / J: K is the input rounded to the grid K / J (`grid.round_to_grid`: unbiased,
Var(K) = 1/4, K in [-J - 1, J + 1]) and N = S G, a random sign S times G = L Q + R, with the draws
(G = 0, S = -1) rejected, so that P(N = n) = P(G = |n|) / (2 - P(G = 0)). Here
- Q ~ Geometric(1/2) (P(Q = q) = 2^-(q+1)) counts trailing one-bits of raw random words: exact;
- R in [0, L) has integer weights w_r ~ S 2^(-r/L), drawn exactly by Walker's alias method in
  integer arithmetic from the top 55 bits of a raw 64-bit word (bit 8 is the sign, bits 0-7
  count Q through a 256-entry table; fresh words continue the count when all 8 are ones).
G's adjacent ratios are integer ratios: P(G = j + 1)/P(G = j) lies in [e^-gamma', 1] with
gamma' = max(max_r ln(w_r / w_{r+1}), ln(2 w_{L-1} / w_0)) ~ ln2 / L, hence so do N's (around 0 by
symmetry); |K - K'| <= 2J + 2, so the mechanism is exactly eps'-LDP with eps' = (2J + 2) gamma'
<= eps, checked at construction. Reports are multiples of 1/J: a fixed set.

Why this design: every probability that matters is an integer ratio or a power of 2, so the
guarantee needs no float argument; Var = J^-2 (1/4 + E[N^2]) is a t-free constant in closed form,
as the predictor needs; the law of N is explicit, which gives the exact log-mass and third moment.
J is the largest power of 2 in [2^7, 2^24] with L <= 4096 (below eps ~ 0.04, J = 128 and L grows
as 1/eps: 180,000 at eps = 1e-3, 1.8M at eps = 1e-4, the smallest budget accepted). Cost of exactness: the noise is
calibrated for 2J + 2 grid steps instead of 2J, so the variance is (1 + 1/J)^2 times 8/eps^2 (plus
J^-2/4): +1.6% below eps ~ 0.04, +0.1% at eps = 1 (J = 2048), +0.02% at eps = 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from ldpfed.samplers.grid import rounding_weights
from ldpfed.samplers.grid_noise import Q_BITS as _Q_BITS
from ldpfed.samplers.grid_noise import GridNoiseSampler, add_noise, geometric_half, round_block
from ldpfed.samplers.words import draw_words, kernel, redraw_at_or_above

# raw word: bits 0-7 trailing ones (Q); bit 8: sign; bits 9-63: alias column and threshold
_TABLE_BITS = 64 - _Q_BITS - 1
_MAX_TABLE = 4096
_MIN_GRID_BITS = 7  # J >= 128: the 2J + 2 calibration costs at most (1 + 1/128)^2 - 1 = 1.6%
_MAX_GRID_BITS = 24
_LN2 = math.log(2.0)


def _alias_table(weights: list[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact Walker/Vose alias table for integer weights over 2^k columns (zero-padded): with y
    uniform in [0, capacity), column c gives c when y < keep[c], else alias[c]."""
    columns = 1 << max(0, (len(weights) - 1).bit_length())
    capacity = sum(weights)  # each column holds `capacity` units; item r holds w_r * columns
    scaled = [w * columns for w in weights] + [0] * (columns - len(weights))
    keep, alias = [capacity] * columns, list(range(columns))
    small = [i for i, s in enumerate(scaled) if s < capacity]
    large = [i for i, s in enumerate(scaled) if s >= capacity]
    while small and large:
        s, big = small.pop(), large[-1]
        keep[s], alias[s] = scaled[s], big
        scaled[big] -= capacity - scaled[s]
        if scaled[big] < capacity:
            small.append(large.pop())
    return np.array(keep, dtype=np.int64), np.array(alias, dtype=np.int64), capacity


def _worst_log_ratio(weights: list[int]) -> float:
    """gamma': the largest |ln| of G's adjacent ratios w_r / w_{r+1} and 2 w_{L-1} / w_0.
    Integer ratios below 2^55 are exact to 1 ulp in floats; 1e-12 of slack covers the log."""
    w = np.array(weights, dtype=float)
    ratios = np.append(w[:-1] / w[1:], 2.0 * w[-1] / w[0])
    return float(np.max(np.abs(np.log(ratios))))


@dataclass(frozen=True)
class DiscreteLaplaceSampler(GridNoiseSampler):
    """Report (K + N)/J with the exact law of the module docstring; `epsilon` is eps' <= budget."""

    budget: float

    @classmethod
    @lru_cache(maxsize=256)
    def shared(cls, budget: float) -> DiscreteLaplaceSampler:
        """One instance per budget, so that its tables and moments are built once however many
        mechanisms use it (it is immutable)."""
        return cls(budget)

    @cached_property
    def grid_steps(self) -> int:
        """J: the largest 2^k (7 <= k <= 24) with L = ln2 (2J + 2) / eps <= 4096 (J = 128 and a
        longer table below eps ~ 0.04)."""
        k = math.floor(math.log2(max(1.0, (_MAX_TABLE * self.budget / _LN2 - 2.0) / 2.0)))
        return 2 ** max(_MIN_GRID_BITS, min(_MAX_GRID_BITS, k))

    @cached_property
    def _wide(self) -> bool:
        """Long tables (small eps) take the alias threshold from a second raw word (62 bits), so
        that the integer weights stay fine enough for the ratio bound."""
        return math.ceil(_LN2 * (2 * self.grid_steps + 2) / self.budget) > _MAX_TABLE

    @cached_property
    def _table(self) -> tuple[list[int], int]:
        """(weights, L): L >= ln2 (2J + 2) / eps, grown until the integer weights give eps' <= eps."""
        span = 2 * self.grid_steps + 2
        length = max(1, math.ceil(_LN2 * span / self.budget))
        while True:
            columns = 1 << max(0, (length - 1).bit_length())
            bits = 61 if self._wide else _TABLE_BITS - (columns.bit_length() - 1)
            scale = 2**bits // length  # sum of weights (the alias capacity) below 2^bits * 1.45
            weights = [max(1, math.floor(scale * 2.0 ** (-r / length))) for r in range(length)]
            excess = span * _worst_log_ratio(weights) / (self.budget * (1.0 - 1e-12))
            if excess <= 1.0:
                return weights, length
            length = max(length + 1, math.ceil(length * excess))

    @cached_property
    def _alias(self):
        return _alias_table(self._table[0])

    @cached_property
    def epsilon(self) -> float:
        """eps' = (2J + 2) gamma' from the integer weights (module docstring)."""
        return (2 * self.grid_steps + 2) * _worst_log_ratio(self._table[0])

    # --- sampling (compiled: `_laplace_noise`) ---------------------------------------------------------
    @cached_property
    def _kernel_arguments(self) -> tuple:
        """(keep, alias, capacity, L, column bits, bits of a redrawn alias threshold, wide)."""
        keep, alias, capacity = self._alias
        column_bits = (len(keep) - 1).bit_length()
        below_bits = 62 if self._wide else _TABLE_BITS - column_bits
        return keep, alias, capacity, self._table[1], column_bits, below_bits, self._wide

    def _sample_rows_kernel(self, t, out, rows, block):
        _laplace_rows(t, out, rows, block, float(self.grid_steps), self._kernel_arguments)

    def _noise_kernel(self, out, handle):
        _laplace_fill(out, handle, self._kernel_arguments)

    _signed_noise = GridNoiseSampler.noise  # the name ldpfed.gradient_noise uses

    # --- exact law and statistics -----------------------------------------------------------------
    @cached_property
    def _normalized_weights(self) -> np.ndarray:
        w = np.array(self._table[0], dtype=float)
        return w / w.sum()

    @cached_property
    def _log_zero_factor(self) -> float:
        """log c with c = 1/(2 - P(G = 0)), P(G = 0) = w_0 / 2."""
        return -math.log(2.0 - self._normalized_weights[0] / 2.0)

    def noise_log_mass(self, n) -> np.ndarray:
        """log P(N = n) = log c + log P(G = |n|), P(G = L q + r) = 2^-(q+1) w_r."""
        length = self._table[1]
        block, offset = np.divmod(np.abs(np.asarray(n, dtype=np.int64)), length)
        return self._log_zero_factor - (block + 1) * _LN2 + np.log(self._normalized_weights[offset])

    @cached_property
    def noise_variance(self) -> float:
        """E[N^2] = 2c E[G^2], E[G] = L + E[R], Var G = 2 L^2 + Var R (Var Q = 2, E[Q] = 1)."""
        w, length = self._normalized_weights, self._table[1]
        r = np.arange(length)
        mean_r = float(w @ r)
        var_r = float(w @ (r - mean_r) ** 2)
        second_g = 2.0 * length**2 + var_r + (length + mean_r) ** 2
        return 2.0 * math.exp(self._log_zero_factor) * second_g

    @property
    def _noise_second_moment(self) -> float:  # the name ldpfed.gradient_noise uses
        return self.noise_variance

    @cached_property
    def _g_moments(self) -> tuple[float, float, float]:
        """E[G], E[G^2], E[G^3] for G = L Q + R (E[Q^k] = 1, 3, 13 for P(Q = q) = 2^-(q+1))."""
        w, length = self._normalized_weights, self._table[1]
        r = np.arange(length, dtype=float)
        m1, m2, m3 = (float(w @ r**k) for k in (1, 2, 3))
        return (
            length + m1,
            3 * length**2 + 2 * length * m1 + m2,
            13 * length**3 + 9 * length**2 * m1 + 3 * length * m2 + m3,
        )

    def _one_side(self, shift) -> np.ndarray:
        """sum_{n >= 1} P(N = n) |n + shift|^3 for real |shift| < 3: c E[(G + shift)^3] (a
        polynomial in shift from G's moments) minus the n = 0 term, plus 2 |n + shift|^3 P(n)
        for the few n >= 1 where n + shift < 0 (|x|^3 = x^3 + 2|x|^3 when x < 0)."""
        g1, g2, g3 = self._g_moments
        c = math.exp(self._log_zero_factor)
        p0 = math.exp(float(self.noise_log_mass(0)))
        total = c * (g3 + 3 * shift * g2 + 3 * shift**2 * g1 + shift**3) - p0 * shift**3
        for n in (1, 2, 3):
            term = n + shift
            total = total + 2.0 * math.exp(float(self.noise_log_mass(n))) * np.where(term < 0, -term, 0.0) ** 3
        return total

    def third_abs_central_moment(self, t) -> np.ndarray:
        x = np.asarray(t, dtype=float) * self.grid_steps
        low, weights = rounding_weights(x)
        zero = math.exp(float(self.noise_log_mass(0)))
        moment = 0.0
        for d, w in zip((-1, 0, 1, 2), weights):
            shift = low + d - x  # report - t in steps is shift + N
            moment = moment + w * (zero * np.abs(shift) ** 3 + self._one_side(shift) + self._one_side(-shift))
        return moment / float(self.grid_steps) ** 3


# --- compiled sampling --------------------------------------------------------------------------------
@kernel
def _laplace_noise(noise, size, handle, table, raw, below, q, scratch, pending):
    """noise[i], i < size: N = S G with (G = 0, S = -1) drawn again (module docstring); `table`:
    the sampler's `_kernel_arguments`.

    Words in the order of the numpy sampler: one raw word per value (the wide tables: then one
    more per value for the threshold), the redraws of thresholds >= capacity (top bits of fresh
    words, pass after pass), the geometric continuations, and last the values to draw again, as
    a new pass of the same procedure. raw, below: uint64 scratch; q, scratch, pending: int64.
    """
    keep, alias, capacity, length, column_bits, below_bits, wide = table
    for j in range(size):
        pending[j] = j  # where each draw goes; then the (G = 0, S = -1) ones again
    count = size
    while count:
        draw_words(handle, raw, count)
        if wide:
            draw_words(handle, below, count)
            for j in range(count):
                below[j] >>= np.uint64(2)
        else:
            for j in range(count):
                below[j] = (raw[j] << np.uint64(column_bits)) >> np.uint64(column_bits + _Q_BITS + 1)
        redraw_at_or_above(handle, below, count, np.uint64(capacity), np.uint64(64 - below_bits), scratch)
        geometric_half(raw, q, count, handle, scratch)
        again = 0
        for j in range(count):
            column = np.int64(raw[j] >> np.uint64(64 - column_bits)) if column_bits else np.int64(0)
            kept, other = keep[column], alias[column]  # both loaded: a select, not a branch
            g = column if below[j] < np.uint64(kept) else other
            g += q[j] * length
            sign = np.int64(raw[j] << np.uint64(63 - _Q_BITS)) >> np.int64(63)  # -bit 8: 0 or -1
            g ^= sign
            if g == -1:  # G = 0 with S = -1: drawn again in the next pass
                pending[again] = pending[j]
                again += 1
            else:
                noise[pending[j]] = np.float64(g - sign)
        count = again


@kernel
def _laplace_fill(out, handle, table):
    size = out.size
    _laplace_noise(
        out,
        size,
        handle,
        table,
        np.empty(size, np.uint64),
        np.empty(size, np.uint64),
        np.empty(size, np.int64),
        np.empty(size, np.int64),
        np.empty(size, np.int64),
    )


@kernel
def _laplace_rows(t, out, rows, block, scale, table):
    """Per row and block: K (dither words), then N (noise words); report (K + N) * (1/J)."""
    size = min(block, t.shape[1])
    noise = np.empty(size)
    raw, below = np.empty(size, np.uint64), np.empty(size, np.uint64)
    q, scratch, pending = np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size, np.int64)
    for row in range(t.shape[0]):
        for first in range(0, t.shape[1], block):
            count = min(block, t.shape[1] - first)
            round_block(t[row], out[row], first, count, rows[row], scale, raw)
            _laplace_noise(noise, count, rows[row], table, raw, below, q, scratch, pending)
            add_noise(out[row], first, count, noise, scale)

"""What the safe samplers of the additive mechanisms (Laplace, Gaussian) share: report (K + N) / J,
K the input rounded to the grid K / J (`grid.round_to_grid`: E[K] = x = t J, Var(K) = 1/4) and N
an integer noise with an exact, symmetric law (mechanisms.md, Floating-point safety).

A sampler provides `grid_steps` (J), `noise(size, rng)`, `noise_log_mass(n)` and `noise_variance`
(E[N^2]); the statistics that follow from them alone live here: unbiased, V = (1/4 + E[N^2]) / J^2
(K and N independent), and log P(report = y | t) as a mixture over the rounding of t. Both noises
draw block counts Q ~ Geometric(1/2) (P(Q = q) = 2^-(q+1)) exactly, as trailing one-bits of raw
random words (`geometric_half`). Sampling runs in compiled kernels (ldpfed.samplers.words) that
draw the words in the order of the former numpy code: the same reports for the same Generator.
"""

from __future__ import annotations

import math

import numpy as np

from ldpfed.samplers.grid import RowSampler, rounding_weights, tpdf_round
from ldpfed.samplers.words import compiled, draw_words, handles, kernel, locked, next_word

Q_BITS = 8  # raw word bits 0-7 count Q through a 256-entry table
_TRAILING_ONES = np.array([(~i & (i + 1)).bit_length() - 1 for i in range(256)], dtype=np.int64)


@kernel
def trailing_ones(word) -> int:
    """Number of trailing one-bits of a uint64 word (64 when all are ones)."""
    count = 0
    while count < 64 and (word >> np.uint64(count)) & np.uint64(1):
        count += 1
    return count


@kernel
def geometric_half(raw, q, count, handle, full) -> None:
    """q[j] ~ Geometric(1/2) for the raw words raw[j], j < count: the trailing ones of bits 0-7,
    counted on through fresh words (one per unfinished j, in index order, pass after pass) when
    all 8 are ones (probability 1/256). Exact: each bit is fair. `full`: int64 scratch."""
    unfinished = 0
    for j in range(count):
        q[j] = _TRAILING_ONES[raw[j] & np.uint64(255)]
        if q[j] == Q_BITS:
            full[unfinished] = j
            unfinished += 1
    while unfinished:
        still = 0
        for b in range(unfinished):
            j = full[b]
            more = trailing_ones(next_word(handle))
            q[j] += more
            if more == 64:
                full[still] = j
                still += 1
        unfinished = still


@kernel
def round_block(inputs, out, first, count, handle, scale, words) -> None:
    """out[first:first + count] = K, the inputs t J rounded to the grid (grid.round_to_grid,
    shift 0), from `count` fresh words (`words`: uint64 scratch)."""
    draw_words(handle, words, count)
    for i in range(count):
        out[first + i] = tpdf_round(words[i], inputs[first + i] * scale, 0.5)


@kernel
def add_noise(out, first, count, noise, scale) -> None:
    """Report (K + N) * (1/J), in the numpy sampler's order of operations."""
    for i in range(count):
        out[first + i] = (out[first + i] + noise[i]) * (1.0 / scale)


class GridNoiseSampler(RowSampler):
    """Report (K + N) / J and its exact statistics, from the noise's law (module docstring).

    A subclass compiles `_sample_rows_kernel(t, out, rows, block)` (per row and block: the dither
    words of the block, then its noise words, report (K + N) * (1/J)) and
    `_noise_kernel(out, handle)` (noise alone), in the order the numpy samplers drew the words.
    """

    def noise(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """`size` draws of N (floats holding integers)."""
        compiled()
        out = np.empty(int(size))
        with locked([rng]):
            self._noise_kernel(out, handles([rng])[0])
        return out

    @property
    def output_bound(self) -> float:
        return math.inf

    @property
    def bias_coefficients(self):
        return (0.0, 0.0)

    @property
    def variance_coefficients(self):
        return ((0.25 + self.noise_variance) / self.grid_steps**2, 0.0, 0.0)

    def log_mass(self, y, t) -> np.ndarray:
        """log P(report = y | t) = log sum_d w_d(x) P(N = y J - floor(x) - d); -inf off the grid."""
        y, t = np.broadcast_arrays(np.asarray(y, dtype=float), np.asarray(t, dtype=float))
        j = self.grid_steps
        code = np.rint(y * j)
        valid = (code / j == y) & (np.abs(code) < 2.0**52)
        code = np.where(valid, code, 0.0)
        low, weights = rounding_weights(t * j)
        logs = [self.noise_log_mass(code - low - d) for d in (-1, 0, 1, 2)]
        top = np.maximum.reduce(logs)  # log-sum-exp: masses far in the tail underflow as floats
        mass = sum(w * np.exp(log - top) for w, log in zip(weights, logs))
        return np.where(valid, top + np.log(mass), -np.inf)

"""What the safe samplers of the additive mechanisms (Laplace, Gaussian) share: report (K + N) / J,
K the input rounded to the grid K / J (`grid.round_to_grid`: E[K] = x = t J, Var(K) = 1/4) and N
an integer noise with an exact, symmetric law (mechanisms.md, Floating-point safety).

A sampler provides `grid_steps` (J), `noise(size, rng)`, `noise_log_mass(n)` and `noise_variance`
(E[N^2]); the statistics that follow from them alone live here: unbiased, V = (1/4 + E[N^2]) / J^2
(K and N independent), and log P(report = y | t) as a mixture over the rounding of t. Both noises
draw block counts Q ~ Geometric(1/2) (P(Q = q) = 2^-(q+1)) exactly, as trailing one-bits of raw
random words (`geometric_half`).
"""

from __future__ import annotations

import math

import numpy as np

from ldpfed.mechanisms.grid import round_to_grid, rounding_weights

Q_BITS = 8  # raw word bits 0-7 count Q through a 256-entry table
_TRAILING_ONES = np.array([(~i & (i + 1)).bit_length() - 1 for i in range(256)], dtype=np.int64)


def trailing_ones(words: np.ndarray, cap: int) -> np.ndarray:
    """Number of trailing one-bits of uint64 words, at most `cap` (int64)."""
    lowest_zero = ~words & (words + np.uint64(1))  # the lowest zero bit alone (0 if all ones)
    count = np.frexp(lowest_zero.astype(np.float64))[1].astype(np.int64) - 1
    return np.where(lowest_zero == 0, cap, np.minimum(count, cap))


def geometric_half(raw: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Q ~ Geometric(1/2) per raw uint64 word (int64): the trailing ones of its bits 0-7, counted
    on through fresh words when all 8 are ones (probability 1/256). Exact: each bit is fair."""
    q = _TRAILING_ONES[(raw & np.uint64(255)).view(np.int64)]
    full = np.flatnonzero(q == Q_BITS)
    while full.size:
        more = trailing_ones(rng.bit_generator.random_raw(full.size), 64)
        q[full] += more
        full = full[more == 64]
    return q


class GridNoiseSampler:
    """Report (K + N) / J and its exact statistics, from the noise's law (module docstring)."""

    def sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k = round_to_grid(t * float(self.grid_steps), rng)
        k += self.noise(t.size, rng)
        k *= 1.0 / self.grid_steps
        return k

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

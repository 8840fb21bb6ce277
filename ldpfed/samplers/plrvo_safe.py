"""The floating-point-safe PLRV-O sampler and the accountant term of what it samples (spec:
gradient-noise.md, PLRV-O; mechanisms.md, Floating-point safety; safe_grid.py for the grid).

What is sampled, per coordinate:
- an atom j uniform on {0, ..., M-1} (M = 2^12, exact random bits) gives the inverse scale
  u_j = F^-1(j / M), the lower edge of the j-th equiprobable bin of Gamma(k, theta) (nudged down
  by 1e-9 relative for the float quantile), and u_0 = u_1;
- the grid step g_j = gamma0 / u_j and integer noise N from the exact discrete Laplace table of
  `ldpfed.samplers.discrete_laplace` (ideal law p(n) ~ 2^(-|n|/L), rate gamma0 = ln2 / L per
  step, i.e. u_j per unit length; the table's integer weights are within a factor e^tau of it);
- the release g_j (K + N), K = floor(x / g_j + U) (two-point rounding): a fixed output set.

Accountant (a sound upper bound, per moment order eta >= 2; G = 1 at eta = 0, 1). Given the atom,
(i) the coupled roundings of x and x' differ by m < |Delta| / g + 1 (+ float slack) steps, so the
rate-shift is t m <= u |Delta| + gamma' with gamma' = gamma0 (1 + 2^-11); (ii) the exact discrete
Laplace with rate t at integer shift m has E_P0[(P_m/P_0)^eta] = (A + B)/2 + (A - B)/2 tanh(t/2)
coth((2 eta - 1) t/2), A = e^{(eta-1) t m}, B = e^{-eta t m}, and tanh(x) coth(kx) <= 1/k + k x^2/3,
so it is at most c_A A + c_B B with c_A = eta/(2eta-1) + (2eta-1) t^2/24, c_B = 1 - c_A: the
continuous Laplace's moment plus O(t^2); (iii) the table's weights add a factor e^{(2 eta - 1) tau};
(iv) F(u) = c_A e^{(eta-1) gamma'} e^{u (eta-1) X} + c_B e^{-eta gamma'} e^{-u eta X} increases in u,
and the atoms are dominated by Gamma(k, theta) except bin 0, so E_atoms F <= E_Gamma F +
(F(u_1) - F(0)) / M, with E_Gamma F in closed form by the Gamma MGF. Hence
    G_safe(X, eta) = e^{(2eta-1) tau} [c_A e^{(eta-1) gamma'} (1 - theta (eta-1) X)^-k
                     + c_B e^{-eta gamma'} (1 + theta eta X)^-k + (F(u_1) - F(0)) / M],
used by the joint (and paper) accountant in place of G. For eta >= 2 and X in [0, C], c_A, c_B >= 0
(c_B = (eta-1)/(2eta-1) - (2eta-1) t^2/24 >= 0 for eta < 10^7 at t <= ln2 / 2^12) and G_safe is a
constant plus positive multiples of (1 - theta(eta-1)X)^-k, (1 + theta eta X)^-k, e^{u_1(eta-1)X} and
e^{-u_1 eta X}: convex in X, and nondecreasing (its derivative is at least e^{(2eta-1)tau} (k theta +
u_1/M) (c_A (eta-1) - c_B eta) = e^{(2eta-1)tau} (k theta + u_1/M) (2eta-1)^2 t^2/24 >= 0), as the joint
accountant's blocks of coordinates need (plrvo.py). Moments, mixtures over the roundings and
over the atoms: the subsampled moment is jointly convex in (P0, P1), so each mixture costs at most
its worst component. The grid's own cost is gamma' per coordinate in rate units: gamma0 is chosen
~ 2^-11 / sqrt(n) so that it stays ~1e-3 of the clip's contribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import gammaincinv

from ldpfed.samplers.discrete_laplace import DiscreteLaplaceSampler
from ldpfed.samplers.safe_grid import GAUSSIAN_INPUT_BITS, grid_inputs, rounding_slack

ATOM_BITS = 12
ATOMS = 2**ATOM_BITS
QUANTILE_NUDGE = 1.0 - 1e-9  # the float Gamma quantile, nudged below the true one
INPUT_BITS = GAUSSIAN_INPUT_BITS  # |x / g| < 2^40 (sums of a batch's clipped gradients included)
_MIN_TABLE_BITS, _MAX_TABLE_BITS = 12, 19  # L = 2^12 .. 2^19 (the largest table builds in ~4 s, once)


@dataclass(frozen=True)
class SafeLaw:
    """The integer-noise side of the safe PLRV-O sampler for n coordinates (the scale atoms depend
    on (k, theta) and are computed where they are used)."""

    table_bits: int  # L = 2^table_bits

    @classmethod
    def for_params(cls, params: int) -> SafeLaw:
        bits = math.ceil(math.log2(2**11 * math.sqrt(params)))
        return cls(max(_MIN_TABLE_BITS, min(_MAX_TABLE_BITS, bits)))

    @property
    def table(self) -> DiscreteLaplaceSampler:
        return _table(self.table_bits)

    @property
    def step_ratio(self) -> float:
        """gamma0 = ln2 / L: the ideal law's rate per grid step."""
        return math.log(2.0) / self.table._table[1]

    @property
    def shift_ratio(self) -> float:
        """gamma' = gamma0 (1 + 2 slack): the rate-shift of the rounding's extra step."""
        return self.step_ratio * (1.0 + 2.0 * rounding_slack(INPUT_BITS))

    @property
    def table_error(self) -> float:
        """tau: the table's masses of N are within e^{+-tau} of the ideal discrete Laplace: twice the largest
        |log(table weight / ideal weight)| (normalized), once for the weights and once for the
        normalizer 2 - P(G = 0), plus 1e-12 of float slack."""
        return _table_error(self.table_bits)


@lru_cache(maxsize=4)
def _table(bits: int) -> DiscreteLaplaceSampler:
    """The discrete Laplace table with L ~ 2^bits (budget ln2 (2J + 2) / L at J = 128)."""
    return DiscreteLaplaceSampler(math.log(2.0) * 258 / 2**bits)


@lru_cache(maxsize=4)
def _table_error(bits: int) -> float:
    table = _table(bits)
    weights, length = table._table
    w = np.asarray(weights, dtype=float)
    ideal = 2.0 ** (-np.arange(length) / length)
    logs = np.log(w / w.sum()) - np.log(ideal / ideal.sum())
    return 2.0 * float(np.max(np.abs(logs))) + 1e-12


def scale_atoms(k: float, theta: float) -> np.ndarray:
    """u_j, j = 0..M-1: lower bin edges of Gamma(k, theta), nudged down; u_0 = u_1."""
    edges = gammaincinv(k, np.arange(1, ATOMS) / ATOMS) * theta * QUANTILE_NUDGE
    return np.concatenate([edges[:1], edges])


@lru_cache(maxsize=256)
def first_atom(k: float, theta: float) -> float:
    """u_0 = u_1 = F^-1(1/M), nudged down."""
    return float(gammaincinv(k, 1.0 / ATOMS) * theta * QUANTILE_NUDGE)


def safe_g_minus_one(x: np.ndarray, eta: np.ndarray, k: float, theta: float, law: SafeLaw) -> np.ndarray:
    """G_safe(x, eta) - 1 (module docstring) for eta (column) x x (row); 0 at eta = 0, 1."""
    eta = np.asarray(eta, dtype=float)[:, None]
    gamma, tau, u1 = law.shift_ratio, law.table_error, first_atom(k, theta)
    step = law.step_ratio
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        c_a = eta / (2.0 * eta - 1.0) + (2.0 * eta - 1.0) * step**2 / 24.0
        c_b = 1.0 - c_a
        up = (eta - 1.0) * gamma - k * np.log1p(-theta * (eta - 1.0) * x)
        down = -eta * gamma - k * np.log1p(theta * eta * x)
        core = c_a * np.expm1(up) + c_b * np.expm1(down)
        bin0 = (
            c_a * np.exp((eta - 1.0) * gamma) * np.expm1(u1 * (eta - 1.0) * x)
            + c_b * np.exp(-eta * gamma) * np.expm1(-u1 * eta * x)
        ) / ATOMS
        inner = core + bin0
        result = np.expm1((2.0 * eta - 1.0) * tau) * (1.0 + inner) + inner
    return np.where(eta >= 2.0, result, 0.0)


def sample_safe(count: int, dims: int, k: float, theta: float, law: SafeLaw, rng: np.random.Generator):
    """(steps g, integer noise N), both shape (count, dims): the atom's grid and the table's noise."""
    atoms = scale_atoms(k, theta)
    steps = law.step_ratio / atoms[rng.integers(0, ATOMS, size=(count, dims))]
    noise = law.table._signed_noise(count * dims, rng).reshape(count, dims)
    return steps, noise


def release_safe(rows: np.ndarray, k: float, theta: float, law: SafeLaw, rng: np.random.Generator) -> np.ndarray:
    """g (K + N) with K the two-point rounding of rows / g (module docstring)."""
    steps, noise = sample_safe(rows.shape[0], rows.shape[1], k, theta, law, rng)
    grid = grid_inputs(rows, steps, rng, INPUT_BITS)
    grid += noise
    grid *= steps
    return grid


def safe_variance(k: float, theta: float, law: SafeLaw, rounding: float = 0.25) -> float:
    """E over the atoms of g_j^2 (E N^2 + rounding): exact for a given rounding variance in steps^2
    (1/4 is the worst input)."""
    steps = law.step_ratio / scale_atoms(k, theta)
    return float(np.mean(steps**2) * (law.table._noise_second_moment + rounding))

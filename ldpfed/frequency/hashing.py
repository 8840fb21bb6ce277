"""Local hashing: optimized (OLH, g = round(e^eps + 1)) and binary (BLH, g = 2) local hashing
(Wang, Blocki, Li and Jha, USENIX Security 2017, Section 4.4).

Hash family (universal, Carter and Wegman): h_{a,b}(x) = ((a x + b) mod P) mod g with the Mersenne
prime P = 2^31 - 1 > k, a uniform in [1, P), b uniform in [0, P). Each user draws her seed (a, b)
from her own noise Generator (the client's secret; `Generator.integers` is exactly uniform), hashes
her category, and reports (a, b, y) with y = h(x) kept with probability p_g = e^eps/(e^eps + g - 1)
or else a uniform other value of [0, g) (generalized randomized response over g values, its
"move" probability rounded up to a multiple of 2^-53 as GRR's is: floating-point safe, ratio
<= e^eps). Reports: an (n, 3) int64 array of rows (a, b, y).

A report supports category c when h_{a,b}(c) = y. For c = x that happens with probability p = p_g.
For c != x, (a x + b, a c + b) mod P is uniform over the P (P - 1) pairs of distinct residues, so
h(c) = h(x) with the exact probability kappa = sum_r m_r (m_r - 1) / (P (P - 1)), m_r the number of
residues of [0, P) equal to r mod g (kappa = 1/g up to ~g/P relative), and
q = kappa p_g + (1 - kappa) (1 - p_g) / (g - 1). Each user's support is an independent Bernoulli,
so the counting estimator and its variance (`CountingOracle`, Wang et al. Theorem 2) are exact;
with kappa = 1/g they are Wang et al.'s Var = (e^eps + g - 1)^2 / (n (e^eps - 1)^2 (g - 1)) at f = 0.

The server's support counting is a compiled loop over users and categories that walks the
arithmetic progression a x + b mod P and its residue mod g with additions only (no division per
pair): O(n k) time, O(k) memory, no (n, k) matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np

from ldpfed.frequency.base import RandomizedResponseOracle, check_categories, check_report_rows
from ldpfed.samplers.words import compiled, kernel
from ldpfed.validation import LDPValueError

PRIME = 2**31 - 1  # the hash family's modulus (a Mersenne prime): k must be below it
_MAX_EXPONENT = 21.0  # g = round(e^eps + 1) is capped at round(e^21 + 1) ~ 1.3e9 < PRIME


def collision_probability(g: int) -> float:
    """kappa = P(h(x) = h(c)) for x != c over the family's seeds, exactly (module docstring)."""
    high, count_high = PRIME // g + 1, PRIME % g
    low, count_low = PRIME // g, g - PRIME % g
    pairs = count_high * high * (high - 1) + count_low * low * (low - 1)
    return float(Fraction(pairs, PRIME * (PRIME - 1)))


def hash_values(a, b, categories, g: int) -> np.ndarray:
    """h_{a,b}(x) = ((a x + b) mod P) mod g, broadcast (a x < 2^62: exact in int64)."""
    return ((np.asarray(a, np.int64) * np.asarray(categories, np.int64) + np.asarray(b, np.int64)) % PRIME) % g


@dataclass(frozen=True)
class LocalHashing(RandomizedResponseOracle):
    """Local hashing with g hash values (module docstring); subclasses fix g."""

    name: ClassVar[str]

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.k >= PRIME:
            raise LDPValueError(f"{self.name} hashes categories below {PRIME}; got k = {self.k}")

    @property
    def g(self) -> int:
        raise NotImplementedError

    @property
    def domain(self) -> int:
        return self.g

    @property
    def q(self) -> float:
        kappa = collision_probability(self.g)
        return kappa * self.p + (1.0 - kappa) * self._move / (self.g - 1)

    def _sample(self, categories, rng):
        n = categories.size
        a = rng.integers(1, PRIME, size=n)
        b = rng.integers(0, PRIME, size=n)
        hashed = hash_values(a, b, categories, self.g)
        return np.stack([a, b, self._respond(hashed, rng)], axis=1)

    def _checked(self, reports) -> np.ndarray:
        reports = check_report_rows(reports, 3, self.name)
        a, b, y = reports.T
        if a.min() < 1 or a.max() >= PRIME or b.min() < 0 or b.max() >= PRIME or y.min() < 0 or y.max() >= self.g:
            raise LDPValueError(f"{self.name} reports are rows (a, b, y): 1 <= a < P, 0 <= b < P, 0 <= y < {self.g}")
        return reports

    def _supports(self, reports):
        a, b, y = self._checked(reports).T
        return (hash_values(a[:, None], b[:, None], np.arange(self.k), self.g) == y[:, None]).astype(float)

    def _supports_first_two(self, reports):
        a, b, y = np.asarray(reports, dtype=np.int64).T
        return hash_values(a[:, None], b[:, None], np.arange(2), self.g) == y[:, None]

    def support_counts(self, reports):
        a, b, y = np.ascontiguousarray(self._checked(reports).T)
        compiled()
        counts = np.zeros(self.k, dtype=np.int64)
        _count_supports(a, b, y, self.g, counts)
        return counts

    def log_probability(self, reports, category):
        category = check_categories([category], self.k, name="category")[0]
        a, b, y = np.asarray(reports, dtype=np.int64).T
        seed = -math.log(PRIME - 1) - math.log(PRIME)  # (a, b) uniform, whatever the category
        hit = hash_values(a, b, category, self.g) == y
        return seed + np.where(hit, math.log(self.p), math.log(self._move / (self.g - 1)))

    report_width = 3

    def describe(self) -> dict:
        return {**super().describe(), "g": self.g, "hash": f"((a x + b) mod {PRIME}) mod g"}


@dataclass(frozen=True)
class OptimizedLocalHashing(LocalHashing):
    """OLH: g = round(e^eps + 1), Wang et al.'s variance-optimal number of hash values."""

    name = "olh"

    @property
    def g(self) -> int:
        return max(2, round(math.exp(min(self.epsilon, _MAX_EXPONENT)) + 1.0))


@dataclass(frozen=True)
class BinaryLocalHashing(LocalHashing):
    """BLH: g = 2, one bit of hash."""

    name = "blh"

    @property
    def g(self) -> int:
        return 2


@kernel
def _count_supports(a, b, y, g, counts):
    """counts[c] += 1 for every user i and category c with ((a_i c + b_i) mod P) mod g = y_i: v = a c + b
    mod P grows by a each step (minus P on a wrap) and its residue mod g by a mod g (minus P mod g on a
    wrap), each kept in range by one comparison."""
    k = counts.size
    p_mod = PRIME % g
    for i in range(a.size):
        step, step_mod, target = a[i], a[i] % g, y[i]
        value = b[i]
        residue = value % g
        for c in range(k):
            if residue == target:
                counts[c] += 1
            value += step
            residue += step_mod
            if residue >= g:
                residue -= g
            if value >= PRIME:
                value -= PRIME
                residue -= p_mod
                if residue < 0:
                    residue += g

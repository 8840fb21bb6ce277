"""Apple's count mean sketches (Apple Differential Privacy Team, "Learning with Privacy at Scale",
2017) for large domains: HCMS, the Hadamard count mean sketch, whose report is one bit whatever k,
and CMS, the count mean sketch, whose report is one row of `columns` bits (`CountMeanSketch`, below).
Both draw their public hash functions from `seed` (a fresh one per collection, public: the hash
index the server learns, never a stream of the clients' noise).

Public part: `hashes` hash functions h_1..h_s into `columns` = m buckets (m a power of 2), drawn from
the public `seed`: h(x) = ((a x^2 + b x + c) mod P) mod m with (a, b, c) uniform in [0, P)^3 and
P = 2^31 - 1 > k, a 3-wise independent family on [0, P). Client (her own Generator): j uniform in
[0, s), l uniform in [0, m), w = H_m[h_j(x), l] (Sylvester Hadamard entry, +-1), and the bit b = w
kept with probability e^eps/(e^eps + 1) (the flip probability rounded up: `base.other_share`).
Report: an (n, 3) int64 array of rows (j, l, b); P(report | x) = (p or 1 - p) / (s m): eps-LDP.

Server: the sketch S[j, l] = sum of the b of the reports with (j, l), one Walsh-Hadamard transform
per row (T = S H_m), and for each category d: Z(d) = c sum_j T[j, h_j(d)] with c = 1/(2p - 1), so
that Z(d) = sum_i Z_i(d), Z_i(d) = c b_i H[l_i, h_{j_i}(d)] and E[Z_i(d) | hashes] = gamma(x_i, d),
the share of the s hash functions under which x_i and d collide. Estimate:
f_hat(d) = (Z(d) / n - kappa) / (1 - kappa), kappa = sum_r m_r^2 / P^2 the exact probability that
two distinct categories collide (m_r residues of [0, P) equal to r mod m; ~1/m). It is unbiased over
the client's noise AND the hash functions (a fresh `seed` per collection), and
Var f_hat(d) = [sum_i (c^2 - E gamma_i^2) + (1/s) (S2 (kappa - kappa^2) + (S1^2 - S2)(tau - kappa^2))]
             / (n^2 (1 - kappa)^2),
with E gamma_i^2 = 1 for x_i = d and kappa/s + kappa^2 (1 - 1/s) otherwise, S1 = n - n_d,
S2 = sum_{x != d} n_x^2 and tau = sum_r m_r^3 / P^3 (three distinct categories collide; the family
is 3-wise independent): the noise term plus the hash-collision term, exactly, conditional on the data.
Server cost: O(n + s m log m + s k), linear in users.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import ClassVar

import numpy as np

from ldpfed.frequency.base import (
    FrequencyOracle,
    check_categories,
    check_frequencies,
    check_report_rows,
    other_share,
    unary_bits,
)
from ldpfed.frequency.hadamard import parity, walsh_hadamard
from ldpfed.validation import LDPValueError, check_positive_int

PRIME = 2**31 - 1


def residue_moments(buckets: int) -> tuple[float, float]:
    """(kappa, tau): sum_r m_r^2 / P^2 and sum_r m_r^3 / P^3, m_r = #{v in [0, P): v mod buckets = r}."""
    high, count_high = PRIME // buckets + 1, PRIME % buckets
    low, count_low = PRIME // buckets, buckets - PRIME % buckets
    square = count_high * high**2 + count_low * low**2
    cube = count_high * high**3 + count_low * low**3
    return float(Fraction(square, PRIME**2)), float(Fraction(cube, PRIME**3))


def collision_terms(frequencies: np.ndarray, n: int, hashes: int, buckets: int) -> tuple[float, np.ndarray]:
    """(E G^2, the hash-collision term per category d) of a sketch with `hashes` public hash functions
    into `buckets`: G is the share of the hash functions under which another user's category collides
    with d (E G = kappa, E G^2 = kappa / s + kappa^2 (1 - 1/s)); the collision term is the variance
    over the hash draw of sum_i G_i = (S2 (kappa - kappa^2) + (S1^2 - S2)(tau - kappa^2)) / s (a 3-wise
    independent family), S1 = n - n_d, S2 = sum_{x != d} n_x^2."""
    kappa, tau = residue_moments(buckets)
    counts = frequencies * n
    others = n - counts  # S1 per category
    others_squared = np.sum(counts**2) - counts**2  # S2 per category
    second = kappa / hashes + kappa**2 * (1.0 - 1.0 / hashes)
    collisions = (others_squared * (kappa - kappa**2) + (others**2 - others_squared) * (tau - kappa**2)) / hashes
    return second, collisions


@dataclass(frozen=True)
class PublicHashSketch(FrequencyOracle):
    """`hashes` public hash functions into `columns` buckets drawn from the public `seed`:
    h(x) = ((a x^2 + b x + c) mod P) mod m (module docstring)."""

    hashes: int = 256
    columns: int = 1024
    seed: int = 0

    power_of_two: ClassVar[bool] = False  # must `columns` be a power of 2 (a Hadamard transform)?

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int(self.hashes, "hashes")
        columns = check_positive_int(self.columns, "columns", minimum=2)
        if self.power_of_two and columns & (columns - 1):
            raise LDPValueError(f"{self.name} columns must be a power of 2, got {columns}")
        check_positive_int(self.seed, "seed", minimum=0)
        if self.k >= PRIME:
            raise LDPValueError(f"{self.name} hashes categories below {PRIME}; got k = {self.k}")

    @cached_property
    def coefficients(self) -> np.ndarray:
        """(hashes, 3) public (a, b, c) of the hash functions, from `seed`."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x4C4D53]))
        return rng.integers(0, PRIME, size=(self.hashes, 3))

    def hash_values(self, rows, categories) -> np.ndarray:
        """h_j(x) for hash rows j and categories x (broadcast); x^2 mod P first keeps a x^2 < 2^62."""
        a, b, c = (self.coefficients[np.asarray(rows), i] for i in range(3))
        x = np.asarray(categories, dtype=np.int64)
        return (((a * ((x * x) % PRIME)) % PRIME + b * x + c) % PRIME) % self.columns

    @cached_property
    def category_buckets(self) -> np.ndarray:
        """(hashes, k) h_j(d) of every hash row and category: the server's lookup, computed once."""
        return self.hash_values(np.arange(self.hashes)[:, None], np.arange(self.k)[None, :])

    def describe(self) -> dict:
        return {**super().describe(), "hashes": self.hashes, "columns": self.columns, "seed": self.seed}


@dataclass(frozen=True)
class HadamardCountMeanSketch(PublicHashSketch):
    """HCMS with `hashes` public hash functions into `columns` buckets (module docstring)."""

    name = "hcms"
    power_of_two = True

    @property
    def _flip(self) -> float:
        return other_share(self.epsilon, 1.0)  # 1/(e^eps + 1), rounded up

    @property
    def scale(self) -> float:
        """c = 1/(2p - 1) = (e^eps + 1)/(e^eps - 1) for the realized p = 1 - flip."""
        return 1.0 / (1.0 - 2.0 * self._flip)

    @property
    def p(self) -> float:
        """P(b agrees with category d's entry H[h_j(d), l]) for a user of category d: 1 - flip."""
        return 1.0 - self._flip

    @property
    def q(self) -> float:
        """The same for a user of another category, over the client's noise and the hash draw:
        (1 + kappa / c) / 2. Each user's agreement bit is Bernoulli(p or q) and her contribution is
        (bit - q) / (p - q) (`contributions`); only the shared hash functions correlate users, which
        `variance` accounts for (the counting formula would not)."""
        kappa, _ = residue_moments(self.columns)
        return 0.5 * (1.0 + kappa / self.scale)

    def _sample(self, categories, rng):
        n = categories.size
        j = rng.integers(0, self.hashes, size=n)
        l = rng.integers(0, self.columns, size=n)  # noqa: E741 - the paper's name
        w = 1 - 2 * parity(self.hash_values(j, categories) & l)
        keep = rng.random(n) >= self._flip
        return np.stack([j, l, np.where(keep, w, -w)], axis=1)

    def _checked(self, reports) -> np.ndarray:
        reports = check_report_rows(reports, 3, self.name)
        j, l, b = reports.T  # noqa: E741
        inside = j.min() >= 0 and j.max() < self.hashes and l.min() >= 0 and l.max() < self.columns
        if not inside or not np.isin(b, (-1, 1)).all():
            raise LDPValueError(f"hcms reports are rows (j, l, b): j < {self.hashes}, l < {self.columns}, b = +-1")
        return reports

    def sketch_sums(self, reports) -> np.ndarray:
        """(k,) Z(d) = sum_i c b_i H[l_i, h_{j_i}(d)]: one bincount, one transform per hash row."""
        j, l, b = self._checked(reports).T  # noqa: E741
        sketch = np.bincount(j * self.columns + l, weights=b, minlength=self.hashes * self.columns)
        transformed = walsh_hadamard(sketch.reshape(self.hashes, self.columns).T).T  # rows: S H_m
        buckets = self.category_buckets
        return self.scale * np.take_along_axis(transformed, buckets, axis=1).sum(axis=0)

    def summed(self, reports) -> np.ndarray:
        kappa, _ = residue_moments(self.columns)
        return (self.sketch_sums(reports) - len(reports) * kappa) / (1.0 - kappa)

    def contributions(self, reports) -> np.ndarray:
        j, l, b = self._checked(reports).T  # noqa: E741
        kappa, _ = residue_moments(self.columns)
        buckets = self.hash_values(j[:, None], np.arange(self.k)[None, :])
        signs = 1 - 2 * parity(buckets & l[:, None])
        return (self.scale * b[:, None] * signs - kappa) / (1.0 - kappa)

    def variance(self, frequencies, n: int) -> np.ndarray:
        f = check_frequencies(frequencies, self.k)
        n = check_positive_int(n, "n")
        kappa, _ = residue_moments(self.columns)
        second, collisions = collision_terms(f, n, self.hashes, self.columns)
        noise = n * self.scale**2 - f * n - (1.0 - f) * n * second  # sum_i (c^2 - E G_i^2), G = 1 for x_i = d
        return (noise + collisions) / (n * (1.0 - kappa)) ** 2

    def log_probability(self, reports, category):
        category = check_categories([category], self.k, name="category")[0]
        j, l, b = np.asarray(reports, dtype=np.int64).T  # noqa: E741
        w = 1 - 2 * parity(self.hash_values(j, category) & l)
        uniform = -math.log(self.hashes) - math.log(self.columns)
        return uniform + np.where(b == w, math.log1p(-self._flip), math.log(self._flip))

    def audit_classes(self, reports) -> np.ndarray:
        """Whether b agrees with category 0's and with category 1's Hadamard entry (2 bits)."""
        j, l, b = np.asarray(reports, dtype=np.int64).T  # noqa: E741
        agree = [b == 1 - 2 * parity(self.hash_values(j, c) & l) for c in (0, 1)]
        return agree[0].astype(np.int64) + 2 * agree[1].astype(np.int64)

    report_width = 3


@dataclass(frozen=True)
class CountMeanSketch(PublicHashSketch):
    """CMS, Apple's count mean sketch: the user draws a hash row j uniform in [0, s) (her own
    Generator), one-hot encodes h_j(x) among the m columns and reports j with the m bits, the bit of
    column h_j(x) kept at 1 w.p. p = e^(eps/2)/(e^(eps/2) + 1), every other bit 1 w.p. q = 1 - p
    (symmetric unary encoding of the hashed value; two values change two bits: eps). The flip
    probability 1/(e^(eps/2) + 1) is rounded up (`base.other_share`): floating-point safe.
    Report: an (n, 1 + m) int16 array, rows (j, b_1..b_m); P(report | x) = prod of the bits' laws / s.

    Server: z_i(d) = (b_i[h_{j_i}(d)] - q)/(p - q) has E[z_i(d) | hashes] = G_i, the share of the s
    hash functions under which x_i and d collide (1 for x_i = d), and f_hat(d) = (mean z(d) - kappa)
    / (1 - kappa) is unbiased over the client's noise and the hash draw (Apple's m/(m-1) (z - 1/m) with
    the exact kappa). Sums: the sketch S[j, l] = sum of the bits of the reports of row j (one bincount
    of the set bits), then sum_j S[j, h_j(d)]: O(n m + s k). Var(z_i | hashes) = c0 + G_i - G_i^2 with
    c0 = p q / (p - q)^2 (the same for either bit law, q = 1 - p), so
    Var f_hat(d) = [n c0 + S1 (kappa - E G^2) + collisions] / (n^2 (1 - kappa)^2) (`collision_terms`)."""

    name = "cms"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hashes > np.iinfo(np.int16).max:
            raise LDPValueError(f"cms reports its hash row as int16: hashes must be at most 32767, got {self.hashes}")

    @property
    def _flip(self) -> float:
        return other_share(self.epsilon / 2, 1.0)  # 1/(e^(eps/2) + 1), rounded up

    @property
    def p(self) -> float:
        """P(the bit of column h_j(d) is 1) for a user of category d: 1 - flip."""
        return 1.0 - self._flip

    @property
    def q(self) -> float:
        """The same for a user of another category, over the client's noise and the hash draw:
        kappa p + (1 - kappa) flip (only the shared hash functions correlate users: `variance`)."""
        kappa, _ = residue_moments(self.columns)
        return kappa * self.p + (1.0 - kappa) * self._flip

    @property
    def report_width(self) -> int:
        return 1 + self.columns

    def _sample(self, categories, rng):
        n = categories.size
        j = rng.integers(0, self.hashes, size=n)
        bits = unary_bits(self.hash_values(j, categories), self.columns, self.p, self._flip, rng)
        return np.concatenate([j[:, None].astype(np.int16), bits.astype(np.int16)], axis=1)

    def _checked(self, reports) -> tuple[np.ndarray, np.ndarray]:
        """(j as int64, the bits in the reports' own integer type): no int64 copy of the n x m bits."""
        given = np.asarray(reports)
        integer = given.dtype.kind in "iub"
        reports = check_report_rows(given, 1 + self.columns, self.name, dtype=given.dtype if integer else np.int64)
        j, bits = reports[:, 0].astype(np.int64), reports[:, 1:]
        if j.min() < 0 or j.max() >= self.hashes or bits.min() < 0 or bits.max() > 1:
            raise LDPValueError(f"cms reports are rows (j, {self.columns} bits): j < {self.hashes}, bits 0/1")
        return j, bits

    def _unbiased(self, z_sums: np.ndarray, n: int) -> np.ndarray:
        """Sum over n users of the contributions, from the sum of their z(d)."""
        kappa, _ = residue_moments(self.columns)
        return (z_sums - n * kappa) / (1.0 - kappa)

    def summed(self, reports) -> np.ndarray:
        j, bits = self._checked(reports)
        rows, columns = np.nonzero(bits)
        sketch = np.bincount(j[rows] * self.columns + columns, minlength=self.hashes * self.columns)
        buckets = self.category_buckets
        hits = np.take_along_axis(sketch.reshape(self.hashes, self.columns), buckets, axis=1).sum(axis=0)
        flip = self._flip
        return self._unbiased((hits - j.size * flip) / (1.0 - 2.0 * flip), j.size)

    def contributions(self, reports) -> np.ndarray:
        j, bits = self._checked(reports)
        buckets = self.hash_values(j[:, None], np.arange(self.k)[None, :])
        flip = self._flip
        z = (np.take_along_axis(bits, buckets, axis=1) - flip) / (1.0 - 2.0 * flip)
        kappa, _ = residue_moments(self.columns)
        return (z - kappa) / (1.0 - kappa)

    def variance(self, frequencies, n: int) -> np.ndarray:
        f = check_frequencies(frequencies, self.k)
        n = check_positive_int(n, "n")
        kappa, _ = residue_moments(self.columns)
        flip = self._flip
        c0 = flip * (1.0 - flip) / (1.0 - 2.0 * flip) ** 2
        second, collisions = collision_terms(f, n, self.hashes, self.columns)
        noise = n * c0 + (1.0 - f) * n * (kappa - second)
        return (noise + collisions) / (n * (1.0 - kappa)) ** 2

    def log_probability(self, reports, category):
        category = check_categories([category], self.k, name="category")[0]
        reports = np.asarray(reports, dtype=np.int64)
        j, bits = reports[:, 0], reports[:, 1:]
        log_keep, log_flip = math.log1p(-self._flip), math.log(self._flip)
        ones = bits.sum(axis=1)
        background = ones * log_flip + (self.columns - ones) * log_keep  # every column as "not h_j(x)"
        hashed = np.take_along_axis(bits, self.hash_values(j, category)[:, None], axis=1)[:, 0]
        correction = np.where(hashed == 1, log_keep - log_flip, log_flip - log_keep)
        return background + correction - math.log(self.hashes)

    def audit_projection(self, reports) -> np.ndarray:
        """(n, 3) int64 rows (j, bit at h_j(0), bit at h_j(1)): all that a report says about categories
        0 and 1 (every other column has the same law under both), so that an audit keeps 3 numbers
        of a report of 1 + m."""
        reports = np.asarray(reports, dtype=np.int64)
        j, bits = reports[:, 0], reports[:, 1:]
        heads = [np.take_along_axis(bits, self.hash_values(j, c)[:, None], axis=1)[:, 0] for c in (0, 1)]
        return np.stack([j, *heads], axis=1)

    def projected_log_ratio(self, projected) -> np.ndarray:
        """log P(report | 0) - log P(report | 1) from a report's `audit_projection`: 0 when h_j(0) =
        h_j(1), else +-ln((1 - flip)/flip) for each of the two bits (`log_probability`'s correction)."""
        j, b0, b1 = np.asarray(projected, dtype=np.int64).T
        step = math.log1p(-self._flip) - math.log(self._flip)
        collide = self.hash_values(j, 0) == self.hash_values(j, 1)
        return np.where(collide, 0.0, (2 * b0 - 1) * step - (2 * b1 - 1) * step)

    def projected_classes(self, projected) -> np.ndarray:
        """Class of a projected report: 4 when h_j(0) = h_j(1) (the two categories give the same law),
        else its bits at h_j(0) and h_j(1), on which alone the log-likelihood ratio depends."""
        j, b0, b1 = np.asarray(projected, dtype=np.int64).T
        return np.where(self.hash_values(j, 0) == self.hash_values(j, 1), 4, b0 + 2 * b1)

    def audit_classes(self, reports) -> np.ndarray:
        """`projected_classes` of the reports."""
        return self.projected_classes(self.audit_projection(reports))

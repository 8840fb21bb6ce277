"""Hadamard response (Acharya, Sun and Zhang, AISTATS 2019, "Hadamard Response: Estimating
Distributions Privately, Efficiently, and with Little Communication"), the basic version with
blocks of size K/2 (their Section 4; pure-LDP's `HadamardResponse` is the same mechanism).

K is the smallest power of 2 above k (K >= k + 1). Category x owns row x + 1 of the Sylvester
Hadamard matrix H_K (row 0, all ones, is skipped) and its set C_x = {y in [0, K): H_K[x + 1, y] = +1}
= {y: popcount((x + 1) & y) even}, of size K/2. The user reports one index y in [0, K): uniform in
C_x with probability p = e^eps/(e^eps + 1), else uniform in its complement (log2 K bits).
P(y | x) = 2 p / K or 2 (1 - p) / K: ratio e^eps. The complement's probability 1/(e^eps + 1) is
rounded up to a multiple of 2^-53 (`base.other_share`), and a uniform y of a given half is a uniform
z in [0, K) with one bit of x + 1 flipped when z's parity is wrong (a bijection): exact.

A report supports category c when y is in C_c: with probability p if c = x and exactly 1/2 = q
otherwise (two distinct non-constant rows agree on K/2 columns and C_c meets each half of C_x in
K/4 points), so the counting estimator and variance (`CountingOracle`) are exact:
Var = (f p (1 - p) + (1 - f)/4) / (n (p - 1/2)^2), (e^eps + 1)^2 / (n (e^eps - 1)^2) at f = 0, as BLH.
Server: the support counts of all k categories are (n + (H_K h)[c + 1]) / 2 for the histogram h of
the reports over [0, K): one bincount over users and one fast Walsh-Hadamard transform, O(n + K log K).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpfed.frequency.base import CountingOracle, check_categories, check_report_rows, other_share
from ldpfed.validation import LDPValueError


def walsh_hadamard(values: np.ndarray) -> np.ndarray:
    """H_K @ values for the Sylvester (natural-order) Hadamard matrix, K = len(values) a power of 2:
    log2 K butterfly passes over the whole array (exact in int64 for integer inputs)."""
    out = np.array(values, copy=True)
    size = out.shape[0]
    half = 1
    while half < size:
        view = out.reshape(size // (2 * half), 2, half, *out.shape[1:])
        top, bottom = view[:, 0].copy(), view[:, 1]
        view[:, 0] += bottom
        view[:, 1] = top - bottom
        half *= 2
    return out


def parity(values: np.ndarray) -> np.ndarray:
    """popcount(values) mod 2, as 0/1 int64."""
    return np.bitwise_count(np.asarray(values, dtype=np.uint64)).astype(np.int64) & 1


@dataclass(frozen=True)
class HadamardResponse(CountingOracle):
    """Hadamard response: one index of [0, K) per user (module docstring)."""

    name = "hadamard"

    @property
    def size(self) -> int:
        """K: the smallest power of 2 >= k + 1."""
        return 1 << self.k.bit_length()

    @property
    def _outside(self) -> float:
        return other_share(self.epsilon, 1.0)  # 1/(e^eps + 1), rounded up

    @property
    def p(self) -> float:
        return 1.0 - self._outside

    q = 0.5
    report_width = 1

    def _sample(self, categories, rng):
        n = categories.size
        row = categories + 1
        inside = rng.random(n) >= self._outside  # P = p exactly
        z = rng.integers(0, self.size, size=n)
        wrong = parity(row & z) != np.where(inside, 0, 1)
        flip = row & -row  # the lowest set bit of row: flipping it in z flips the parity
        return np.where(wrong, z ^ flip, z)

    def _checked(self, reports) -> np.ndarray:
        reports = check_report_rows(reports, None, self.name)
        if reports.min() < 0 or reports.max() >= self.size:
            raise LDPValueError(f"{self.name} reports are indices in [0, {self.size})")
        return reports

    def _supports(self, reports):
        y = self._checked(reports)
        return (parity((np.arange(self.k) + 1)[None, :] & y[:, None]) == 0).astype(float)

    def _supports_first_two(self, reports):
        y = np.asarray(reports, dtype=np.int64)
        return parity(np.array([1, 2])[None, :] & y[:, None]) == 0

    def support_counts(self, reports):
        y = self._checked(reports)
        transformed = walsh_hadamard(np.bincount(y, minlength=self.size).astype(np.int64))
        return (y.size + transformed[1 : self.k + 1]) // 2

    def log_probability(self, reports, category):
        category = check_categories([category], self.k, name="category")[0]
        y = np.asarray(reports, dtype=np.int64)
        inside = parity((category + 1) & y) == 0
        return np.where(inside, math.log(2.0 * self.p / self.size), math.log(2.0 * self._outside / self.size))

    def describe(self) -> dict:
        return {**super().describe(), "K": self.size}

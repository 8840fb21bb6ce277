"""Subset selection, the k-subset mechanism (Wang et al. 2016, "Mutual information optimally local
private discrete distribution estimation"; Ye and Barg, IEEE Trans. Inf. Theory 2018).

The user reports a set S of omega categories, omega = max(1, round(k / (e^eps + 1))) (Ye and Barg's
optimal size, capped at k - 1): S contains her category x with probability
p = omega e^eps / (omega e^eps + k - omega), and the rest of S is a uniform subset of the other
k - 1 categories (omega - 1 of them, or omega when x is left out). P(S | x) = p / C(k-1, omega-1)
when x is in S, (1 - p) / C(k-1, omega) otherwise: ratio e^eps. The probability of leaving x out is
rounded up to a multiple of 2^-53 (`base.other_share`), and the uniform subset is Floyd's algorithm
on `Generator.integers` (exactly uniform): floating-point safe.

Reports: an (n, omega) int64 array, each row S sorted (the order carries nothing). A report
supports c when c is in S: with probability p if c = x, and q = (p (omega - 1) + (1 - p) omega) / (k - 1)
otherwise, independently across users, so the counting estimator and variance (`CountingOracle`) are
exact. Server: one bincount over the n omega members.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpfed.frequency.base import CountingOracle, check_categories, check_report_rows, other_share
from ldpfed.validation import LDPValueError

_CHUNK_ENTRIES = 1 << 23  # users x categories of the membership table Floyd's algorithm keeps


def uniform_subsets(population: int, sizes: np.ndarray, width: int, rng: np.random.Generator) -> np.ndarray:
    """One uniform subset of [0, population) per row, of size sizes[i] (width or width - 1), as an
    (n, width) array whose last width - sizes[i] entries are -1. Floyd's algorithm, vectorized over
    rows: for j = population - width, ..., population - 1, draw t uniform in [0, j]; take t, or j if t
    is already taken. Rows of size width - 1 skip the first step (Floyd's algorithm for that size)."""
    n = sizes.size
    out = np.full((n, width), -1, dtype=np.int64)
    rows_per_chunk = max(1, _CHUNK_ENTRIES // population)
    for start in range(0, n, rows_per_chunk):
        stop = min(n, start + rows_per_chunk)
        rows = np.arange(stop - start)
        taken = np.zeros((stop - start, population), dtype=bool)
        filled = np.zeros(stop - start, dtype=np.int64)
        active_from = width - sizes[start:stop]  # steps skipped by the short rows
        for step, j in enumerate(range(population - width, population)):
            t = rng.integers(0, j + 1, size=stop - start)
            pick = np.where(taken[rows, t], j, t)
            live = rows[step >= active_from]
            taken[live, pick[live]] = True
            out[start + live, filled[live]] = pick[live]
            filled[live] += 1
    return out


@dataclass(frozen=True)
class SubsetSelection(CountingOracle):
    """k-subset mechanism with the optimal subset size (module docstring)."""

    name = "subset-selection"

    @property
    def omega(self) -> int:
        """Subset size: round(k / (e^eps + 1)), at least 1 and at most k - 1."""
        return int(min(self.k - 1, max(1, round(self.k / (math.exp(min(self.epsilon, 700.0)) + 1.0)))))

    @property
    def report_width(self) -> int:
        return self.omega

    @property
    def _leave_out(self) -> float:
        """(k - omega) / (omega e^eps + k - omega), rounded up."""
        return other_share(self.epsilon, (self.k - self.omega) / self.omega)

    @property
    def p(self) -> float:
        return 1.0 - self._leave_out

    @property
    def q(self) -> float:
        return (self.p * (self.omega - 1) + self._leave_out * self.omega) / (self.k - 1)

    def _sample(self, categories, rng):
        n, width = categories.size, self.omega
        included = rng.random(n) >= self._leave_out  # P = p exactly
        others = uniform_subsets(self.k - 1, np.where(included, width - 1, width), width, rng)
        members = others + (others >= categories[:, None])  # skip x: [0, k-1) -> the k - 1 others
        members[:, -1] = np.where(included, categories, members[:, -1])  # the free slot of included rows
        return np.sort(members, axis=1)

    def _checked(self, reports) -> np.ndarray:
        reports = check_report_rows(reports, self.omega, self.name)
        if reports.min() < 0 or reports.max() >= self.k:
            raise LDPValueError(f"{self.name} reports are rows of {self.omega} categories in [0, {self.k})")
        return reports

    def _supports(self, reports):
        reports = self._checked(reports)
        supports = np.zeros((reports.shape[0], self.k))
        np.put_along_axis(supports, reports, 1.0, axis=1)
        return supports

    def _supports_first_two(self, reports):
        reports = np.asarray(reports, dtype=np.int64)
        return np.stack([(reports == 0).any(axis=1), (reports == 1).any(axis=1)], axis=1)

    def support_counts(self, reports):
        return np.bincount(self._checked(reports).ravel(), minlength=self.k)

    def log_probability(self, reports, category):
        category = check_categories([category], self.k, name="category")[0]
        inside = (np.asarray(reports, dtype=np.int64) == category).any(axis=-1)
        others = self.k - 1
        log_in = math.log(self.p) - math.log(math.comb(others, self.omega - 1))
        log_out = math.log(self._leave_out) - math.log(math.comb(others, self.omega))
        return np.where(inside, log_in, log_out)

    def describe(self) -> dict:
        return {**super().describe(), "omega": self.omega}

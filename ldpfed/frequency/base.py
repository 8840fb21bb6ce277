"""What every frequency oracle shares (mechanisms.md, Frequency estimation): the interface
`FrequencyOracle`, the support-counting family `CountingOracle` with its exact variance (Wang et al.,
USENIX Security 2017, Theorem 2), input checks, and `dyadic_up`, the rounding that keeps every
Bernoulli floating-point safe. The oracles live in their own modules (`oracles`: GRR, OUE, histogram
encoding; `hashing`: OLH, BLH; `hadamard`; `subset`; `thresholding`: SHE, THE; `sketches`: HCMS) and
are registered in `oracles`.

Floating-point safety: every Bernoulli is decided by comparing a 53-bit uniform (k / 2^53) with a
probability that does not depend on the input, rounded to a multiple of 2^-53 in the direction that
keeps the probability ratio <= e^eps (`dyadic_up` on the "report something else" probability);
uniform choices among integers use `Generator.integers` (exact). The oracles' p and q are these
realized values, so estimators and variances are exact for what is sampled.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpfed.validation import LDPValueError, check_epsilon, check_generator, check_positive_int

_RESOLUTION = 2**53  # rng.random() returns k / 2^53


def check_categories(categories, k: int, name: str = "categories") -> np.ndarray:
    """A 1-D array of integer category codes in 0..k-1 (integral floats are accepted)."""
    array = np.asarray(categories)
    if array.ndim != 1 or array.size == 0:
        raise LDPValueError(f"{name} must be a non-empty 1-D array (one category per user), got shape {array.shape}")
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise LDPValueError(f"{name} must be integer codes in 0..{k - 1}, got dtype {array.dtype}")
    if not np.issubdtype(array.dtype, np.integer):
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise LDPValueError(f"{name} must be integer codes in 0..{k - 1}; found non-integers, NaN or inf")
    if array.min() < 0 or array.max() > k - 1:
        raise LDPValueError(f"{name} must lie in 0..{k - 1} (k={k}); found range [{array.min()}, {array.max()}]")
    return array.astype(np.int64)


def check_frequencies(frequencies, k: int) -> np.ndarray:
    f = np.asarray(frequencies, dtype=float)
    if f.shape != (k,) or not np.all(np.isfinite(f)) or f.min() < 0 or f.max() > 1:
        raise LDPValueError(f"frequencies must be {k} numbers in [0, 1], got {frequencies!r}")
    return f


def check_report_rows(reports, columns: int | None, name: str, dtype=np.int64) -> np.ndarray:
    """Reports as a non-empty array with one row per user (and `columns` columns when given)."""
    array = np.asarray(reports)
    shape_ok = array.ndim == 1 if columns is None else (array.ndim == 2 and array.shape[1] == columns)
    if not shape_ok or array.shape[0] == 0:
        wanted = "(n,)" if columns is None else f"(n, {columns})"
        raise LDPValueError(f"{name} reports must be a non-empty {wanted} array, got shape {array.shape}")
    return array.astype(dtype, copy=False)


def check_bit_rows(reports, k: int) -> np.ndarray:
    """Unary-encoded reports as a float (n, k) matrix of 0/1 entries, one row per user."""
    bits = check_report_rows(reports, k, "unary", dtype=float)
    if not np.isin(bits, (0.0, 1.0)).all():
        raise LDPValueError("unary reports must contain only bits 0/1")
    return bits


def unary_bits(categories: np.ndarray, k: int, p: float, q: float, rng: np.random.Generator) -> np.ndarray:
    """One row of k bits per user: the bit of her category is 1 w.p. p, every other bit w.p. q."""
    n = categories.size
    bits = rng.random((n, k)) < q
    bits[np.arange(n), categories] = rng.random(n) < p
    return bits


def dyadic_up(probability: float) -> float:
    """The smallest multiple of 2^-53 >= probability (with a 2^-50 relative margin for the
    rounding of the float that computed it), at least 2^-53: P(rng.random() < result) = result."""
    return max(1, math.ceil(probability * (1.0 + 2.0**-50) * _RESOLUTION)) / _RESOLUTION


def other_share(epsilon: float, others: float) -> float:
    """others / (e^eps + others), the probability of reporting one of `others` outcomes rather than
    the favoured one, overflow-free and rounded up by `dyadic_up` (the ratio stays <= e^eps)."""
    small = others * math.exp(-epsilon)
    return dyadic_up(small / (1.0 + small))


@dataclass(frozen=True)
class FrequencyOracle(ABC):
    """A randomizer of one categorical value among k, with its estimator and exact variance."""

    epsilon: float
    k: int

    name: ClassVar[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_positive_int(self.k, "k", minimum=2))

    def perturb(self, categories, rng: np.random.Generator) -> np.ndarray:
        """One report per user for `categories` (int codes, shape (n,))."""
        check_generator(rng)
        return self._sample(check_categories(categories, self.k), rng)

    @abstractmethod
    def _sample(self, categories: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...

    @abstractmethod
    def contributions(self, reports) -> np.ndarray:
        """(n, k) per-user unbiased estimates of the one-hot vector; `estimate` is their mean.

        Sums of contributions are additive, so chunks of users can be estimated separately.
        """

    def summed(self, reports) -> np.ndarray:
        """(k,) sum over the reports of the per-user contributions (additive over chunks of users)."""
        return self.contributions(reports).sum(axis=0)

    def estimate(self, reports) -> np.ndarray:
        """Unbiased (k,) frequency estimates from the n users' reports."""
        return self.summed(reports) / len(reports)

    @abstractmethod
    def variance(self, frequencies, n: int) -> np.ndarray:
        """Exact (k,) variance of `estimate` for n users whose true frequencies are `frequencies`."""

    @abstractmethod
    def log_probability(self, reports, category: int) -> np.ndarray:
        """log P(report | category) (a density for continuous reports); one value per report."""

    @property
    def report_width(self) -> int:
        """Numbers in one user's report (k for the one-hot encodings), which bounds a chunk's memory."""
        return self.k

    @property
    def guarantee(self) -> str:
        return f"{self.epsilon:g}-LDP per categorical value (probability ratio <= e^eps)"

    def describe(self) -> dict:
        return {"name": self.name, "epsilon": self.epsilon, "k": self.k, "guarantee": self.guarantee}


class CountingOracle(FrequencyOracle):
    """Oracles whose report 'supports' category c with probability p if c is the true value, else q,
    independently across users.

    Estimator and variance (Wang et al. 2017, Theorem 2, conditional on the data):
    f_hat_c = (C_c / n - q) / (p - q),
    Var = (f_c p (1 - p) + (1 - f_c) q (1 - q)) / (n (p - q)^2).
    `support_counts` gives C (k,) without the (n, k) support matrix where the oracle can.
    """

    p: ClassVar[float]
    q: ClassVar[float]

    @abstractmethod
    def _supports(self, reports) -> np.ndarray:
        """(n, k) 0/1: does each report support each category."""

    def support_counts(self, reports) -> np.ndarray:
        """(k,) C_c: how many reports support each category."""
        return self._supports(reports).sum(axis=0)

    def contributions(self, reports) -> np.ndarray:
        return (self._supports(reports) - self.q) / (self.p - self.q)

    def summed(self, reports) -> np.ndarray:
        counts = np.asarray(self.support_counts(reports), dtype=float)
        return (counts - len(reports) * self.q) / (self.p - self.q)

    def variance(self, frequencies, n: int) -> np.ndarray:
        f = check_frequencies(frequencies, self.k)
        n = check_positive_int(n, "n")
        p, q = self.p, self.q
        return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)

    def audit_classes(self, reports) -> np.ndarray:
        """int64 class of each report for an audit on categories 0 and 1: whether it supports
        category 0 (bit 0) and category 1 (bit 1), on which the log-likelihood ratio depends for
        every counting oracle whose report law is a function of those two facts."""
        head = np.asarray(self._supports_first_two(reports), dtype=np.int64)
        return head[:, 0] + 2 * head[:, 1]

    def _supports_first_two(self, reports) -> np.ndarray:
        return self._supports(reports)[:, :2]


def randomized_response(values: np.ndarray, domain: int, move: float, rng: np.random.Generator) -> np.ndarray:
    """Each value kept w.p. 1 - move (exactly, for a multiple of 2^-53), else replaced by a
    uniform one of the other domain - 1 values of 0..domain-1."""
    keep = rng.random(values.shape) >= move
    other = (values + rng.integers(1, domain, size=values.shape)) % domain
    return np.where(keep, values, other)


class RandomizedResponseOracle(CountingOracle):
    """A counting oracle whose report is randomized response over `domain` values: the moving
    probability (domain - 1)/(e^eps + domain - 1) is rounded up to a multiple of 2^-53, p = 1 - it."""

    @property
    def domain(self) -> int:
        raise NotImplementedError

    @property
    def _move(self) -> float:
        return other_share(self.epsilon, self.domain - 1)

    @property
    def p(self) -> float:
        return 1.0 - self._move  # exact: 1 minus a multiple of 2^-53

    def _respond(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return randomized_response(values, self.domain, self._move, rng)


CHUNK_ENTRIES = 1 << 22  # report numbers per chunk of `estimate_in_chunks` (32 MiB of float64)


def estimate_in_chunks(
    oracle: FrequencyOracle, categories, rng: np.random.Generator, chunk_entries: int = CHUNK_ENTRIES
) -> np.ndarray:
    """Perturb and estimate n users' categories chunk by chunk (memory bounded by `chunk_entries`
    numbers of reports, and each oracle's server step bounds its own), adding the chunks' `summed`
    contributions: the law of `oracle.estimate(oracle.perturb(categories, rng))`, at any n and k."""
    categories = check_categories(categories, oracle.k)
    chunk = max(1, chunk_entries // oracle.report_width)
    total = np.zeros(oracle.k)
    for start in range(0, categories.size, chunk):
        total += oracle.summed(oracle.perturb(categories[start : start + chunk], rng))
    return total / categories.size

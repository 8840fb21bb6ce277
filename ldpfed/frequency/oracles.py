"""Frequency estimation over k categories (mechanisms.md, Frequency estimation by histogram encoding).

Three frequency oracles, built by name with `get(name, epsilon, k, **options)`:
- "grr": generalized (k-ary) randomized response; the report is one category.
- "oue": optimized unary encoding (Wang et al., USENIX Security 2017); the report is k bits.
- "histogram": histogram encoding on any scalar randomizer of `ldpfed.mechanisms`
  (`mechanism="laplace"` by default; further options such as `estimator="raw"` go to it).

Each oracle has `perturb(categories, rng) -> reports` (vectorized over users), `estimate(reports)
-> (k,)` frequencies (the mean of the per-user `contributions(reports)`, which add over chunks),
`variance(frequencies, n) -> (k,)` (the exact variance of each estimated
frequency), `log_probability(reports, category)` (to check the guarantee), `epsilon` and
`guarantee`. `epsilon` is the budget of one categorical report; a user who reports m categorical
attributes gives each one eps/m, as in `ldpfed.mechanisms.multidim`.

Floating-point safety (mechanisms.md): every Bernoulli is decided by comparing a 53-bit uniform
(k / 2^53) with a probability that does not depend on the input, rounded to a multiple of 2^-53
in the direction that keeps the ratio <= e^eps: GRR's "report another category" probability and
OUE's q are rounded UP (`dyadic_up`), so the realized p/q ratio is exactly <= e^eps (at eps above
~36 it stops growing: the report keeps 2^-53 of noise rather than none, which the float formula
1/(e^eps + k - 1) = 0 would give, an infinite ratio). p and q are these realized values, so the
estimators and variances are exact for what is sampled.

Variances are conditional on the data, like the scalar mechanisms' V(t): the n users' categories
are fixed and only the randomization is random, so for a population with frequencies f the
estimate of f_c has exactly the variance returned (no multinomial sampling term).

Histogram encoding, as ldpfed reads the spec: the one-hot vector in {0,1}^k is mapped to
{-1,+1}^k (0 -> -1, 1 -> +1) and every entry is perturbed independently with budget eps/2. The
spec writes eps/(2m); here m = 1 categorical value per report. Changing the category changes
exactly two entries, so two entries at eps/2 each give eps in total (for an approximate
mechanism, two entries at (eps/2, delta/2) give (eps, delta) by basic composition).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

import ldpfed.mechanisms as mechanisms
from ldpfed.mechanisms.base import Mechanism
from ldpfed.registry import Registry
from ldpfed.validation import LDPValueError, check_delta, check_epsilon, check_generator, check_positive_int


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


def _check_frequencies(frequencies, k: int) -> np.ndarray:
    f = np.asarray(frequencies, dtype=float)
    if f.shape != (k,) or not np.all(np.isfinite(f)) or f.min() < 0 or f.max() > 1:
        raise LDPValueError(f"frequencies must be {k} numbers in [0, 1], got {frequencies!r}")
    return f


_RESOLUTION = 2**53  # rng.random() returns k / 2^53


def dyadic_up(probability: float) -> float:
    """The smallest multiple of 2^-53 >= probability (with a 2^-50 relative margin for the
    rounding of the float that computed it), at least 2^-53: P(rng.random() < result) = result."""
    return max(1, math.ceil(probability * (1.0 + 2.0**-50) * _RESOLUTION)) / _RESOLUTION


def _check_generator(rng) -> None:
    check_generator(rng)


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
        _check_generator(rng)
        return self._sample(check_categories(categories, self.k), rng)

    @abstractmethod
    def _sample(self, categories: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...

    @abstractmethod
    def contributions(self, reports) -> np.ndarray:
        """(n, k) per-user unbiased estimates of the one-hot vector; `estimate` is their mean.

        Sums of contributions are additive, so chunks of users can be estimated separately.
        """

    def estimate(self, reports) -> np.ndarray:
        """Unbiased (k,) frequency estimates from the n users' reports."""
        return self.contributions(reports).mean(axis=0)

    @abstractmethod
    def variance(self, frequencies, n: int) -> np.ndarray:
        """Exact (k,) variance of `estimate` for n users whose true frequencies are `frequencies`."""

    @abstractmethod
    def log_probability(self, reports, category: int) -> np.ndarray:
        """log P(report | category) (a density for continuous reports); one value per report."""

    @property
    def guarantee(self) -> str:
        return f"{self.epsilon:g}-LDP per categorical value (probability ratio <= e^eps)"

    def describe(self) -> dict:
        return {"name": self.name, "epsilon": self.epsilon, "k": self.k, "guarantee": self.guarantee}


class _CountingOracle(FrequencyOracle):
    """Oracles whose report 'supports' category c with probability p if c is the true value, else q.

    Estimator and variance (Wang et al. 2017, Theorem 2, conditional on the data):
    f_hat_c = (C_c / n - q) / (p - q),
    Var = (f_c p (1 - p) + (1 - f_c) q (1 - q)) / (n (p - q)^2).
    """

    p: ClassVar[float]
    q: ClassVar[float]

    @abstractmethod
    def _supports(self, reports) -> np.ndarray:
        """(n, k) 0/1: does each report support each category."""

    def contributions(self, reports) -> np.ndarray:
        return (self._supports(reports) - self.q) / (self.p - self.q)

    def variance(self, frequencies, n: int) -> np.ndarray:
        f = _check_frequencies(frequencies, self.k)
        n = check_positive_int(n, "n")
        p, q = self.p, self.q
        return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)


@dataclass(frozen=True)
class GeneralizedRR(_CountingOracle):
    """k-ary randomized response: keep the value w.p. p = e^eps/(e^eps + k - 1), else a uniform other.

    The probability of moving, (k - 1)/(e^eps + k - 1), is rounded up to a multiple of 2^-53
    (module docstring); p = 1 - that, q = that / (k - 1).
    """

    name = "grr"

    @property
    def _move(self) -> float:
        # (k-1)/(e^eps + k - 1), written with e^-eps so that eps > 709 does not overflow
        small = (self.k - 1) * math.exp(-self.epsilon)
        return dyadic_up(small / (1.0 + small))

    @property
    def p(self) -> float:
        return 1.0 - self._move  # exact: 1 minus a multiple of 2^-53

    @property
    def q(self) -> float:
        return self._move / (self.k - 1)

    def _sample(self, categories, rng):
        keep = rng.random(categories.shape) >= self._move  # P = 1 - move exactly
        other = (categories + rng.integers(1, self.k, size=categories.shape)) % self.k  # uniform != c
        return np.where(keep, categories, other)

    def _supports(self, reports):
        reports = check_categories(reports, self.k, name="reports")
        return (reports[:, None] == np.arange(self.k)).astype(float)

    def log_probability(self, reports, category):
        reports = np.asarray(reports)
        return np.where(reports == category, math.log(self.p), math.log(self.q))


@dataclass(frozen=True)
class OptimizedUnaryEncoding(_CountingOracle):
    """OUE: one-hot bits; the true bit is 1 w.p. p = 1/2, every other bit w.p. q = 1/(e^eps + 1)."""

    name = "oue"
    p = 0.5

    @property
    def q(self) -> float:
        # 1/(e^eps + 1), overflow-free, rounded up to what a 53-bit uniform resolves
        return dyadic_up(math.exp(-self.epsilon) / (1.0 + math.exp(-self.epsilon)))

    def _sample(self, categories, rng):
        n = categories.size
        bits = rng.random((n, self.k)) < self.q
        bits[np.arange(n), categories] = rng.random(n) < self.p
        return bits

    def _supports(self, reports):
        bits = np.asarray(reports)
        if bits.ndim != 2 or bits.shape[1] != self.k or bits.shape[0] == 0:
            raise LDPValueError(f"reports must be an (n, k={self.k}) bit matrix, got shape {bits.shape}")
        if not np.isin(bits, (0, 1)).all():
            raise LDPValueError("reports must contain only bits 0/1")
        return bits.astype(float)

    def log_probability(self, reports, category):
        bits = np.asarray(reports, dtype=bool)
        truth = np.arange(self.k) == category
        p_one = np.where(truth, self.p, self.q)
        with np.errstate(divide="ignore"):  # q underflows to 0 at eps > ~745: log q = -inf
            return np.sum(np.where(bits, np.log(p_one), np.log1p(-p_one)), axis=-1)


@dataclass(frozen=True)
class HistogramEncoding(FrequencyOracle):
    """One-hot in {-1,+1}^k, each entry perturbed by `entry` (the scalar mechanism at eps/2).

    Entry means: E[t*] = b0 + (1 + b1) t with t = 2 f_c - 1 on average over users, hence
    f_hat_c = ((mean_c - b0) / (1 + b1) + 1) / 2, exact for biased (square-wave raw) mechanisms too.
    Var(f_hat_c) = (f_c V(1) + (1 - f_c) V(-1)) / (4 n (1 + b1)^2).
    """

    entry: Mechanism  # the per-entry randomizer, budget eps/2 (and delta/2); see `get`

    name = "histogram"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.entry, Mechanism):
            raise LDPValueError("histogram encoding needs a scalar mechanism; build it with ldpfed.frequency.get")

    def _sample(self, categories, rng):
        one_hot = np.full((categories.size, self.k), -1.0)
        one_hot[np.arange(categories.size), categories] = 1.0
        return self.entry.perturb(one_hot, rng)

    def contributions(self, reports) -> np.ndarray:
        reports = np.asarray(reports, dtype=float)
        if reports.ndim != 2 or reports.shape[1] != self.k or reports.shape[0] == 0:
            raise LDPValueError(f"reports must be an (n, k={self.k}) array, got shape {reports.shape}")
        if not np.all(np.isfinite(reports)):
            raise LDPValueError("reports contain NaN or inf")
        b0, b1 = self.entry.bias_coefficients
        return ((reports - b0) / (1.0 + b1) + 1.0) / 2.0

    def variance(self, frequencies, n: int) -> np.ndarray:
        f = _check_frequencies(frequencies, self.k)
        n = check_positive_int(n, "n")
        _, b1 = self.entry.bias_coefficients
        v_one, v_minus_one = self.entry.variance(1.0), self.entry.variance(-1.0)
        return (f * v_one + (1 - f) * v_minus_one) / (4 * n * (1.0 + b1) ** 2)

    def log_probability(self, reports, category):
        reports = np.asarray(reports, dtype=float)
        one_hot = np.where(np.arange(self.k) == category, 1.0, -1.0)
        return np.sum(self.entry.log_density(reports, one_hot), axis=-1)

    @property
    def delta(self) -> float | None:
        return None if self.entry.delta is None else 2 * self.entry.delta

    @property
    def guarantee(self) -> str:
        if self.entry.approximate:
            return f"({self.epsilon:g}, {self.delta:g})-LDP per categorical value ({self.entry.name} per entry)"
        return f"{self.epsilon:g}-LDP per categorical value ({self.entry.name} at eps/2 per entry)"

    def describe(self) -> dict:
        return {**super().describe(), "delta": self.delta, "entry": self.entry.describe()}


_REGISTRY: Registry[type[FrequencyOracle]] = Registry(
    "frequency oracle", (GeneralizedRR, OptimizedUnaryEncoding, HistogramEncoding)
)
available = _REGISTRY.available
get_class = _REGISTRY.get_class


def get(name: str, epsilon: float, k: int, **options) -> FrequencyOracle:
    """Build the frequency oracle `name` ("grr", "oue" or "histogram") for k categories.

    "histogram" takes `mechanism` (a name from ldpfed.mechanisms.available(), default "laplace"),
    `delta` (total, for approximate mechanisms) and any option of that mechanism.
    """
    cls = get_class(name)
    if cls is HistogramEncoding:
        epsilon = check_epsilon(epsilon)
        mechanism = options.pop("mechanism", "laplace")
        if not isinstance(mechanism, str):
            raise LDPValueError(f"mechanism must be a name from {mechanisms.available()}, got {mechanism!r}")
        # Validate the total delta before halving it (delta=1.5 must fail, not become 0.75).
        delta = check_delta(
            options.pop("delta", None), approximate=mechanisms.get_class(mechanism).approximate, mechanism=mechanism
        )
        entry = mechanisms.get(mechanism, epsilon / 2, None if delta is None else delta / 2, **options)
        return HistogramEncoding(epsilon, k, entry)
    if options:
        raise LDPValueError(f"{cls.name} takes no options; got {sorted(options)}")
    return cls(epsilon, k)

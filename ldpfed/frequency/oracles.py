"""The frequency oracles and their registry (mechanisms.md, Frequency estimation): GRR and OUE here,
the others in their modules, built by name with `get(name, epsilon, k, **options)`:
- "grr": generalized (k-ary) randomized response; the report is one category.
- "oue": optimized unary encoding (Wang et al., USENIX Security 2017); the report is k bits.
- "sue": symmetric unary encoding (basic one-round RAPPOR); the report is k bits.
- "histogram": histogram encoding on any scalar randomizer of `ldpfed.mechanisms`
  (`mechanism="laplace"` by default; further options such as `estimator="raw"` go to it).
- "olh", "blh": optimized and binary local hashing (`hashing`); the report is a hash seed and a value.
- "hadamard": Hadamard response (Acharya, Sun and Zhang 2019; `hadamard`); the report is one index.
- "subset-selection": the k-subset mechanism (Wang et al. 2016, Ye and Barg 2018; `subset`).
- "she", "the": summation and thresholding with histogram encoding (Wang et al. 2017; `thresholding`).
- "hcms", "cms": Apple's Hadamard count mean sketch and count mean sketch for large domains (`sketches`).

Each oracle has `perturb(categories, rng) -> reports` (vectorized over users), `estimate(reports)
-> (k,)` frequencies (for the counting oracles from the support counts, without an (n, k) matrix;
the per-user `contributions(reports)` add over chunks), `variance(frequencies, n) -> (k,)` (the exact
variance of each estimated frequency), `log_probability(reports, category)` (to check the guarantee),
`epsilon` and `guarantee`. Usual aliases (`ALIASES`: de, krr, hr, ss, l-sue, ...) name the same
classes. `epsilon` is the budget of one categorical report; a user who reports m
categorical attributes gives each one eps/m, as in `ldpfed.mechanisms.multidim`.

Floating-point safety (`base`): GRR's "report another category" probability and OUE's q are
rounded UP (`dyadic_up`), so the realized p/q ratio is exactly <= e^eps (at eps above ~36 it stops
growing: the report keeps 2^-53 of noise rather than none, which the float formula
1/(e^eps + k - 1) = 0 would give, an infinite ratio).

Variances are conditional on the data, like the scalar mechanisms' V(t): the n users' categories
are fixed and only the randomization is random, so for a population with frequencies f the
estimate of f_c has exactly the variance returned (no multinomial sampling term).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

import ldpfed.mechanisms as mechanisms
from ldpfed.frequency.base import (
    CountingOracle,
    FrequencyOracle,
    RandomizedResponseOracle,
    check_bit_rows,
    check_categories,
    check_frequencies,
    dyadic_up,
    other_share,
    unary_bits,
)
from ldpfed.frequency.hadamard import HadamardResponse
from ldpfed.frequency.hashing import BinaryLocalHashing, OptimizedLocalHashing
from ldpfed.frequency.histogram import HistogramEncoding
from ldpfed.frequency.longitudinal import LONGITUDINAL_ORACLES
from ldpfed.frequency.sketches import CountMeanSketch, HadamardCountMeanSketch
from ldpfed.frequency.subset import SubsetSelection
from ldpfed.frequency.thresholding import SummationHistogramEncoding, ThresholdingHistogramEncoding
from ldpfed.registry import Registry
from ldpfed.validation import LDPValueError, canonical_name, check_delta, check_epsilon

# Re-exported: the modules that import them from here.
__all__ = [
    "CountingOracle",
    "FrequencyOracle",
    "HistogramEncoding",
    "check_categories",
    "check_frequencies",
    "dyadic_up",
]


@dataclass(frozen=True)
class GeneralizedRR(RandomizedResponseOracle):
    """k-ary randomized response: keep the value w.p. p = e^eps/(e^eps + k - 1), else a uniform other.

    The probability of moving, (k - 1)/(e^eps + k - 1), is rounded up to a multiple of 2^-53
    (module docstring); p = 1 - that, q = that / (k - 1).
    """

    name = "grr"

    @property
    def domain(self) -> int:
        return self.k

    @property
    def q(self) -> float:
        return self._move / (self.k - 1)

    def _sample(self, categories, rng):
        return self._respond(categories, rng)

    def _supports(self, reports):
        reports = check_categories(reports, self.k, name="reports")
        return (reports[:, None] == np.arange(self.k)).astype(float)

    def support_counts(self, reports):
        return np.bincount(check_categories(reports, self.k, name="reports"), minlength=self.k)

    report_width = 1

    def log_probability(self, reports, category):
        reports = np.asarray(reports)
        return np.where(reports == category, math.log(self.p), math.log(self.q))


@dataclass(frozen=True)
class OptimizedUnaryEncoding(CountingOracle):
    """OUE: one-hot bits; the true bit is 1 w.p. p = 1/2, every other bit w.p. q = 1/(e^eps + 1)."""

    name = "oue"
    p = 0.5

    @property
    def q(self) -> float:
        # 1/(e^eps + 1), overflow-free, rounded up to what a 53-bit uniform resolves
        return other_share(self.epsilon, 1.0)

    def _sample(self, categories, rng):
        return unary_bits(categories, self.k, self.p, self.q, rng)

    def _supports(self, reports):
        return check_bit_rows(reports, self.k)

    def log_probability(self, reports, category):
        bits = np.asarray(reports, dtype=bool)
        truth = np.arange(self.k) == category
        p_one = np.where(truth, self.p, self.q)
        with np.errstate(divide="ignore"):  # q underflows to 0 at eps > ~745: log q = -inf
            return np.sum(np.where(bits, np.log(p_one), np.log1p(-p_one)), axis=-1)


@dataclass(frozen=True)
class SymmetricUnaryEncoding(CountingOracle):
    """SUE (basic one-round RAPPOR): one-hot bits, the true bit 1 w.p. p = e^(eps/2)/(e^(eps/2) + 1),
    every other bit w.p. q = 1 - p (two bits differ between two values: eps/2 each). q is rounded up
    to what a 53-bit uniform resolves (`other_share`), p = 1 - q exactly."""

    name = "sue"

    @property
    def q(self) -> float:
        return other_share(self.epsilon / 2, 1.0)

    @property
    def p(self) -> float:
        return 1.0 - self.q

    def _sample(self, categories, rng):
        return unary_bits(categories, self.k, self.p, self.q, rng)

    def _supports(self, reports):
        return check_bit_rows(reports, self.k)

    def _supports_first_two(self, reports):
        return np.asarray(reports, dtype=bool)[:, :2]

    def log_probability(self, reports, category):
        bits = np.asarray(reports, dtype=bool)
        p_one = np.where(np.arange(self.k) == category, self.p, self.q)
        return np.sum(np.where(bits, np.log(p_one), np.log1p(-p_one)), axis=-1)


_REGISTRY: Registry[type[FrequencyOracle]] = Registry(
    "frequency oracle",
    (
        GeneralizedRR,
        OptimizedUnaryEncoding,
        SymmetricUnaryEncoding,
        HistogramEncoding,
        OptimizedLocalHashing,
        BinaryLocalHashing,
        HadamardResponse,
        SubsetSelection,
        SummationHistogramEncoding,
        ThresholdingHistogramEncoding,
        HadamardCountMeanSketch,
        CountMeanSketch,
        *LONGITUDINAL_ORACLES,  # rappor, l-grr, l-osue, dbitflippm: epsilon is eps_inf
    ),
)
available = _REGISTRY.available
# Names the literature and the other libraries use for the same oracles (pure-LDP's DE, Hadamard
# response's HR, subset selection's SS, Arcolezi et al.'s L-SUE for basic RAPPOR).
ALIASES = {
    "de": "grr",
    "krr": "grr",
    "k-rr": "grr",
    "direct-encoding": "grr",
    "hr": "hadamard",
    "hadamard-response": "hadamard",
    "ss": "subset-selection",
    "k-subset": "subset-selection",
    "l-sue": "rappor",
    "basic-rappor": "rappor",
}


def resolve(name: str) -> str:
    """The registered name of `name` or of its alias (`ALIASES`), canonical; unknown names unchanged."""
    key = canonical_name(name)
    return ALIASES.get(key, key)


def get_class(name: str) -> type[FrequencyOracle]:
    """The oracle class registered under `name` or one of its aliases."""
    return _REGISTRY.get_class(resolve(name))


def get(name: str, epsilon: float, k: int, **options) -> FrequencyOracle:
    """Build the frequency oracle `name` (one of `available()`) for k categories.

    "histogram" takes `mechanism` (a name from ldpfed.mechanisms.available(), default "laplace"),
    `delta` (total, for approximate mechanisms) and any option of that mechanism; the other oracles
    take their own fields as options (e.g. hcms: hashes, columns), or none.
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
    allowed = sorted({f.name for f in fields(cls) if f.init} - {"epsilon", "k", "entry"})
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        takes = f"takes options {', '.join(allowed)}" if allowed else "takes no options"
        raise LDPValueError(f"{cls.name} {takes}; got {unknown}")
    build = getattr(cls, "build", None)
    return build(epsilon, k, **options) if build is not None else cls(epsilon, k, **options)

"""Longitudinal frequency oracles: the same value reported over many rounds, through memoization.

A user who reports the same category every round through a fresh eps-LDP randomizer spends eps per
round: after T rounds an observer averages the T reports and the guarantee is T eps. Memoization
(Erlingsson, Pihur & Korolova, "RAPPOR", CCS 2014) randomizes twice:
- the permanent report is computed once per user and value from the user's own secret stream and
  kept by the client; it is eps_inf-LDP, and an observer of any number of rounds learns at most it,
  so eps_inf is charged once, however many rounds follow;
- every round, an instantaneous report randomizes the permanent one again; an observer of one round
  sees the two randomizations chained, which is eps_1-LDP (eps_1 <= eps_inf). Against an observer
  of t rounds the guarantee is min(eps_inf, t eps_1).

Oracles, built by name with `ldpfed.frequency.get(name, epsilon, k, ...)` where `epsilon` is eps_inf:
- "rappor": basic one-hot RAPPOR (no Bloom filter: one bit per category, h = 1, k known):
  symmetric unary encoding in both rounds (L-SUE of Arcolezi et al.); the permanent bit is kept
  w.p. p1 = e^(eps_inf/2) / (e^(eps_inf/2) + 1) (RAPPOR's f = 2 q1), the instantaneous bit
  reports the permanent one w.p. p2 = 1 - q2.
- "l-osue": optimized unary encoding (p1 = 1/2, q1 = 1/(e^eps_inf + 1)) then symmetric
  unary encoding (Arcolezi et al., "Improving the Utility of Locally Differentially Private
  Protocols for Longitudinal and Multidimensional Frequency Estimates", 2022).
- "l-grr": k-ary randomized response in both rounds (same paper).
- "dbitflippm": Ding, Kulkarni & Yekhanin, "Collecting telemetry data privately" (NeurIPS 2017),
  with one bucket per category (b = k): each user samples `bits` = d of the k buckets once and
  memoizes one symmetric-randomized bit per sampled bucket; every round repeats the permanent
  report, so eps_1 = eps_inf = eps. Two values differ in min(d, 2) sampled bits, so each bit gets
  eps / min(d, 2): the paper's p = e^(eps/2)/(e^(eps/2) + 1) for d >= 2, and e^eps/(e^eps + 1) for
  d = 1, where the paper's eps/2 would leave the report (eps/2)-LDP (tight, as the audit checks).

eps_1 of the chained oracles is the single-round likelihood ratio: ln(P/Q) for L-GRR and
ln(P (1 - Q) / (Q (1 - P))) for the unary encodings (a change of value flips two bits), with the
one-round probabilities P = p1 p2 + (1 - p1) q2 (the report supports the true category) and
Q = q1 p2 + (1 - q1) q2 (it supports another). The second round's q2 is the root of
eps_1(q2) = the requested eps_1 (eps_1 decreases in q2; bisection to float precision, taking the
side of the root with more noise).

Floating-point safety (mechanisms.md; `ldpfed.frequency.base`): every Bernoulli compares a
53-bit uniform with a probability that does not depend on the input, rounded to a multiple of
2^-53 towards more noise (the "lie" probabilities q1, q2, and GRR's moving probabilities, rounded
up), so the realized eps_inf and eps_1 (`realized_epsilons`) are at most the requested ones. The
estimators and variances use these realized probabilities.

Variances are conditional on the data, like the other oracles': one round's estimate has the
variance of the chained randomizer (P, Q), `variance`; the average of T rounds of the same users
keeps the permanent randomization's share, `variance_of_average`.

A value that changes needs a new permanent report (`memoize` again), charged eps_inf again: the
memo here is kept per user for one value, not per (user, value) as RAPPOR's clients do.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ldpfed.frequency.base import (
    CountingOracle,
    FrequencyOracle,
    check_bit_rows,
    check_categories,
    check_frequencies,
    dyadic_up,
    other_share,
    randomized_response,
    unary_bits,
)
from ldpfed.validation import LDPValueError, check_epsilon, check_generator, check_positive_int

_BISECTIONS = 200  # halvings of [0, q2_max]: far below the 2^-53 grid the root is rounded to


def _decreasing_root(function, low: float, high: float) -> float:
    """The root of a decreasing `function` with function(low) > 0 >= function(high), by bisection
    (a few hundred float evaluations, once per oracle; no solver import on the clients' path)."""
    for _ in range(_BISECTIONS):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if function(middle) > 0:
            low = middle
        else:
            high = middle
    return high


@dataclass(frozen=True)
class Memo:
    """The permanent reports of n users for their current categories; the client keeps it."""

    categories: np.ndarray  # (n,) the memoized values
    permanent: np.ndarray  # (n,) categories (L-GRR) or (n, k) bits (the unary encodings)


@dataclass(frozen=True)
class LongitudinalCharge:
    """What a client's memoized collection costs: eps_inf once, eps_1 against one round."""

    epsilon_inf: float
    epsilon_1: float
    rounds: int

    def against_rounds(self, observed: int) -> float:
        """The guarantee against an observer of `observed` rounds: min(eps_inf, observed eps_1)."""
        return min(self.epsilon_inf, check_positive_int(observed, "observed") * self.epsilon_1)

    def statement(self) -> str:
        return (
            f"{self.epsilon_inf:g}-LDP against an observer of all {self.rounds} round(s) (the permanent "
            f"report, charged once); {self.epsilon_1:g}-LDP against an observer of any one round"
        )


@dataclass(frozen=True)
class LongitudinalOracle(FrequencyOracle):
    """A memoizing frequency oracle: `epsilon` is eps_inf, `epsilon_1` one round's budget
    (default eps_inf / 2). `perturb` is one round of users with fresh permanent reports (the law
    of one round, for estimation, variance and audit); to collect over rounds, `memoize` once from
    the client's permanent stream and `report` every round (`MemoizedReporter`): calling `perturb`
    every round would draw new permanent reports and spend eps_inf every round."""

    epsilon_1: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        epsilon_1 = self.epsilon / 2 if self.epsilon_1 is None else check_epsilon(self.epsilon_1, "epsilon_1")
        if epsilon_1 > self.epsilon:
            raise LDPValueError(
                f"epsilon_1 (one round) must be at most epsilon (eps_inf, all rounds): got {epsilon_1} > {self.epsilon}"
            )
        object.__setattr__(self, "epsilon_1", epsilon_1)

    @property
    def epsilon_inf(self) -> float:
        return self.epsilon

    def memoize(self, categories, rng: np.random.Generator) -> Memo:
        """The users' permanent reports, from the client's own secret stream `rng` (made once)."""
        check_generator(rng)
        categories = check_categories(categories, self.k)
        return Memo(categories, self._permanent(categories, rng))

    def report(self, memo: Memo, rng: np.random.Generator) -> np.ndarray:
        """One round's instantaneous reports from the kept permanent ones."""
        check_generator(rng)
        if not isinstance(memo, Memo):
            raise LDPValueError(f"memo must be a Memo made by memoize, got {type(memo).__name__}")
        return self._instantaneous(memo.permanent, rng)

    def _sample(self, categories, rng):
        return self._instantaneous(self._permanent(categories, rng), rng)

    @abstractmethod
    def _permanent(self, categories: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...

    @abstractmethod
    def _instantaneous(self, permanent: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...

    @abstractmethod
    def permanent_log_probability(self, permanent, category: int) -> np.ndarray:
        """log P(permanent report | category): its ratio over categories is bounded by e^eps_inf."""

    @abstractmethod
    def realized_epsilons(self) -> tuple[float, float]:
        """(eps_inf, eps_1) of the probabilities actually sampled (<= the requested ones)."""

    @abstractmethod
    def variance_of_average(self, frequencies, n: int, rounds: int) -> np.ndarray:
        """Exact (k,) variance of the average of `rounds` rounds' estimates of the same n users."""

    def charge(self, rounds: int) -> LongitudinalCharge:
        """The privacy cost of `rounds` rounds from one memo: eps_inf does not grow with rounds."""
        return LongitudinalCharge(self.epsilon, self.epsilon_1, check_positive_int(rounds, "rounds"))

    @property
    def guarantee(self) -> str:
        return (
            f"{self.epsilon:g}-LDP per categorical value against an observer of every round (permanent "
            f"report, memoized), {self.epsilon_1:g}-LDP against an observer of one round"
        )

    def describe(self) -> dict:
        return {**super().describe(), "epsilon_inf": self.epsilon, "epsilon_1": self.epsilon_1}


class MemoizedReporter:
    """A client's users over rounds: the permanent reports made once, one instantaneous report a round."""

    def __init__(self, oracle: LongitudinalOracle, categories, permanent_rng: np.random.Generator) -> None:
        self.oracle = oracle
        self.memo = oracle.memoize(categories, permanent_rng)
        self.rounds = 0

    def report(self, rng: np.random.Generator) -> np.ndarray:
        """This round's reports; `rng` is the round's stream, never the permanent one."""
        reports = self.oracle.report(self.memo, rng)
        self.rounds += 1
        return reports

    @property
    def charge(self) -> LongitudinalCharge:
        return LongitudinalCharge(self.oracle.epsilon, self.oracle.epsilon_1, max(self.rounds, 1))


def memoized_versus_fresh(
    memoized: LongitudinalOracle, fresh: FrequencyOracle, frequencies, n: int, rounds: int
) -> dict:
    """At one budget over T rounds: `memoized` (eps_inf charged once) against `fresh`, an oracle
    drawn anew every round at eps_inf / T (basic composition: T rounds spend eps_inf), on the same
    k categories. Variances of the T-round average and the guarantee against each observer."""
    rounds = check_positive_int(rounds, "rounds")
    if fresh.k != memoized.k or fresh.epsilon * rounds > memoized.epsilon * (1 + 1e-12):
        raise LDPValueError(
            f"fresh must be an oracle on the same k={memoized.k} at eps_inf / rounds = {memoized.epsilon / rounds:g} "
            f"or less, got k={fresh.k}, eps={fresh.epsilon:g}"
        )
    charge = memoized.charge(rounds)
    return {
        "rounds": rounds,
        "memoized": {
            "oracle": memoized.name,
            "variance_of_average": memoized.variance_of_average(frequencies, n, rounds),
            "against_one_round": charge.epsilon_1,
            "against_all_rounds": charge.against_rounds(rounds),
            "charged": charge.epsilon_inf,
        },
        "fresh": {
            "oracle": fresh.name,
            "variance_of_average": fresh.variance(frequencies, n) / rounds,
            "against_one_round": fresh.epsilon,
            "against_all_rounds": fresh.epsilon * rounds,
            "charged": fresh.epsilon * rounds,
        },
    }


# ---- two randomizations chained (RAPPOR, L-OSUE, L-GRR) ---------------------------------------
@dataclass(frozen=True)
class _ChainedOracle(LongitudinalOracle, CountingOracle):
    """Round 1 (permanent) supports category c w.p. p1 if c is the value, q1 otherwise; round 2
    reports 'supports c' w.p. p2 if the permanent report does, q2 otherwise."""

    @property
    @abstractmethod
    def _first(self) -> tuple[float, float]:
        """(p1, q1), rounded towards more noise."""

    @abstractmethod
    def _one_round_epsilon(self, p: float, q: float) -> float:
        """eps of one report whose support probabilities are p (own category) and q (another)."""

    @abstractmethod
    def _second_from_q(self, q2: float) -> tuple[float, float]:
        """(p2, q2) realizable from a requested q2, rounded towards more noise."""

    @cached_property
    def _second(self) -> tuple[float, float]:
        p1, q1 = self._first
        target = self.epsilon_1

        def excess(q2: float) -> float:
            p2 = self._p2_of(q2)
            return self._one_round_epsilon(*self._chain(p1, q1, p2, q2)) - target

        low = 0.0
        if excess(low) <= 0:  # eps_1 at or above what round 1 alone gives: round 2 adds the least noise
            return self._second_from_q(0.0)
        return self._second_from_q(_decreasing_root(excess, low, self._q2_max))

    @abstractmethod
    def _p2_of(self, q2: float) -> float: ...

    @staticmethod
    def _chain(p1: float, q1: float, p2: float, q2: float) -> tuple[float, float]:
        return p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2

    @cached_property
    def p(self) -> float:
        return self._chain(*self._first, *self._second)[0]

    @cached_property
    def q(self) -> float:
        return self._chain(*self._first, *self._second)[1]

    @property
    def probabilities(self) -> dict[str, float]:
        """The realized (p1, q1, p2, q2) and one round's (P, Q)."""
        (p1, q1), (p2, q2) = self._first, self._second
        return {"p1": p1, "q1": q1, "p2": p2, "q2": q2, "P": self.p, "Q": self.q}

    def realized_epsilons(self) -> tuple[float, float]:
        return self._one_round_epsilon(*self._first), self._one_round_epsilon(self.p, self.q)

    def variance_of_average(self, frequencies, n: int, rounds: int) -> np.ndarray:
        """Per user, with pi = P(permanent supports c) (p1 or q1) and a = p2 or q2 given it:
        Var(mean of T reports) = Var(a) + E[a (1 - a)] / T = pi (1 - pi) (p2 - q2)^2
        + (pi p2 (1 - p2) + (1 - pi) q2 (1 - q2)) / T; the estimate divides by (P - Q)."""
        f = check_frequencies(frequencies, self.k)
        n, rounds = check_positive_int(n, "n"), check_positive_int(rounds, "rounds")
        (p1, q1), (p2, q2) = self._first, self._second

        def per_user(pi: float) -> float:
            return pi * (1 - pi) * (p2 - q2) ** 2 + (pi * p2 * (1 - p2) + (1 - pi) * q2 * (1 - q2)) / rounds

        return (f * per_user(p1) + (1 - f) * per_user(q1)) / (n * (self.p - self.q) ** 2)

    def describe(self) -> dict:
        return {**super().describe(), "probabilities": self.probabilities}


@dataclass(frozen=True)
class _ChainedUnary(_ChainedOracle):
    """Unary encodings: k bits, every bit randomized in both rounds; symmetric second round."""

    _q2_max = 0.5  # the q2 at which round 2 carries no information (P = Q)

    def _one_round_epsilon(self, p: float, q: float) -> float:
        return math.log(p) + math.log1p(-q) - math.log(q) - math.log1p(-p)

    def _p2_of(self, q2: float) -> float:
        return 1.0 - q2

    def _second_from_q(self, q2: float) -> tuple[float, float]:
        q2 = dyadic_up(q2)
        return 1.0 - q2, q2

    def _permanent(self, categories, rng):
        p1, q1 = self._first
        return unary_bits(categories, self.k, p1, q1, rng)

    def _instantaneous(self, permanent, rng):
        p2, q2 = self._second
        return rng.random(permanent.shape) < np.where(permanent, p2, q2)

    def _supports(self, reports):
        return check_bit_rows(reports, self.k)

    def _bits_log_probability(self, bits, category: int, p: float, q: float) -> np.ndarray:
        bits = np.asarray(bits, dtype=bool)
        p_one = np.where(np.arange(self.k) == category, p, q)
        return np.sum(np.where(bits, np.log(p_one), np.log1p(-p_one)), axis=-1)

    def log_probability(self, reports, category):
        return self._bits_log_probability(reports, category, self.p, self.q)

    def permanent_log_probability(self, permanent, category):
        return self._bits_log_probability(permanent, category, *self._first)


@dataclass(frozen=True)
class BasicRAPPOR(_ChainedUnary):
    """Basic one-hot RAPPOR: symmetric unary encoding in both rounds (module docstring)."""

    name = "rappor"

    @cached_property
    def _first(self) -> tuple[float, float]:
        q1 = other_share(self.epsilon / 2, 1)  # two bits differ: eps_inf / 2 each
        return 1.0 - q1, q1


@dataclass(frozen=True)
class LongitudinalOSUE(_ChainedUnary):
    """L-OSUE: optimized unary encoding (p1 = 1/2) then symmetric unary encoding."""

    name = "l-osue"

    @cached_property
    def _first(self) -> tuple[float, float]:
        return 0.5, other_share(self.epsilon, 1)


@dataclass(frozen=True)
class LongitudinalGRR(_ChainedOracle):
    """L-GRR: k-ary randomized response in both rounds; the report is one category."""

    name = "l-grr"

    @property
    def _q2_max(self) -> float:
        return 1.0 / self.k

    @cached_property
    def _first(self) -> tuple[float, float]:
        move = other_share(self.epsilon, self.k - 1)
        return 1.0 - move, move / (self.k - 1)

    def _one_round_epsilon(self, p: float, q: float) -> float:
        return math.log(p / q)

    def _p2_of(self, q2: float) -> float:
        return 1.0 - (self.k - 1) * q2

    def _second_from_q(self, q2: float) -> tuple[float, float]:
        move = dyadic_up((self.k - 1) * q2)
        return 1.0 - move, move / (self.k - 1)

    def _move(self, probabilities: tuple[float, float]) -> float:
        return 1.0 - probabilities[0]  # exact: p = 1 - a multiple of 2^-53

    def _permanent(self, categories, rng):
        return randomized_response(categories, self.k, self._move(self._first), rng)

    def _instantaneous(self, permanent, rng):
        return randomized_response(np.asarray(permanent), self.k, self._move(self._second), rng)

    def _supports(self, reports):
        reports = check_categories(reports, self.k, name="reports")
        return (reports[:, None] == np.arange(self.k)).astype(float)

    def log_probability(self, reports, category):
        return np.where(np.asarray(reports) == category, math.log(self.p), math.log(self.q))

    def permanent_log_probability(self, permanent, category):
        p1, q1 = self._first
        return np.where(np.asarray(permanent) == category, math.log(p1), math.log(q1))


# ---- one permanent report, repeated (dBitFlipPM) ------------------------------------------------
@dataclass(frozen=True)
class DBitFlipPM(LongitudinalOracle):
    """dBitFlipPM with b = k buckets: d sampled buckets, one memoized bit each (module docstring).

    Report: (n, k) int8, -1 for the buckets a user did not sample, else the bit. Contribution of a
    user to category c: (k / d) [c sampled] (bit - q) / (p - q), unbiased for the one-hot entry;
    its variance is (k / d) E[Y^2] - t for t = [c is the value], E[Y^2] = (P_t (1 - 2q) + q^2) / (p - q)^2
    with P_t = p or q. Two values differ in at most min(d, 2) sampled bits: eps = min(d, 2) ln(p / q).
    """

    bits: int = 1

    name = "dbitflippm"

    def __post_init__(self) -> None:
        if self.epsilon_1 is not None and self.epsilon_1 != self.epsilon:
            raise LDPValueError(
                "dbitflippm has no instantaneous round (every round repeats the permanent report): "
                f"epsilon_1 is epsilon, got epsilon_1={self.epsilon_1} for epsilon={self.epsilon}"
            )
        object.__setattr__(self, "epsilon_1", self.epsilon)
        super().__post_init__()
        object.__setattr__(self, "bits", check_positive_int(self.bits, "bits"))
        if self.bits > self.k:
            raise LDPValueError(f"bits (sampled buckets) must be at most k={self.k}, got {self.bits}")

    @cached_property
    def _flip(self) -> tuple[float, float]:
        q = other_share(self.epsilon / self._differing, 1)
        return 1.0 - q, q

    @property
    def _differing(self) -> int:
        """How many sampled bits two values can change: buckets v and v' both sampled, or one."""
        return min(self.bits, 2)

    def _permanent(self, categories, rng):
        n = categories.size
        p, q = self._flip
        sampled = rng.permuted(np.broadcast_to(np.arange(self.k), (n, self.k)), axis=1)[:, : self.bits]
        bits = rng.random((n, self.bits)) < np.where(sampled == categories[:, None], p, q)
        report = np.full((n, self.k), -1, dtype=np.int8)
        np.put_along_axis(report, sampled, bits.astype(np.int8), axis=1)
        return report

    def _instantaneous(self, permanent, rng):
        return np.array(permanent, copy=True)

    def _checked(self, reports) -> np.ndarray:
        reports = np.asarray(reports)
        if reports.ndim != 2 or reports.shape[1] != self.k or reports.shape[0] == 0:
            raise LDPValueError(f"reports must be an (n, k={self.k}) array, got shape {reports.shape}")
        if not np.isin(reports, (-1, 0, 1)).all() or np.any((reports >= 0).sum(axis=1) != self.bits):
            raise LDPValueError(f"reports must hold -1 (not sampled) and exactly {self.bits} bits 0/1 per user")
        return reports

    def contributions(self, reports) -> np.ndarray:
        reports = self._checked(reports)
        p, q = self._flip
        return np.where(reports >= 0, (self.k / self.bits) * (reports - q) / (p - q), 0.0)

    def _per_user_variance(self, truth: float) -> float:
        p, q = self._flip
        second_moment = ((p if truth else q) * (1 - 2 * q) + q * q) / (p - q) ** 2
        return (self.k / self.bits) * second_moment - truth

    def variance(self, frequencies, n: int) -> np.ndarray:
        f = check_frequencies(frequencies, self.k)
        n = check_positive_int(n, "n")
        return (f * self._per_user_variance(1.0) + (1 - f) * self._per_user_variance(0.0)) / n

    def variance_of_average(self, frequencies, n: int, rounds: int) -> np.ndarray:
        check_positive_int(rounds, "rounds")
        return self.variance(frequencies, n)  # every round repeats the permanent report

    def log_probability(self, reports, category):
        reports = np.asarray(reports)
        p, q = self._flip
        p_one = np.where(np.arange(self.k) == category, p, q)
        per_bit = np.where(reports == 1, np.log(p_one), np.where(reports == 0, np.log1p(-p_one), 0.0))
        subsets = math.lgamma(self.k + 1) - math.lgamma(self.bits + 1) - math.lgamma(self.k - self.bits + 1)
        return per_bit.sum(axis=-1) - subsets  # the sampled buckets are uniform, whatever the value

    def permanent_log_probability(self, permanent, category):
        return self.log_probability(permanent, category)

    def audit_classes(self, reports) -> np.ndarray:
        """int64 class of each report for an audit on categories 0 and 1: the states (-1, 0, 1) of
        buckets 0 and 1, on which alone the log-likelihood ratio of the two categories depends."""
        head = np.asarray(reports, dtype=np.int64)[:, :2] + 1
        return head[:, 0] + 3 * head[:, 1]

    def realized_epsilons(self) -> tuple[float, float]:
        p, q = self._flip
        epsilon = self._differing * math.log(p / q)
        return epsilon, epsilon

    def describe(self) -> dict:
        return {**super().describe(), "bits": self.bits}


LONGITUDINAL_ORACLES = (BasicRAPPOR, LongitudinalGRR, LongitudinalOSUE, DBitFlipPM)

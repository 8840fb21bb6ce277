"""Privacy amplification by shuffling: n eps0-LDP reports, shuffled, are (eps, delta)-DP against
whoever sees only their multiset (spec: trust-models.md, Shuffle amplification).

Two bounds of Feldman, McMillan & Talwar, "Hiding among the clones" (FOCS 2021):

- `closed_form_epsilon`: Theorem 3.1 as the spec states it, for delta in (0, 1] and
  eps0 <= log(n / (16 log(2/delta))):
      eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 log(4/delta)) / sqrt(n) + 8 e^eps0 / n)).
- `numerical_epsilon`: their numerical procedure (Section 4, Appendix E). The shuffled pair is
  dominated by P = (A + D, C - A + 1 - D) against Q = (A + 1 - D, C - A + D), with
  C ~ Bin(n - 1, e^-eps0) the other users' "clones", A ~ Bin(C, 1/2), D ~ Bern(e^eps0/(e^eps0 + 1)).
  delta(eps) = sum_c P(C = c) D_{e^eps}(P_c || Q_c), each term a pair of binomial CDFs; the
  smallest eps with delta(eps) <= delta is found by bisection and reported from above. Unlike the
  authors' code (which bounds blocks of c by their end points), every c within 40 standard
  deviations of C's mean is summed exactly and the mass left out is added to delta whole.

`shuffled_epsilon` is what ldpfed uses: the numerical bound, never above the closed form (checked),
and only inside the closed form's condition, which is therefore the condition ldpfed states and
refuses outside of (`minimum_reports`): n >= 16 log(2/delta) e^eps0 reports per round.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ldpfed.accounting.events import EpsilonDeltaDpEvent
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int

BOUNDS = ("numerical", "closed-form")
BISECTION_STEPS = 60  # eps found to eps0 * 2^-60, reported from above
TAIL_SDS = 40.0  # clones counts summed exactly: mean +- 40 sd of Bin(n - 1, e^-eps0); the rest goes to delta


def _check(epsilon0: float, reports: int, delta: float) -> tuple[float, int, float]:
    epsilon0 = check_epsilon(epsilon0, "local epsilon (eps0)")
    reports = check_positive_int(reports, "reports per round (n)")
    delta = float(delta)
    if not (0.0 < delta <= 1.0):
        raise LDPValueError(f"the shuffled delta must be in (0, 1], got {delta!r}")
    return epsilon0, reports, delta


def minimum_reports(epsilon0: float, delta: float) -> int:
    """The smallest n with eps0 <= log(n / (16 log(2/delta))): Theorem 3.1's condition."""
    epsilon0, _, delta = _check(epsilon0, 1, delta)
    return math.ceil(16.0 * math.log(2.0 / delta) * math.exp(epsilon0) * (1 + 1e-12))


def check_conditions(epsilon0: float, reports: int, delta: float) -> None:
    """Raise LDPValueError, saying which condition fails, outside the bound's conditions."""
    epsilon0, reports, delta = _check(epsilon0, reports, delta)
    needed = minimum_reports(epsilon0, delta)
    if reports < needed:
        largest = math.log(reports / (16.0 * math.log(2.0 / delta))) if reports > 16 * math.log(2 / delta) else None
        shown = "none" if largest is None else f"{largest:.3g}"
        raise LDPValueError(
            f"the shuffle bound (Feldman, McMillan & Talwar 2021, Thm 3.1: eps0 <= log(n / (16 log(2/delta)))) "
            f"needs n >= {needed} reports per round at eps0 = {epsilon0:g}, delta = {delta:g}; got n = {reports} "
            f"(the largest eps0 it allows there: {shown})"
        )


def closed_form_epsilon(epsilon0: float, reports: int, delta: float) -> float:
    """Theorem 3.1 (spec form); refuses outside its condition."""
    check_conditions(epsilon0, reports, delta)
    e0 = math.exp(epsilon0)
    term = 8.0 * math.sqrt(e0 * math.log(4.0 / delta)) / math.sqrt(reports) + 8.0 * e0 / reports
    return math.log1p((e0 - 1.0) / (e0 + 1.0) * term)


def divergence_given_clones(clones: np.ndarray, epsilon: float, epsilon0: float) -> np.ndarray:
    """D_{e^eps}(P_c || Q_c) for each clones count c (= D_{e^eps}(Q_c || P_c): a -> c + 1 - a swaps
    them). P_c(a) / Q_c(a) falls with a, so P_c exceeds e^eps Q_c exactly for a < beta (c + 1)."""
    return _CloneDivergence(clones, epsilon0)(epsilon)


class _CloneDivergence:
    """`divergence_given_clones` for fixed counts c, as a function of eps. Each count's two binomial
    CDFs change only where its cutoff floor(beta (c + 1)) does, so over the eps of a bisection they
    are recomputed there alone (as it closes in, at almost no count): the same figures, a fraction
    of the CDF evaluations."""

    def __init__(self, clones: np.ndarray, epsilon0: float):
        from scipy.stats import binom  # here: scipy.stats costs a process' start about 0.5 s

        self.binom = binom
        self.clones = np.asarray(clones, dtype=np.float64)
        self.epsilon0 = epsilon0
        self._cutoff = np.full(self.clones.shape, np.nan)  # where _at and _below were evaluated
        self._at = np.empty(self.clones.shape)
        self._below = np.empty(self.clones.shape)

    def __call__(self, epsilon: float) -> np.ndarray:
        if epsilon >= self.epsilon0:
            return np.zeros_like(self.clones)
        alpha = math.exp(self.epsilon0) / (math.exp(self.epsilon0) + 1.0)  # P(D = 1), written stably below
        alpha_bar = 1.0 / (math.exp(self.epsilon0) + 1.0)
        e = math.exp(epsilon)
        beta = (alpha - e * alpha_bar) / ((1.0 + e) * (alpha - alpha_bar))
        cutoff = np.floor(beta * (self.clones + 1.0))
        moved = cutoff != self._cutoff
        if moved.any():
            self._at[moved] = self.binom.cdf(cutoff[moved], self.clones[moved], 0.5)
            self._below[moved] = self.binom.cdf(cutoff[moved] - 1.0, self.clones[moved], 0.5)
            self._cutoff = cutoff
        p_mass = alpha * self._at + alpha_bar * self._below
        q_mass = alpha_bar * self._at + alpha * self._below
        return np.maximum(p_mass - e * q_mass, 0.0)


class _ShuffledDelta:
    """`numerical_delta` for fixed (eps0, n), as a function of eps: the clones counts, their
    probabilities and the mass left out do not depend on eps and are computed once."""

    def __init__(self, epsilon0: float, reports: int):
        from scipy.stats import binom

        q = math.exp(-epsilon0)
        trials = reports - 1
        mean, sd = trials * q, math.sqrt(trials * q * (1.0 - q))
        low = max(0, math.floor(mean - TAIL_SDS * sd))
        high = min(trials, math.ceil(mean + TAIL_SDS * sd))
        clones = np.arange(low, high + 1)
        self.pmf = binom.pmf(clones, trials, q)
        self.left_out = max(0.0, 1.0 - float(self.pmf.sum()))
        self.divergence = _CloneDivergence(clones, epsilon0)

    def __call__(self, epsilon: float) -> float:
        return min(1.0, float(np.dot(self.pmf, self.divergence(epsilon))) + self.left_out)


def numerical_delta(epsilon: float, epsilon0: float, reports: int) -> float:
    """An upper bound on the shuffled delta at eps (FMT 2021, Section 4): the exact sum over the
    clones counts near C's mean, plus the probability mass of the counts left out."""
    return _ShuffledDelta(epsilon0, reports)(epsilon)


def numerical_epsilon(epsilon0: float, reports: int, delta: float) -> float:
    """The smallest eps (from above, to eps0 2^-60) with `numerical_delta(eps) <= delta`; at most eps0."""
    epsilon0, reports, delta = _check(epsilon0, reports, delta)
    delta_at = _ShuffledDelta(epsilon0, reports)
    low, high = 0.0, epsilon0
    if delta_at(low) <= delta:
        return 0.0
    for _ in range(BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if delta_at(middle) <= delta:
            high = middle
        else:
            low = middle
        if high - low <= 1e-12 * epsilon0:
            break
    return high


@dataclass(frozen=True)
class ShuffledGuarantee:
    """One shuffled round: eps0 against anyone who sees one report (the shuffler included), and
    the amplified (epsilon, delta) against the server, which sees the multiset of `reports`."""

    epsilon0: float
    reports: int
    epsilon: float
    delta: float
    bound: str

    def event(self) -> EpsilonDeltaDpEvent:
        """The round's cost against the server, for the per-client ledger."""
        return EpsilonDeltaDpEvent(self.epsilon, self.delta)

    def to_dict(self) -> dict:
        return {
            "local_epsilon": self.epsilon0,
            "reports": self.reports,
            "shuffled_epsilon": self.epsilon,
            "shuffled_delta": self.delta,
            "bound": self.bound,
            "minimum_reports": minimum_reports(self.epsilon0, self.delta),
        }


def shuffled_epsilon(epsilon0: float, reports: int, delta: float, bound: str = "numerical") -> ShuffledGuarantee:
    """The amplified guarantee of one round of `reports` shuffled eps0-LDP reports; refuses outside
    Theorem 3.1's condition. `numerical` (default) is checked against the closed form. Cached on
    its arguments: the numerical bound costs seconds at n = 10^6 and a round asks for it several
    times (admission, record), with the same (eps0, n, delta) in every full round."""
    return _shuffled_epsilon(float(epsilon0), int(reports), float(delta), bound)


@functools.lru_cache(maxsize=64)
def _shuffled_epsilon(epsilon0: float, reports: int, delta: float, bound: str) -> ShuffledGuarantee:
    if bound not in BOUNDS:
        raise LDPValueError(f"shuffle bound must be one of {', '.join(BOUNDS)}; got {bound!r}")
    closed = closed_form_epsilon(epsilon0, reports, delta)
    if bound == "closed-form":
        return ShuffledGuarantee(float(epsilon0), int(reports), min(closed, float(epsilon0)), float(delta), bound)
    numerical = numerical_epsilon(epsilon0, reports, delta)
    if numerical > closed * (1 + 1e-9):
        raise AssertionError(f"numerical shuffle bound {numerical} exceeds the closed form {closed}")
    return ShuffledGuarantee(float(epsilon0), int(reports), numerical, float(delta), bound)

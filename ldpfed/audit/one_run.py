"""An epsilon lower bound from one run (Steinke, Nasr & Jagielski, NeurIPS 2023, Appendix D).

m canaries are each included in the run independently with probability 1/2 (a secret coin). An
auditor scores every canary after the run, guesses "in" for the k+ highest scores and "out" for the
k- lowest (abstaining on the rest: r = k+ + k- guesses) and counts v correct guesses. Under
(eps, delta)-DP the number of correct guesses is stochastically dominated by
Binomial(r, q), q = e^eps / (1 + e^eps), up to the delta term of their Theorem 3.3:
    p(eps) = P[Binomial(r, q) >= v] + 2 m delta max_{1<=i<=v} P[v - i <= Binomial(r, q) < v] / i,
and the lower bound is the largest eps with p(eps) < p (p = 1 - confidence), found by their
bisection: eps_max grows by 1 until p(eps_max) >= p, then 30 halvings of [eps_min, eps_max].

The bound only needs (m, r, v): white box (each round's aggregate) and black box (the final model)
differ only in where the scores come from, so this module takes scores, never models.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

# scipy.stats is imported in the functions that use it: every `ldpfed simulate` loads this module
# (through the train task's canaries) and most never audit (~0.6 s of CPU).
from ldpfed.validation import LDPValueError, check_fraction, check_positive_int

BISECTION_STEPS = 30  # Appendix D's count: the bracket [0, eps_max] shrinks by 2^-30


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Probability of >= v correct guesses out of r under (eps, delta)-DP (Appendix D, p-value).

    The running maximum of Appendix D's loop, alpha = max_i sum_{j=1..i} P[B = v - j] / i, is
    taken as one cumulative sum (the same value: each step keeps the larger ratio).
    """
    from scipy.stats import binom

    q = 1.0 / (1.0 + np.exp(-epsilon))  # accuracy of eps-DP randomized response
    beta = float(binom.sf(v - 1, r, q))  # P[Binomial(r, q) >= v]
    if v == 0:
        return min(beta, 1.0)
    steps = np.arange(1, v + 1)
    below = np.cumsum(binom.pmf(v - steps, r, q))  # P[v > Binomial(r, q) >= v - i]
    alpha = max(float(np.max(below / steps)), 0.0)
    return min(beta + alpha * delta * 2 * m, 1.0)


def one_run_epsilon(m: int, r: int, v: int, delta: float, p: float) -> float:
    """Largest eps that the counts refute at level p: Appendix D's bisection, step for step.

    Invariants: p_value(eps_min) < p (eps_min = 0 when even eps = 0 is not refuted) and
    p_value(eps_max) >= p.
    """
    eps_min, eps_max = 0.0, 1.0
    while one_run_p_value(m, r, v, eps_max, delta) < p:
        eps_max += 1.0
    for _ in range(BISECTION_STEPS):
        epsilon = (eps_min + eps_max) / 2.0
        if one_run_p_value(m, r, v, epsilon, delta) < p:
            eps_min = epsilon
        else:
            eps_max = epsilon
    return eps_min


def count_correct(scores, included, k_plus: int, k_minus: int) -> int:
    """v: correct guesses when the k_plus highest scores are guessed "in" and the k_minus lowest
    "out". Ties are broken by canary index (a stable sort), which does not depend on the coins."""
    scores, included = np.asarray(scores, dtype=float), np.asarray(included, dtype=bool)
    order = np.argsort(scores, kind="stable")
    guessed_in = order[scores.size - k_plus :] if k_plus else order[:0]
    return int(np.count_nonzero(included[guessed_in]) + np.count_nonzero(~included[order[:k_minus]]))


@dataclass(frozen=True)
class OneRunBound:
    """The one-run lower bound with what it was computed from."""

    epsilon_lower: float
    confidence: float
    delta: float
    canaries: int  # m
    guesses: int  # r = k_plus + k_minus
    correct: int  # v
    k_plus: int
    k_minus: int
    candidates: int = 1  # guess counts tried (the level is split over them)

    def to_dict(self) -> dict:
        return asdict(self)


def _check(scores, included, delta: float, confidence: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    scores, included = np.asarray(scores, dtype=float), np.asarray(included)
    if scores.ndim != 1 or scores.shape != included.shape or not scores.size:
        raise LDPValueError(
            f"scores and inclusion bits must be two non-empty vectors of one length, got shapes "
            f"{scores.shape} and {included.shape}"
        )
    if not np.all(np.isfinite(scores)):
        raise LDPValueError("canary scores must be finite")
    if not np.isin(included, (0, 1)).all():
        raise LDPValueError("inclusion bits must be 0 or 1 (or booleans)")
    if not 0.0 <= float(delta) < 1.0:
        raise LDPValueError(f"delta must be in [0, 1), got {delta!r}")
    return scores, included.astype(bool), float(delta), check_fraction(confidence, "confidence")


def one_run_audit(
    scores, included, *, delta: float = 0.0, confidence: float = 0.95, guesses: list[tuple[int, int]] | None = None
) -> OneRunBound:
    """The Appendix D bound from canary scores (higher: more likely included) and the secret coins.

    `guesses` lists the (k_plus, k_minus) pairs to try; the level 1 - confidence is split evenly
    over them (Bonferroni), so the best of them is still a valid bound at `confidence`. The default
    tries k_plus = k_minus = k for k = m/2, m/4, ..., down to 8 (or 1 when m < 16).
    """
    scores, included, delta, confidence = _check(scores, included, delta, confidence)
    m = scores.size
    if guesses is None:
        guesses = default_guesses(m)
    for k_plus, k_minus in guesses:
        check_positive_int(k_plus, "k_plus", minimum=0)
        check_positive_int(k_minus, "k_minus", minimum=0)
        if not 0 < k_plus + k_minus <= m:
            raise LDPValueError(f"need 0 < k_plus + k_minus <= m = {m}, got ({k_plus}, {k_minus})")
    level = (1.0 - confidence) / len(guesses)
    best = None
    for k_plus, k_minus in guesses:
        correct = count_correct(scores, included, k_plus, k_minus)
        epsilon = one_run_epsilon(m, k_plus + k_minus, correct, delta, level)
        if best is None or epsilon > best.epsilon_lower:
            best = OneRunBound(epsilon, confidence, delta, m, k_plus + k_minus, correct, k_plus, k_minus, len(guesses))
    return best


def default_guesses(m: int) -> list[tuple[int, int]]:
    """k_plus = k_minus = k for k = m // 2, m // 4, ... while k >= 8 (at least one pair)."""
    pairs, k = [], max(m // 2, 1)
    while k >= 8 or not pairs:
        pairs.append((k, k))
        k //= 2
        if k == 0:
            break
    return pairs

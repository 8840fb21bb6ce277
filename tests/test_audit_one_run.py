"""The one-run lower bound (Steinke, Nasr & Jagielski 2023, Appendix D) and its guessing helpers.

The reference below computes the same p-value by a different path, in mpmath at 40 digits and without
scipy: binomial sums whose terms are built by the ratio C(r, k+1)/C(r, k) (the tail's first one from
log-gammas), and its eps by mpmath's Illinois
root finder instead of the paper's bisection; the two must agree to the bisection's resolution.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from ldpfed.audit.one_run import count_correct, default_guesses, one_run_audit, one_run_epsilon, one_run_p_value
from ldpfed.validation import LDPValueError

mpmath.mp.dps = 40


def _pmf_table(r: int, q) -> list:
    """[P[Binomial(r, q) = k] for k = 0..r] in mpmath, by the ratio of consecutive terms."""
    terms = [(1 - q) ** r]
    for k in range(r):
        terms.append(terms[-1] * (r - k) / (k + 1) * q / (1 - q))
    return terms


def _upper_tail(r: int, v: int, q) -> mpmath.mpf:
    """P[Binomial(r, q) >= v]: the first term from log-gammas, the next ones by the ratio of
    consecutive terms, summed until they fall below 10^-45 of the sum."""
    term = mpmath.exp(
        mpmath.loggamma(r + 1)
        - mpmath.loggamma(v + 1)
        - mpmath.loggamma(r - v + 1)
        + v * mpmath.log(q)
        + (r - v) * mpmath.log(1 - q)
    )
    total = mpmath.mpf(0)
    for k in range(v, r + 1):
        total += term
        if term < total * mpmath.mpf(10) ** -45:
            break
        term *= mpmath.mpf(r - k) / (k + 1) * q / (1 - q)
    return total


def reference_p_value(m: int, r: int, v: int, epsilon, delta) -> mpmath.mpf:
    """Theorem 3.3's p-value, written from the formula: P[B >= v] + 2 m delta max_i P[v-i <= B < v] / i,
    B ~ Binomial(r, e^eps / (1 + e^eps)); the delta term's pmf table only when delta > 0."""
    epsilon = mpmath.mpf(epsilon)
    q = mpmath.e**epsilon / (1 + mpmath.e**epsilon)
    tail = _upper_tail(r, v, q)
    if not delta:
        return min(tail, mpmath.mpf(1))
    pmf = _pmf_table(r, q)
    ratios, below = [mpmath.mpf(0)], mpmath.mpf(0)
    for i in range(1, v + 1):
        below += pmf[v - i]
        ratios.append(below / i)
    return min(tail + 2 * m * mpmath.mpf(delta) * max(ratios), mpmath.mpf(1))


def reference_epsilon(m: int, r: int, v: int, delta, p, near: float) -> float:
    """The eps where the reference p-value crosses p: Illinois root finding on [near - 1/4, near + 1/4]
    (the function must change sign there, and it rises in eps, so the root is the one)."""
    crossing = lambda e: reference_p_value(m, r, v, e, delta) - p  # noqa: E731
    low, high = max(near - 0.25, 0.0), near + 0.25
    assert crossing(low) < 0 < crossing(high)
    return float(mpmath.findroot(crossing, (low, high), solver="illinois", tol=1e-24))


def test_the_papers_example_gives_3_601():
    # An ideal guesser on eps = 4 randomized response is right with probability e^4 / (1 + e^4):
    # of m = r = 1,000 guesses, 982.01 are correct in expectation.
    v = round(1000 * math.exp(4) / (1 + math.exp(4)))
    assert one_run_epsilon(1000, 1000, v, delta=0.0, p=0.05) == pytest.approx(3.601, abs=0.001)


GRID = [(epsilon, m, 0.0) for m in (1_000, 10_000) for epsilon in (1.0, 2.0, 4.0, 8.0)]
GRID += [(1.0, 1_000, 1e-5), (4.0, 1_000, 1e-5)]  # the delta term (pmf sums: kept to m = 1,000 for time)


@pytest.mark.parametrize(("epsilon", "m", "delta"), GRID)
def test_bound_matches_an_independent_binomial_tail(epsilon, m, delta):
    v = round(m * math.exp(epsilon) / (1 + math.exp(epsilon)))  # the ideal guesser's expected count
    bound = one_run_epsilon(m, m, v, delta, 0.05)
    expected = reference_epsilon(m, m, v, delta, 0.05, near=bound)
    # 30 halvings of a bracket of width <= eps + 1 leave < 1e-8; the comparison allows 1e-6.
    assert bound == pytest.approx(expected, abs=1e-6)
    assert expected < epsilon  # a lower bound of the truth (at m = 1,000 even r = v stops at 5.81)


@pytest.mark.parametrize(("m", "r", "v", "epsilon", "delta"), [(100, 60, 50, 1.5, 1e-3), (1000, 200, 150, 0.7, 1e-4)])
def test_p_value_matches_the_reference_with_abstentions_and_delta(m, r, v, epsilon, delta):
    assert one_run_p_value(m, r, v, epsilon, delta) == pytest.approx(float(reference_p_value(m, r, v, epsilon, delta)))


def test_delta_weakens_the_bound_and_no_correct_guess_certifies_nothing():
    assert one_run_epsilon(1000, 1000, 950, 1e-4, 0.05) < one_run_epsilon(1000, 1000, 950, 0.0, 0.05)
    assert one_run_epsilon(1000, 1000, 500, 0.0, 0.05) == 0.0  # chance level refutes no eps
    assert one_run_epsilon(1000, 100, 0, 0.0, 0.05) == 0.0


def test_guesses_take_the_highest_scores_as_in_and_the_lowest_as_out():
    scores = np.array([0.9, 0.1, 0.5, 0.8, 0.2, 0.7])
    included = np.array([1, 0, 0, 0, 1, 1], dtype=bool)
    # in: 0.9 (right), 0.8 (wrong); out: 0.1 (right), 0.2 (wrong)
    assert count_correct(scores, included, 2, 2) == 2
    assert count_correct(scores, included, 3, 0) == 2  # 0.9, 0.8, 0.7
    assert count_correct(scores, included, 0, 1) == 1


def test_audit_splits_the_level_over_the_guess_counts_it_tries():
    rng = np.random.default_rng(3)
    included = rng.integers(0, 2, 2000).astype(bool)
    scores = included * 3.0 + rng.standard_normal(2000)
    single = one_run_audit(scores, included, confidence=0.95, guesses=[(100, 100)])
    swept = one_run_audit(scores, included, confidence=0.95, guesses=[(100, 100), (50, 50), (200, 200)])
    assert single.candidates == 1 and swept.candidates == 3
    level_3 = one_run_epsilon(2000, 200, single.correct, 0.0, 0.05 / 3)
    assert swept.epsilon_lower >= level_3  # the best of three, each at level 0.05 / 3
    assert level_3 < single.epsilon_lower


def test_bound_is_valid_for_randomized_response_at_its_claim():
    # eps-DP randomized response on the coin: the score is the released bit. The bound at 95% must
    # stay above eps in at most 5% of runs: of 20 runs, 4 or more misses have probability 0.016 at a
    # 5% miss rate (Binomial(20, 0.05)), so 3 are tolerated.
    epsilon, m, misses = 2.0, 1000, 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        included = rng.integers(0, 2, m).astype(bool)
        keep = rng.random(m) < math.exp(epsilon) / (1 + math.exp(epsilon))
        released = np.where(keep, included, ~included).astype(float) + 1e-3 * rng.random(m)
        misses += one_run_audit(released, included).epsilon_lower > epsilon
    assert misses <= 3


def test_default_guesses_halve_down_to_eight_and_inputs_are_checked():
    assert default_guesses(1000) == [(500, 500), (250, 250), (125, 125), (62, 62), (31, 31), (15, 15)]
    assert default_guesses(5) == [(2, 2)]
    with pytest.raises(LDPValueError):
        one_run_audit([0.1, 0.2], [1, 0, 1])
    with pytest.raises(LDPValueError):
        one_run_audit([0.1, 0.2], [1, 2])
    with pytest.raises(LDPValueError):
        one_run_audit([0.1, 0.2], [1, 0], guesses=[(2, 1)])

"""The shuffle amplification bound (ldpfed.accounting.shuffle; spec: trust-models.md)."""

import math

import numpy as np
import pytest
from scipy import stats

from ldpfed.accounting import PrivacyLedger
from ldpfed.accounting.shuffle import (
    check_conditions,
    closed_form_epsilon,
    divergence_given_clones,
    minimum_reports,
    numerical_delta,
    numerical_epsilon,
    shuffled_epsilon,
)
from ldpfed.validation import LDPValueError


def test_closed_form_reproduces_the_spec_example():
    # trust-models.md: eps0 = 2, n = 20,000, delta = 1e-6 gives eps <= 0.378 (condition eps0 <= 4.46)
    assert closed_form_epsilon(2.0, 20_000, 1e-6) == pytest.approx(0.378, abs=5e-4)
    assert math.log(20_000 / (16 * math.log(2 / 1e-6))) == pytest.approx(4.46, abs=5e-3)


def test_numerical_bound_reproduces_the_published_example():
    # Feldman, McMillan & Talwar's code (apple/ml-shuffling-amplification, README "Getting Started",
    # example.py: n = 10^5, eps0 = 4, delta = 1e-6): the numerical eps lies between 0.1675385583317841
    # (their lower bound) and 0.172790550755978 (their upper bound, 10 bisection steps)
    eps = numerical_epsilon(4.0, 10**5, 1e-6)
    assert 0.1675385583317841 <= eps <= 0.172790550755978


def test_divergence_matches_brute_force_in_both_directions():
    eps0, eps = 1.3, 0.4
    alpha = math.exp(eps0) / (1 + math.exp(eps0))
    for c in range(0, 30):
        b = np.append(stats.binom.pmf(np.arange(c + 1), c, 0.5), 0.0)  # b(a), a = 0..c+1
        shifted = np.concatenate(([0.0], b[:-1]))  # b(a - 1)
        p = alpha * b + (1 - alpha) * shifted
        q = (1 - alpha) * b + alpha * shifted
        forward = np.maximum(p - math.exp(eps) * q, 0).sum()
        backward = np.maximum(q - math.exp(eps) * p, 0).sum()
        assert divergence_given_clones(np.array([c]), eps, eps0)[0] == pytest.approx(forward, abs=1e-13)
        assert forward == pytest.approx(backward, abs=1e-13)


def test_numerical_bound_is_the_smallest_eps_meeting_delta():
    eps = numerical_epsilon(2.0, 20_000, 1e-6)
    assert numerical_delta(eps, 2.0, 20_000) <= 1e-6
    assert numerical_delta(eps * (1 - 1e-6), 2.0, 20_000) > 1e-6


@pytest.mark.parametrize(
    "eps0,n,delta", [(2.0, 20_000, 1e-6), (1.0, 5_000, 1e-5), (4.0, 10**5, 1e-6), (0.5, 1000, 1e-3)]
)
def test_numerical_bound_never_exceeds_the_closed_form(eps0, n, delta):
    assert numerical_epsilon(eps0, n, delta) <= closed_form_epsilon(eps0, n, delta)


def test_monotone_in_n_and_eps0():
    ns = [2_000, 5_000, 20_000, 100_000]
    by_n = [shuffled_epsilon(1.0, n, 1e-6).epsilon for n in ns]
    assert all(a > b for a, b in zip(by_n, by_n[1:]))
    eps0s = [0.25, 0.5, 1.0, 2.0, 3.0]
    by_eps0 = [shuffled_epsilon(e, 100_000, 1e-6).epsilon for e in eps0s]
    assert all(a < b for a, b in zip(by_eps0, by_eps0[1:]))
    assert all(s < e for s, e in zip(by_eps0, eps0s))  # amplified below eps0


def test_refused_outside_the_condition_with_the_minimum_n():
    needed = minimum_reports(2.0, 1e-6)
    assert needed == math.ceil(16 * math.log(2e6) * math.exp(2.0))
    check_conditions(2.0, needed, 1e-6)
    with pytest.raises(LDPValueError, match=f"needs n >= {needed}"):
        shuffled_epsilon(2.0, needed - 1, 1e-6)
    with pytest.raises(LDPValueError):
        shuffled_epsilon(float("nan"), 10_000, 1e-6)
    with pytest.raises(LDPValueError):
        shuffled_epsilon(1.0, 10_000, 0.0)
    with pytest.raises(LDPValueError, match="numerical, closed-form"):
        shuffled_epsilon(1.0, 10_000, 1e-6, bound="clones")


def test_rounds_compose_in_the_ledger_and_absent_rounds_cost_nothing():
    guarantee = shuffled_epsilon(1.0, 20_000, 1e-7)
    ledger = PrivacyLedger()
    for r in range(1, 11):
        ledger.record_event("a", r, guarantee.event(), "shuffled laplace")
        if r <= 5:
            ledger.record_event("b", r, guarantee.event(), "shuffled laplace")
    a, b = ledger.spent("a", "basic"), ledger.spent("b", "basic")
    assert a.epsilon == pytest.approx(10 * guarantee.epsilon) and b.epsilon == pytest.approx(5 * guarantee.epsilon)
    assert a.delta == pytest.approx(10 * 1e-7)
    assert ledger.spent("a", "pld").epsilon <= a.epsilon

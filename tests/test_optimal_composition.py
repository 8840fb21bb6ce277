"""T identical (eps, delta)-DP rounds composed in closed form (ldpfed.accounting.optimal_composition),
against an independent term-by-term reference (exact binomial sums in 50-digit arithmetic) and
against dp_accounting's privacy loss distribution of the same rounds."""

from __future__ import annotations

import json
import math

import mpmath
import pytest
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from typer.testing import CliRunner

from ldpfed.accounting import SelfComposedDpEvent, create_accountant
from ldpfed.accounting.events import EpsilonDeltaDpEvent
from ldpfed.accounting.optimal_composition import composed_epsilon
from ldpfed.cli.main import app

CASES = [  # (eps per round, delta per round, rounds T, target delta)
    (1.0, 0.0, 1, 1e-5),
    (0.1, 0.0, 3, 1e-2),
    (1.0, 0.0, 10, 1e-5),
    (0.5, 0.0, 60, 1e-6),
    (1.0, 1e-7, 50, 1e-5),
    (2.0, 0.0, 1000, 1e-5),  # a target between two loss atoms: the PLD's answer is the next atom
    (30.0, 0.0, 100, 1e-5),  # 1 - p = 9e-14: the binomial is taken in q = 1 / (1 + e^eps), exactly
]


def reference_epsilon(eps: float, delta: float, rounds: int, target: float) -> float:
    """Kairouz-Oh-Viswanath's optimal composition, summed term by term over every k in 50 digits."""
    mpmath.mp.dps = 50
    e = mpmath.mpf(eps)
    p = mpmath.e**e / (1 + mpmath.e**e)
    atoms = [
        (e * (2 * k - rounds), mpmath.binomial(rounds, k) * p**k * (1 - p) ** (rounds - k)) for k in range(rounds + 1)
    ]
    kept = 1 - (1 - mpmath.mpf(delta)) ** rounds

    def total(x):
        return kept + (1 - kept) * sum(w * (1 - mpmath.e ** (x - loss)) for loss, w in atoms if loss > x)

    low, high = mpmath.mpf(0), e * rounds
    if total(low) <= target:
        return 0.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (low, middle) if total(middle) <= target else (middle, high)
    return float(high)


@pytest.mark.parametrize(("eps", "delta", "rounds", "target"), CASES)
def test_closed_form_matches_the_term_by_term_reference_and_never_understates(eps, delta, rounds, target):
    exact = reference_epsilon(eps, delta, rounds, target)
    accountant = create_accountant("pld").compose(SelfComposedDpEvent(EpsilonDeltaDpEvent(eps, delta), rounds))
    for found in (composed_epsilon(eps, delta, rounds, target), accountant.spent(target).epsilon):
        assert found >= exact * (1 - 1e-12)  # never below the exact composition
        assert found <= exact * (1 + 1e-8) + 1e-12  # and tight (the PLD is 2e-4 looser in the last case)


@pytest.mark.parametrize(("eps", "delta", "rounds", "target"), CASES)
def test_the_pld_accountant_agrees_with_dp_accounting_and_is_no_looser(eps, delta, rounds, target):
    interval = eps / math.ceil(eps / 1e-4)
    one = pld_lib.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=interval
    )
    library = one.self_compose(rounds).get_epsilon_for_delta(target)
    spent = create_accountant("pld").compose(SelfComposedDpEvent(EpsilonDeltaDpEvent(eps, delta), rounds))
    ours = spent.spent(target).epsilon
    assert ours <= library * (1 + 1e-9) + 1e-12
    assert ours >= library * (1 - 3e-4)


def test_a_billion_rounds_are_accounted_in_closed_form():
    """The PLD of 10^9 rounds has 2 * 10^9 + 1 losses (GBs); the closed form sums a window of
    ~3 * 10^5 binomial terms. The result lies between the mean privacy loss and basic composition."""
    rounds, eps = 10**9, 1.0
    result = CliRunner().invoke(app, ["account", "-m", "laplace", "-e", "1", "--rounds", str(rounds), "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["epsilon"]
    mean_loss = rounds * eps * math.tanh(eps / 2)  # E[L] = T eps (2p - 1)
    sd_loss = 2 * eps * math.sqrt(rounds * math.exp(eps)) / (1 + math.exp(eps))
    assert mean_loss < found < mean_loss + 6 * sd_loss
    assert found == pytest.approx(composed_epsilon(eps, 0.0, rounds, 1e-5), rel=1e-12)

"""Longitudinal (memoized) frequency collection over a federation's rounds: each user's permanent
report is drawn once from the client's own secret stream (the same every round; nothing the server
holds redraws it), each round's instantaneous report is fresh, and the ledger charges eps_inf once
per client however many rounds follow, with eps_1 stated against an observer of one round."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_collecting_rows

from ldpfed import tasks
from ldpfed.accounting import Budget
from ldpfed.accounting.events import EpsilonDeltaDpEvent
from ldpfed.accounting.ledger import PrivacyLedger
from ldpfed.accounting.library import dp_event
from ldpfed.config import Config
from ldpfed.frequency.categorical import AttributeOracles
from ldpfed.protocols import seeds
from ldpfed.protocols.frequency import FrequencyClient, FrequencyServer, collect_frequency_sums, permanent_stream
from ldpfed.protocols.privacy import round_event
from ldpfed.tasks import validated


def _event(epsilon: float):
    return EpsilonDeltaDpEvent(epsilon, 0.0)


@pytest.mark.parametrize("rounds", [1, 10, 100])
def test_a_clients_eps_inf_is_the_same_for_any_number_of_rounds(rounds):
    """Every client's total over T rounds of a memoized collection is eps_inf (basic, advanced,
    rdp, pld alike); a client that joins late is charged at its first round, and a budget of eps_inf
    admits every later round (its 'one more round' costs nothing to a client already charged)."""
    ledger = PrivacyLedger()
    event = _event(2.0)
    ledger.declare_memoized(event, 1.0, "2-LDP against the server, 1-LDP against one round")
    budget = Budget(max_epsilon=2.0)
    for server_round in range(1, rounds + 1):
        clients = np.arange(5) if server_round > 1 else np.arange(3)  # clients 3 and 4 join in round 2
        admitted, stopped = budget.admit(ledger, clients.tolist(), event)
        assert admitted == clients.tolist() and not stopped
        ledger.record_round(clients, server_round, event, "l-grr")
    frame = ledger.to_frame()
    assert (frame["basic_epsilon"] == 2.0).all() and (frame["pld_epsilon"] <= 2.0 + 1e-9).all()
    assert frame["rounds"].tolist() == ([rounds] * 3 + [rounds - 1] * 2 if rounds > 1 else [1] * 3)
    record = ledger.state_dict(per_client=False)
    assert record["guarantees"][0]["against_an_observer_of_one_round_epsilon"] == 1.0
    entries = ledger.entries_frame()
    assert (entries.groupby("client_id")["event"].apply(lambda e: (e != "NoOpDpEvent").sum()) == 1).all()
    # without the declaration the same rounds compose: T eps
    plain = PrivacyLedger()
    for server_round in range(1, rounds + 1):
        plain.record_round(np.arange(3), server_round, event, "grr")
    assert plain.spent(0).epsilon == pytest.approx(2.0 * rounds)


def _sums(oracles, codes, secret: int, server_round: int):
    noise = seeds.stream(secret, seeds.NOISE, server_round)
    return collect_frequency_sums(codes, oracles, noise, permanent=permanent_stream(secret))


def test_the_permanent_report_comes_from_the_clients_secret_and_each_round_is_fresh():
    """dbitflippm repeats its permanent report: the same sums every round of one secret (the memo is
    drawn again, identically, whatever rebuilds the client), different ones for another secret;
    l-grr's instantaneous reports are fresh each round."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 6, size=(300, 2))
    repeat = AttributeOracles.build("dbitflippm", 2.0, [6, 6], report_dims=1)
    first, second = (_sums(repeat, codes, 99, r) for r in (1, 2))
    np.testing.assert_array_equal(first.total, second.total)
    assert not np.array_equal(first.total, _sums(repeat, codes, 100, 1).total)
    chained = AttributeOracles.build("l-grr", 2.0, [6, 6], report_dims=1)
    one, two = (_sums(chained, codes, 99, r) for r in (1, 2))
    np.testing.assert_array_equal(one.count, two.count)  # the memoized choice of m of d attributes
    assert not np.array_equal(one.total, two.total)
    with pytest.raises(Exception, match="permanent"):
        collect_frequency_sums(codes, chained, seeds.stream(99, seeds.NOISE, 1))


def test_the_average_over_rounds_has_the_memoized_variance():
    """R = 200 clients (independent memos) of n = 100 users, k = 4, T = 8 rounds of l-osue at
    eps_inf = 2: the variance of the T-round average estimate of an empty category is
    `variance_of_average` within 3 standard errors (sample variance of R near-Gaussian values:
    SE = V sqrt(2 / (R - 1)) = 0.1 V), and above 1.5 x the one-round variance / T that a memo redrawn
    every round would give (0.42 V here: 5.8 SE below V)."""
    oracles = AttributeOracles.build("l-osue", 2.0, [4])
    codes = np.repeat(np.arange(3), [40, 30, 30])[:, None]  # category 3 empty
    averages = np.array(
        [
            np.mean([_sums(oracles, codes, 1000 + client, r).total[3] / 100 for r in range(1, 9)])
            for client in range(200)
        ]
    )
    oracle = oracles.oracles[0]
    expected = oracle.variance_of_average(np.array([0.4, 0.3, 0.3, 0.0]), 100, 8)[3]
    measured = averages.var(ddof=1)
    assert abs(measured - expected) <= 3 * expected * np.sqrt(2 / (averages.size - 1))
    assert measured > 1.5 * oracle.variance(np.array([0.4, 0.3, 0.3, 0.0]), 100)[3] / 8


def _config(**options) -> Config:
    return validated(Config().with_options({"task": "frequency", "engine": "local", **options}))


@pytest.mark.parametrize("mechanism", ["l-grr", "rappor"])
def test_simulate_charges_eps_inf_once_and_states_eps_1(mechanism):
    """3 clients, 4 rounds of a memoized oracle at eps_inf = 2 (m = 1 of 2 attributes): every
    client's total is 2 after every round, the summary states eps_1 = 1 against one round's
    observer, and every round has reports and an MSE."""
    config = _config(
        clients=3, users=300, dims=2, categories="5", rounds=4, seed=3, epsilon=2.0, mechanism=mechanism, report_dims=1
    )
    summary, rows = run_collecting_rows(config, noise_seed=7)
    assert (rows["epsilon_spent"] == 2.0).all() and summary["epsilon_spent_max_per_client"] == 2.0
    assert summary["memoized"]["epsilon_1"] == pytest.approx(1.0)
    observer = [g for g in summary["guarantees"] if g["party"].startswith("an observer of any one round")]
    assert len(observer) == 1 and observer[0]["epsilon"] == pytest.approx(1.0)
    assert max(g["epsilon"] for g in summary["guarantees"]) == pytest.approx(2.0)  # the server: eps_inf
    assert np.isfinite(rows["mse"]).all() and (rows["users_reported"] == 300).all()
    label = tasks.get("frequency").epsilon_label(summary)  # the console's label of `epsilon`
    assert "charged once" in label and "eps_1 = 1 " in label and "and round" not in label


def test_the_server_declares_the_memoized_event():
    config = _config(clients=2, users=40, dims=1, categories="4", epsilon=1.0, mechanism="l-grr")
    oracles = AttributeOracles.build("l-grr", 1.0, [4])
    server = FrequencyServer(oracles, 2, ["mean"], round_event=round_event(config, 1.0, None))
    client = FrequencyClient(np.zeros((20, 1), dtype=np.int64), oracles, secret=5)
    for server_round in (1, 2, 3):
        server.configure_round(server_round)
        reply, _ = client.reply(server_round, {})
        server.aggregate(server_round, {0: reply, 1: reply}, {})
    assert server.ledger.spent(0).epsilon == pytest.approx(1.0)
    assert server.ledger.state_dict()["guarantees"][0]["against_an_observer_of_one_round_epsilon"] == pytest.approx(0.5)
    assert isinstance(server.ledger.entries()[-1].event, dp_event.NoOpDpEvent)

"""The ledger's per-round totals cost one accountant computation per distinct client history, and
give each client exactly what composing its own recorded rounds gives."""

from __future__ import annotations

from collections import Counter

import pytest

import ldpfed.accounting.ledger as ledger_module
from ldpfed.accounting import (
    ACCOUNTANTS,
    Budget,
    GaussianDpEvent,
    PrivacyLedger,
    create_accountant,
    event_from_dict,
    gaussian_round,
    not_private,
    pure_round,
)

DELTA = 1e-5


def reference_totals(ledger: PrivacyLedger) -> dict[str, dict]:
    """Each client composed on its own from the ledger's recorded entries (no shared work)."""
    histories: dict[str, Counter] = {}
    for entry in ledger.state_dict(DELTA)["entries"]:
        histories.setdefault(entry["client_id"], Counter())[event_from_dict(entry["event"])] += 1
    totals = {}
    for client, history in histories.items():
        total = {}
        for name in ACCOUNTANTS:
            fresh = create_accountant(name)
            if any(fresh.unsupported(event) is not None for event in history):
                total[name] = None
                continue
            for event, count in history.items():
                fresh.compose(event, count)
            spent = fresh.spent(DELTA)
            total[name] = (spent.epsilon, spent.delta)
        totals[client] = total
    return totals


def mixed_ledger() -> PrivacyLedger:
    """Clients with different participation and events: pure rounds, Gaussian rounds, a
    not-private round, and clients sharing a history."""
    ledger = PrivacyLedger()
    pure, gaussian = pure_round(0.5), gaussian_round(2.0, epsilon=1.0, delta=DELTA)
    for server_round in range(1, 6):
        for client in range(12):
            if client % 3 == 0 or server_round % (client % 3 + 1) == 0:
                ledger.record_event(client, server_round, pure if client < 8 else gaussian)
    ledger.record_event(11, 6, not_private("a clean release"))
    return ledger


def test_totals_equal_each_client_composed_on_its_own():
    ledger = mixed_ledger()
    expected = reference_totals(ledger)
    totals = ledger.totals(DELTA)
    assert totals.keys() == expected.keys()
    for client, total in totals.items():
        for name in ACCOUNTANTS:
            figures = (total[f"{name}_epsilon"], total[f"{name}_delta"])
            if expected[client][name] is None:
                assert figures == (None, None)
            elif not total["private"]:
                assert figures == (None, None) and client == "11"
            else:
                assert figures == expected[client][name]  # the same computation: bit for bit
    assert ledger.max_spent("basic", DELTA).epsilon is None  # client 11 is not private
    for client in ("0", "4", "9"):
        assert (ledger.spent(client, "pld", DELTA).epsilon, ledger.spent(client, "pld", DELTA).delta) == expected[
            client
        ]["pld"]


def count_accountants(monkeypatch) -> list[str]:
    made: list[str] = []
    real = ledger_module.create_accountant

    def counted(name):
        made.append(name)
        return real(name)

    monkeypatch.setattr(ledger_module, "create_accountant", counted)
    return made


@pytest.mark.parametrize("event", [pure_round(1.0), gaussian_round(1.5, epsilon=1.0, delta=DELTA)])
def test_a_rounds_totals_do_not_grow_with_the_clients_or_the_rounds(monkeypatch, event):
    """Every client in every round (the mean task): the accountant work of a round's record (totals,
    max_spent, a budget's admission) is the same for 10 clients as for 1,000."""
    made = count_accountants(monkeypatch)
    per_round = {}
    for clients in (10, 1000):
        ledger = PrivacyLedger()
        counts = []
        for server_round in range(1, 4):
            made.clear()
            Budget(100.0, "pld", DELTA).admit(ledger, range(clients), event)
            for client in range(clients):
                ledger.record_event(client, server_round, event)
            ledger.totals(DELTA)
            ledger.max_spent("pld", DELTA)
            counts.append(len(made))
        per_round[clients] = counts
    assert per_round[10] == per_round[1000]
    assert max(per_round[1000]) <= 2 * len(ACCOUNTANTS) + 1


def test_a_gaussian_history_is_not_shared_with_another_noise_multiplier():
    ledger = PrivacyLedger()
    for server_round in (1, 2):
        ledger.record_event("a", server_round, GaussianDpEvent(1.0))
        ledger.record_event("b", server_round, GaussianDpEvent(2.0))
    assert ledger.spent("a", "rdp", DELTA).epsilon > ledger.spent("b", "rdp", DELTA).epsilon

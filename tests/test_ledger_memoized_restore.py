"""A ledger restored from its record keeps its memoized declarations: a memo's later rounds are free
after a restore as before it (replaying the entries alone charged eps_inf again at the next round)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ldpfed.accounting import EpsilonDeltaDpEvent, PrivacyLedger


def test_a_restored_ledger_charges_a_memoized_event_once():
    event = EpsilonDeltaDpEvent(2.0, 0.0)
    ledger = PrivacyLedger()
    ledger.declare_memoized(event, 1.0, "2-LDP against the server, 1-LDP against one round")
    for server_round in (1, 2):
        ledger.record_round(np.arange(3), server_round, event, "l-grr")
    restored = PrivacyLedger.from_state_dict(json.loads(json.dumps(ledger.state_dict())))
    for book in (ledger, restored):
        book.record_round(np.arange(4), 3, event, "l-grr")  # client 3 joins: charged at its first round
    assert [restored.spent(c).epsilon for c in range(4)] == pytest.approx([2.0] * 4)
    assert restored.totals() == ledger.totals()
    assert restored.state_dict()["guarantees"] == ledger.state_dict()["guarantees"]

"""The ledger's CSV renderings (`PrivacyLedger.entries_csv`, `totals_csv`) against pandas' rendering
of its frames (`entries_frame`, `to_frame`), the reference, on random ledgers: full participation
in row order (the fast path), the same clients in another order, subsets, and named client ids
(with commas and quotes, which CSV quotes)."""

from __future__ import annotations

import numpy as np

from ldpfed.accounting import legacy_event
from ldpfed.accounting.ledger import PrivacyLedger


def _random_ledger(rng: np.random.Generator) -> PrivacyLedger:
    ledger = PrivacyLedger()
    clients = int(rng.integers(1, 40))
    named = ["ann", 'b"o,b', "cy 1"][: int(rng.integers(0, 4))]
    events = [legacy_event(1.0, None, "laplace"), legacy_event(0.5, 1e-6, "gaussian-ish")]
    for round in range(1, int(rng.integers(2, 6))):
        kind = rng.integers(4)
        if kind == 0:  # every client in row order: the fast path
            ids = np.arange(clients)
        elif kind == 1:  # every client, first and last in place, the middle permuted
            ids = (
                np.concatenate([[0], rng.permutation(np.arange(1, clients - 1)), [clients - 1]])
                if clients > 2
                else np.arange(clients)
            )
        elif kind == 2:  # a subset in random order
            ids = rng.permutation(clients)[: int(rng.integers(1, clients + 1))]
        else:
            ids = np.arange(clients)
        event = events[int(rng.integers(2))]
        ledger.record_round(ids, round, event, "laplace" if event is events[0] else "gaussian")
        if named and rng.random() < 0.5:
            ledger.record_round(named, round, event, "named")
    return ledger


def test_entries_and_totals_render_as_pandas_renders_their_frames():
    rng = np.random.default_rng(7)
    for _ in range(60):
        ledger = _random_ledger(rng)
        assert ledger.entries_csv() == ledger.entries_frame().to_csv(index=False)
        assert ledger.totals_csv(1e-5) == ledger.to_frame(1e-5).to_csv(index=False)


def test_a_full_round_renders_its_clients_in_the_order_recorded():
    """Every client, the first and last in place but the others swapped: the lines follow the record."""
    ledger = PrivacyLedger()
    ledger.record_round([0, 2, 1, 3], 1, legacy_event(1.0, None, "laplace"), "laplace")
    lines = ledger.entries_csv().splitlines()[1:]
    assert [line.split(",")[0] for line in lines] == ["0", "2", "1", "3"]

"""The ledger's CSV renderings against its frames, on random ledgers (full participation in row
order, the same clients in another order, subsets, and named client ids with commas and quotes,
which CSV quotes): privacy.csv (`totals_csv`) as pandas renders `to_frame`, and
privacy_entries.csv (`entries_csv`, runs of consecutive ids) read back by `read_entries` as
`entries_frame`, one row per client and round in the order recorded."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from ldpfed.accounting import legacy_event, read_entries
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
        pd.testing.assert_frame_equal(read_entries(io.StringIO(ledger.entries_csv())), ledger.entries_frame())
        assert ledger.totals_csv(1e-5) == ledger.to_frame(1e-5).to_csv(index=False)


def test_a_round_of_consecutive_clients_is_one_line_and_gaps_or_names_start_new_ones():
    ledger = PrivacyLedger()
    laplace = legacy_event(1.0, None, "laplace")
    ledger.record_round(np.arange(100_000), 1, laplace, "laplace")
    ledger.record_round([5, 6, 7, 9, 10, 2], 2, laplace, "laplace")
    ledger.record_round(["ann", 'b"o,b'], 2, laplace, "named")
    assert ledger.entries_csv().splitlines() == [
        "round,first_client_id,last_client_id,clients,mechanism,event",
        "1,0,99999,100000,laplace,1-DP",
        "2,5,7,3,laplace,1-DP",
        "2,9,10,2,laplace,1-DP",
        "2,2,2,1,laplace,1-DP",
        "2,ann,ann,1,named,1-DP",
        '2,"b""o,b","b""o,b",1,named,1-DP',
    ]


def test_a_full_round_renders_its_clients_in_the_order_recorded():
    """Every client, the first and last in place but the others swapped: the lines follow the record."""
    ledger = PrivacyLedger()
    ledger.record_round([0, 2, 1, 3], 1, legacy_event(1.0, None, "laplace"), "laplace")
    assert read_entries(io.StringIO(ledger.entries_csv()))["client_id"].tolist() == ["0", "2", "1", "3"]

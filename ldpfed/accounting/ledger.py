"""Per-client privacy ledger across federated rounds (spec: federated.md, Accounting per client;
gradient-noise.md, Accounting across rounds).

Each round a client takes part in, the ledger records that round's privacy-cost event
(ldpfed.accounting.events). Any accountant (ldpfed.accounting.accountants) composes a client's
events into its total; `totals()` reports every accountant side by side, and `spent_within(..., extra=)`
the total after one more round, which a budget (ldpfed.accounting.budget) checks before admitting a
client to it (`simulate --max-epsilon`).

A client with any not-private event reports `private: False`, the reasons, and no epsilon
(None, JSON null) under every accountant.

Totals are computed once per distinct history: a client's total is a function of its events and
their counts (in the order it met them), so clients with the same history (every client of a run in
which all take part) share one accountant computation, memoized by that history. A round's totals
then cost O(clients) dictionary work plus one accountant call per distinct history, not one per
client and round of the run (the same numbers as composing each client on its own).

A memoized collection (RAPPOR-style longitudinal frequency oracles: each user's permanent report is
drawn once and every round re-randomizes it) is declared with `declare_memoized(event, ...)`: a
client's first round of it records `event` (eps_inf, charged once), its later rounds a no-op event
(they reveal nothing beyond the permanent report to the server over all rounds), and a budget's
"one more round" of it costs nothing to a client already charged. The one-round guarantee (eps_1,
against an observer of that round alone) is a statement of the collection, the same for every
client, written beside the totals (`state_dict`'s "guarantees"); the totals' columns stay eps_inf.

No amplification by the server's client sampling is claimed: LDP protects each report on its
own, the client knows whether it was sampled (its loss counts in every round it took part in),
and the sampling is done by the untrusted server the guarantee is meant to hold against.
"""

from __future__ import annotations

import csv
import io
import math
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ldpfed.accounting.accountants import (
    ACCOUNTANTS,
    DEFAULT_DELTA_TARGET,
    Spent,
    create_accountant,
    not_private_reasons,
)
from ldpfed.accounting.events import (
    describe_event,
    event_from_dict,
    event_to_dict,
)
from ldpfed.accounting.library import dp_event
from ldpfed.validation import LDPValueError, check_fraction, check_positive_int

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class LedgerEntry:
    client_id: str
    round: int
    event: dp_event.DpEvent
    mechanism: str

    def to_dict(self) -> dict:
        return {
            "client_id": self.client_id,
            "round": self.round,
            "mechanism": self.mechanism,
            "event": event_to_dict(self.event),
        }


_REPEAT = dp_event.NoOpDpEvent()  # a memoized collection's later round: nothing new against the server


def _column(values: list) -> np.ndarray:
    """A column of per-state values: floats (None as NaN) where all are numbers or None, else objects."""
    if all(value is None or (isinstance(value, float) and not isinstance(value, bool)) for value in values):
        return np.array([np.nan if value is None else value for value in values], dtype=float)
    if all(isinstance(value, (bool, np.bool_)) for value in values) or all(
        isinstance(value, int) and not isinstance(value, bool) for value in values
    ):
        return np.array(values)
    return np.array(values, dtype=object)


# privacy_entries.csv: a run of clients with consecutive integer ids (first to last, `clients` of
# them; a named client alone: first = last, 1) that met `event` by `mechanism` in `round`.
ENTRIES_COLUMNS = ["round", "first_client_id", "last_client_id", "clients", "mechanism", "event"]
TOTALS_COLUMNS = ["client_id", "rounds", "mechanisms", "private", "reasons"] + [
    f"{name}_{part}" for name in ACCOUNTANTS for part in ("epsilon", "delta")
]


def _csv_field(value) -> str:
    """One CSV field as pandas' to_csv writes it (csv.QUOTE_MINIMAL; None and NaN empty)."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return ""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow([value])
    return buffer.getvalue()


def _flat(record: dict, column: str):
    """A totals record's value as one table cell (lists joined as `to_frame` joins them)."""
    if column == "mechanisms":
        return ",".join(record[column])
    if column == "reasons":
        return "; ".join(record[column])
    return record[column]


def _csv_lines(columns: list[str], ids: list[str], states: np.ndarray, suffixes: dict[int, str]) -> str:
    """Header, then for each recorded row (state > 0) its id and its state's fields; rows in runs
    of one state are joined at once (a round in which every client took part: one run)."""
    rows = np.flatnonzero(states > 0)
    header = ",".join(columns) + "\n"
    if not rows.size:
        return header
    tails = {state: "," + suffix + "\n" for state, suffix in suffixes.items()}
    if rows.size < len(ids):
        ids = [ids[row] for row in rows.tolist()]
    of_rows = states[rows]
    starts = np.concatenate([[0], np.flatnonzero(np.diff(of_rows)) + 1, [rows.size]])
    if starts.size > 1024:  # many short runs: one concatenation per row
        return header + "".join(map(operator.add, ids, [tails[state] for state in of_rows.tolist()]))
    parts = [header]
    for start, end in zip(starts[:-1].tolist(), starts[1:].tolist()):
        tail = tails[int(of_rows[start])]
        parts.append(tail.join(ids[start:end]) + tail)
    return "".join(parts)


def _composed(history: tuple, accountant: str, extra: dp_event.DpEvent | None = None):
    """A fresh `accountant` composed with the (event, count) pairs of `history`, then `extra`."""
    composed = create_accountant(accountant)
    for event, count in history:
        composed.compose(event, count)
    if extra is not None:
        composed.compose(extra)
    return composed


def _int_key(client_id) -> int | None:
    """A client id that is a non-negative integer (or its canonical decimal string), else None."""
    if isinstance(client_id, (int, np.integer)) and not isinstance(client_id, bool) and client_id >= 0:
        return int(client_id)
    if isinstance(client_id, str) and client_id.isdigit() and client_id.isascii() and str(int(client_id)) == client_id:
        return int(client_id)
    return None


class PrivacyLedger:
    """Each client's privacy-cost event per round, and its totals over the rounds it took part in.

    Kept as columns: each client is a row whose state (its history: the (event, count) pairs in
    the order it met them, and its mechanisms) is an index into the distinct states seen; a round
    moves the rows of its clients from state to state with array operations, one transition per
    distinct state (`record_round`). Integer client ids (partition ids) are found by array
    indexing, other ids (any string) through a dictionary. The recorded rounds are kept as one
    block (round, event, mechanism, rows) per call (`entries_frame`)."""

    def __init__(self) -> None:
        self._int_rows = np.full(0, -1, dtype=np.int64)  # integer client id -> row (-1: none)
        self._named_rows: dict[str, int] = {}  # other client ids -> row
        self._row_ids = np.zeros(0, dtype=np.int64)  # row -> integer client id (-1: named)
        self._row_names: dict[int, str] = {}  # row -> other client id
        self._state = np.zeros(0, dtype=np.int64)  # row -> state index
        self._latest = np.zeros(0, dtype=np.int64)  # row -> its latest recorded round (-1: none)
        self._states: list[tuple[tuple, frozenset]] = [((), frozenset())]  # (history, mechanisms)
        self._state_index: dict[tuple, int] = {self._states[0]: 0}
        self._moves: dict[tuple, int] = {}  # (state, event, mechanism) -> next state
        self._blocks: list[tuple[int, dp_event.DpEvent, str, np.ndarray]] = []  # (round, event, mechanism, rows)
        self._rounds: dict[int, list[np.ndarray]] = {}  # round -> rows recorded in it
        self._size = 0
        # (history, accountant, delta target, extra event) -> Spent, or None where unsupported
        self._memo: dict[tuple, Spent | None] = {}
        self._memoized: dict[dp_event.DpEvent, dict] = {}  # permanent event -> its guarantees' statement

    def __len__(self) -> int:
        return self._size

    # --- recording ----------------------------------------------------------------------------------
    def record_event(self, client_id, round: int, event: dp_event.DpEvent, mechanism: str | None = None) -> None:
        """Record one round of one client by its event."""
        self.record_round([client_id], round, event, mechanism)

    def declare_memoized(self, event: dp_event.DpEvent, one_round_epsilon: float, statement: str) -> None:
        """`event` is a memoized collection's permanent cost: charged at a client's first round of
        it, free at its later ones (module docstring); `one_round_epsilon`: eps_1, against an
        observer of one round; `statement`: who gets which guarantee, in words."""
        if not isinstance(event, dp_event.DpEvent):
            raise LDPValueError(f"event must be a DpEvent, got {type(event).__name__}")
        self._memoized[event] = {
            "event": describe_event(event),
            "against_the_server_over_all_rounds": "each client's total (eps_inf for its memoized value, charged once)",
            "against_an_observer_of_one_round_epsilon": float(one_round_epsilon),
            "statement": statement,
        }

    def _charged(self, rows: np.ndarray, event: dp_event.DpEvent) -> np.ndarray:
        """Whether each row's history already holds `event` (one check per distinct state)."""
        states = self._state[rows]
        holds = np.zeros(len(self._states), dtype=bool)
        for state in np.flatnonzero(np.bincount(states, minlength=len(self._states))):
            holds[state] = event in dict(self._states[state][0])
        return holds[states]

    def record_round(self, client_ids, round: int, event: dp_event.DpEvent, mechanism: str | None = None) -> None:
        """Record one round with the same event for each of `client_ids` (array work: O(clients)
        in numpy, one transition per distinct client state); a declared memoized event is a no-op
        for the clients already charged it."""
        round = check_positive_int(round, "round", minimum=0)
        if not isinstance(event, dp_event.DpEvent):
            raise LDPValueError(f"event must be a DpEvent, got {type(event).__name__}")
        mechanism = describe_event(event) if mechanism is None else str(mechanism)
        rows = self._rows_for(client_ids)
        if rows.size == 0:
            return
        self._check_new(rows, round)
        if event in self._memoized:
            charged = self._charged(rows, event)
            if charged.any():
                self._record_rows(rows[~charged], round, event, mechanism)
                self._record_rows(rows[charged], round, _REPEAT, f"{mechanism}: memo repeated, charged once")
                return
        self._record_rows(rows, round, event, mechanism)

    def _record_rows(self, rows: np.ndarray, round: int, event: dp_event.DpEvent, mechanism: str) -> None:
        if rows.size == 0:
            return
        states = self._state[rows]
        moves = np.arange(len(self._states), dtype=np.int64)  # state -> state after this round
        for state in np.flatnonzero(np.bincount(states, minlength=len(self._states))):
            moves[state] = self._move(int(state), event, mechanism)
        self._state[rows] = moves[states]
        self._latest[rows] = np.maximum(self._latest[rows], round)
        self._rounds.setdefault(round, []).append(rows)
        self._blocks.append((round, event, mechanism, rows))
        self._size += rows.size

    def _check_new(self, rows: np.ndarray, round: int) -> None:
        """Raise if a row appears twice in `rows` or already has an entry for `round`: array work
        (a row whose latest round is below `round` cannot have one)."""
        counts = np.bincount(rows, minlength=self._state.size)
        twice = np.flatnonzero(counts > 1)
        earlier = rows[self._latest[rows] >= round]
        if earlier.size:
            done = np.concatenate(self._rounds.get(round, [np.zeros(0, dtype=np.int64)]))
            twice = np.concatenate([twice, earlier[np.isin(earlier, done)]])
        if twice.size:
            raise LDPValueError(f"client {self._client_of(int(twice[0]))!r} already has an entry for round {round}")

    def _move(self, state: int, event: dp_event.DpEvent, mechanism: str) -> int:
        """The state after `state` meets one more round of `event` by `mechanism`."""
        key = (state, event, mechanism)
        if key not in self._moves:
            history, mechanisms = self._states[state]
            counts = dict(history)
            counts[event] = counts.get(event, 0) + 1  # a new event goes last: the order met
            after = (tuple(counts.items()), mechanisms | {mechanism})
            if after not in self._state_index:
                self._state_index[after] = len(self._states)
                self._states.append(after)
            self._moves[key] = self._state_index[after]
        return self._moves[key]

    def _rows_for(self, client_ids) -> np.ndarray:
        """The rows of `client_ids`, new rows made for clients not seen before."""
        ids = np.asarray(client_ids)
        if ids.size and ids.dtype.kind in "iu" and ids.min() >= 0:
            return self._integer_rows(ids.astype(np.int64).ravel())
        return np.array([self._row_of(client, create=True) for client in list(client_ids)], dtype=np.int64)

    def _integer_rows(self, ids: np.ndarray) -> np.ndarray:
        if ids.max() >= self._int_rows.size:
            grown = np.full(max(int(ids.max()) + 1, 2 * self._int_rows.size), -1, dtype=np.int64)
            grown[: self._int_rows.size] = self._int_rows
            self._int_rows = grown
        rows = self._int_rows[ids]
        new = rows < 0
        if new.any():
            fresh = np.unique(ids[new])
            self._int_rows[fresh] = self._add_rows(fresh.size)
            self._row_ids[-fresh.size :] = fresh
            rows = self._int_rows[ids]
        return rows

    def _add_rows(self, count: int) -> np.ndarray:
        start = self._state.size
        self._state = np.concatenate([self._state, np.zeros(count, dtype=np.int64)])
        self._latest = np.concatenate([self._latest, np.full(count, -1, dtype=np.int64)])
        self._row_ids = np.concatenate([self._row_ids, np.full(count, -1, dtype=np.int64)])
        return np.arange(start, start + count)

    def _row_of(self, client_id, create: bool = False) -> int:
        """The row of one client (-1 if unknown and not `create`)."""
        key = _int_key(client_id)
        if key is not None:
            if key < self._int_rows.size and self._int_rows[key] >= 0:
                return int(self._int_rows[key])
            return int(self._integer_rows(np.array([key]))[0]) if create else -1
        name = str(client_id)
        if name not in self._named_rows:
            if not create:
                return -1
            row = int(self._add_rows(1)[0])
            self._named_rows[name], self._row_names[row] = row, name
        return self._named_rows[name]

    def _client_of(self, row: int) -> str:
        return self._row_names[row] if self._row_ids[row] < 0 else str(int(self._row_ids[row]))

    def _client_column(self) -> np.ndarray:
        """Each row's client id as a string (str(client_id), as recorded)."""
        column = self._row_ids.astype(str).astype(object)
        for row, name in self._row_names.items():
            column[row] = name
        return column

    # --- questions -----------------------------------------------------------------------------------
    def clients(self) -> list[str]:
        return [str(client) for client in self._client_column()[self._state > 0]]

    def accountant(self, client_id, accountant: str = "basic", extra: dp_event.DpEvent | None = None):
        """`accountant` composed with the client's events (and `extra`, if given)."""
        return _composed(self._history(client_id), accountant, extra)

    def spent(self, client_id, accountant: str = "basic", delta_target: float = DEFAULT_DELTA_TARGET) -> Spent:
        """The client's total so far under `accountant` (epsilon None when not private)."""
        return self._spent_of(self._history(client_id), accountant, delta_target)

    def _history(self, client_id) -> tuple:
        """The client's (event, count) pairs in the order it met them: all its total depends on."""
        row = self._row_of(client_id)
        return () if row < 0 else self._states[self._state[row]][0]

    def _spent_of(
        self, history: tuple, accountant: str, delta_target: float, extra: dp_event.DpEvent | None = None
    ) -> Spent:
        """`accountant`'s total of `history` (and `extra`), computed once per distinct argument."""
        return self._memoised(("at", history, accountant, delta_target, extra), lambda a: a.spent(delta_target))

    def _memoised(self, key: tuple, state):
        """`state(accountant composed with key's history and extra)`, once per distinct key."""
        if key not in self._memo:
            _, history, accountant, _, extra = key
            self._memo[key] = state(_composed(history, accountant, extra))
        return self._memo[key]

    def spent_within(
        self,
        client_id,
        accountant: str = "basic",
        max_delta: float = DEFAULT_DELTA_TARGET,
        extra: dp_event.DpEvent | None = None,
    ) -> Spent:
        """The client's total as `accountant` states it with delta <= `max_delta` where it can
        (`Accountant.spent_within`; basic's delta is the rounds' sum); with `extra`, the total it
        would have after one more round costing `extra` (what a budget checks before admitting it)."""
        history = self._history(client_id)
        if extra in self._memoized and extra in dict(history):  # a memo's later round costs nothing more
            extra = None
        key = ("within", history, accountant, max_delta, extra)
        return self._memoised(key, lambda composed: composed.spent_within(max_delta))

    def _recorded_states(self) -> list[int]:
        """The distinct states of the clients with at least one recorded round."""
        return [int(state) for state in np.flatnonzero(np.bincount(self._state, minlength=1)) if state > 0]

    def max_spent(
        self, accountant: str = "basic", delta_target: float = DEFAULT_DELTA_TARGET, *, within: bool = False
    ) -> Spent:
        """The largest total any client has spent (not private if any client is not); `within`:
        each client's total as stated within delta_target (`spent_within`, a budget's view). One
        accountant figure per distinct client history."""
        reasons = tuple(self.reasons())
        if reasons:
            return Spent(accountant, None, None, False, reasons)
        histories = {self._states[state][0] for state in self._recorded_states()}
        if within:
            spents = [
                self._memoised(("within", h, accountant, delta_target, None), lambda a: a.spent_within(delta_target))
                for h in histories
            ]
        else:
            spents = [self._spent_of(history, accountant, delta_target) for history in histories]
        if not spents:
            return Spent(accountant, 0.0, 0.0, True, (), 0.0, 0.0)
        return Spent(
            accountant,
            max(s.epsilon for s in spents),
            max(s.delta for s in spents),
            True,
            (),
            max(s.float_slack_epsilon for s in spents),
            max(s.float_slack_delta for s in spents),
        )

    @property
    def private(self) -> bool:
        return not self.reasons()

    def reasons(self) -> list[str]:
        """Why the ledger is not private (empty when every recorded round is)."""
        return list(not_private_reasons(self._events_of_all()))

    def _events_of_all(self):
        return {event for state in self._recorded_states() for event, _ in self._states[state][0]}

    # --- records -----------------------------------------------------------------------------------
    def totals(self, delta_target: float = DEFAULT_DELTA_TARGET) -> dict[str, dict]:
        """str(client_id) -> {rounds, mechanisms, private, reasons, and for each accountant
        <name>_epsilon, <name>_delta}; figures an accountant cannot give are None (a dict per
        client: `to_frame` gives the same as columns)."""
        records = self._state_records(check_fraction(delta_target, "delta_target"))
        rows = np.flatnonzero(self._state > 0)
        clients = self._client_column()
        return {
            str(clients[row]): {
                **records[self._state[row]],
                "mechanisms": list(records[self._state[row]]["mechanisms"]),
                "reasons": list(records[self._state[row]]["reasons"]),
            }
            for row in rows
        }

    def _state_records(self, delta_target: float) -> dict[int, dict]:
        """{state: its `totals` record}, one per distinct recorded state."""
        return {
            state: self._total(self._states[state][0], self._states[state][1], delta_target)
            for state in self._recorded_states()
        }

    def _total(self, history: tuple, mechanisms: set[str], delta_target: float) -> dict:
        """A client's `totals` record from its history and mechanisms."""
        total = {"rounds": int(sum(count for _, count in history)), "mechanisms": sorted(mechanisms)}
        for name in ACCOUNTANTS:
            spent = self._spent_if_supported(history, name, delta_target)
            total[f"{name}_epsilon"] = None if spent is None else spent.epsilon
            total[f"{name}_delta"] = None if spent is None else spent.delta
        client_reasons = not_private_reasons(event for event, _ in history)
        total["private"] = not client_reasons
        total["reasons"] = list(client_reasons)
        return total

    def _spent_if_supported(self, history: tuple, accountant: str, delta_target: float) -> Spent | None:
        """The total of `history` under `accountant`, or None if it cannot account one of the events."""
        key = (history, accountant, delta_target, "if supported")
        if key not in self._memo:
            fresh = create_accountant(accountant)
            supported = all(fresh.unsupported(event) is None for event, _ in history)
            self._memo[key] = self._spent_of(history, accountant, delta_target) if supported else None
        return self._memo[key]

    def to_frame(self, delta_target: float = DEFAULT_DELTA_TARGET) -> pd.DataFrame:
        """One row per client with its totals (for CSV/Parquet), built as columns: each distinct
        state's record once, spread over its clients by array indexing."""
        import pandas as pd  # lazily, with pyarrow: a Flower node imports this module, never this method

        columns = TOTALS_COLUMNS
        records = self._state_records(check_fraction(delta_target, "delta_target"))
        rows = np.flatnonzero(self._state > 0)
        states = sorted(records)
        position = np.searchsorted(np.array(states, dtype=np.int64), self._state[rows]) if states else rows
        data = {"client_id": self._client_column()[rows]}
        for column in columns[1:]:
            values = [records[state][column] for state in states]
            if column in ("mechanisms", "reasons"):
                values = [",".join(value) if column == "mechanisms" else "; ".join(value) for value in values]
            data[column] = _column(values)[position] if states else []
        return pd.DataFrame(data, columns=columns)

    def totals_csv(self, delta_target: float = DEFAULT_DELTA_TARGET) -> str:
        """`to_frame(delta_target)` as CSV text (as DataFrame.to_csv(index=False) writes it): each
        distinct state's fields rendered once and joined to its clients' ids, no record per client."""
        records = self._state_records(check_fraction(delta_target, "delta_target"))
        fields = {
            state: [_csv_field(_flat(record, c)) for c in TOTALS_COLUMNS[1:]] for state, record in records.items()
        }
        return _csv_lines(TOTALS_COLUMNS, self._csv_ids(), self._state, {s: ",".join(f) for s, f in fields.items()})

    def entries_csv(self) -> str:
        """privacy_entries.csv: the recorded rounds, in the order recorded, with each round's clients
        as runs of consecutive integer ids, one line per run (`ENTRIES_COLUMNS`: a round of every
        client is one line, at any number of clients); a named client id is a run of its own.
        `read_entries` expands it to `entries_frame()`, one row per client and round."""
        lines = [",".join(ENTRIES_COLUMNS) + "\n"]
        ids = self._csv_ids() if self._blocks else []
        for round, event, mechanism, rows in self._blocks:
            tail = "," + ",".join(_csv_field(value) for value in (mechanism, describe_event(event))) + "\n"
            integer = self._row_ids[rows]
            ends_run = (integer[1:] != integer[:-1] + 1) | (integer[:-1] < 0)
            starts = np.concatenate([[0], np.flatnonzero(ends_run) + 1])
            stops = np.append(starts[1:], rows.size)
            firsts, lasts = rows[starts].tolist(), rows[stops - 1].tolist()
            lines += [
                f"{round},{ids[first]},{ids[last]},{count}{tail}"
                for first, last, count in zip(firsts, lasts, (stops - starts).tolist())
            ]
        return "".join(lines)

    def _csv_ids(self) -> list[str]:
        """Each row's client id as a CSV field, cached while no row is added."""
        if getattr(self, "_ids_cache", (None, -1))[1] != self._state.size:
            column = list(map(str, self._row_ids.tolist()))  # integers need no quoting
            for row, name in self._row_names.items():
                column[row] = _csv_field(name)
            self._ids_cache = (column, self._state.size)
        return self._ids_cache[0]

    def entries_frame(self) -> pd.DataFrame:
        """Every recorded round (the accountants' inputs), one row per client and round, in the
        order recorded."""
        import pandas as pd

        clients = self._client_column()
        blocks = self._blocks
        if not blocks:
            return pd.DataFrame(columns=["client_id", "round", "mechanism", "event"])
        sizes = [rows.size for _, _, _, rows in blocks]
        block = np.repeat(np.arange(len(blocks)), sizes)
        rows = np.concatenate([rows for _, _, _, rows in blocks])
        return pd.DataFrame(
            {
                "client_id": clients[rows],
                "round": np.array([r for r, _, _, _ in blocks], dtype=np.int64)[block],
                "mechanism": np.array([m for _, _, m, _ in blocks], dtype=object)[block],
                "event": np.array([describe_event(e) for _, e, _, _ in blocks], dtype=object)[block],
            }
        )

    def entries(self) -> list[LedgerEntry]:
        """Every recorded round as a `LedgerEntry`, in the order recorded (one object per client and
        round: for records of small ledgers; `entries_frame` for large ones)."""
        clients = self._client_column()
        return [
            LedgerEntry(str(clients[row]), r, event, mechanism)
            for r, event, mechanism, rows in self._blocks
            for row in rows
        ]

    def state_dict(self, delta_target: float = DEFAULT_DELTA_TARGET, *, per_client: bool = True) -> dict:
        """JSON-ready record: the accountants, their inputs (entries) and outputs (totals);
        `per_client` False leaves out the per-client entries and totals (which `entries_frame` and
        `to_frame` hold as columns) and keeps the distinct histories' totals."""
        record = {
            "accountants": {name: cls.description for name, cls in ACCOUNTANTS.items()},
            "delta_target": check_fraction(delta_target, "delta_target"),
            "amplification_by_client_sampling": False,
            "private": self.private,
            "reasons": self.reasons(),
        }
        if self._memoized:
            record["guarantees"] = list(self._memoized.values())
            record["memoized_events"] = [event_to_dict(event) for event in self._memoized]  # guarantees' order
        if per_client:
            record["entries"] = [entry.to_dict() for entry in self.entries()]
            record["totals"] = self.totals(delta_target)
        else:
            counts = np.bincount(self._state, minlength=len(self._states))
            record["clients"] = int(np.count_nonzero(self._state > 0))
            record["distinct_totals"] = [
                {"clients": int(counts[state]), **total} for state, total in self._state_records(delta_target).items()
            ]
        return record

    @classmethod
    def from_state_dict(cls, state: dict) -> PrivacyLedger:
        """The ledger of a `state_dict` record (with its entries): its memoized declarations first, so
        that a restored ledger charges a memo's later rounds nothing, as the original does."""
        ledger = cls()
        for event, guarantee in zip(state.get("memoized_events", []), state.get("guarantees", [])):
            ledger.declare_memoized(
                event_from_dict(event), guarantee["against_an_observer_of_one_round_epsilon"], guarantee["statement"]
            )
        for entry in state.get("entries", []):
            ledger.record_event(entry["client_id"], entry["round"], event_from_dict(entry["event"]), entry["mechanism"])
        return ledger


def read_entries(source) -> pd.DataFrame:
    """privacy_entries.csv (a path or an open file) as one row per client and round, in the order
    recorded: the columns of `PrivacyLedger.entries_frame` (client ids as strings), each run of
    consecutive integer ids expanded."""
    import pandas as pd

    text = {"first_client_id": str, "last_client_id": str, "mechanism": str, "event": str}
    runs = pd.read_csv(source, dtype={**text, "round": np.int64, "clients": np.int64}, keep_default_na=False)
    counts = runs["clients"].to_numpy()
    run = np.repeat(np.arange(len(runs)), counts)
    offset = np.arange(run.size) - np.repeat(np.cumsum(counts) - counts, counts)
    firsts = runs["first_client_id"].to_numpy(dtype=object)[run]
    ranged = counts[run] > 1
    if ranged.any():
        firsts[ranged] = (firsts[ranged].astype(np.int64) + offset[ranged]).astype(str)
    return pd.DataFrame(
        {
            "client_id": firsts,
            "round": runs["round"].to_numpy()[run],
            "mechanism": runs["mechanism"].to_numpy(dtype=object)[run],
            "event": runs["event"].to_numpy(dtype=object)[run],
        }
    )

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

No amplification by the server's client sampling is claimed: LDP protects each report on its
own, the client knows whether it was sampled (its loss counts in every round it took part in),
and the sampling is done by the untrusted server the guarantee is meant to hold against.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ldpfed.accounting.accountants import (
    ACCOUNTANTS,
    DEFAULT_DELTA_TARGET,
    Spent,
    create_accountant,
    not_private_reasons,
)
from ldpfed.accounting.events import (
    CalibratedDpEvent,
    EpsilonDeltaDpEvent,
    GaussianDpEvent,
    describe_event,
    event_from_dict,
    event_to_dict,
    not_private,
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


def legacy_event(epsilon: float, delta: float | None, mechanism: str, noise_multiplier: float | None = None):
    """The event of a round given as (eps, delta[, noise multiplier]); eps = inf: not private."""
    try:
        epsilon = float(epsilon)
    except (TypeError, ValueError):
        raise LDPValueError(f"epsilon must be a number > 0 (inf for no privacy), got {epsilon!r}") from None
    if math.isnan(epsilon) or epsilon <= 0:
        raise LDPValueError(f"epsilon must be > 0 (inf for no privacy), got {epsilon!r}")
    delta = 0.0 if delta is None else float(delta)
    if not (0.0 <= delta < 1.0):
        raise LDPValueError(f"delta must be in [0, 1), got {delta!r}")
    if math.isinf(epsilon):
        return not_private(f"mechanism {mechanism} releases its value without noise")
    if noise_multiplier is None:
        return EpsilonDeltaDpEvent(epsilon, delta)
    noise_multiplier = float(noise_multiplier)
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise LDPValueError(f"noise_multiplier must be a finite number > 0, got {noise_multiplier!r}")
    if delta == 0.0:
        raise LDPValueError("a Gaussian round needs its delta in (0, 1)")
    return CalibratedDpEvent(GaussianDpEvent(noise_multiplier), epsilon, delta)


def _composed(history: tuple, accountant: str, extra: dp_event.DpEvent | None = None):
    """A fresh `accountant` composed with the (event, count) pairs of `history`, then `extra`."""
    composed = create_accountant(accountant)
    for event, count in history:
        composed.compose(event, count)
    if extra is not None:
        composed.compose(extra)
    return composed


class PrivacyLedger:
    """Each client's privacy-cost event per round, and its totals over the rounds it took part in."""

    def __init__(self) -> None:
        self._entries: list[LedgerEntry] = []
        self._events: dict[str, Counter] = {}
        self._mechanisms: dict[str, set[str]] = {}
        self._seen: set[tuple[str, int]] = set()
        # (history, accountant, delta target, extra event) -> Spent, or None where unsupported
        self._memo: dict[tuple, Spent | None] = {}

    def __len__(self) -> int:
        return len(self._entries)

    # --- recording ----------------------------------------------------------------------------------
    def record_event(self, client_id, round: int, event: dp_event.DpEvent, mechanism: str | None = None) -> None:
        """Record one round of one client by its event."""
        client = str(client_id)
        round = check_positive_int(round, "round", minimum=0)
        if not isinstance(event, dp_event.DpEvent):
            raise LDPValueError(f"event must be a DpEvent, got {type(event).__name__}")
        if (client, round) in self._seen:
            raise LDPValueError(f"client {client!r} already has an entry for round {round}")
        entry = LedgerEntry(client, round, event, describe_event(event) if mechanism is None else str(mechanism))
        self._entries.append(entry)
        if client not in self._events:  # (setdefault would build a Counter on every call)
            self._events[client], self._mechanisms[client] = Counter(), set()
        self._events[client][event] += 1
        self._mechanisms[client].add(entry.mechanism)
        self._seen.add((client, round))

    # --- questions -----------------------------------------------------------------------------------
    def clients(self) -> list[str]:
        return list(self._events)

    def accountant(self, client_id, accountant: str = "basic", extra: dp_event.DpEvent | None = None):
        """`accountant` composed with the client's events (and `extra`, if given)."""
        return _composed(self._history(client_id), accountant, extra)

    def spent(self, client_id, accountant: str = "basic", delta_target: float = DEFAULT_DELTA_TARGET) -> Spent:
        """The client's total so far under `accountant` (epsilon None when not private)."""
        return self._spent_of(self._history(client_id), accountant, delta_target)

    def _history(self, client_id) -> tuple:
        """The client's (event, count) pairs in the order it met them: all its total depends on."""
        return tuple(self._events.get(str(client_id), Counter()).items())

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
        key = ("within", self._history(client_id), accountant, max_delta, extra)
        return self._memoised(key, lambda composed: composed.spent_within(max_delta))

    def max_spent(
        self, accountant: str = "basic", delta_target: float = DEFAULT_DELTA_TARGET, *, within: bool = False
    ) -> Spent:
        """The largest total any client has spent (not private if any client is not); `within`:
        each client's total as stated within delta_target (`spent_within`, a budget's view)."""
        reasons = tuple(self.reasons())
        if reasons:
            return Spent(accountant, None, None, False, reasons)
        spend = self.spent_within if within else self.spent
        spents = [spend(client, accountant, delta_target) for client in self._events]
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
        return {event for events in self._events.values() for event in events}

    # --- records -----------------------------------------------------------------------------------
    def totals(self, delta_target: float = DEFAULT_DELTA_TARGET) -> dict[str, dict]:
        """str(client_id) -> {rounds, mechanisms, private, reasons, and for each accountant
        <name>_epsilon, <name>_delta}; figures an accountant cannot give are None."""
        delta_target = check_fraction(delta_target, "delta_target")
        shared: dict[tuple, dict] = {}  # one record per distinct (history, mechanisms)
        result = {}
        for client, events in self._events.items():
            history, mechanisms = tuple(events.items()), self._mechanisms[client]
            key = (history, frozenset(mechanisms))
            if key not in shared:
                shared[key] = self._total(history, mechanisms, delta_target)
            record = shared[key]
            result[client] = {**record, "mechanisms": list(record["mechanisms"]), "reasons": list(record["reasons"])}
        return result

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
        """One row per client with its totals (for CSV/Parquet)."""
        import pandas as pd  # lazily, with pyarrow: a Flower node imports this module, never this method

        columns = ["client_id", "rounds", "mechanisms", "private", "reasons"] + [
            f"{name}_{part}" for name in ACCOUNTANTS for part in ("epsilon", "delta")
        ]
        rows = [
            {
                "client_id": client,
                **total,
                "mechanisms": ",".join(total["mechanisms"]),
                "reasons": "; ".join(total["reasons"]),
            }
            for client, total in self.totals(delta_target).items()
        ]
        return pd.DataFrame(rows, columns=columns)

    def entries_frame(self) -> pd.DataFrame:
        """Every recorded round (the accountants' inputs)."""
        import pandas as pd

        rows = [
            {"client_id": e.client_id, "round": e.round, "mechanism": e.mechanism, "event": describe_event(e.event)}
            for e in self._entries
        ]
        return pd.DataFrame(rows, columns=["client_id", "round", "mechanism", "event"])

    def state_dict(self, delta_target: float = DEFAULT_DELTA_TARGET) -> dict:
        """JSON-ready record: the accountants, their inputs (entries) and outputs (totals)."""
        return {
            "accountants": {name: cls.description for name, cls in ACCOUNTANTS.items()},
            "delta_target": check_fraction(delta_target, "delta_target"),
            "amplification_by_client_sampling": False,
            "private": self.private,
            "reasons": self.reasons(),
            "entries": [entry.to_dict() for entry in self._entries],
            "totals": self.totals(delta_target),
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> PrivacyLedger:
        ledger = cls()
        for entry in state.get("entries", []):
            ledger.record_event(entry["client_id"], entry["round"], event_from_dict(entry["event"]), entry["mechanism"])
        return ledger

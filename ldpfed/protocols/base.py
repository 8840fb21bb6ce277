"""What travels between a client half and a server half, and the budget bookkeeping of a round
(spec: federated.md). Flower-free: `clients/` and `server/` convert these to Flower records.

A server half is shaped like a Flower Strategy: `configure_round` (which partitions, what to
broadcast), `aggregate` (the replies of the round, and the failures), `evaluate` (the server's own
evaluation). A client half answers `reply(round, broadcast)` with a `ClientReply` (only what the
protocol sends) and a diagnostics dict (clean values for the simulation's figures; never sent,
see ldpfed.protocols.diagnostics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

import ldpfed.accounting as accounting


class InjectedFailure(RuntimeError):
    """Raised by clients listed in `fail-clients` (fault injection for tests and demos)."""


@dataclass(frozen=True)
class ClientReply:
    """A client's message to the server: named arrays and numbers (no clean value)."""

    arrays: dict[str, np.ndarray]
    metrics: dict[str, int | float] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundPlan:
    """The server's instructions for one round: who is asked, and what they all receive."""

    partitions: list[int]
    broadcast: dict[str, np.ndarray]


class ServerHalf(Protocol):
    def configure_round(self, server_round: int) -> RoundPlan: ...
    def aggregate(
        self, server_round: int, replies: dict, failures: dict[int, str], sums: dict | None = None
    ) -> dict: ...
    def evaluate(self, server_round: int) -> dict: ...


class ClientHalf(Protocol):
    def reply(self, server_round: int, broadcast: dict[str, np.ndarray]) -> tuple[ClientReply, dict]: ...


def short_reason(reason: str) -> str:
    """The last line of a (Ray) traceback: 'InjectedFailure: injected failure ...'."""
    lines = [line.strip() for line in str(reason).strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "error"


def participation(planned: list[int], replies: dict, failures: dict[int, str]) -> dict:
    """The round's participation record; a planned client without a reply or error failed too."""
    failures = {**{pid: "no reply" for pid in planned if pid not in replies}, **failures}
    return {
        "clients_sampled": len(planned),
        "clients_replied": len(replies),
        "clients_failed": len(failures),
        "failed_partitions": ",".join(str(pid) for pid in sorted(failures)),
        "failure_reasons": " | ".join(sorted(set(failures.values()))),
    }


class BudgetedServer:
    """The budget bookkeeping every server half shares (mean, frequency, train): one ledger event per
    client per round (`round_event`, None: no ledger), the per-client budget that stops a client
    before it would exceed it (ldpfed.accounting.Budget, or None), and the round's participation."""

    def __init__(self, round_event, budget=None) -> None:
        self.round_event = round_event
        self.budget = budget
        if budget is not None:
            budget.check(round_event)
        self.ledger = accounting.PrivacyLedger()
        self._planned: list[int] = []
        self._stopped: list[int] = []

    def admit(self, partitions) -> list[int]:
        """The partitions that take part this round; those the budget stops are kept for the record."""
        if self.budget is None:
            self._planned, self._stopped = list(partitions), []
        else:
            self._planned, self._stopped = self.budget.admit(self.ledger, list(partitions), self.round_event)
        return self._planned

    def charge(self, server_round: int, partitions, mechanism: str) -> None:
        """Record one round's event for each partition that replied."""
        if self.round_event is not None:
            for pid in partitions:
                self.ledger.record_event(pid, server_round, self.round_event, mechanism)

    def round_record(self, replies: dict, failures: dict[int, str]) -> dict:
        """Participation (planned, replied, failed) and who the budget stopped."""
        record = participation(self._planned, replies, failures)
        if self.budget is not None:
            record["clients_stopped_by_budget"] = len(self._stopped)
            record["stopped_partitions"] = ",".join(str(pid) for pid in sorted(self._stopped))
        return record

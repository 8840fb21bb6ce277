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
        self,
        server_round: int,
        replies: dict[int, ClientReply],
        failures: dict[int, str],
        sums: dict[int, dict] | None = None,
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


def admit(budget, ledger, partitions: list[int], event) -> tuple[list[int], list[int]]:
    """(partitions that take part, partitions stopped by the run's privacy budget): a client whose
    total would exceed max-epsilon with this round's `event` stops (ldpfed.accounting.Budget)."""
    if budget is None:
        return list(partitions), []
    return budget.admit(ledger, list(partitions), event)


def budget_record(budget, stopped: list[int]) -> dict:
    """The round's record of the clients the budget stopped (nothing without a budget)."""
    if budget is None:
        return {}
    return {
        "clients_stopped_by_budget": len(stopped),
        "stopped_partitions": ",".join(str(pid) for pid in sorted(stopped)),
    }

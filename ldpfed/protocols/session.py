"""One federation run seen from outside the protocol: the world's seeds, the per-round record with
the diagnostics joined in, and the summary (spec: federated.md); what differs by task comes from
the run's entry of `ldpfed.tasks`, which the harness hands to `Session`.

`World` is what the harness knows: the run seed's children (data seed, server seed) and one secret
per client from the noise root (128 bits of OS entropy, or `--noise-seed`; per client with
`fresh-noise`). `Session` turns each round's server metrics and the clients' diagnostics into a
metrics row, writes the files (`Recorder`) and builds the summary. It is used by `ldpfed simulate`
(both engines) and by the ServerApp under `flwr run`, where no diagnostics reach it (the noise
figures are then NaN).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ldpfed.accounting import trust
from ldpfed.config import Config
from ldpfed.outputs import OutputDir
from ldpfed.protocols import seeds
from ldpfed.protocols.privacy import privacy_status
from ldpfed.protocols.recorder import Recorder
from ldpfed.validation import LDPValueError


@dataclass(frozen=True)
class World:
    """The harness's seeds: the server gets `server` and `data` only; clients `data` and their secret.
    `noise_root` (None with fresh noise) is what the clients' secrets derive from, never the run
    seed; `noise` says where it came from (`seeds.OS_ENTROPY`, `USER_CHOSEN`, `FRESH_PER_CLIENT`)."""

    data: int
    server: int
    secrets: dict[int, int] | None  # None: each client draws OS entropy (fresh noise)
    noise_root: int | None = None
    noise: str = seeds.USER_CHOSEN  # secrets given directly (a deployment's node seeds in a test) are chosen

    @classmethod
    def from_config(cls, config: Config, noise_seed: int | None = None) -> World:
        """Data and server seeds from the run seed; the clients' secrets from `noise_seed` if given,
        else from a noise root of 128 bits of OS entropy (per client with `fresh-noise`)."""
        run = config.run
        public = seeds.data_seed(run.seed), seeds.server_seed(run.seed)
        if run.fresh_noise:
            if noise_seed is not None:
                raise LDPValueError("--noise-seed and --fresh-noise exclude each other (fresh noise is never recorded)")
            return cls(*public, None, None, seeds.FRESH_PER_CLIENT)
        root = seeds.fresh_secret() if noise_seed is None else noise_seed
        source = seeds.OS_ENTROPY if noise_seed is None else seeds.USER_CHOSEN
        return cls(*public, seeds.client_secrets(root, config.federation.clients), root, source)

    def secret(self, partition_id: int) -> int:
        return seeds.fresh_secret() if self.secrets is None else self.secrets[partition_id]

    def central_noise_secret(self) -> int:
        """The trusted server's noise secret under the central trust model: from the noise root (OS
        entropy with fresh noise), so that `--noise-seed` replays it and the run seed does not."""
        return seeds.fresh_secret() if self.noise_root is None else seeds.central_secret(self.noise_root)

    def secrets_of(self, partitions: list[int]) -> dict[int, int]:
        """The secrets a node hosting `partitions` is given (OS entropy with fresh noise)."""
        return {pid: self.secret(pid) for pid in partitions}


class Session:
    """Per-round rows (server metrics + joined diagnostics + privacy spent) and the summary."""

    def __init__(
        self,
        task,
        config: Config,
        server,
        data_seed: int,
        engine: str,
        output: OutputDir | None = None,
        noise: str = seeds.NODES,
    ) -> None:
        """`task`: the run's entry of `ldpfed.tasks` (its data, diagnostics and summary).
        `output`: the results directory checked before any work (default: `output.out`, checked now).
        `noise`: where the clients' secrets came from (`World.noise`; under `flwr run`, the nodes)."""
        config = task.bind(config, data_seed)
        self.task, self.config, self.server, self.engine, self.noise = task, config, server, engine, noise
        self.status = privacy_status(config, task.sends)
        self.recorder = Recorder(config, output)
        self.started = time.perf_counter()
        self.round_started = self.started
        self.observed = task.observe(config, data_seed)

    def after_round(self, server_round: int, metrics: dict, diagnostics: dict[int, dict]) -> dict:
        joined = self.task.joined(self.config, self.server, self.observed, diagnostics)
        # by the run's accountant (that of the budget, as the budget sees it); None when not private
        budget = self.config.budget
        ledger = self.server.ledger
        spent = ledger.max_spent(self.config.privacy.accountant) if budget is None else budget.max_spent(ledger)
        now = time.perf_counter()
        row = {
            "round": server_round,
            **metrics,
            **joined,
            "epsilon_spent": spent.epsilon,
            "delta_spent": spent.delta,
            "seconds": now - self.round_started,
        }
        if budget is not None:  # no client can afford another round: the later rounds have no reports
            row["budget_exhausted"] = not budget.can_continue(
                ledger, range(self.config.federation.clients), self.server.round_event
            )
        self.round_started = now
        self.recorder.add_round(row, self.server.ledger)
        return row

    def finish(self, interrupted: bool = False) -> dict:
        """The summary (written with the other files; without a finished round, summary.json alone);
        `interrupted`: the run stopped early and the summary covers the rounds that finished."""
        config, rows = self.config, self.recorder.rows
        reported = [row for row in rows if row["clients_replied"] > 0]
        task_summary = self.task.summary(config, self.server, rows, reported) if rows else {}
        summary = {
            **run_header(config, self.engine, len(rows), interrupted),
            "mechanism": config.privacy.mechanism,
            **trust.get("local").record(),
            **self.status.record(),
            "privacy_qualification": seeds.qualification(self.status.private, self.noise),
            "epsilon": self.status.epsilon(config.privacy.epsilon),
            "aggregator": config.aggregation.aggregator,
            "seed": config.run.seed,
            "fresh_noise": config.run.fresh_noise,
            "noise_seed": self.noise,
            **task_summary,
            **self.task.data_summary(config),
            "clients_failed_total": int(sum(row["clients_failed"] for row in rows)),
            "clients_replied_total": int(sum(row["clients_replied"] for row in rows)),
            "failure_reasons": " | ".join(
                sorted({r for row in rows for r in row["failure_reasons"].split(" | ") if r})
            ),
            "epsilon_spent_max_per_client": rows[-1]["epsilon_spent"] if rows else None,
            "delta_spent_max_per_client": rows[-1]["delta_spent"] if rows else None,
            "last_round_with_reports": reported[-1]["round"] if reported else None,
            **budget_summary(config, rows),
            "seconds": time.perf_counter() - self.started,
            "seconds_per_round": float(np.mean([row["seconds"] for row in rows])) if rows else None,
        }
        summary["guarantees"] = trust.get("local").guarantees(summary, self.task.unit)
        self.recorder.finish(summary, self.server.ledger)
        return summary


def budget_summary(config: Config, rows: list[dict]) -> dict:
    """With a budget: the budget, and the round after which no client could afford another
    (None if never); the rounds after it ran without reports (the run keeps its stated length)."""
    budget = config.budget
    if budget is None:
        return {}
    exhausted = next((row["round"] for row in rows if row.get("budget_exhausted")), None)
    return {"budget": budget.record(), "budget_exhausted_after_round": exhausted}


def run_header(config: Config, engine: str, rounds_finished: int, interrupted: bool) -> dict:
    """The summary's first keys, under every trust model: the run's shape and how far it got."""
    return {
        "engine": engine,
        "task": config.run.task,
        "clients": config.federation.clients,
        "rounds": config.run.rounds,
        "rounds_finished": rounds_finished,
        "interrupted": interrupted,
    }

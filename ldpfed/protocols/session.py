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
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ldpfed.accounting import trust
from ldpfed.config import Config
from ldpfed.outputs import OutputDir, Secret, dumps
from ldpfed.protocols import canaries, seeds
from ldpfed.protocols.privacy import privacy_status
from ldpfed.protocols.recorder import Recorder, qualified
from ldpfed.validation import LDPValueError


@dataclass(frozen=True)
class World:
    """The harness's seeds: the server gets `server` and `data` only; clients `data` and their secret.
    `noise_root` (None with fresh noise) is what the clients' secrets derive from, never the run
    seed; `noise` says where it came from (`seeds.OS_ENTROPY`, `USER_CHOSEN`, `FRESH_PER_CLIENT`)."""

    data: int
    server: int
    secrets: (
        Mapping[int, int] | None
    )  # seeds.ClientSecrets, or a dict; None: each client draws OS entropy (fresh noise)
    noise_root: int | None = None
    noise: str = seeds.USER_CHOSEN  # secrets given directly (a deployment's node seeds in a test) are chosen
    canaries: canaries.CanaryDesign | None = None  # the in-run audit's canaries (their coins: the world's only)

    @classmethod
    def from_config(cls, config: Config, noise_seed: int | None = None) -> World:
        """Data and server seeds from the run seed; the clients' secrets from `noise_seed` if given,
        else from a noise root of 128 bits of OS entropy (per client with `fresh-noise`); with
        canaries, one secret per client of the federation (canaries included, each wrapped with the
        canary design's secret, ldpfed.protocols.canaries)."""
        run = config.run
        public = seeds.data_seed(run.seed), seeds.server_seed(run.seed)
        if run.fresh_noise:
            if noise_seed is not None:
                raise LDPValueError("--noise-seed and --fresh-noise exclude each other (fresh noise is never recorded)")
            return cls(*public, None, None, seeds.FRESH_PER_CLIENT)
        root = seeds.fresh_secret() if noise_seed is None else noise_seed
        source = seeds.OS_ENTROPY if noise_seed is None else seeds.USER_CHOSEN
        federation = canaries.expanded(config)
        secrets = seeds.client_secrets(root, federation.federation.clients)
        if not config.training.canaries:
            return cls(*public, secrets, root, source)
        design = canaries.CanaryDesign.of(federation, seeds.canary_secret(root))
        return cls(*public, canaries.world_secrets(federation, secrets, root), root, source, design)

    def secret(self, partition_id: int) -> int:
        return seeds.fresh_secret() if self.secrets is None else self.secrets[partition_id]

    def central_noise_secret(self) -> int:
        """The trusted server's noise secret under the central trust model: from the noise root (OS
        entropy with fresh noise), so that `--noise-seed` replays it and the run seed does not."""
        return seeds.fresh_secret() if self.noise_root is None else seeds.central_secret(self.noise_root)

    def secrets_of(self, partitions: list[int]):
        """The secrets a node hosting `partitions` is given ({pid: secret}; OS entropy with fresh
        noise): held as words (`seeds.ClientSecrets`) where the world's are, without an int per client."""
        if self.secrets is None:
            return seeds.ClientSecrets.fresh(partitions)
        if isinstance(self.secrets, seeds.ClientSecrets):
            return self.secrets.restricted(partitions)
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
        audit: canaries.LocalAudit | None = None,
    ) -> None:
        """`task`: the run's entry of `ldpfed.tasks` (its data, diagnostics and summary).
        `output`: the results directory checked before any work (default: `output.out`, checked now).
        `noise`: where the clients' secrets came from (`World.noise`; under `flwr run`, the nodes).
        `audit`: the canaries' audit (ldpfed.protocols.canaries), fed the server's view each round."""
        config = task.bind(config, data_seed)  # with canaries: the federation's (`canaries.expanded`)
        self.task, self.config, self.server, self.engine, self.noise = task, config, server, engine, noise
        self.data_seed = data_seed
        self.audit = audit
        self.status = privacy_status(config, task.sends)
        self.recorder = Recorder(canaries.user_config(config), output)
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
        if self.audit is not None:
            self.audit.observe(self.server)
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
            **(canaries.counts(config) if config.training.canaries else {}),
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
        # whom each figure protects: the trust model's parties, then the task's own (a memoized
        # collection's eps_1 against an observer of one round)
        own = summary.pop("round_observer_guarantees", [])
        summary["guarantees"] = [*trust.get("local").guarantees(summary, self.task.unit), *own]
        verdict = self.audit_verdict(summary) if self.audit is not None and rows else None
        self.recorder.finish(summary, self.server.ledger, self.task.data_files(config, self.data_seed))
        if verdict is not None:
            record_audit(self.recorder, self.server.ledger, summary, self.audit, verdict)
        return summary

    def audit_verdict(self, summary: dict):
        """The canaries' verdict against the server (local trust) beside the run's accounted eps, into
        `summary["canary_audit"]`; None (and the reason there) when it cannot be made."""
        accounted = summary["epsilon_spent_max_per_client"]
        speaks_to = self.audit.speaks_to
        if accounted is None or not summary.get("private"):
            summary["canary_audit"] = canaries.summary_entry(None, speaks_to, "the run is not private: no eps to audit")
            return None
        try:
            verdict = self.audit.verdict(accounted, summary["delta_spent_max_per_client"])
        except LDPValueError as error:
            summary["canary_audit"] = canaries.summary_entry(None, speaks_to, str(error))
            return None
        summary["canary_audit"] = canaries.summary_entry(verdict, speaks_to)
        return verdict


def record_audit(recorder: Recorder, ledger, summary: dict, audit: canaries.LocalAudit, verdict) -> None:
    """The canaries' record (coins: owner-only, the run's local output) and privacy.json with the
    verdict beside the accounted eps."""
    output = recorder.output
    if not output.enabled:
        return
    privacy = {
        **qualified(ledger.state_dict(recorder.config.delta_target, per_client=False), summary),
        "canary_audit": summary["canary_audit"],
    }
    record = canaries.audit_record(audit.design, audit.dims, verdict, audit.speaks_to)
    output.write({"privacy.json": privacy, canaries.RECORD: Secret(dumps(record))})


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

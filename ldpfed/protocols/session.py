"""One federation run seen from outside the protocol: the world's seeds, the halves, the per-round
record with the diagnostics joined in, and the summary (spec: federated.md).

`World` is what the harness knows: the run seed's children (data seed, server seed) and one secret
per client from the noise root (128 bits of OS entropy, or `--noise-seed`; per client with
`fresh-noise`). `Session` turns each round's server metrics and the clients' diagnostics into a
metrics row, writes the files (`Recorder`) and builds the summary. It is used by `ldpfed simulate`
(both engines) and by the ServerApp under `flwr run`, where no diagnostics reach it (the noise
figures are then NaN).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

import ldpfed.aggregation as aggregation
from ldpfed.accounting import create_accountant, trust
from ldpfed.config import FEDAVG, Config
from ldpfed.data import DEFAULT_DIMS, available_synthetic
from ldpfed.outputs import OutputDir
from ldpfed.protocols import diagnostics as joins
from ldpfed.protocols import frequency, mean, seeds, train
from ldpfed.protocols.nodes import ClientsNode, Layout, default_nodes, default_tuple_nodes
from ldpfed.protocols.privacy import privacy_status, round_event
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


def without_seed(config: Config) -> Config:
    """The config a server or client half is given: the run seed removed (it never needs it)."""
    return replace(config, run=replace(config.run, seed=None))


def bind_data(config: Config, data_seed: int) -> Config:
    """The mean (frequency) task's config with the data's users and dims (attributes) (0 = from the
    data; `mean.bound`, `frequency.bound`)."""
    if config.run.task == "frequency":
        return frequency.bound(config, data_seed)
    return mean.bound(config, data_seed) if config.run.task == "mean" else config


def server_half(config: Config, data_seed: int, server_seed: int, fedavg: Callable | None = None):
    public = without_seed(bind_data(config, data_seed))
    if config.run.task == "mean":
        return mean.server_from_config(public)
    if config.run.task == "frequency":
        return frequency.server_from_config(public, data_seed)
    return train.TrainServer(public, data_seed, server_seed, fedavg)


def client_half(config: Config, partition_id: int, data_seed: int, secret: int):
    return _client(without_seed(bind_data(config, data_seed)), partition_id, data_seed, secret)


def _client(public: Config, partition_id: int, data_seed: int, secret: int):
    if public.run.task == "mean":
        return mean.client_from_config(public, partition_id, data_seed, secret)
    if public.run.task == "frequency":
        return frequency.client_from_config(public, partition_id, data_seed, secret)
    return train.TrainClient(public, partition_id, data_seed, secret)


def node_half(config: Config, partitions: list[int], data_seed: int, secrets: dict[int, int]):
    """The half of a node hosting `partitions` (ldpfed.protocols.nodes), each client with its
    secret: train trains them at once (`TrainNode`); the mean and frequency clients answer one
    after another (each vectorized over its cohort of users; with node-reply sum the node adds
    their report sums up)."""
    public = without_seed(bind_data(config, data_seed))
    if public.run.task == "train":
        return train.TrainNode(public, partitions, data_seed, secrets)
    halves = {pid: _client(public, pid, data_seed, secrets[pid]) for pid in partitions}
    return ClientsNode(halves.__getitem__, summing=public.federation.node_reply == "sum")


def layout(config: Config) -> Layout:
    """The run's nodes: `federation.nodes`, or when 0 min(clients, CPUs) (train) or what the tuple
    task's work fills (`default_tuple_nodes`; users x dims of the bound config)."""
    federation = config.federation
    if federation.nodes:
        return Layout(federation.clients, federation.nodes)
    if config.run.task in ("mean", "frequency"):
        values = config.data.users * config.data.dims
        return Layout(federation.clients, default_tuple_nodes(federation.clients, values, federation.cpus))
    return Layout(federation.clients, default_nodes(federation.clients, federation.cpus))


def preflight(config: Config) -> tuple[Config, str | None]:
    """Fail before any federation starts on what can be checked here (data present and in its
    domain, names). Returns the config bound to the data's shape (`bind_data`) and, for the mean
    task, one line saying what data was read."""
    data_seed = seeds.data_seed(config.run.seed)
    if config.run.task == "mean" and config.noisy and config.data_name in available_synthetic():
        # the shape is known: a bad budget fails before the data are generated
        mean.mechanism(replace(config, data=replace(config.data, dims=config.data.dims or DEFAULT_DIMS)))
    if config.run.task == "frequency":
        frequency.check_mechanism(config)  # a synthetic set's shape is known: checked before it is drawn
    if config.run.task in ("mean", "frequency"):
        described = (mean if config.run.task == "mean" else frequency).read(config, data_seed).description
        config = bind_data(config, data_seed)
        if config.run.task == "mean" and config.noisy:
            mean.mechanism(config)  # a file: m is known once it is read
        if config.run.task == "frequency":
            frequency.oracles_from_config(config, data_seed)  # fair or a file: the categories are read
        event = round_event(config, config.privacy.epsilon, config.delta_or_none)
    else:
        described, event = None, train.check_setup(config, data_seed)
    check_accounting(config, event)
    return config, described


def check_accounting(config: Config, event) -> None:
    """The run's accountant can account a client's round, and a budget holds at least one."""
    if config.budget is not None:
        config.budget.check(event)
        return
    reason = create_accountant(config.privacy.accountant).unsupported(event)
    if reason is not None:
        raise LDPValueError(reason)


class Session:
    """Per-round rows (server metrics + joined diagnostics + privacy spent) and the summary."""

    def __init__(
        self,
        config: Config,
        server,
        data_seed: int,
        engine: str,
        output: OutputDir | None = None,
        noise: str = seeds.NODES,
    ) -> None:
        """`output`: the results directory checked before any work (default: `output.out`, checked now).
        `noise`: where the clients' secrets came from (`World.noise`; under `flwr run`, the nodes)."""
        config = bind_data(config, data_seed)
        self.config, self.server, self.engine, self.noise = config, server, engine, noise
        self.status = privacy_status(config)
        self.recorder = Recorder(config, output)
        self.started = time.perf_counter()
        self.round_started = self.started
        if config.run.task == "mean":
            self.data = mean.tuples(config, data_seed)
        elif config.run.task == "frequency":
            self.data = frequency.read(config, data_seed)
        if config.run.task in ("mean", "frequency"):
            self.cohorts = np.array_split(np.arange(config.data.users), config.federation.clients)

    def after_round(self, server_round: int, metrics: dict, diagnostics: dict[int, dict]) -> dict:
        if self.config.run.task == "mean":
            joined = joins.mean_round(self.server.outcome, self.data, self.cohorts, self.config)
        elif self.config.run.task == "frequency":
            joined = joins.frequency_round(self.server.outcome, self.data, self.cohorts, self.config)
        else:
            joined = joins.train_round(self.server.outcome, diagnostics, self.server.privatizer)
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
        if not rows:
            task_summary = {}
        elif config.run.task in ("mean", "frequency"):
            task_summary = mean_summary(rows, reported)
        else:
            task_summary = train_summary(rows, config, self.server)
        summary = {
            "engine": self.engine,
            "task": config.run.task,
            "clients": config.federation.clients,
            "rounds": config.run.rounds,
            "rounds_finished": len(rows),
            "interrupted": interrupted,
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
            **(self._data_summary() if config.run.task in ("mean", "frequency") else {}),
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
        summary["guarantees"] = trust.get("local").guarantees(summary, config.run.task)
        self.recorder.finish(summary, self.server.ledger)
        return summary

    def _data_summary(self) -> dict:
        """The mean task's data shape and, for a file with --domain, the scale of its MSE (frequency:
        users and attributes)."""
        scale = mean.scale(self.config) if self.config.run.task == "mean" else None
        return {"users": self.config.data.users, "dims": self.config.data.dims, **({"scale": scale} if scale else {})}


def _nanmean(values) -> float | None:
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def mean_summary(rows: list[dict], reported: list[dict]) -> dict:
    """The final figures are the last round's that had reports (`last_round_with_reports`): a round
    without any (every client failed, or the budget stopped them all) estimates nothing (NaN)."""
    last = reported[-1] if reported else rows[-1]
    return {
        "final_mse": last["mse"],
        "predicted_mse_plain_mean": last["predicted_mse"],
        "mean_mse_over_rounds": _nanmean([row["mse"] for row in rows]),
        "final_mse_plain_mean": last["mse_plain_mean"],
    }


def budget_summary(config: Config, rows: list[dict]) -> dict:
    """With a budget: the budget, and the round after which no client could afford another
    (None if never); the rounds after it ran without reports (the run keeps its stated length)."""
    budget = config.budget
    if budget is None:
        return {}
    exhausted = next((row["round"] for row in rows if row.get("budget_exhausted")), None)
    return {"budget": budget.record(), "budget_exhausted_after_round": exhausted}


def _ldpvec_record(ldpvec, dims: int) -> dict:
    """LDPVec's settings and budget split; without a guarantee (exact-unsafe), no epsilon at all."""
    if ldpvec.private:
        return ldpvec.describe(dims)
    return {key: value for key, value in ldpvec.describe().items() if key not in ("epsilon", "delta")}


def deviation_used(config: Config) -> str:
    """The deviation model (plug-in | model) the run's aggregator re-calibrates with, or "not used":
    FedAvg and the plain mean ignore it (the only aggregators an LDPVec run allows)."""
    aggregator = config.aggregation.aggregator
    if aggregator == FEDAVG or not aggregation.get_class(aggregator).uses_deviation:
        return "not used"
    return config.aggregation.deviation


def train_summary(rows: list[dict], config: Config, server) -> dict:
    measured = np.array([row["measured_squared_distance"] for row in rows], dtype=float)
    predicted = np.array([row["predicted_squared_distance"] for row in rows], dtype=float)
    known = np.isfinite(measured) & np.isfinite(predicted)
    ratio = (
        float(measured[known].sum() / predicted[known].sum()) if known.any() and predicted[known].sum() > 0 else None
    )
    directional = getattr(server.privatizer, "ldpvec", None)
    return {
        "perturbation": config.training.perturbation,
        **({"ldpvec": _ldpvec_record(directional, int(server.weights.size))} if directional is not None else {}),
        "mean_cosine_to_clean": _nanmean([row["cosine_to_clean"] for row in rows]),
        "mean_leading_energy_share": _nanmean([row["leading_energy_share"] for row in rows]),
        "final_accuracy": rows[-1]["accuracy"],
        "final_loss": rows[-1]["loss"],
        "best_accuracy": float(max(row["accuracy"] for row in rows)),
        "data": config.data_name,
        "model": config.training.model,
        "parameters": int(server.weights.size),
        "deviation": deviation_used(config),
        "noise_measured_over_predicted": ratio,
        # gradient noises (ldpfed.gradient_noise): which sampler ran (safe = floating-point safe)
        "noise_sampler": (
            server.privatizer.noise(int(server.weights.size)).sampler_description
            if hasattr(server.privatizer, "noise")
            else None
        ),
        "mean_measured_squared_distance": _nanmean(measured),
        "mean_predicted_squared_distance": _nanmean(predicted),
        "mean_applied_squared_distance": _nanmean([row["applied_squared_distance"] for row in rows]),
        "diagnostics": (
            "clients wrote their clean clipped updates to the run's local output; the harness "
            "joined them with the server's aggregate (never sent to the server)"
            if np.isfinite(measured).any()
            else None
        ),
    }

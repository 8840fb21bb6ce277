"""Federated LDP-SGD under Flower (spec: federated.md, Federated LDP-SGD; analysis.md, federated
rounds).

Each round the server samples round(fraction * clients) partitions (at least one) from the seed,
sends the global weights; a client sets them, runs `local-steps` SGD steps on its partition,
forms its update u_k = w_k - w, clips and perturbs the whole update (`UpdatePrivatizer`; with
mechanism `none` the update is sent as it is, plain FedAvg) and returns it with its sample count.
The server applies the FedAvg mean sum_k p_k u_k (p_k = n_k / sum n of the clients that replied),
evaluates the global model on the test set, and records the predicted aggregate-noise variance
per coordinate, sum_k p_k^2 v_k (analysis.md, federated rounds), and each client's privacy cost.

Aggregation (issue 6). `aggregator` mean | l1 | l2 | hdr4me | james-stein goes through
`ldpfed.aggregation.updates.aggregate_updates`: the weighted mean of the perturbed updates, the
per-coordinate deviation model (`deviation` plug-in: from the spread of the received updates;
model: the mechanism's worst-case variance at the clipping bound), and the re-calibration with
half-width C; the server applies w <- w + estimate. `fedavg` is Flower's own weighted average
(`flwr.serverapp.strategy.strategy_utils.aggregate_arrayrecords`) of the same replies, the plain
baseline (equal to `mean` up to float rounding).

Measured vs predicted aggregate noise (analysis.md, federated rounds). SIMULATION-ONLY: with
`measure-noise` on, each client also returns its clipped, noise-free update on the separate field
MEASUREMENT_FIELD. The server uses it ONLY to measure ||noisy mean - clean mean||^2 beside the
exact CLT prediction (`ldpfed.analysis.round_noise`), and the distance of the applied
(re-calibrated) step from the clean mean; it never enters aggregation (`fedavg` is given only
the update and the sample count). The client's local training loss (raw data, not privatized)
rides with this channel: with `measure-noise` 0 a private client sends only the privatized update
and its sample count n_k (public, as FedAvg weights). A deployment must not have this channel: it
would send the update in the clear. With mechanism `none` the update is the clipped update, so nothing extra
is sent.
"""

from __future__ import annotations

import functools

import numpy as np
from flwr.app import ArrayRecord, MetricRecord, RecordDict

import ldpfed.aggregation as aggregation
from ldpfed.aggregation.updates import aggregate_updates
from ldpfed.analysis.round_noise import predicted_aggregate_noise, round_noise_report
from ldpfed.data.federated import load_federated
from ldpfed.training.local import evaluate, train_local
from ldpfed.training.models import build_model
from ldpfed.training.parameters import flatten, get_weights, set_weights, unflatten
from ldpfed.training.privatize import UpdatePrivatizer
from simulations import seeds
from simulations.config import FEDAVG, SimulationConfig

UPDATE_FIELD = "update"
METRICS_FIELD = "metrics"
# Simulation-only measurement channel (module docstring): never aggregated, absent in a deployment.
MEASUREMENT_FIELD = "measurement.clipped_update"


@functools.lru_cache(maxsize=2)
def _federated(data: str, clients: int, partition: str, seed: int, data_dir: str, classes: int, alpha: float):
    return load_federated(
        data, clients, partition=partition, seed=seed, data_dir=data_dir or None,
        classes_per_client=classes, alpha=alpha,
    )


def federated_data(config: SimulationConfig):
    """The partitioned data set; the same on the server and on every client (seeded by `seed`)."""
    return _federated(
        config.data, config.clients, config.partition, config.seed, config.data_dir,
        config.classes_per_client, config.dirichlet_alpha,
    )


def new_model(config: SimulationConfig):
    data = federated_data(config)
    return build_model(config.model, data.input_shape, data.num_classes, seed=seeds.integer_seed(config.seed, seeds.MODEL_INIT))


@functools.lru_cache(maxsize=4)
def privatizer(config: SimulationConfig) -> UpdatePrivatizer:
    """Clip (and, unless mechanism is none, perturb) the update; `none` still clips, so a run
    without noise is the same algorithm on the same clipped updates (issue 6 compares them).
    Cached per config: a client builds it once, not every round (its per-value mechanism, e.g. the
    analytic Gaussian calibration, is memoized inside it)."""
    return UpdatePrivatizer(
        config.mechanism, config.epsilon, config.clip, delta=config.delta_or_none, report_dims=config.report_dims_or_none
    )


def check_setup(config: SimulationConfig) -> None:
    """Load the data, build the model and the privatizer once, so bad options fail before Flower starts."""
    new_model(config)
    privatizer(config)


# ---- client side ----------------------------------------------------------------------------
def client_reply(config: SimulationConfig, partition_id: int, server_round: int, content: RecordDict) -> RecordDict:
    """E local SGD steps from the global weights; the clipped, perturbed update and n_k."""
    X, y = federated_data(config).client(partition_id)
    model = new_model(config)
    like = get_weights(model)
    start = content["global"].to_numpy_ndarrays()[0]
    set_weights(model, unflatten(start, like))
    stats = train_local(
        model, X, y, steps=config.local_steps, lr=config.lr, batch_size=config.batch_size,
        seed=seeds.integer_seed(config.seed, seeds.LOCAL_TRAINING, partition_id, server_round),
    )
    update = flatten(get_weights(model)) - start
    update_privatizer = privatizer(config)
    noisy = update_privatizer.privatize(update, seeds.stream(config.seed, seeds.CLIENT_NOISE, partition_id, server_round))
    metrics = {"num-examples": int(y.size)}
    if config.measure_noise or not config.private:
        # The local training loss is computed on the client's raw data and is not privatized: like
        # the clean update it travels only on the simulation-only channel (or without privacy).
        metrics["train-loss"] = float(stats["loss"])
    reply = RecordDict(
        {
            UPDATE_FIELD: ArrayRecord([np.asarray(noisy, dtype=np.float64)]),
            METRICS_FIELD: MetricRecord(metrics),
        }
    )
    if config.measure_noise and config.private:
        # SIMULATION ONLY (module docstring): the clean clipped update, for the server's noise
        # measurement; a deployment must not send it.
        reply[MEASUREMENT_FIELD] = ArrayRecord([update_privatizer.clip_only(update)])
    return reply


def flower_fedavg(replies: list[RecordDict]) -> np.ndarray:
    """Flower's own FedAvg: `aggregate_arrayrecords` over records holding only the privatized
    update and the metrics (the measurement channel is left out, so it cannot be aggregated)."""
    from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

    records = [RecordDict({UPDATE_FIELD: reply[UPDATE_FIELD], METRICS_FIELD: reply[METRICS_FIELD]}) for reply in replies]
    return aggregate_arrayrecords(records, "num-examples").to_numpy_ndarrays()[0]


# ---- server side ----------------------------------------------------------------------------
class TrainServer:
    """Server-side logic of federated LDP-SGD: sampling, FedAvg of the updates, evaluation."""

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.data = federated_data(config)
        self.model = new_model(config)
        self.like = get_weights(self.model)
        self.weights = flatten(self.like).astype(np.float64)
        self.privatizer = privatizer(config)
        # Worst case over coordinate values in [-C, C] of the per-coordinate noise variance v.
        self.noise_per_coordinate = float(np.mean(self.privatizer.per_coordinate_noise(self.weights.size)[1]))
        self.ledger_entry = self.privatizer.ledger_entry(self.weights.size)

    def sample(self, server_round: int) -> list[int]:
        """round(fraction * clients) partitions (>= 1), without replacement, from the seed."""
        clients = self.config.clients
        k = max(1, round(self.config.fraction * clients))
        if k == clients:
            return list(range(clients))
        chosen = seeds.stream(self.config.seed, seeds.SAMPLING, server_round).choice(clients, size=k, replace=False)
        return sorted(int(pid) for pid in chosen)

    def round_payload(self, server_round: int) -> dict:
        return {"global": ArrayRecord([self.weights])}

    def aggregate(self, server_round: int, replies: dict[int, RecordDict], ledger) -> dict:
        """w <- w + (re-calibrated) aggregate of the replies; test loss/accuracy; predicted and
        (simulation only) measured aggregate noise."""
        metrics = {"train_loss": float("nan"), "predicted_noise": 0.0, **dict.fromkeys(ROUND_NOISE_COLUMNS, float("nan"))}
        if replies:
            pids = sorted(replies)
            sizes = np.array([replies[pid][METRICS_FIELD]["num-examples"] for pid in pids], dtype=float)
            p = sizes / sizes.sum()
            updates = np.stack([replies[pid][UPDATE_FIELD].to_numpy_ndarrays()[0] for pid in pids])
            step, recalibration = self._aggregate_step([replies[pid] for pid in pids], updates, sizes)
            self.weights = self.weights + step
            # analysis.md, federated rounds: Var of sum_k p_k n_k per coordinate = sum_k p_k^2 v_k
            # (worst case over coordinate values in [-C, C]; needs nothing from the clients).
            metrics["predicted_noise"] = float(np.sum(p**2) * self.noise_per_coordinate)
            metrics["predicted_noise_trace_worst_case"] = metrics["predicted_noise"] * self.weights.size
            if all("train-loss" in replies[pid][METRICS_FIELD] for pid in pids):
                metrics["train_loss"] = float(p @ np.array([replies[pid][METRICS_FIELD]["train-loss"] for pid in pids]))
            metrics.update(recalibration)
            clean = self._clean_updates(replies, pids, updates)
            if clean is not None:
                metrics.update(self._measured_noise(updates, clean, sizes, step))
            for pid in pids:
                ledger.record(pid, server_round, **self.ledger_entry)
        set_weights(self.model, unflatten(self.weights, self.like))
        loss, accuracy = evaluate(self.model, *self.data.test)
        return {"loss": float(loss), "accuracy": float(accuracy), **metrics}

    def _aggregate_step(self, replies: list[RecordDict], updates: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, dict]:
        """The update the server applies, and the re-calibration's per-round record."""
        config = self.config
        if config.aggregator == FEDAVG:
            return flower_fedavg(replies), {}
        alpha = config.alpha if "alpha" in aggregation.accepted_options(config.aggregator) else None
        result = aggregate_updates(
            updates, sizes, config.aggregator, privatizer=self.privatizer, deviation=config.deviation, alpha=alpha
        )
        summary = result.summary()
        return result.estimate, {
            "deviation_variance_trace": summary["deviation_variance_trace"],
            "recalibration_shift_squared": summary["recalibration_shift_squared"],
        }

    def _clean_updates(self, replies: dict[int, RecordDict], pids: list[int], updates: np.ndarray) -> np.ndarray | None:
        """The clients' clipped noise-free updates: the updates themselves for mechanism none, the
        simulation-only measurement channel otherwise (None when it is switched off)."""
        if not self.config.private:
            return updates
        if not all(MEASUREMENT_FIELD in replies[pid] for pid in pids):
            return None
        return np.stack([replies[pid][MEASUREMENT_FIELD].to_numpy_ndarrays()[0] for pid in pids])

    def _measured_noise(self, updates: np.ndarray, clean: np.ndarray, sizes: np.ndarray, step: np.ndarray) -> dict:
        """Measured ||noisy mean - clean mean||^2 beside its exact prediction (analysis.md,
        federated rounds), and how far the applied step lies from the clean mean."""
        p = sizes / sizes.sum()
        noisy_mean, clean_mean = p @ updates, p @ clean
        noise_mean, noise_variance = predicted_aggregate_noise(clean, sizes, self.privatizer)
        report = round_noise_report(noisy_mean, clean_mean, noise_variance, noise_mean)
        ratio = report["ratio"]
        return {
            "predicted_noise_trace": report["predicted_variance_trace"],
            "predicted_squared_distance": report["predicted_squared_distance"],
            "measured_squared_distance": report["measured_squared_distance"],
            "noise_ratio": float("nan") if ratio is None else ratio,
            "noise_z_beyond_1_96": float("nan") if report["fraction_abs_z_above_1_96"] is None else report["fraction_abs_z_above_1_96"],
            "applied_squared_distance": float(np.sum((step - clean_mean) ** 2)),
            "clean_update_squared_norm": float(np.sum(clean_mean**2)),
        }

    def summary(self, rows: list[dict]) -> dict:
        measured = np.array([row["measured_squared_distance"] for row in rows], dtype=float)
        predicted = np.array([row["predicted_squared_distance"] for row in rows], dtype=float)
        applied = np.array([row["applied_squared_distance"] for row in rows], dtype=float)
        known = np.isfinite(measured) & np.isfinite(predicted)
        ratio = float(measured[known].sum() / predicted[known].sum()) if known.any() and predicted[known].sum() > 0 else None
        channel = self.config.private and bool(self.config.measure_noise)
        return {
            "final_accuracy": rows[-1]["accuracy"],
            "final_loss": rows[-1]["loss"],
            "best_accuracy": float(max(row["accuracy"] for row in rows)),
            "data": self.config.data,
            "model": self.config.model,
            "parameters": int(self.weights.size),
            "deviation": self.config.deviation if self.config.aggregator != FEDAVG else None,
            "noise_measured_over_predicted": ratio,
            "mean_measured_squared_distance": _nanmean(measured),
            "mean_predicted_squared_distance": _nanmean(predicted),
            "mean_applied_squared_distance": _nanmean(applied),
            "measurement_channel": (
                f"simulation only: clients also sent their clipped noise-free update ({MEASUREMENT_FIELD}), "
                "used for the noise metrics only, never aggregated; a deployment must not have it"
                if channel else None
            ),
        }


ROUND_NOISE_COLUMNS = (
    "predicted_noise_trace_worst_case", "deviation_variance_trace", "recalibration_shift_squared",
    "predicted_noise_trace", "predicted_squared_distance", "measured_squared_distance", "noise_ratio",
    "noise_z_beyond_1_96", "applied_squared_distance", "clean_update_squared_norm",
)


def _nanmean(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None

"""Federated LDP-SGD under Flower (spec: federated.md, Federated LDP-SGD; analysis.md, federated
rounds).

Each round the server samples round(fraction * clients) partitions (at least one) from the seed,
sends the global weights; a client sets them, runs `local-steps` SGD steps on its partition,
forms its update u_k = w_k - w, clips and perturbs the whole update (`UpdatePrivatizer`; with
mechanism `none` the update is sent as it is, plain FedAvg) and returns it with its sample count.
The server applies the FedAvg mean sum_k p_k u_k (p_k = n_k / sum n of the clients that replied),
evaluates the global model on the test set, and records the predicted aggregate-noise variance
per coordinate, sum_k p_k^2 v_k (analysis.md, federated rounds), and each client's privacy cost.
"""

from __future__ import annotations

import functools

import numpy as np
from flwr.app import ArrayRecord, MetricRecord, RecordDict

from ldpfed.data.federated import load_federated
from ldpfed.training.local import evaluate, train_local
from ldpfed.training.models import build_model
from ldpfed.training.parameters import flatten, get_weights, set_weights, unflatten
from ldpfed.training.privatize import UpdatePrivatizer
from simulations import seeds
from simulations.config import SimulationConfig


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


def privatizer(config: SimulationConfig) -> UpdatePrivatizer:
    """Clip (and, unless mechanism is none, perturb) the update; `none` still clips, so a run
    without noise is the same algorithm on the same clipped updates (issue 6 compares them)."""
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
    update = privatizer(config).privatize(update, seeds.stream(config.seed, seeds.CLIENT_NOISE, partition_id, server_round))
    return RecordDict(
        {
            "update": ArrayRecord([np.asarray(update, dtype=np.float64)]),
            "metrics": MetricRecord({"num-examples": int(y.size), "train-loss": float(stats["loss"])}),
        }
    )


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
        """w <- w + sum_k p_k u_k over the replies; test loss/accuracy; predicted noise."""
        config = self.config
        predicted_noise = 0.0
        train_loss = float("nan")
        if replies:
            pids = sorted(replies)
            sizes = np.array([replies[pid]["metrics"]["num-examples"] for pid in pids], dtype=float)
            p = sizes / sizes.sum()
            updates = np.stack([replies[pid]["update"].to_numpy_ndarrays()[0] for pid in pids])
            self.weights = self.weights + p @ updates
            # analysis.md, federated rounds: Var of sum_k p_k n_k per coordinate = sum_k p_k^2 v_k.
            predicted_noise = float(np.sum(p**2) * self.noise_per_coordinate)
            train_loss = float(p @ np.array([replies[pid]["metrics"]["train-loss"] for pid in pids]))
            for pid in pids:
                ledger.record(pid, server_round, **self.ledger_entry)
        set_weights(self.model, unflatten(self.weights, self.like))
        loss, accuracy = evaluate(self.model, *self.data.test)
        return {
            "loss": float(loss),
            "accuracy": float(accuracy),
            "train_loss": train_loss,
            "predicted_noise": predicted_noise,
        }

    def summary(self, rows: list[dict]) -> dict:
        return {
            "final_accuracy": rows[-1]["accuracy"],
            "final_loss": rows[-1]["loss"],
            "best_accuracy": float(max(row["accuracy"] for row in rows)),
            "data": self.config.data,
            "model": self.config.model,
            "parameters": int(self.weights.size),
        }

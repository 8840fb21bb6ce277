"""Tuple collection under Flower (spec: federated.md, Tuple collection; analysis.md).

A Flower client holds a cohort of users: the `users` rows of the data set cut into `clients`
contiguous, near-equal blocks by partition id. Each user randomizes her own tuple (m of d
dimensions, eps/m each, `ldpfed.multidim`), and the client sends only the per-dimension
`ReportSums` (post-processing). The server adds the sums of the clients that replied, forms
theta_hat, re-calibrates it with the chosen aggregator (plug-in deviation model), and, knowing the
truth in simulation, records the measured MSE next to the CLT prediction for the users that
actually reported.
"""

from __future__ import annotations

import functools

import numpy as np
from flwr.app import ArrayRecord, MetricRecord, RecordDict

import ldpfed.aggregation as aggregation
from ldpfed.analysis import predict
from ldpfed.data import load_tuples
from ldpfed.multidim import ReportSums, mean_estimate, per_value_mechanism, perturb_tuples, summarize
from simulations import seeds
from simulations.config import SimulationConfig


def report_dims(config: SimulationConfig) -> int:
    """m: `report-dims`, or all d dimensions when 0."""
    return config.report_dims or config.dims


@functools.lru_cache(maxsize=4)
def _dataset(tuples: str, users: int, dims: int, seed: int) -> np.ndarray:
    return load_tuples(tuples, users=users, dims=dims, rng=seeds.stream(seed, seeds.DATA))


def dataset(config: SimulationConfig) -> np.ndarray:
    """All users' tuples (users, dims) in [-1, 1]; the same on the server and on every client."""
    return _dataset(config.tuples, config.users, config.dims, config.seed)


@functools.lru_cache(maxsize=4)
def _cohorts(users: int, clients: int) -> list[np.ndarray]:
    return np.array_split(np.arange(users), clients)


def cohort(config: SimulationConfig, partition_id: int) -> np.ndarray:
    """Row indices of the users held by client `partition_id` (contiguous, near-equal blocks;
    the split is made once, not per client and round)."""
    return _cohorts(config.users, config.clients)[partition_id]


@functools.lru_cache(maxsize=4)
def mechanism(config: SimulationConfig):
    """The per-value mechanism every user applies (budget eps/m, delta/m); built once per config."""
    return per_value_mechanism(config.mechanism, config.epsilon, report_dims(config), config.delta_or_none)


# ---- client side ----------------------------------------------------------------------------
def client_reply(config: SimulationConfig, partition_id: int, server_round: int) -> RecordDict:
    """The cohort's users randomize locally; the client returns their report sums."""
    values = dataset(config)[cohort(config, partition_id)]
    rng = seeds.stream(config.seed, seeds.CLIENT_NOISE, partition_id, server_round)
    mask, reports = perturb_tuples(values, mechanism(config), report_dims(config), rng)
    sums = summarize(mask, reports)
    return RecordDict(
        {
            "sums": ArrayRecord([sums.count, sums.total, sums.total_sq]),
            "metrics": MetricRecord({"users": sums.users, "partition-id": partition_id}),
        }
    )


def sums_from_reply(content: RecordDict) -> ReportSums:
    count, total, total_sq = content["sums"].to_numpy_ndarrays()
    return ReportSums(count, total, total_sq, int(content["metrics"]["users"]))


# ---- server side ----------------------------------------------------------------------------
class MeanServer:
    """Server-side logic of the mean task: sampling, aggregation, error and prediction per round."""

    metric = "mse"

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.truth_by_partition = {}
        self.aggregator = aggregation.get_many([config.aggregator], alpha=config.alpha)[0]
        self.mechanism = mechanism(config)

    def sample(self, server_round: int) -> list[int]:
        """Every client reports in every round (each round is one collection)."""
        return list(range(self.config.clients))

    def round_payload(self, server_round: int) -> dict:
        return {}

    def aggregate(self, server_round: int, replies: dict[int, RecordDict], ledger) -> dict:
        """Sum the replies, re-calibrate, and measure against the truth and the prediction."""
        config = self.config
        if not replies:
            return {"mse": float("nan"), "mse_plain_mean": float("nan"), "predicted_mse": float("nan")}
        sums = sum((sums_from_reply(content) for content in replies.values()), ReportSums.zeros(config.dims))
        rows = np.concatenate([cohort(config, pid) for pid in sorted(replies)])
        data = dataset(config)[rows]
        truth = data.mean(axis=0)
        theta_hat = mean_estimate(sums)
        deviation = aggregation.plugin_deviation(sums, self.mechanism)
        estimate = self.aggregator(theta_hat, deviation, 1.0).estimate
        prediction = predict(
            config.mechanism, config.epsilon, len(rows), config.dims, report_dims(config), data,
            delta=config.delta_or_none, counts=sums.count,
        )
        predicted_sigma2 = prediction.deviation_model().sigma ** 2
        for pid in sorted(replies):
            ledger.record(pid, server_round, config.epsilon, config.delta_or_none or 0.0, config.mechanism)
        return {
            "mse": float(np.mean((estimate - truth) ** 2)),
            "mse_plain_mean": float(np.mean((theta_hat - truth) ** 2)),
            "predicted_mse": float(prediction.mse),
            "predicted_noise": float(np.mean(predicted_sigma2)),
            "users_reported": int(sums.users),
        }

    def summary(self, rows: list[dict]) -> dict:
        measured = np.array([row["mse"] for row in rows], dtype=float)
        last = rows[-1]
        return {
            "final_mse": last["mse"],
            "predicted_mse": last["predicted_mse"],
            "mean_mse_over_rounds": float(np.nanmean(measured)) if np.isfinite(measured).any() else None,
            "final_mse_plain_mean": last["mse_plain_mean"],
        }

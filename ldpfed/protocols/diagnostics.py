"""Simulation diagnostics, joined by the harness outside the protocol (spec: federated.md, "Who
knows the noise").

The server never receives a clean value. In a simulation, each client half also returns a
diagnostics dict (its clean clipped update, its training loss); the engine hands it to the
harness (in memory, or through a file the node writes to the run's local output), and the harness
joins it with what the server holds after the round (`outcome`). The mean task's truth and CLT
prediction come from the data, which the harness (the world) knows.
"""

from __future__ import annotations

import numpy as np

from ldpfed.analysis import predict
from ldpfed.analysis.frequency import predict_frequency
from ldpfed.analysis.moments import ColumnMoments
from ldpfed.analysis.round_noise import predicted_aggregate_noise, round_noise_report
from ldpfed.directional.diagnostics import cosine, leading_energy_share

TRAIN_COLUMNS = (
    "train_loss",
    "predicted_noise_trace",
    "predicted_squared_distance",
    "measured_squared_distance",
    "noise_ratio",
    "noise_z_beyond_1_96",
    "applied_squared_distance",
    "clean_update_squared_norm",
    "cosine_to_clean",
    "leading_energy_share",
    "clean_leading_energy_share",
)


def train_round(outcome, diagnostics: dict[int, dict], privatizer) -> dict:
    """Measured ||noisy mean - clean mean||^2 beside its exact prediction (analysis.md, federated
    rounds; NaN for LDPVec, which has no per-coordinate noise model), the distance of the applied
    step from the clean mean, the weighted training loss, and (directional.md, last section) the
    mean over replying clients of the cosine between a privatized update and its clean clipped
    update and of the share of the energy in the first 1% of coordinates (privatized and clean).
    NaN where a replying client's diagnostics are missing (e.g. under `flwr run`). With summed node
    replies the server holds no client's update: the per-client cosine and energy share come from
    the nodes' diagnostics (computed there, beside the clean update)."""
    metrics = dict.fromkeys(TRAIN_COLUMNS, float("nan"))
    if outcome is None or not all(pid in diagnostics for pid in outcome.partitions):
        return metrics
    p = outcome.sizes / outcome.sizes.sum()
    clean = np.stack([diagnostics[pid]["clean"] for pid in outcome.partitions])
    losses = np.array([diagnostics[pid]["loss"] for pid in outcome.partitions])
    noisy_mean, clean_mean = outcome.mean, p @ clean
    if outcome.updates is None:
        cosines = np.array([diagnostics[pid]["cosine_to_clean"] for pid in outcome.partitions])
        shares = np.array([diagnostics[pid]["leading_energy_share"] for pid in outcome.partitions])
    else:
        cosines, shares = cosine(outcome.updates, clean), leading_energy_share(outcome.updates)
    metrics.update(
        cosine_to_clean=float(np.mean(cosines)),
        leading_energy_share=float(np.mean(shares)),
        clean_leading_energy_share=float(np.mean(leading_energy_share(clean))),
        applied_squared_distance=float(np.sum((outcome.step - clean_mean) ** 2)),
        clean_update_squared_norm=float(np.sum(clean_mean**2)),
        measured_squared_distance=float(np.sum((noisy_mean - clean_mean) ** 2)),
        train_loss=float(p @ losses) if np.all(np.isfinite(losses)) else float("nan"),
    )
    if not hasattr(privatizer, "noise_moments"):  # LDPVec: no per-coordinate noise model
        return metrics
    noise_mean, noise_variance = predicted_aggregate_noise(clean, outcome.sizes, privatizer)
    report = round_noise_report(noisy_mean, clean_mean, noise_variance, noise_mean)
    metrics.update(
        predicted_noise_trace=report["predicted_variance_trace"],
        predicted_squared_distance=report["predicted_squared_distance"],
        measured_squared_distance=report["measured_squared_distance"],
        noise_ratio=float("nan") if report["ratio"] is None else report["ratio"],
        noise_z_beyond_1_96=(
            float("nan") if report["fraction_abs_z_above_1_96"] is None else report["fraction_abs_z_above_1_96"]
        ),
    )
    return metrics


class _Replied:
    """The last round's replying users and what the diagnostics computed of them (the truth, the
    data's moments): a run's rounds mostly have the same replying clients, so these are computed
    once per run, not once per round. One entry, keyed by the data object itself (held, so its
    identity cannot be reused) and the replying partitions."""

    def __init__(self) -> None:
        self.data, self.partitions, self.rows, self.users, self.figures = None, None, None, 0, {}

    def of(self, data, cohorts, partitions) -> _Replied:
        """This entry for `partitions`' users of `data` (`rows`: theirs, None for every user in
        order; `users`: how many), emptied when either changed since the last call."""
        key = list(partitions) if not isinstance(partitions, np.ndarray) else partitions.tolist()
        if self.data is not data or key != self.partitions:  # (a list's == : no array made per round)
            pids = np.asarray(key, dtype=np.int64)
            self.rows = None if cohorts.everyone(pids) else cohorts.rows(pids)
            self.users = cohorts.users if self.rows is None else self.rows.size
            self.data, self.partitions, self.figures = data, key, {}
        return self

    def figure(self, name: str, compute):
        """`compute(rows)`, computed once per entry."""
        if name not in self.figures:
            self.figures[name] = compute(self.rows)
        return self.figures[name]


_REPLIED = _Replied()


def mean_round(outcome, data: np.ndarray, cohorts, config) -> dict:
    """MSE of the chosen aggregator and of the plain mean against the truth of the users whose
    clients replied, beside the CLT prediction for those users (analysis.md). `cohorts`: the users
    of each client (`ldpfed.protocols.mean.Cohorts`)."""
    nan = float("nan")
    if outcome is None or not outcome.partitions:
        return {"mse": nan, "mse_plain_mean": nan, "predicted_mse": nan, "predicted_noise": nan}
    replied = _REPLIED.of(data, cohorts, outcome.partitions)

    def values(rows):
        return data if rows is None and _in_order(data) else data[np.arange(len(data)) if rows is None else rows]

    truth = replied.figure("truth", lambda rows: values(rows).mean(axis=0))
    moments = replied.figure("moments", lambda rows: ColumnMoments.from_array(values(rows)))
    privacy, m = config.privacy, config.privacy.report_dims or config.data.dims
    counts = np.asarray(outcome.sums.count, dtype=float)
    # the prediction of these users' moments, for this budget and these report counts (the same
    # every round when every value is reported): kept for the next round, one entry
    key = (privacy.mechanism, privacy.epsilon, config.data.dims, m, config.delta_or_none, counts.tobytes())
    last = replied.figures.get("prediction")
    if last is None or last[0] != key:
        users, dims, delta = replied.users, config.data.dims, config.delta_or_none
        prediction = predict(privacy.mechanism, privacy.epsilon, users, dims, m, moments, delta=delta, counts=counts)
        last = key, (float(prediction.mse), float(np.mean(prediction.deviation_model().sigma ** 2)))
        replied.figures["prediction"] = last
    predicted_mse, predicted_noise = last[1]
    return {
        "mse": float(np.mean((outcome.estimates[config.aggregation.aggregator] - truth) ** 2)),
        "mse_plain_mean": float(np.mean((outcome.theta_hat - truth) ** 2)),
        "predicted_mse": predicted_mse,
        "predicted_noise": predicted_noise,
    }


def _in_order(data: np.ndarray) -> bool:
    """A C-ordered float64 array: its reductions add as those of a copy of its rows do."""
    return isinstance(data, np.ndarray) and data.dtype == np.float64 and data.flags.c_contiguous


def frequency_round(outcome, data, cohorts, config) -> dict:
    """Frequency MSE (mean over the one-hot entries) of the chosen aggregator and of the plain mean
    against the frequencies of the users whose clients replied, beside the CLT prediction for those
    users (`ldpfed.analysis.frequency`; report counts averaged over their binomial law)."""
    nan = float("nan")
    if outcome is None or not outcome.partitions:
        return {"mse": nan, "mse_plain_mean": nan, "predicted_mse": nan, "predicted_noise": nan}
    replied = _REPLIED.of(data, cohorts, outcome.partitions)
    truth = replied.figure("truth", lambda rows: (data if rows is None else data.subset(rows)).frequencies())
    prediction = predict_frequency(outcome.oracles, truth, replied.users)
    return {
        "mse": float(np.mean((outcome.estimates[config.aggregation.aggregator] - truth) ** 2)),
        "mse_plain_mean": float(np.mean((outcome.f_hat - truth) ** 2)),
        "predicted_mse": float(prediction.mse),
        "predicted_noise": float(np.mean(prediction.variance)),
    }

"""In-process mean-estimation experiments: users perturb, the collector aggregates, repeated.

One repetition (recalibration.md, "What to measure"):
1. every user reports m of her d values through the mechanism (budget eps/m each), in chunks of
   users so that memory is bounded by the chunk, and the collector adds up the `ReportSums`;
2. the collector forms theta_hat (the mean of the reports per dimension), builds the deviation
   model (plug-in from the reports, or the predictor's model) and applies every aggregator;
3. each aggregator's squared error against theta_bar (the true column means) is recorded.

One path with `ldpfed simulate --task mean`: the users are one client's cohort and
repetition r is round r+1 of the same client and server halves (`ldpfed.protocols.mean`), under
the same seed scheme (`ldpfed.protocols.seeds`): the data from the run seed's data seed, the
noise of round r+1 from the client's secret, (secret, NOISE, r+1); inside it, chunk k of users
draws from child k. So `simulate --task mean --clients 1 --engine local` gives the plain mean's
rows of `compare` for the same seed. A chunk is a fixed block of users, so the result depends on
(seed, chunk_users) and not on how the chunks are scheduled. `chunk_users` defaults to about 2^20 values per chunk
(`default_chunk_users(dims)`) and is recorded in every result. Another chunk size draws other
(equally valid) randomness: a general sampler consumes its stream in an order that depends on the
array shape, so bitwise equality across chunk sizes would need one stream per user.

Deviation "model": the predictor's N(delta_j, sigma_j^2) (`ldpfed.analysis.predict`) from the
data's column moments with the expected report counts E[r_j] = n m / d, built once per
(mechanism, eps) before any report is seen (the thesis' setting). The predicted MSE of `mean` in
the summary is the same prediction.

`estimate_once` (steps 2-3 without the error) is the collector's side on its own, reused by the
Flower path, which collects the same `ReportSums` from clients.

Studies (`ExperimentPlan.study_rounds` T): repetitions r = sT .. sT + T - 1 are the rounds of study s;
its final estimate is the average of their estimates (`experiments.plan.study_errors`), and the
summary adds the studies' MSE (`mse_final`) beside the prediction `Prediction.mse_of_average(T)`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np

import ldpfed.aggregation as aggregation
import ldpfed.mechanisms as mechanisms
from ldpfed.analysis import ColumnMoments, predict
from ldpfed.experiments.plan import ExperimentPlan, joined_config, study_errors, summarize_studies
from ldpfed.mechanisms.multidim import (
    per_value_mechanism,
)
from ldpfed.outputs import options_text
from ldpfed.protocols import seeds
from ldpfed.protocols.mean import MeanClient, MeanServer, default_chunk_users
from ldpfed.validation import (
    LDPValueError,
    check_report_dims,
    check_values,
)

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_AGGREGATORS = ("mean", "l1", "l2", "hdr4me", "james-stein")


# --- the experiment ------------------------------------------------------------------------------
@dataclass(frozen=True)
class MechanismChoice:
    """A mechanism name with its options, e.g. square-wave with estimator="debiased"."""

    name: str
    options: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """'square-wave[estimator=debiased]', or the bare name without options; marked
        '(NOT floating-point safe)' when the mechanism uses a continuous sampler (mechanisms.md)."""
        label = self.name if not self.options else f"{self.name}[{options_text(self.options)}]"
        cls = mechanisms.get_class(self.name)
        default = next(f.default for f in fields(cls) if f.name == "sampler")
        if self.options.get("sampler", default) != "safe":
            label += " (NOT floating-point safe)"
        return label


@dataclass(frozen=True)
class ExperimentResult:
    """`runs`: one row per (mechanism, options, epsilon, repetition, aggregator); `summary`: their
    mean and spread with the predicted MSE of `mean`; `config`: every resolved setting."""

    runs: pd.DataFrame
    summary: pd.DataFrame
    config: dict

    @classmethod
    def join(cls, results: Sequence[ExperimentResult]) -> ExperimentResult:
        """One result of experiments on the same data with the same options but the budgets (e.g.
        one per per-round budget of a total): their rows in order, the mechanisms and epsilons gathered."""
        if len(results) == 1:
            return results[0]
        import pandas as pd

        return cls(
            pd.concat([r.runs for r in results], ignore_index=True),
            pd.concat([r.summary for r in results], ignore_index=True),
            joined_config(results),
        )


def _as_choices(mechanism_choices) -> list[MechanismChoice]:
    if isinstance(mechanism_choices, (str, MechanismChoice)):
        mechanism_choices = [mechanism_choices]
    choices = []
    for item in mechanism_choices:
        if isinstance(item, MechanismChoice):
            choices.append(item)
        elif isinstance(item, str):
            choices.append(MechanismChoice(mechanisms.get_class(item).name))
        else:
            name, options = item
            choices.append(MechanismChoice(mechanisms.get_class(name).name, dict(options)))
    return choices


def run_mean_experiment(data, mechanism_choices, epsilons: float | Iterable[float], **options) -> ExperimentResult:
    """Mean estimation repeated for every mechanism choice x epsilon: `run_mean_plan` with the plan
    of `epsilons` and `options` (the other fields of `ExperimentPlan`: aggregators, report_dims
    (default d), delta, deviation, alpha, l2_reference, repeats, seed, chunk_users, progress)."""
    return run_mean_plan(
        data, mechanism_choices, ExperimentPlan.build("mean", epsilons, DEFAULT_AGGREGATORS, **options)
    )


def run_mean_plan(data, mechanism_choices, plan: ExperimentPlan) -> ExperimentResult:
    """Mean estimation repeated `plan.repeats` times for every mechanism choice x epsilon.

    data: (users, dims) values in [-1, 1]. mechanism_choices: a name, a MechanismChoice, or a
    list of names / (name, options) / MechanismChoice. `delta` goes to approximate mechanisms only.
    """
    table = data if isinstance(data, np.ndarray) else np.asarray(data, dtype=float)
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
        raise LDPValueError(f"data must be a non-empty 2-D (users, dims) array, got shape {table.shape}")
    users, dims = table.shape
    choices = _as_choices(mechanism_choices)
    report_dims = dims if plan.report_dims is None else check_report_dims(plan.report_dims, dims)
    aggregator_objects = aggregation.get_many(plan.aggregators, alpha=plan.alpha, l2_reference=plan.l2_reference)
    resolved_chunk = default_chunk_users(dims) if plan.chunk_users is None else plan.chunk_users
    moments = validated_column_moments(table, resolved_chunk)
    theta_bar = moments.mean

    # Build every mechanism first: a bad option or plan.delta fails before any work.
    configurations = []
    for choice in choices:
        approximate = mechanisms.get_class(choice.name).approximate
        choice_delta = plan.delta if approximate else None
        for epsilon in plan.epsilons:
            mechanism = per_value_mechanism(choice.name, epsilon, report_dims, choice_delta, **choice.options)
            configurations.append((choice, epsilon, choice_delta, mechanism))

    secret = seeds.client_secrets(plan.seed, 1)[0]
    run_rows, predicted, study_rows, predicted_final = [], {}, [], {}
    for choice, epsilon, choice_delta, mechanism in configurations:
        prediction = predict(
            choice.name, epsilon, users, dims, report_dims, moments, delta=choice_delta, **choice.options
        )
        predicted[(choice.label, epsilon)] = prediction.mse
        if plan.study_rounds is not None:
            predicted_final[(choice.label, epsilon)] = prediction.mse_of_average(plan.study_rounds)
        model = prediction.deviation_model() if plan.deviation == "model" else "plug-in"
        client = MeanClient(table, mechanism, report_dims, secret, chunk_users=resolved_chunk)
        server = MeanServer(
            mechanism,
            dims,
            1,
            [a.name for a in aggregator_objects],
            alpha=plan.alpha,
            l2_reference=plan.l2_reference,
            deviation=model,
        )
        labels = {"mechanism": choice.name, "options": options_text(choice.options), "epsilon": epsilon}
        rows, estimates = _repeat(client, server, plan, labels, theta_bar)
        run_rows.extend(rows)
        for name, rounds in estimates.items():
            errors = study_errors(np.array(rounds), theta_bar, plan.study_rounds)
            study_rows.extend({**labels, "aggregator": name, "mse_final": float(e)} for e in errors)

    import pandas as pd  # lazily, with pyarrow: a Flower node imports this module for collect_sums only

    runs = pd.DataFrame(run_rows)
    summary = summarize_runs(runs, predicted, choices)
    if plan.study_rounds is not None:
        summary = join_studies(summary, study_rows, predicted_final, choices)
    config = {
        "mechanisms": [{"name": c.name, "options": c.options} for c in choices],
        "epsilons": list(plan.epsilons),
        "aggregators": [a.name for a in aggregator_objects],
        "users": users,
        "dims": dims,
        "report_dims": report_dims,
        **plan.record(),
        "chunk_users": resolved_chunk,
        "halfwidth": 1.0,
    }
    if plan.study_rounds is not None:
        config["study_rounds"] = plan.study_rounds
    return ExperimentResult(runs, summary, config)


def _repeat(client, server, plan: ExperimentPlan, labels: dict, truth: np.ndarray) -> tuple[list[dict], dict]:
    """`plan.repeats` rounds of one configuration: a row per (repeat, aggregator), and each
    aggregator's estimates when the repeats form T-round studies ({} otherwise)."""
    rows, estimates = [], {}
    studies = plan.study_rounds is not None
    for repeat in range(plan.repeats):
        server_round = repeat + 1
        server.configure_round(server_round)
        reply, _ = client.reply(server_round, {})
        server.aggregate(server_round, {0: reply}, {})
        for name, result in server.outcome.results.items():
            rows.append(
                {
                    **labels,
                    "aggregator": name,
                    "repeat": repeat,
                    **({"study": repeat // plan.study_rounds} if studies else {}),
                    "mse": float(np.mean((result.estimate - truth) ** 2)),
                    "deviation_source": result.record["deviation_source"],
                    "alpha": result.record.get("alpha", plan.alpha),
                    "l2_reference": result.record.get("l2_reference", plan.l2_reference),
                }
            )
            if studies:
                estimates.setdefault(name, []).append(result.estimate)
        if plan.progress is not None:
            plan.progress()
    return rows, estimates


def validated_column_moments(table: np.ndarray, chunk_users: int) -> ColumnMoments:
    """Column means (theta_bar) and spreads S_j^2 after checking every value is finite and in [-1, 1].

    Two passes chunk by chunk (the centred second pass avoids cancellation), so that a large
    (e.g. memory-mapped or float32) table is never copied whole.
    """
    users, dims = table.shape
    chunks = [slice(start, start + chunk_users) for start in range(0, users, chunk_users)]
    total = np.zeros(dims)
    for chunk in chunks:
        total += check_values(table[chunk], name="data values").sum(axis=0)
    mean = total / users
    spread = np.zeros(dims)
    for chunk in chunks:
        spread += ((np.asarray(table[chunk], dtype=float) - mean) ** 2).sum(axis=0)
    variance = spread / (users - 1) if users > 1 else np.zeros(dims)
    return ColumnMoments.from_summary(users, np.clip(mean, -1.0, 1.0), variance=variance)


def summarize_runs(runs: pd.DataFrame, predicted: dict, choices: Sequence[MechanismChoice]) -> pd.DataFrame:
    """Mean, standard deviation and standard error of the MSE over repetitions; predicted MSE of
    `mean` (NaN for the other aggregators, which the predictor does not model)."""
    keys = ["mechanism", "options", "epsilon", "aggregator"]
    grouped = runs.groupby(keys, sort=False)["mse"]
    summary = grouped.agg(mse="mean", mse_std="std", repeats="count").reset_index()
    summary["mse_std"] = summary["mse_std"].fillna(0.0)  # one repetition: no spread measured
    summary["mse_se"] = summary["mse_std"] / np.sqrt(summary["repeats"])
    labels = {(c.name, options_text(c.options)): c.label for c in choices}
    summary["predicted_mse"] = [
        predicted.get((labels[(m, o)], e), math.nan) if a == "mean" else math.nan
        for m, o, e, a in zip(summary["mechanism"], summary["options"], summary["epsilon"], summary["aggregator"])
    ]
    return summary


def join_studies(
    summary: pd.DataFrame, study_rows: list[dict], predicted_final: dict, choices: Sequence[MechanismChoice]
) -> pd.DataFrame:
    """The summary with each configuration's T-round studies (`ExperimentPlan.study_rounds`):
    `studies`, `mse_final` (measured: the final estimate, the average of a study's T rounds),
    `mse_final_std`, `mse_final_se` and `predicted_mse_final` (CLT, plain mean only:
    `Prediction.mse_of_average(T)`)."""
    keys = ["mechanism", "options", "epsilon", "aggregator"]
    joined = summary.merge(summarize_studies(study_rows, keys), on=keys, how="left", sort=False)
    labels = {(c.name, options_text(c.options)): c.label for c in choices}
    joined["predicted_mse_final"] = [
        predicted_final.get((labels[(m, o)], e), math.nan) if a == "mean" else math.nan
        for m, o, e, a in zip(joined["mechanism"], joined["options"], joined["epsilon"], joined["aggregator"])
    ]
    return joined

"""In-process frequency-estimation experiments (the frequency analogue of
`ldpfed.experiments.mean`): mechanisms x budgets x aggregators, measured beside the predicted MSE.

Repetition r of a configuration is round r+1 of the same client and server halves as
`ldpfed simulate --task frequency` (`ldpfed.protocols.frequency`), one client holding every user,
under the seed scheme of `ldpfed.protocols.seeds`. A memoized (longitudinal) oracle's repetitions
are rounds of one memo only within a study: each study (each repetition, or each block of T with
`study_rounds`) is a client with its own secret, so a fresh permanent randomization (`_study_client`);
one memo for all would make the repetitions' spread the instantaneous noise alone.
The error of an aggregator is the mean over the D = sum k_j one-hot entries of (estimate - true
frequency)^2.

Predicted MSE: the plain mean's is `predict_frequency` (exact given the data, normal model not
needed); every other element-wise aggregator's is `recalibrated_mse` under the predictor's normal
model, with the aggregator's weights from that same model. With deviation "model" this is the
server's own setting; with "plug-in" the server's sigma_e is estimated from the reports, so the
prediction is the model's approximation of it. The simplex projection has no prediction (NaN).
With `ExperimentPlan.study_rounds` T, every T repetitions are one study whose final estimate averages
them (`mse_final`, predicted for the plain mean by `FrequencyPrediction.mse_of_average(T)`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

import ldpfed.aggregation as aggregation
from ldpfed.aggregation.simplex import SimplexProjection
from ldpfed.analysis.frequency import predict_frequency, recalibrated_mse
from ldpfed.data.categorical import CategoricalData
from ldpfed.experiments.plan import ExperimentPlan, joined_config, study_errors, summarize_studies
from ldpfed.frequency.categorical import AttributeOracles, is_approximate
from ldpfed.protocols import seeds
from ldpfed.protocols.frequency import FrequencyClient, FrequencyServer
from ldpfed.validation import check_report_dims

DEFAULT_FREQUENCY_AGGREGATORS = ("mean", "l1", "l2", "hdr4me", "james-stein", SimplexProjection.name)


@dataclass(frozen=True)
class FrequencyExperimentResult:
    """`runs`: one row per (mechanism, epsilon, repetition, aggregator); `summary`: mean, sd, se
    and predicted MSE; `frequencies`: per (mechanism, epsilon, aggregator, attribute, category) the
    truth and the estimate's mean and sd over repetitions; `config`: every resolved setting."""

    runs: pd.DataFrame
    summary: pd.DataFrame
    frequencies: pd.DataFrame
    config: dict

    @classmethod
    def join(cls, results: Sequence[FrequencyExperimentResult]) -> FrequencyExperimentResult:
        """One result of experiments on the same data with the same options but the budgets."""
        if len(results) == 1:
            return results[0]
        return cls(
            *(
                pd.concat([getattr(r, part) for r in results], ignore_index=True)
                for part in ("runs", "summary", "frequencies")
            ),
            joined_config(results),
        )


def build_oracles(
    names: Sequence[str],
    epsilons: Sequence[float],
    categories,
    report_dims: int,
    delta: float | None,
    options: dict[str, dict],
) -> list[AttributeOracles]:
    """Every (mechanism, epsilon) configuration, built before any work (a bad option fails first)."""
    built = []
    for name in names:
        approximate_delta = delta if is_approximate(name) else None
        for epsilon in epsilons:
            built.append(
                AttributeOracles.build(
                    name, epsilon, categories, report_dims, approximate_delta, **options.get(name, {})
                )
            )
    return built


def run_frequency_experiment(
    data: CategoricalData, names: Sequence[str], epsilons: Sequence[float], *, options=None, **plan_options
) -> FrequencyExperimentResult:
    """Frequency estimation repeated for every mechanism x epsilon: `run_frequency_plan` with the
    plan of `epsilons` and `plan_options` (the other fields of `ExperimentPlan`)."""
    plan = ExperimentPlan.build("frequency", epsilons, DEFAULT_FREQUENCY_AGGREGATORS, **plan_options)
    return run_frequency_plan(data, names, plan, options)


def run_frequency_plan(
    data: CategoricalData, names: Sequence[str], plan: ExperimentPlan, options: dict[str, dict] | None = None
) -> FrequencyExperimentResult:
    """Frequency estimation repeated `plan.repeats` times for every mechanism x epsilon (module docstring).

    names: "grr", "oue", or scalar mechanism names (histogram-encoded); `options[name]` goes to that
    mechanism (e.g. {"square-wave": {"estimator": "debiased"}}). report_dims m of the d attributes
    (default d). Every configuration uses the same streams (common random numbers)."""
    m = data.attributes if plan.report_dims is None else check_report_dims(plan.report_dims, data.attributes)
    configurations = build_oracles(names, plan.epsilons, data.categories, m, plan.delta, options or {})
    truth = data.frequencies()
    secret = seeds.client_secrets(plan.seed, 1)[0]
    elementwise = {
        a.name: a
        for a in aggregation.get_many(
            [n for n in plan.aggregators if aggregation.get_class(n).elementwise],
            alpha=plan.alpha,
            l2_reference=plan.l2_reference,
        )
    }

    run_rows, predicted, estimates, study_rows, predicted_final = [], {}, [], [], {}
    for oracles in configurations:
        prediction = predict_frequency(oracles, truth, data.users)
        model = prediction.deviation_model()
        if plan.study_rounds is not None:
            predicted_final[(oracles.name, oracles.epsilon)] = prediction.mse_of_average(plan.study_rounds)
        for name in plan.aggregators:
            predicted[(oracles.name, oracles.epsilon, name)] = (
                prediction.mse
                if name == "mean"
                else recalibrated_mse(elementwise[name], truth, model)
                if name in elementwise
                else math.nan
            )
        client = _study_client(data.codes, oracles, plan, secret)
        server = FrequencyServer(
            oracles,
            1,
            plan.aggregators,
            alpha=plan.alpha,
            l2_reference=plan.l2_reference,
            deviation=model if plan.deviation == "model" else "plug-in",
        )
        repeat_rows, collected = _repeat(client, server, oracles, plan, truth)
        run_rows.extend(repeat_rows)
        for name, rows in collected.items():
            stacked = np.array(rows)
            estimates.append(_frequency_rows(data, oracles, name, truth, stacked))
            if plan.study_rounds is not None:
                labels = {"mechanism": oracles.name, "oracle": oracles.kind, "epsilon": oracles.epsilon}
                errors = study_errors(stacked, truth, plan.study_rounds)
                study_rows.extend({**labels, "aggregator": name, "mse_final": float(e)} for e in errors)

    runs = pd.DataFrame(run_rows)
    summary = _summarize(runs, predicted)
    if plan.study_rounds is not None:
        keys = ["mechanism", "oracle", "epsilon", "aggregator"]
        summary = summary.merge(summarize_studies(study_rows, keys), on=keys, how="left", sort=False)
        summary["predicted_mse_final"] = [
            predicted_final[(m, e)] if a == "mean" else math.nan
            for m, e, a in zip(summary["mechanism"], summary["epsilon"], summary["aggregator"])
        ]
    config = {
        "task": "frequency",
        "mechanisms": [c.describe() for c in configurations[:: len(plan.epsilons)]],
        "epsilons": list(plan.epsilons),
        "aggregators": list(plan.aggregators),
        "users": data.users,
        "attributes": data.attributes,
        "categories": data.categories.tolist(),
        "report_dims": m,
        **plan.record(),
        "chunk_users": plan.chunk_users,
        "data": data.source,
        "attribute_names": list(data.names),
    }
    if plan.study_rounds is not None:
        config["study_rounds"] = plan.study_rounds
    return FrequencyExperimentResult(runs, summary, pd.concat(estimates, ignore_index=True), config)


def _repeat(client, server, oracles, plan: ExperimentPlan, truth: np.ndarray) -> tuple[list[dict], dict]:
    """`plan.repeats` rounds of one configuration: a row per (repeat, aggregator), and each
    aggregator's estimates, in the order of the repeats."""
    rows, collected = [], {name: [] for name in plan.aggregators}
    for repeat in range(plan.repeats):
        server.configure_round(repeat + 1)
        reply, _ = client(repeat).reply(repeat + 1, {})
        server.aggregate(repeat + 1, {0: reply}, {})
        for name, estimate in server.outcome.estimates.items():
            collected[name].append(estimate)
            rows.append(
                {
                    "mechanism": oracles.name,
                    "oracle": oracles.kind,
                    "epsilon": oracles.epsilon,
                    "aggregator": name,
                    "repeat": repeat,
                    **({} if plan.study_rounds is None else {"study": repeat // plan.study_rounds}),
                    "mse": float(np.mean((estimate - truth) ** 2)),
                }
            )
        if plan.progress is not None:
            plan.progress()
    return rows, collected


def _study_client(codes: np.ndarray, oracles: AttributeOracles, plan: ExperimentPlan, secret: int):
    """repeat -> the client that replies in it: one client (`secret`) for freshly randomized oracles;
    for a memoized one, study s's client holds secret s of the plan's seed (secret 0 is `secret`), so
    each study draws its own memo and its rounds share it."""
    one = FrequencyClient(codes, oracles, secret, chunk_users=plan.chunk_users)
    if not oracles.memoized:
        return lambda repeat: one
    rounds = plan.study_rounds or 1
    secrets = seeds.client_secrets(plan.seed, plan.repeats // rounds)
    clients = [one] + [
        FrequencyClient(codes, oracles, secrets[study], chunk_users=plan.chunk_users)
        for study in range(1, plan.repeats // rounds)
    ]
    return lambda repeat: clients[repeat // rounds]


def _frequency_rows(data: CategoricalData, oracles: AttributeOracles, aggregator: str, truth, stacked) -> pd.DataFrame:
    attribute = oracles.attribute_of_entry
    return pd.DataFrame(
        {
            "mechanism": oracles.name,
            "epsilon": oracles.epsilon,
            "aggregator": aggregator,
            "attribute": [data.names[j] for j in attribute],
            "category": [label for labels in data.labels for label in labels],
            "true_frequency": truth,
            "estimate": stacked.mean(axis=0),
            "estimate_sd": stacked.std(axis=0, ddof=1) if len(stacked) > 1 else np.zeros(len(truth)),
            "first_estimate": stacked[0],
        }
    )


def _summarize(runs: pd.DataFrame, predicted: dict) -> pd.DataFrame:
    keys = ["mechanism", "oracle", "epsilon", "aggregator"]
    summary = runs.groupby(keys, sort=False)["mse"].agg(mse="mean", mse_std="std", repeats="count").reset_index()
    summary["mse_std"] = summary["mse_std"].fillna(0.0)
    summary["mse_se"] = summary["mse_std"] / np.sqrt(summary["repeats"])
    summary["predicted_mse"] = [
        predicted[(m, e, a)] for m, e, a in zip(summary["mechanism"], summary["epsilon"], summary["aggregator"])
    ]
    return summary

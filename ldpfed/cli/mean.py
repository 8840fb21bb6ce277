"""`ldpfed compare --task mean`: aggregators x mechanisms x budgets on tuples, measured in process
beside the predicted MSE (`ldpfed.experiments.mean`).

With a total budget (`--budget EPS[,DELTA] --rounds T [--accountant A]`) each mechanism runs at the
per-round budget `ldpfed plan` gives it (`ldpfed.planning.run.StudyBudget`): the mechanisms that
share a per-round (eps, delta) run as one `ExperimentPlan`, the results are joined, and every T
repetitions are one study whose final estimate averages them.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from rich.markup import escape
from rich.table import Table

import ldpfed.aggregation as aggregation
import ldpfed.mechanisms as mechanisms
from ldpfed.cli.budget_study import FINAL_COLUMNS, budget_figure, budget_title, final_cells, study_keys, study_plans
from ldpfed.cli.common import (
    check_estimator,
    console,
    estimator_options,
    out_of_domain_policy,
    parse_domain,
    parse_list,
    progress_steps,
    read_data,
    scale_note,
    show_results,
)
from ldpfed.data import available_synthetic
from ldpfed.experiments.mean import DEFAULT_AGGREGATORS, ExperimentResult, MechanismChoice, run_mean_plan
from ldpfed.experiments.plan import ExperimentPlan
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.outputs import OutputDir
from ldpfed.planning.run import StudyBudget, study_repeats, with_budget_columns
from ldpfed.protocols.seeds import data_seed
from ldpfed.validation import LDPValueError, check_positive_int, check_report_dims

DEFAULT_USERS, DEFAULT_DIMS = 20000, 20
MEAN_DEFAULTS = {
    "mechanism": "laplace,piecewise",
    "epsilons": "0.5,1,2,4",
    "aggregators": ",".join(aggregation.available("mean")),
    "data": "gaussian",
    "domain": "-1,1",
    "repeats": 5,
    "l2_reference": "bound",
    "deviation": "plug-in",
}


def compare_mean(options: dict, study: StudyBudget | None) -> None:
    """The comparison on tuples: each mechanism's plans, checked before the data are read; run with
    progress; written and shown."""
    given = {name: options[name] for name in ("mechanism", "epsilons", "aggregators", "data", "domain")}
    settings = {name: MEAN_DEFAULTS[name] if value is None else value for name, value in given.items()}
    repeats = options["repeats"]
    if study is not None:
        repeats = study_repeats(repeats, study.rounds, MEAN_DEFAULTS["repeats"])
    shared = {
        "aggregators": parse_list(settings["aggregators"], str, "--aggregators"),
        "deviation": options["deviation"],
        "alpha": options["alpha"],
        "l2_reference": options["l2_reference"] or MEAN_DEFAULTS["l2_reference"],
        "repeats": MEAN_DEFAULTS["repeats"] if repeats is None else repeats,
        "seed": options["seed"],
        "chunk_users": options["chunk_users"],
    }
    check_estimator(options["estimator"])
    names = parse_list(settings["mechanism"], str, "--mechanism")
    choices = _mechanism_choices(names, options["estimator"], options["delta"])
    runs, groups = _runs(choices, settings["epsilons"], options["delta"], shared, study)
    data = _data_request(settings["data"], settings["domain"], options)
    if data["synthetic"]:  # d is known before the data are generated: m and every budget per value too
        report_dims = options["report_dims"]
        _check_budgets(
            runs, data["dims"] if report_dims is None else check_report_dims(report_dims, data["dims"]), study
        )
    with OutputDir.prepare(options["out"], overwrite=options["overwrite"], command="compare") as output:
        result, config = _measure(runs, data, options["report_dims"], study, groups, shared["repeats"])
        rows = json_rows(result)
        written = output.write(output_files(result, config, rows)) if output.enabled else []
    as_json = options["as_json"]
    show_results(rows, lambda: results_table(result, config), as_json=as_json, out=options["out"], files=written)
    if "scale" in config and not as_json:
        console.print(config["scale"]["note"] + ".", highlight=False)


def _runs(choices, epsilons: str, delta, shared: dict, study: StudyBudget | None) -> tuple[list, list | None]:
    """[(mechanism choices, plan)]: one plan, or with a total one per per-round (eps, delta) that the
    total gives the mechanisms; and the study's groups (None without a total)."""
    if study is None:
        plan = ExperimentPlan.build(
            "mean", parse_list(epsilons, float, "--epsilons"), DEFAULT_AGGREGATORS, delta=delta, **shared
        )
        return [(choices, plan)], None
    groups = study.groups([choice.name for choice in choices])
    plans = study_plans("mean", study, groups, DEFAULT_AGGREGATORS, shared)
    runs = [
        ([choice for choice in choices if choice.name in group.mechanisms], group_plan)
        for group, group_plan in zip(groups, plans)
    ]
    return runs, groups


def _data_request(data: str, domain: str, options: dict) -> dict:
    """The data to read: a synthetic set's default shape, the domain and the out-of-domain policy checked."""
    synthetic = data in available_synthetic()
    users, dims = options["users"], options["dims"]
    if synthetic:
        users = DEFAULT_USERS if users is None else users
        dims = DEFAULT_DIMS if dims is None else dims
    out_of_domain = "error" if options["out_of_domain"] is None else options["out_of_domain"]
    out_of_domain_policy(out_of_domain)
    return {
        "name": data,
        "synthetic": synthetic,
        "users": None if users is None else check_positive_int(users, "--users"),
        "dims": None if dims is None else check_positive_int(dims, "--dims"),
        "domain": parse_domain(domain),
        "header": options["header"],
        "out_of_domain": out_of_domain,
    }


def _check_budgets(runs: list, m: int, study: StudyBudget | None) -> None:
    """Every mechanism at every budget per value (eps/m) exists, before any data are drawn."""
    for run_choices, run_plan in runs:
        for choice in run_choices:
            approximate = mechanisms.get_class(choice.name).approximate
            for epsilon in run_plan.epsilons:
                try:
                    per_value_mechanism(
                        choice.name, epsilon, m, run_plan.delta if approximate else None, **choice.options
                    )
                except LDPValueError as error:
                    if study is None:
                        raise
                    raise LDPValueError(
                        f"{study.text()} gives {choice.name} eps {epsilon:g} per round: {error}"
                    ) from None


def _measure(
    runs: list, data: dict, report_dims: int | None, study, groups, repeats: int
) -> tuple[ExperimentResult, dict]:
    """The data read (the seed scheme of `ldpfed simulate`: from the run seed's data seed), the runs
    measured, and the comparison's config record."""
    seed = runs[0][1].seed
    low, high = data["domain"]
    tuples = read_data(
        data["name"],
        users=data["users"],
        dims=data["dims"],
        seed=seed,
        domain=(low, high),
        header=data["header"],
        out_of_domain=data["out_of_domain"],
        rng=np.random.default_rng(data_seed(seed)),
    )
    table = tuples.values
    m = table.shape[1] if report_dims is None else check_report_dims(report_dims, table.shape[1])
    result = _run_with_progress(table, [(choices, replace(plan, report_dims=m)) for choices, plan in runs])
    config = {
        "task": "mean",
        "data": data["name"],
        "domain": [low, high],
        "out_of_domain": data["out_of_domain"],
        "seed": seed,
        **result.config,
    }
    if study is not None:
        config["budget"] = study.describe(groups, repeats)
        result = replace(result, summary=with_budget_columns(result.summary, groups))
    if not data["synthetic"] and (low, high) != (-1.0, 1.0):
        config["scale"] = scale_note((low, high))
    return result, config


def _mechanism_choices(names: list[str], estimator: str | None, delta: float | None) -> list[MechanismChoice]:
    """Registry names with the --estimator option given to the mechanisms that take it."""
    choices = [MechanismChoice(mechanisms.get_class(name).name, estimator_options(name, estimator)) for name in names]
    if estimator is not None and not any(c.options for c in choices):
        raise LDPValueError(f"--estimator applies to square-wave only; none of {names} takes it")
    if delta is not None and not any(mechanisms.get_class(c.name).approximate for c in choices):
        raise LDPValueError(f"--delta applies to approximate mechanisms (e.g. gaussian); none of {names} is")
    return choices


def _run_with_progress(table, runs: list) -> ExperimentResult:
    """The experiments (one per (choices, plan)) with a progress bar, or (stderr not a terminal) one
    line per configuration; joined into one result."""
    labels = [  # the runs' order; one text per repetition, the last of a configuration carries its line
        f"{choice.label} eps={epsilon:g} done" if repeat == plan.repeats - 1 else None
        for choices, plan in runs
        for choice in choices
        for epsilon in plan.epsilons
        for repeat in range(plan.repeats)
    ]
    texts = iter(labels)
    with progress_steps("compare", len(labels)) as advance:
        results = [
            run_mean_plan(table, choices, replace(plan, progress=lambda: advance(next(texts))))
            for choices, plan in runs
        ]
    return ExperimentResult.join(results)


def _label(mechanism: str, options: str) -> str:
    return f"{mechanism}[{options}]" if options else mechanism


def _number(value: float):
    return None if value is None or not math.isfinite(value) else float(value)


def json_rows(result: ExperimentResult) -> list[dict]:
    """One row per (mechanism, epsilon, aggregator) with a fixed set of keys (with --budget, the
    planned settings and the T-round studies' keys too)."""
    return [
        {
            "mechanism": _label(row["mechanism"], row["options"]),
            "epsilon": float(row["epsilon"]),
            "aggregator": row["aggregator"],
            "mse": float(row["mse"]),
            "mse_std": float(row["mse_std"]),
            "predicted_mse": _number(row["predicted_mse"]) if row["aggregator"] == "mean" else None,
            **study_keys(row),
        }
        for row in result.summary.to_dict("records")
    ]


def results_table(result: ExperimentResult, config: dict) -> Table:
    summary = result.summary
    aggregators = list(dict.fromkeys(summary["aggregator"]))
    title = (
        f"MSE (mean ± sd over {config['repeats']} repetitions); {config['data']} "
        f"{config['users']}x{config['dims']}, m={config['report_dims']}, deviation={config['deviation']}, "
        f"alpha={config['alpha']:g}, l2 reference={config['l2_reference']}"
    )
    budget = config.get("budget")
    if budget is not None:
        title += "; " + budget_title(budget)
    table = Table(title=title, caption="bold: lowest measured MSE in the row")
    table.add_column("eps" if budget is None else "eps per round", justify="right")
    table.add_column("mechanism", overflow="fold")
    for column in (*aggregators, "predicted mean"):
        table.add_column(column, justify="right", overflow="fold")
    if budget is not None:
        for column in (f"spent ({budget['accountant']})", *FINAL_COLUMNS):
            table.add_column(column, justify="right")
    keys = ["epsilon", "mechanism", "options"]
    for (epsilon, mechanism, options), group in summary.sort_values("epsilon", kind="stable").groupby(keys, sort=False):
        by_name = {row.aggregator: row for row in group.itertuples(index=False)}
        best = min(by_name, key=lambda name: by_name[name].mse)
        cells = []
        for name in aggregators:
            row = by_name[name]
            text = f"{row.mse:.3g} ±{row.mse_std:.2g}"
            cells.append(f"[bold]{text}[/]" if name == best else text)
        predicted = by_name["mean"].predicted_mse if "mean" in by_name else math.nan
        table.add_row(
            f"{epsilon:g}",
            escape(_label(mechanism, options)),
            *cells,
            f"{predicted:.3g}" if math.isfinite(predicted) else "-",
            *([] if budget is None else final_cells(by_name.get("mean"))),
        )
    return table


def mse_figure(result: ExperimentResult):
    """MSE vs eps (log-log), one panel per mechanism, one line per aggregator; predicted mean dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    summary = result.summary.assign(
        label=[_label(m, o) for m, o in zip(result.summary["mechanism"], result.summary["options"])]
    )
    labels = list(dict.fromkeys(summary["label"]))
    figure, axes = plt.subplots(1, len(labels), figsize=(4.5 * len(labels), 3.8), squeeze=False, sharey=True)
    for axis, label in zip(axes[0], labels):
        panel = summary[summary["label"] == label]
        for name, group in panel.groupby("aggregator", sort=False):
            axis.errorbar(group["epsilon"], group["mse"], yerr=group["mse_se"], marker="o", ms=3, capsize=2, label=name)
        predicted = panel[(panel["aggregator"] == "mean") & panel["predicted_mse"].notna()]
        if len(predicted):
            axis.plot(predicted["epsilon"], predicted["predicted_mse"], "k--", lw=1, label="predicted (mean)")
        axis.set_xscale("log")
        axis.set_yscale("log")
        # ticks at the budgets run, labelled once each (log-axis minor labels collide)
        budgets = sorted(set(panel["epsilon"]))
        axis.set_xticks(budgets, [f"{e:g}" for e in budgets])
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_title(label)
        axis.set_xlabel("epsilon")
        axis.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("MSE (error bars: standard error)")
    axes[0][-1].legend(fontsize=8)
    figure.tight_layout()
    return figure


def output_files(result: ExperimentResult, config: dict, rows: list[dict]) -> dict:
    """The files of `--out`, by name, for `OutputDir.write`; with a total budget the
    figure shows each mechanism at its per-round eps, one round and the T-round final estimate."""
    if "budget" in config:
        summary = result.summary
        labels = [
            f"{_label(m, o)}\neps {e:.4g}/round"
            for m, o, e in zip(summary["mechanism"], summary["options"], summary["epsilon"])
        ]
        figure = budget_figure(summary, labels, config["budget"])
    else:
        figure = mse_figure(result)
    return {
        "runs.csv": result.runs,
        "summary.csv": result.summary,
        "summary.json": {"config": config, "rows": rows},
        "mse_vs_epsilon.png": figure,
    }

"""`ldpfed predict --task frequency` and `ldpfed compare --task frequency`: frequency
estimation over categorical attributes, predicted per category before running, and measured for
mechanisms x budgets x aggregators. `predict` and `compare` call these when --task is frequency.

Options keep their meaning where they have one: --dims is the number of attributes d (synthetic
data), --report-dims the attributes m each user reports (eps/m each), --users the users n;
--categories gives the categories of a CSV's columns (or the synthetic sets' counts).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
from rich.markup import escape
from rich.table import Table

from ldpfed.analysis.frequency import predict_frequency
from ldpfed.cli.budget_study import FINAL_COLUMNS, budget_figure, budget_title, final_cells, study_keys, study_plans
from ldpfed.cli.common import (
    check_estimator,
    console,
    error_console,
    estimator_options,
    parse_list,
    print_json,
    progress_steps,
    show_results,
)
from ldpfed.data.categorical import CategoricalData, read_categorical
from ldpfed.experiments.frequency import (
    DEFAULT_FREQUENCY_AGGREGATORS,
    FrequencyExperimentResult,
    run_frequency_plan,
)
from ldpfed.experiments.plan import ExperimentPlan
from ldpfed.frequency.categorical import AttributeOracles, is_approximate, oracle_kind, takes_hash_seed
from ldpfed.outputs import OutputDir
from ldpfed.planning.frequency import measure_memoized_versus_fresh, memoized_versus_fresh
from ldpfed.planning.run import StudyBudget, study_repeats, with_budget_columns
from ldpfed.protocols.frequency import public_hash_seed
from ldpfed.protocols.seeds import data_seed
from ldpfed.validation import LDPValueError, check_delta, check_epsilon, check_positive_int, check_report_dims

DATA_HELP = "frequency: zipf[:S] | uniform (synthetic) | fair (statsmodels) | a .csv of categories."
CATEGORIES_HELP = (
    "frequency: categories of a CSV's columns: K (codes 0..K-1), K1,K2,... per column, or labels "
    "'a,b,c;x,y' per column (default: inferred); synthetic: counts (default 10)."
)
FREQUENCY_DEFAULTS = {"mechanism": "grr,oue,laplace,piecewise", "epsilons": "0.5,1,2,4", "data": "zipf", "repeats": 5}
SHOWN_ENTRIES = 40
PREDICTION_FILE, PER_CATEGORY_FILE = "prediction.json", "per_category.csv"


def _reject(given: dict, allowed: set, task_label: str = "--task frequency") -> None:
    """Options given that do not apply to the frequency task: one error naming them."""
    wrong = [
        "--" + name.replace("_", "-") for name, value in given.items() if name not in allowed and value is not None
    ]
    if wrong:
        raise LDPValueError(f"{', '.join(sorted(wrong))} do(es) not apply to {task_label}")


def _mechanism_options(names: list[str], estimator: str | None, hash_seed: int | None = None) -> dict[str, dict]:
    """--estimator for the mechanisms that take it, and the run's public hash index (`hash_seed`) for
    the sketches (hcms, cms); an unknown name is an error here."""
    for name in names:
        oracle_kind(name)
    options = {name: estimator_options(name, estimator) if oracle_kind(name) == "histogram" else {} for name in names}
    if estimator is not None and not any(options.values()):
        raise LDPValueError(f"--estimator applies to square-wave only; none of {names} takes it")
    if hash_seed is not None:
        options = {
            name: {**options[name], "seed": hash_seed} if takes_hash_seed(name) else options[name] for name in names
        }
    return options


def read_frequency_data(data, users, dims, categories, header, rng) -> CategoricalData:
    """The categorical data (`read_categorical`), with what was read on stderr."""
    if users is not None:
        users = check_positive_int(users, "--users")
    if dims is not None:
        dims = check_positive_int(dims, "--dims")
    table = read_categorical(data, users=users, attributes=dims, categories=categories, rng=rng, header=header)
    error_console.print(f"data: {table.description}", highlight=False, soft_wrap=True, markup=False)
    return table


def _check_delta(names: list[str], delta, *, required: bool) -> None:
    """--delta, before any data: for the approximate mechanisms among `names`, in (0, 1) (and given,
    when `required`); refused when none of them is approximate."""
    approximate = [name for name in names if is_approximate(name)]
    if delta is not None and not approximate:
        raise LDPValueError(f"--delta applies to approximate mechanisms (e.g. gaussian); none of {names} is")
    for name in approximate:
        if required or delta is not None:
            check_delta(delta, approximate=True, mechanism=name)


# ---- predict ---------------------------------------------------------------------------------
def predict_frequency_command(
    *,
    mechanism,
    epsilon,
    delta,
    users,
    dims,
    report_dims,
    data,
    header,
    seed,
    estimator,
    categories,
    out,
    overwrite,
    as_json,
    unsupported: dict,
) -> None:
    """Per-category bias, variance and MSE of each --mechanism (comma-separated) before running."""
    _reject(unsupported, set())
    names = parse_list(mechanism, str, "--mechanism")
    epsilon = check_epsilon(epsilon, "--epsilon")
    seed = check_positive_int(seed, "--seed", minimum=0)
    check_estimator(estimator)
    options = _mechanism_options(names, estimator, public_hash_seed(data_seed(seed)))  # per run, public
    _check_delta(names, delta, required=True)
    if report_dims is not None:
        check_positive_int(report_dims, "--report-dims")  # and <= the attributes, once the data are read
    with OutputDir.prepare(out, overwrite=overwrite, command="predict --task frequency") as destination:
        table = read_frequency_data(data or "zipf", users, dims, categories, header, np.random.default_rng(seed))
        m = check_report_dims(table.attributes if report_dims is None else report_dims, table.attributes)
        truth = table.frequencies()
        predictions = []
        for name in names:
            oracles = AttributeOracles.build(
                name, epsilon, table.categories, m, delta if is_approximate(name) else None, **options[name]
            )
            predictions.append(predict_frequency(oracles, truth, table.users))
        entries = _entry_labels(table)
        result = {
            "task": "frequency",
            "data": table.source,
            "users": table.users,
            "attributes": table.attributes,
            "categories": table.categories.tolist(),
            "report_dims": m,
            "epsilon": epsilon,
            "entries": entries,
            "predictions": [p.to_dict() for p in predictions],
        }
        written = destination.write(
            {PREDICTION_FILE: result, PER_CATEGORY_FILE: per_category_frame(entries, predictions)}
        )
    if as_json:
        print_json(result)
        return
    _print_prediction(table, predictions, entries)
    if written:
        console.print(f"wrote {out}/" + ", ".join(written), highlight=False)


def per_category_frame(entries: list[dict], predictions) -> pd.DataFrame:
    """One row per (mechanism, attribute, category): the true frequency and the predicted bias,
    variance and MSE of its estimate (squared frequency units)."""
    return pd.concat(
        [
            pd.DataFrame(entries).assign(
                mechanism=p.oracles.name,
                frequency=p.frequencies,
                bias=p.bias,
                variance=p.variance,
                mse=p.mse_per_entry,
            )
            for p in predictions
        ],
        ignore_index=True,
    )[["mechanism", "attribute", "category", "frequency", "bias", "variance", "mse"]]


def _entry_labels(table: CategoricalData) -> list[dict]:
    return [
        {"attribute": table.names[j], "category": label} for j, labels in enumerate(table.labels) for label in labels
    ]


def _print_prediction(table, predictions, entries) -> None:
    first = predictions[0]
    summary = Table(
        title=f"Predicted frequency error (CLT): {table.users:,} users, d = {table.attributes} attributes, "
        f"m = {first.oracles.report_dims}; data: {table.source}"
    )
    summary.add_column("quantity")
    for p in predictions:
        summary.add_column(p.oracles.name, justify="right")
    rows = [
        ("guarantee", lambda p: f"{p.oracles.epsilon:g}-LDP per user"),
        ("per attribute", lambda p: p.oracles.oracles[0].guarantee.split(" per ")[0] + " per value"),
        ("MSE (mean over entries)", lambda p: f"{p.mse:.6g}"),
        ("  bias^2", lambda p: f"{np.mean(p.bias**2):.3g}"),
        ("  randomizer noise", lambda p: f"{np.mean(p.noise_variance):.6g}"),
        ("  sampling m of d", lambda p: f"{np.mean(p.sampling_variance):.6g}"),
        ("RMSE", lambda p: f"{math.sqrt(p.mse):.6g}"),
    ]
    for label, cell in rows:
        summary.add_row(label, *(cell(p) for p in predictions))
    console.print(summary)
    shown = min(len(entries), SHOWN_ENTRIES)
    if len(predictions) == 1:  # one mechanism: its bias, variance and MSE per category
        columns = [
            ("bias", first.bias, ".3g"),
            ("variance", first.variance, ".4g"),
            ("MSE", first.mse_per_entry, ".4g"),
        ]
    else:  # several: the MSE of each
        columns = [(f"MSE {p.oracles.name}", p.mse_per_entry, ".4g") for p in predictions]
    detail = Table(title=f"Per category (first {shown} of {len(entries)}): true frequency and predicted error")
    for column in ("attribute", "category", "frequency", *(name for name, _, _ in columns)):
        detail.add_column(column, justify="right")
    for e in range(shown):
        detail.add_row(
            escape(entries[e]["attribute"]),
            escape(entries[e]["category"]),
            f"{first.frequencies[e]:.4f}",
            *(format(values[e], spec) for _, values, spec in columns),
        )
    console.print(detail)


# ---- compare ---------------------------------------------------------------------------------
def compare_frequency(
    *,
    mechanism,
    epsilons,
    aggregators,
    data,
    header,
    users,
    dims,
    report_dims,
    repeats,
    seed,
    delta,
    deviation,
    alpha,
    l2_reference,
    estimator,
    chunk_users,
    categories,
    out,
    overwrite,
    as_json,
    unsupported: dict,
    study: StudyBudget | None = None,
) -> None:
    """Mechanisms x budgets x aggregators on categorical data, measured beside the prediction; with
    `study` (--budget, --rounds, --accountant) each mechanism at the per-round budget the total gives it,
    in T-round studies."""
    _reject(unsupported, set())
    names = parse_list(FREQUENCY_DEFAULTS["mechanism"] if mechanism is None else mechanism, str, "--mechanism")
    check_estimator(estimator)
    seed = check_positive_int(0 if seed is None else seed, "--seed", minimum=0)
    options = _mechanism_options(names, estimator, public_hash_seed(data_seed(seed)))  # per run, public
    _check_delta(names, delta, required=False)
    if study is not None:
        repeats = study_repeats(repeats, study.rounds, FREQUENCY_DEFAULTS["repeats"])
    shared = {
        "aggregators": parse_list(aggregators, str, "--aggregators") if aggregators else None,
        "deviation": deviation,
        "alpha": alpha,
        "l2_reference": "bound" if l2_reference is None else l2_reference,
        "repeats": FREQUENCY_DEFAULTS["repeats"] if repeats is None else repeats,
        "seed": seed,
        "chunk_users": chunk_users,
    }
    if study is None:
        budgets = parse_list(FREQUENCY_DEFAULTS["epsilons"] if epsilons is None else epsilons, float, "--epsilons")
        plans = [
            (names, ExperimentPlan.build("frequency", budgets, DEFAULT_FREQUENCY_AGGREGATORS, delta=delta, **shared))
        ]
    else:  # one plan per per-round (eps, delta) that the total gives the oracles
        groups = study.groups(names)
        group_plans = study_plans("frequency", study, groups, DEFAULT_FREQUENCY_AGGREGATORS, shared)
        plans = [(list(group.names), group_plan) for group, group_plan in zip(groups, group_plans)]
    plan = plans[0][1]
    with OutputDir.prepare(out, overwrite=overwrite, command="compare --task frequency") as output:
        table = read_frequency_data(
            FREQUENCY_DEFAULTS["data"] if data is None else data,
            users,
            dims,
            categories,
            header,
            np.random.default_rng(data_seed(plan.seed)),
        )
        m = table.attributes if report_dims is None else check_report_dims(report_dims, table.attributes)
        steps = sum(len(group) * len(p.epsilons) * p.repeats for group, p in plans)
        with progress_steps("compare", steps) as advance:
            result = FrequencyExperimentResult.join(
                [
                    run_frequency_plan(table, group, replace(p, report_dims=m, progress=advance), options)
                    for group, p in plans
                ]
            )
        if study is not None:
            config = {**result.config, "budget": study.describe(groups, plan.repeats)}
            if not study.total.delta:  # the longitudinal oracles are pure
                predicted = memoized_versus_fresh(table, study.total.epsilon, study.rounds, m)
                config["memoized_versus_fresh"] = measure_memoized_versus_fresh(
                    table, predicted, plan.repeats, plan.seed
                )
            result = replace(result, summary=with_budget_columns(result.summary, groups), config=config)
        rows = json_rows(result)
        written = output.write(output_files(result, rows)) if output.enabled else []
    show_results(rows, lambda: results_table(result), as_json=as_json, out=out, files=written)
    if not as_json and result.config.get("memoized_versus_fresh"):
        print_memoized_versus_fresh(result.config["memoized_versus_fresh"])


def print_memoized_versus_fresh(rows: list[dict]) -> None:
    """The table of memoized against fresh collection at one budget over T rounds (`plan` and
    `compare --task frequency --budget --rounds`), with whom each guarantee holds against."""
    first = rows[0]
    table = Table(
        title=f"Memoized vs fresh collection at one budget over T = {first['rounds']} rounds "
        f"(eps {max(r['epsilon_against_all_rounds'] for r in rows):g} per user against the server over all rounds, "
        f"for a value that stays fixed), m = {first['report_dims']}",
        caption="memoized: each user's permanent report drawn once (eps_inf charged once), a fresh instantaneous "
        "report each round; fresh: a new report each round at eps / T (basic composition)",
    )
    measured = "measured_mse_of_average" in first
    for column in (
        "collection",
        "oracle",
        "eps per round",
        "eps vs one round's observer",
        "eps vs the server, all rounds",
    ):
        table.add_column(column, justify="left" if column in ("collection", "oracle") else "right")
    table.add_column("MSE of the T-round average (predicted)", justify="right")
    if measured:
        table.add_column("measured ± se", justify="right")
    for row in rows:
        per_round = "-" if row["epsilon_per_round"] is None else f"{row['epsilon_per_round']:.4g}"
        cells = [
            row["collection"],
            row["oracle"],
            per_round,
            f"{row['epsilon_against_one_round']:.4g}",
            f"{row['epsilon_against_all_rounds']:.4g}",
            f"{row['mse_of_average']:.4g}",
        ]
        if measured:
            cells.append(f"{row['measured_mse_of_average']:.4g} ±{row['measured_se']:.2g}")
        table.add_row(*cells)
    console.print(table)


def _number(value) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def json_rows(result: FrequencyExperimentResult) -> list[dict]:
    return [
        {
            "mechanism": row["mechanism"],
            "oracle": row["oracle"],
            "epsilon": float(row["epsilon"]),
            "aggregator": row["aggregator"],
            "mse": float(row["mse"]),
            "mse_std": float(row["mse_std"]),
            "predicted_mse": _number(row["predicted_mse"]),
            **study_keys(row),
        }
        for row in result.summary.to_dict("records")
    ]


def results_table(result: FrequencyExperimentResult) -> Table:
    config, summary = result.config, result.summary
    aggregators = list(dict.fromkeys(summary["aggregator"]))
    budget = config.get("budget")
    table = Table(
        title=f"Frequency MSE (mean over entries; mean ± sd over {config['repeats']} repetitions), "
        f"predicted in brackets; {config['data']}, {config['users']} users, d={config['attributes']}, "
        f"m={config['report_dims']}, deviation={config['deviation']}"
        + ("" if budget is None else "; " + budget_title(budget)),
        caption="bold: lowest measured MSE in the row",
    )
    table.add_column("eps" if budget is None else "eps per round", justify="right")
    table.add_column("mechanism")
    for name in aggregators:
        table.add_column(name, justify="right", overflow="fold")
    if budget is not None:
        for column in (f"spent ({budget['accountant']})", *FINAL_COLUMNS):
            table.add_column(column, justify="right")
    for (epsilon, mechanism), group in summary.sort_values("epsilon", kind="stable").groupby(
        ["epsilon", "mechanism"], sort=False
    ):
        by_name = {row.aggregator: row for row in group.itertuples(index=False)}
        best = min(by_name, key=lambda n: by_name[n].mse)
        cells = []
        for name in aggregators:
            row = by_name[name]
            text = f"{row.mse:.3g} ±{row.mse_std:.2g}" + (
                f" [{row.predicted_mse:.3g}]" if math.isfinite(row.predicted_mse) else ""
            )
            cells.append(f"[bold]{text}[/]" if name == best else text)
        finals = [] if budget is None else final_cells(by_name.get("mean"))
        table.add_row(f"{epsilon:g}", escape(mechanism), *cells, *finals)
    return table


def frequency_figure(result: FrequencyExperimentResult):
    """Bars of the true and estimated frequencies of the first attribute, for the first mechanism at
    the smallest budget (where the aggregators differ most), one bar group per category."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = result.frequencies
    attribute = frame["attribute"].iloc[0]
    mechanism = frame["mechanism"].iloc[0]
    epsilon = frame.loc[frame["mechanism"] == mechanism, "epsilon"].min()  # with --budget each has its own
    panel = frame[(frame["attribute"] == attribute) & (frame["mechanism"] == mechanism) & (frame["epsilon"] == epsilon)]
    names = list(dict.fromkeys(panel["aggregator"]))
    categories = list(dict.fromkeys(panel["category"]))
    width = 0.8 / (len(names) + 1)
    x = np.arange(len(categories))
    figure, axis = plt.subplots(figsize=(max(6, 0.9 * len(categories) * (len(names) + 1) / 3), 4))
    truth = panel[panel["aggregator"] == names[0]]["true_frequency"].to_numpy()
    axis.bar(x, truth, width, color="black", label="true")
    for i, name in enumerate(names, start=1):
        values = panel[panel["aggregator"] == name]["first_estimate"].to_numpy()
        axis.bar(x + i * width, values, width, label=name)
    axis.axhline(0, color="grey", lw=0.5)
    axis.set_xticks(x + 0.4 - width / 2, categories, rotation=45 if len(categories) > 8 else 0)
    axis.set_xlabel(f"category of {attribute}")
    axis.set_ylabel("frequency")
    axis.set_title(f"{mechanism}, eps = {epsilon:g}: true vs estimated (repetition 1)")
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    return figure


def mse_figure(result: FrequencyExperimentResult):
    """MSE vs eps (log-log), one panel per mechanism (4 per row), one line per aggregator; predicted dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    summary = result.summary
    mechanisms = list(dict.fromkeys(summary["mechanism"]))
    columns = min(4, len(mechanisms))
    rows = -(-len(mechanisms) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.5 * rows), squeeze=False, sharey=True)
    epsilons = sorted(summary["epsilon"].unique())
    for axis, mechanism in zip(axes.flat, mechanisms):
        panel = summary[summary["mechanism"] == mechanism]
        for name, group in panel.groupby("aggregator", sort=False):
            line = axis.errorbar(
                group["epsilon"], group["mse"], yerr=group["mse_se"], marker="o", ms=3, capsize=2, label=name
            )
            if group["predicted_mse"].notna().any():
                axis.plot(group["epsilon"], group["predicted_mse"], "--", lw=1, color=line[0].get_color())
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.xaxis.set_major_locator(FixedLocator(epsilons))
        axis.xaxis.set_minor_locator(NullLocator())
        axis.set_xticklabels([f"{e:g}" for e in epsilons])
        axis.set_title(mechanism)
        axis.set_xlabel("epsilon")
        axis.grid(True, which="both", alpha=0.3)
    for axis in axes.flat[len(mechanisms) :]:
        axis.set_visible(False)
    for axis in axes[:, 0]:
        axis.set_ylabel("frequency MSE (dashed: predicted)")
    axes.flat[0].legend(fontsize=8)
    figure.tight_layout()
    return figure


def output_files(result: FrequencyExperimentResult, rows: list[dict]) -> dict:
    """The files of `--out`; with a total budget the MSE figure shows each mechanism at its per-round
    eps, one round and the T-round final estimate."""
    summary, budget = result.summary, result.config.get("budget")
    labels = [f"{m}\neps {e:.4g}/round" for m, e in zip(summary["mechanism"], summary["epsilon"])]
    return {
        "runs.csv": result.runs,
        "summary.csv": result.summary,
        "frequencies.csv": result.frequencies,
        "summary.json": {"config": result.config, "rows": rows},
        "frequencies.png": frequency_figure(result),
        "mse_per_aggregator.png": mse_figure(result) if budget is None else budget_figure(summary, labels, budget),
    }

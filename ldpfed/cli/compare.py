"""`ldpfed compare`: aggregators x mechanisms x budgets, measured beside the predicted MSE.

Task "mean" runs the in-process mean-estimation experiment of `ldpfed.experiments.mean`.

With a total budget (`--budget EPS[,DELTA] --rounds T [--accountant A]`, mean and frequency) each
mechanism runs at the per-round budget `ldpfed plan` gives it (`ldpfed.planning.run.StudyBudget`):
the mechanisms that share a per-round (eps, delta) run as one `ExperimentPlan`, the results are
joined, and every T repetitions are one study whose final estimate averages them.

Task "train" compares aggregators in federated LDP-SGD. Its runner needs Flower and the
apps in `simulations/`, which the core library must never import; so this module looks the
runner up through the entry point `train` of the group `ldpfed.compare_tasks` (declared in
pyproject.toml: `simulations.compare_train:compare_train`) and hands it the option values.
Dependencies stay one-way (simulations -> ldpfed). Options that belong to one task only are an
error with the other; options shared by both default per task (None below = "the task's default").
"""

from __future__ import annotations

import math
from dataclasses import replace
from importlib.metadata import entry_points

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

import ldpfed.aggregation as aggregation
import ldpfed.mechanisms as mechanisms
from ldpfed.cli import frequency as frequency_cli
from ldpfed.cli.common import (
    FINAL_COLUMNS,
    HEADER_HELP,
    OUT_OF_DOMAIN_HELP,
    OUTPUTS_EPILOG,
    budget_figure,
    budget_title,
    check_estimator,
    console,
    estimator_options,
    final_cells,
    handle_errors,
    out_of_domain_policy,
    parse_domain,
    parse_list,
    progress_steps,
    read_data,
    scale_note,
    show_results,
    study_keys,
    study_plans,
)
from ldpfed.cli.options import (
    CLIENTS,
    CLIP,
    COORDINATE_CLIP,
    MODEL,
    OVERWRITE,
    delta_option,
    json_option,
    mechanism_option,
    out_option,
    report_dims_option,
)
from ldpfed.data import available_synthetic
from ldpfed.experiments.mean import DEFAULT_AGGREGATORS, ExperimentResult, MechanismChoice, run_mean_plan
from ldpfed.experiments.plan import ExperimentPlan
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.outputs import OutputDir
from ldpfed.planning.run import DEFAULT_STUDY_ACCOUNTANT, StudyBudget, study_repeats, with_budget_columns
from ldpfed.protocols.seeds import data_seed
from ldpfed.validation import LDPValueError, check_positive_int, check_report_dims

TASKS = ("mean", "train", "frequency")
DEFAULT_USERS, DEFAULT_DIMS = 20000, 20
TASK_PLUGIN_GROUP = "ldpfed.compare_tasks"
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
MEAN_ONLY = ("domain", "users", "dims", "l2_reference", "estimator", "chunk_users", "header", "out_of_domain")
TRAIN_ONLY = (
    "model",
    "clients",
    "rounds",
    "local_steps",
    "lr",
    "batch_size",
    "clip",
    "coordinate_clip",
    "partition",
    "fraction",
    "engine",
    "cpus",
    "data_dir",
    "nodes",
    "device",
)


def _task_runner(task: str):
    """The `ldpfed.compare_tasks` entry point for `task` (installed by the simulations package)."""
    found = [ep for ep in entry_points(group=TASK_PLUGIN_GROUP) if ep.name == task]
    if not found:
        raise LDPValueError(
            f"--task {task} needs the Flower simulations (entry point {TASK_PLUGIN_GROUP}:{task}); "
            "install the project with `pip install -e .`"
        )
    return found[0].load()


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_task_options(task: str, given: dict) -> None:
    """Options of the other task are an error (named), not silently ignored."""
    foreign = TRAIN_ONLY if task == "mean" else MEAN_ONLY
    wrong = [_flag(name) for name in foreign if given.get(name) is not None]
    if wrong:
        raise LDPValueError(f"{', '.join(wrong)} do(es) not apply to --task {task}")


def _mechanism_choices(names: list[str], estimator: str | None, delta: float | None) -> list[MechanismChoice]:
    """Registry names with the --estimator option given to the mechanisms that take it."""
    choices = [MechanismChoice(mechanisms.get_class(name).name, estimator_options(name, estimator)) for name in names]
    if estimator is not None and not any(c.options for c in choices):
        raise LDPValueError(f"--estimator applies to square-wave only; none of {names} takes it")
    if delta is not None and not any(mechanisms.get_class(c.name).approximate for c in choices):
        raise LDPValueError(f"--delta applies to approximate mechanisms (e.g. gaussian); none of {names} is")
    return choices


@handle_errors
def compare(
    context: typer.Context,
    mechanism: str | None = mechanism_option(
        None, "Comma-separated mechanism names (mean: laplace,piecewise; train: laplace; train also takes none)."
    ),
    epsilons: str | None = typer.Option(
        None,
        "--epsilons",
        "-e",
        help="Budgets eps, comma-separated: per user, eps/m per reported value (mean, frequency: 0.5,1,2,4) "
        "or per client and round (train: 1.5,4.9,15.3).",
    ),
    aggregators: str | None = typer.Option(
        None, "--aggregators", "-a", help="Comma-separated aggregators (default: all; train also: fedavg)."
    ),
    data: str | None = typer.Option(
        None,
        "--data",
        help="mean: synthetic set (gaussian|uniform|poisson) or .csv/.npy/.parquet; "
        "train: digits|mnist-5k|synthetic-fedprox|mnist|cifar10; " + frequency_cli.DATA_HELP,
    ),
    domain: str | None = typer.Option(
        None,
        "--domain",
        help="mean: declared data domain LOW,HIGH of a data file (default -1,1; MSE stays on the [-1, 1] scale).",
    ),
    header: bool | None = typer.Option(None, "--header/--no-header", help="mean: " + HEADER_HELP),
    out_of_domain: str | None = typer.Option(None, "--out-of-domain", help="mean: " + OUT_OF_DOMAIN_HELP),
    users: int | None = typer.Option(
        None, "--users", "-n", help=f"mean: users n (synthetic default {DEFAULT_USERS}; a file's rows)."
    ),
    dims: int | None = typer.Option(
        None,
        "--dims",
        "-d",
        help=f"mean: dimensions d of a tuple (synthetic default {DEFAULT_DIMS}; a file's columns).",
    ),
    report_dims: int | None = report_dims_option(" (train: each client; default all, train: Wang's m)"),
    repeats: int | None = typer.Option(
        None, "--repeats", "-r", help="Repetitions per configuration (mean 5, train 2)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of data and of every repetition's stream."),
    delta: float | None = delta_option(", per user (train: per client and round); approximate mechanisms"),
    deviation: str = typer.Option(
        "plug-in", "--deviation", help="Deviation model: plug-in (from reports/updates) or model."
    ),
    alpha: float = typer.Option(0.95, "--alpha", help="Confidence level of the regularization weights."),
    l2_reference: str | None = typer.Option(
        None, "--l2-reference", help="mean: L2 reference m_j: bound (domain, default) or estimate (|theta_hat|)."
    ),
    estimator: str | None = typer.Option(None, "--estimator", help="mean: square-wave estimator raw or debiased."),
    chunk_users: int | None = typer.Option(
        None, "--chunk-users", help="mean: users perturbed per chunk (default ~2^20 values)."
    ),
    model: str | None = MODEL,
    clients: int | None = CLIENTS,
    rounds: int | None = typer.Option(
        None, "--rounds", help="train: rounds (default 5); mean, frequency with --budget: the rounds T of a study."
    ),
    local_steps: int | None = typer.Option(
        None, "--local-steps", help="train: local SGD steps per round (default 10)."
    ),
    lr: float | None = typer.Option(None, "--lr", help="train: client learning rate (default 0.1)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="train: client minibatch size (default 32)."),
    clip: float | None = CLIP,
    coordinate_clip: float | None = COORDINATE_CLIP,
    partition: str | None = typer.Option(None, "--partition", help="train: iid | k-classes | dirichlet."),
    fraction: float | None = typer.Option(None, "--fraction", help="train: fraction of clients sampled per round."),
    engine: str | None = typer.Option(
        None, "--engine", help="train: flower (default; Ray) | local (same code, no Flower; for big sweeps)."
    ),
    cpus: int | None = typer.Option(None, "--cpus", help="train, flower engine: CPUs Ray may use (0 = all)."),
    data_dir: str | None = typer.Option(None, "--data-dir", help="train: directory with mnist/cifar10 files."),
    nodes: int | None = typer.Option(
        None,
        "--nodes",
        help="train: Flower nodes hosting the clients, each training its clients at once (0 = min(clients, CPUs)).",
    ),
    device: str | None = typer.Option(None, "--device", help="train: where the nodes train: auto | cpu | cuda."),
    categories: str | None = typer.Option(None, "--categories", help=frequency_cli.CATEGORIES_HELP),
    trust: str | None = typer.Option(
        None,
        "--trust",
        help="Trust models side by side, comma-separated (local,shuffle for mean; local,central for train): "
        "--epsilons are then each client's totals over the run, per client, at the total's --delta (default 1e-5).",
    ),
    budget: str | None = typer.Option(
        None,
        "--budget",
        help="EPS[,DELTA] (mean, frequency): a client's total budget over --rounds T (delta 0 or absent: pure); "
        "each mechanism runs at the per-round eps and delta that `ldpfed plan` gives it, and each T repetitions "
        "are one study whose final estimate is their average. Not with --epsilons or --delta.",
    ),
    accountant: str | None = typer.Option(
        None,
        "--accountant",
        help="With --budget: the composition that holds the total, basic | advanced | rdp | pld "
        f"(default: {DEFAULT_STUDY_ACCOUNTANT}).",
    ),
    task: str = typer.Option(
        "mean",
        "--task",
        help="What to compare: mean (mean estimation), train (federated LDP-SGD) "
        "or frequency (categorical attributes).",
    ),
    out: str | None = out_option("CSV, JSON summary and PNG plot"),
    overwrite: bool = OVERWRITE,
    as_json: bool = json_option("a JSON list of rows instead of a table"),
) -> None:
    """Compare aggregators (mean, L1, L2, HDR4ME*, James-Stein) across mechanisms and budgets."""
    # --- validate everything before any work ---------------------------------------------------
    if task not in TASKS:
        raise LDPValueError(f"--task must be one of {TASKS}, got {task!r}")
    options = dict(context.params)  # every option as given (None: not given)
    planned = {name: options.pop(name) for name in ("budget", "accountant")}
    if trust is not None:  # the runs are simulate's (Flower, the trust harness): found as --task train's runner is
        _refuse_budget(planned, "compare --trust (its --epsilons are each client's totals over the run)")
        with OutputDir.prepare(out, overwrite=overwrite, command="compare --trust") as output:
            _task_runner("trust")({**options, "out": output})
        return
    options.pop("task")
    options.pop("trust")
    if task == "train":
        _refuse_budget(planned, "--task train (a training run from a total budget: ldpfed simulate --budget)")
    else:
        study = _study(planned, options.pop("rounds"), epsilons, delta)
    if task == "frequency":
        unsupported = {name: options.pop(name, None) for name in ("domain", "out_of_domain", *TRAIN_ONLY)}
        frequency_cli.compare_frequency(**options, unsupported=unsupported, study=study)
        return
    if categories is not None:
        raise LDPValueError(f"--categories applies to --task frequency, not to --task {task}")
    options.pop("categories")
    _check_task_options(task, options)
    if task == "train":
        for name in MEAN_ONLY:
            options.pop(name)
        runner = _task_runner("train")
        options.pop("overwrite")
        # Checked before any federation starts; the runner writes through it (ldpfed.outputs).
        with OutputDir.prepare(out, overwrite=overwrite, command="compare --task train") as output:
            runner({**options, "out": output})
        return
    mechanism = MEAN_DEFAULTS["mechanism"] if mechanism is None else mechanism
    epsilons = MEAN_DEFAULTS["epsilons"] if epsilons is None else epsilons
    aggregators = MEAN_DEFAULTS["aggregators"] if aggregators is None else aggregators
    data = MEAN_DEFAULTS["data"] if data is None else data
    domain = MEAN_DEFAULTS["domain"] if domain is None else domain
    if study is not None:
        repeats = study_repeats(repeats, study.rounds, MEAN_DEFAULTS["repeats"])
    repeats = MEAN_DEFAULTS["repeats"] if repeats is None else repeats
    l2_reference = MEAN_DEFAULTS["l2_reference"] if l2_reference is None else l2_reference
    mechanism_names = parse_list(mechanism, str, "--mechanism")
    shared = {
        "aggregators": parse_list(aggregators, str, "--aggregators"),
        "deviation": deviation,
        "alpha": alpha,
        "l2_reference": l2_reference,
        "repeats": repeats,
        "seed": seed,
        "chunk_users": chunk_users,
    }
    if study is None:
        plan = ExperimentPlan.build(
            "mean", parse_list(epsilons, float, "--epsilons"), DEFAULT_AGGREGATORS, delta=delta, **shared
        )
    check_estimator(estimator)
    choices = _mechanism_choices(mechanism_names, estimator, delta)
    if study is None:
        runs = [(choices, plan)]
    else:  # one plan per per-round (eps, delta) that the total gives the mechanisms
        groups = study.groups([choice.name for choice in choices])
        plans = study_plans("mean", study, groups, DEFAULT_AGGREGATORS, shared)
        runs = [
            ([choice for choice in choices if choice.name in group.mechanisms], group_plan)
            for group, group_plan in zip(groups, plans)
        ]
        plan = plans[0]
    synthetic = data in available_synthetic()
    if synthetic:
        users = DEFAULT_USERS if users is None else users
        dims = DEFAULT_DIMS if dims is None else dims
    users = None if users is None else check_positive_int(users, "--users")
    dims = None if dims is None else check_positive_int(dims, "--dims")
    low, high = parse_domain(domain)
    out_of_domain = "error" if out_of_domain is None else out_of_domain
    out_of_domain_policy(out_of_domain)
    if synthetic:  # d is known before the data are generated: m and every budget per value too
        m = dims if report_dims is None else check_report_dims(report_dims, dims)
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
    with OutputDir.prepare(out, overwrite=overwrite, command="compare") as output:
        # The seed scheme of `ldpfed simulate` (ldpfed.protocols.seeds): data from the run seed's data seed.
        tuples = read_data(
            data,
            users=users,
            dims=dims,
            seed=plan.seed,
            domain=(low, high),
            header=header,
            out_of_domain=out_of_domain,
            rng=np.random.default_rng(data_seed(plan.seed)),
        )
        table = tuples.values
        report_dims = table.shape[1] if report_dims is None else check_report_dims(report_dims, table.shape[1])
        result = _run_with_progress(
            table, [(run_choices, replace(run_plan, report_dims=report_dims)) for run_choices, run_plan in runs]
        )
        config = {
            "task": task,
            "data": data,
            "domain": [low, high],
            "out_of_domain": out_of_domain,
            "seed": plan.seed,
            **result.config,
        }
        if study is not None:
            config["budget"] = study.describe(groups, repeats)
            result = replace(result, summary=with_budget_columns(result.summary, groups))
        if not synthetic and (low, high) != (-1.0, 1.0):
            config["scale"] = scale_note((low, high))
        rows = json_rows(result)
        written = output.write(output_files(result, config, rows)) if output.enabled else []
    show_results(rows, lambda: results_table(result, config), as_json=as_json, out=out, files=written)
    if "scale" in config and not as_json:
        console.print(config["scale"]["note"] + ".", highlight=False)


def _refuse_budget(planned: dict, where: str) -> None:
    given = [_flag(name) for name, value in planned.items() if value is not None]
    if given:
        raise LDPValueError(f"{', '.join(given)} do(es) not apply to {where}")


def _study(planned: dict, rounds: int | None, epsilons: str | None, delta: float | None) -> StudyBudget | None:
    """The total budget of a mean or frequency comparison (--budget, --rounds, --accountant), or None;
    the options a total decides are a contradiction with it."""
    if planned["budget"] is None:
        if planned["accountant"] is not None:
            raise LDPValueError("--accountant applies with --budget (the composition that holds the total)")
        if rounds is not None:
            raise LDPValueError("--rounds applies to --task train, or with --budget (the rounds of a study)")
        return None
    given = [flag for flag, value in (("--epsilons", epsilons), ("--delta", delta)) if value is not None]
    if given:
        raise LDPValueError(f"--budget sets every mechanism's per-round epsilon and delta: drop {', '.join(given)}")
    return StudyBudget.parse(planned["budget"], rounds, planned["accountant"])


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


def register(app: typer.Typer) -> None:
    app.command("compare", epilog=OUTPUTS_EPILOG)(compare)

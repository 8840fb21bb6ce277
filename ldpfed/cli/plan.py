"""`ldpfed plan`: from a client's total privacy budget over a study, the per-round settings with the
smallest predicted error, and its alternatives (ldpfed.planning)."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np
import typer
from rich.table import Table

from ldpfed.cli.common import (
    HEADER_HELP,
    OUT_OF_DOMAIN_HELP,
    OUTPUTS_EPILOG,
    console,
    handle_errors,
    out_of_domain_policy,
    parse_domain,
    parse_list,
    print_json,
    progress_steps,
)
from ldpfed.cli.frequency import CATEGORIES_HELP, read_frequency_data
from ldpfed.cli.options import (
    CLIENTS,
    CLIP,
    COORDINATE_CLIP,
    MODEL,
    OVERWRITE,
    json_option,
    mechanism_option,
    out_option,
    report_dims_option,
)
from ldpfed.cli.predict import _load_data as load_data
from ldpfed.outputs import OutputDir
from ldpfed.planning import TotalBudget, rounds_taken
from ldpfed.planning.frequency import FrequencyTask, frequency_curve_row, make_frequency_plan
from ldpfed.planning.plan import (
    CURVE_ACCOUNTANTS,
    MeanTask,
    candidate_report_dims,
    check_options,
    curve_figure,
    make_plan,
    mse_against_rounds,
)
from ldpfed.planning.train import make_train_plan
from ldpfed.tasks import foreign_flags, resolve
from ldpfed.validation import LDPValueError, check_positive_int

PLAN_TASKS = ("mean", "frequency", "train")  # the tasks a plan predicts the error of
SHOWN_ROWS = 15


@handle_errors
def plan_command(
    task: str = typer.Option(
        "mean",
        "--task",
        help="mean (tuples in [-1, 1]) | frequency (categorical attributes) | train (model updates per round).",
    ),
    budget: str = typer.Option(
        ..., "--budget", help="EPS[,DELTA]: a client's total budget over the whole study (delta 0 or absent: pure)."
    ),
    rounds: int = typer.Option(..., "--rounds", "-T", help="Collection rounds T of the study."),
    participation: float = typer.Option(
        1.0,
        "--participation",
        help="Fraction q of the clients that report in a round (the error is predicted for q n users; the "
        "guarantee still assumes a client takes part in every round: no amplification under local DP).",
    ),
    rounds_cap: int = typer.Option(
        None, "--rounds-cap", help="The federation's cap on the rounds one client takes part in (default: every round)."
    ),
    mechanism: str = mechanism_option(
        None, "Randomizers to consider, comma-separated (default: all; gaussian needs DELTA)."
    ),
    report_dims: str = report_dims_option(", or auto (1, 2, 4, ... and d). Default d"),
    accountant: str = typer.Option("pld", "--accountant", help="basic | advanced | rdp | pld (default: pld)."),
    data: str = typer.Option(
        None,
        "--data",
        help="Synthetic set (gaussian|uniform|poisson), a .csv/.npy/.parquet table, or a .json of moments "
        "(default: the default data set, gaussian 10,000 users x 10 dims); frequency: zipf[:S] | uniform | fair | "
        "a .csv of categories (default zipf).",
    ),
    categories: str = typer.Option(None, "--categories", help=CATEGORIES_HELP),
    model: str = MODEL,
    clients: int = CLIENTS,
    clip: float = CLIP,
    coordinate_clip: float = COORDINATE_CLIP,
    users: int = typer.Option(None, "--users", "-n", help="Users n of a synthetic set (default 10,000)."),
    dims: int = typer.Option(None, "--dims", "-d", help="Dimensions d of a synthetic set (default 10)."),
    domain: str = typer.Option("-1,1", "--domain", help="LOW,HIGH: the declared domain of a data file's values."),
    header: bool = typer.Option(None, "--header/--no-header", help=HEADER_HELP),
    out_of_domain: str = typer.Option("error", "--out-of-domain", help=OUT_OF_DOMAIN_HELP),
    seed: int = typer.Option(0, "--seed", help="Seed for synthetic data."),
    out: str | None = out_option("plan.csv, plan.json, mse_vs_rounds.csv and mse_vs_rounds.png"),
    overwrite: bool = OVERWRITE,
    as_json: bool = json_option("one JSON object instead of tables"),
) -> None:
    """Per-round budget, report dimension and mechanism with the smallest predicted error for a total budget."""
    if task not in PLAN_TASKS:
        raise LDPValueError(f"--task must be one of {', '.join(PLAN_TASKS)}, got {task!r}")
    request = {name: value for name, value in locals().items() if name != "task"}
    foreign = foreign_flags(task, request, "plan_options")
    if foreign:
        raise LDPValueError(f"{', '.join(foreign)} do(es) not apply to --task {task}")
    request["total"] = TotalBudget.parse(request.pop("budget"))
    PLANNERS[task](SimpleNamespace(**request))


def _plan_tuples(side, read, request) -> None:
    """`plan --task mean|frequency`: every (mechanism, m) ranked by its predicted error; with --out the
    plan's files and each mechanism's MSE against T. `side`: the task's side of a plan (before the
    data are read, its options are checked); `read`: (make, dims of the data, row_of, moments)."""
    parse_domain(request.domain)
    out_of_domain_policy(request.out_of_domain)
    check_positive_int(request.seed, "--seed", minimum=0)
    names = None if request.mechanism is None else parse_list(request.mechanism, str, "--mechanism")
    total, rounds = request.total, request.rounds
    check_options(
        side, total, rounds, request.rounds_cap, names, request.report_dims, request.accountant, request.participation
    )
    with OutputDir.prepare(request.out, overwrite=request.overwrite, command="plan") as destination:
        make, data_dims, row_of, moments = read(request)
        options = {
            "mechanisms": names,
            "report_dims": request.report_dims,
            "accountant": request.accountant,
            "participation": request.participation,
            "cap": request.rounds_cap,
        }
        candidates = len(side.names(total, names)) * len(candidate_report_dims(data_dims, request.report_dims))
        with progress_steps("plan", candidates) as advance:
            plan = make(total, rounds, progress=advance, **options)
        summary = plan.summary()
        summary["simulate"] = simulate_command(plan)
        files = _plan_files(plan, summary, moments, row_of) if destination.enabled else {}
        written = destination.write(files) if files else []
    if request.as_json:
        print_json(summary)
        return
    _print_plan(plan, summary)
    if written:
        console.print(f"wrote {request.out}/" + ", ".join(written), highlight=False)


def _mean_data(request):
    """The tuples' moments (a synthetic set of --users x --dims, a table, or a .json of moments)."""
    data = request.data
    if data is None and (request.users is None) != (request.dims is None):
        raise LDPValueError("give both --users and --dims (a synthetic set of that size), or neither")
    if data is None and request.users is not None:
        data = "gaussian"
    low_high = parse_domain(request.domain)
    moments, source, _ = load_data(
        data, request.users, request.dims, request.seed, low_high, request.header, request.out_of_domain
    )
    return partial(make_plan, moments, data=source), moments.dims, None, moments


def _frequency_data(request):
    """The categorical attributes (a synthetic set or a .csv of categories)."""
    rng = np.random.default_rng(request.seed)
    table = read_frequency_data(
        request.data or "zipf", request.users, request.dims, request.categories, request.header, rng
    )
    return partial(make_frequency_plan, table), table.attributes, frequency_curve_row(table, request.total), None


def _plan_files(plan, summary: dict, moments, row_of) -> dict:
    """plan.csv, plan.json and each mechanism's (at its best m) MSE against T, as a table and a figure."""
    best_m = {}
    for row in plan.rows:  # each mechanism's best m
        best_m.setdefault(row.budget.mechanism, row.report_dims)
    with progress_steps("plan: MSE against T", len(best_m) * len(CURVE_ACCOUNTANTS)) as advance:
        curve = mse_against_rounds(moments, plan.total, list(best_m), best_m, row_of=row_of, progress=advance)
    return {
        "plan.csv": plan.frame(),
        "plan.json": summary,
        "mse_vs_rounds.csv": curve,
        "mse_vs_rounds.png": curve_figure(curve, plan.total, plan.rounds),
    }


def train_plan_command(request) -> None:
    """`plan --task train`: each mechanism's per-round setting and its aggregate noise per round."""
    total, rounds, cap = request.total, request.rounds, request.rounds_cap
    rounds_taken(rounds, cap)
    names = None if request.mechanism is None else parse_list(request.mechanism, str, "--mechanism")
    train_options = {name: getattr(request, name) for name in ("model", "clients", "clip", "coordinate_clip")}
    flags = {"task": "train", "data": request.data, "seed": request.seed, "rounds": rounds}
    flags.update(accountant=request.accountant, **train_options)
    config = resolve(None, {key: value for key, value in flags.items() if value is not None})
    participation, dims, out, overwrite, as_json = (
        request.participation,
        request.dims,
        request.out,
        request.overwrite,
        request.as_json,
    )
    with OutputDir.prepare(out, overwrite=overwrite, command="plan") as destination:
        plan = make_train_plan(config, total, rounds, mechanisms=names, participation=participation, cap=cap, dims=dims)
        summary = plan.summary()
        best = plan.best
        summary["simulate"] = (
            f"ldpfed simulate --task train --data {plan.data} --model {plan.model} --clients {plan.clients} "
            f"--mechanism {best.budget.mechanism} --budget {total.text()} --rounds {rounds} "
            f"--accountant {best.budget.accountant}"
        )
        files = {"plan.csv": plan.frame(), "plan.json": summary} if destination.enabled else {}
        written = destination.write(files) if files else []
    if as_json:
        print_json(summary)
        return
    table = Table(
        title=f"Plan (train): total eps {total.epsilon:g}, delta {total.delta:g} per client over T = {rounds} rounds; "
        f"{plan.model} on {plan.data}, d = {plan.dims}, {best.clients_per_round} clients per round"
    )
    columns = [
        ("", lambda r: "*" if r is best else ""),
        ("mechanism", lambda r: r.budget.mechanism),
        ("m", lambda r: "-" if r.report_dims is None else str(r.report_dims)),
        ("eps/round", lambda r: f"{r.budget.epsilon:.6g}"),
        ("accountant", lambda r: r.budget.accountant),
        ("total", lambda r: f"{r.budget.spent[r.budget.accountant].epsilon:.6g}"),
        ("noise mult.", lambda r: "-" if r.noise_multiplier is None else f"{r.noise_multiplier:.4g}"),
        ("clip", lambda r: f"{r.clip:g} ({r.clipping})"),
        ("||u||", lambda r: f"{r.update_norm:.4g}"),
        ("E||noise||^2", lambda r: f"{r.aggregate_noise:.4g}"),
        ("SNR", lambda r: f"{r.signal_to_noise:.4g}"),
    ]
    for label, _ in columns:
        table.add_column(label, justify="left" if label in ("", "mechanism", "accountant") else "right")
    for row in plan.rows:
        table.add_row(*(cell(row) for _, cell in columns))
    console.print(table)
    console.print(f"SNR: {summary['signal_to_noise']}. Guarantee: {plan.guarantee()}.")
    for note, names in plan.accountant_notes().items():  # rows not under --accountant, and why
        console.print(f"{', '.join(names)}: {note}", highlight=False, markup=False, soft_wrap=True)
    for excluded in plan.excluded:
        console.print(f"left out: {excluded['mechanism']}: {excluded['reason']}")
    console.print(f"Run it: {summary['simulate']}", highlight=False, soft_wrap=True)
    if written:
        console.print(f"wrote {out}/" + ", ".join(written), highlight=False)


def simulate_command(plan) -> str:
    """The `ldpfed simulate` line that runs the recommended row."""
    best = plan.best
    return (
        f"ldpfed simulate --task {plan.task} --mechanism {best.budget.mechanism} --report-dims {best.report_dims} "
        f"--budget {plan.total.text()} --rounds {plan.rounds} --accountant {plan.accountant}"
    )


def _print_plan(plan, summary: dict) -> None:
    total = plan.total
    delta = f", delta {total.delta:g}" if total.delta else ""
    table = Table(
        title=f"Plan: total eps {total.epsilon:g}{delta} per client over T = {plan.rounds} rounds "
        f"({plan.accountant}); {plan.users:,} users, d = {plan.dims}; data: {plan.data}"
    )
    columns = [
        ("", lambda r: "*" if r is plan.best else ""),
        ("mechanism", lambda r: r.budget.mechanism),
        ("m", lambda r: str(r.report_dims)),
        ("eps/round", lambda r: f"{r.budget.epsilon:.6g}"),
        ("basic", lambda r: _eps(r, "basic")),
        ("advanced", lambda r: _eps(r, "advanced")),
        ("pld", lambda r: _eps(r, "pld")),
        ("MSE round (mean)", lambda r: f"{r.mse_round_mean:.4g}"),
        ("MSE round (hdr4me)", lambda r: f"{r.mse_round_aggregators.get('hdr4me', float('nan')):.4g}"),
        ("MSE of the T-round average", lambda r: f"{r.mse_final:.4g}"),
        ("MSE one collection", lambda r: f"{r.mse_one_collection:.4g}"),
        ("valid", lambda r: "yes" if r.warning is None else "no"),
    ]
    for label, _ in columns:
        table.add_column(label, justify="left" if label in ("", "mechanism") else "right")
    for row in plan.rows[:SHOWN_ROWS]:
        table.add_row(*(cell(row) for _, cell in columns))
    console.print(table)
    if len(plan.rows) > SHOWN_ROWS:
        console.print(f"({len(plan.rows) - SHOWN_ROWS} more rows in --json / --out plan.csv)", highlight=False)
    console.print(f"Total eps columns: the same rounds under each accountant. Guarantee: {plan.guarantee()}.")
    console.print(f"Calibration: {summary['calibration']['method']}; {summary['calibration']['tolerance']}.")
    for excluded in plan.excluded:
        console.print(f"left out: {excluded['mechanism']} m={excluded['report_dims']}: {excluded['reason']}")
    console.print(f"Run it: {summary['simulate']}", highlight=False, soft_wrap=True)


def _eps(row, accountant: str) -> str:
    spent = row.budget.spent.get(accountant)
    return "-" if spent is None else f"{spent.epsilon:.4g}"


# each task's plan: the tuple tasks rank (mechanism, m) on their side of a plan; train has its own
PLANNERS = {
    "mean": partial(_plan_tuples, MeanTask, _mean_data),
    "frequency": partial(_plan_tuples, FrequencyTask, _frequency_data),
    "train": train_plan_command,
}


def register(app: typer.Typer) -> None:
    app.command("plan", epilog=OUTPUTS_EPILOG)(plan_command)

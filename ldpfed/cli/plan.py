"""`ldpfed plan`: from a client's total privacy budget over a study, the per-round settings with the
smallest predicted error, and its alternatives (ldpfed.planning)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from types import SimpleNamespace

import numpy as np
import typer
from rich.table import Table

import ldpfed.mechanisms as mechanisms
import ldpfed.tasks as tasks
from ldpfed.accounting.trust import get_class
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
from ldpfed.cli.frequency import CATEGORIES_HELP, print_memoized_versus_fresh, read_frequency_data
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
from ldpfed.planning.trust_plan import plan_trust
from ldpfed.tasks import foreign_flags, resolve
from ldpfed.validation import LDPValueError, check_positive, check_positive_int

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
    trust: str = typer.Option(
        None,
        "--trust",
        help="Trust models to set side by side at the total, comma-separated: local, shuffle (mean), central "
        "(train), secagg; each row's setting, noise, predicted error and bits per value (one --mechanism for local "
        "and shuffle, default laplace).",
    ),
    bits: int = typer.Option(
        None, "--bits", help="--trust secagg: bits per value b (the secure sum is modulo 2^b; default 16)."
    ),
    out: str | None = out_option("plan.csv, plan.json, mse_vs_rounds.csv and mse_vs_rounds.png"),
    overwrite: bool = OVERWRITE,
    as_json: bool = json_option("one JSON object instead of tables"),
) -> None:
    """Per-round budget, report dimension and mechanism with the smallest predicted error for a total budget."""
    if task not in PLAN_TASKS:
        raise LDPValueError(f"--task must be one of {', '.join(PLAN_TASKS)}, got {task!r}")
    request = {name: value for name, value in locals().items() if name != "task"}
    foreign = foreign_flags(task, request, "plan_options")
    foreign = [flag for flag in foreign if trust is None or flag not in TRUST_FLAGS]
    if foreign:
        raise LDPValueError(f"{', '.join(foreign)} do(es) not apply to --task {task}")
    request["total"] = TotalBudget.parse(request.pop("budget"))
    if trust is not None:
        trust_plan_command(SimpleNamespace(task=task, **request))
        return
    if bits is not None:
        raise LDPValueError("--bits applies to plan --trust secagg")
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
    if summary.get("memoized_versus_fresh"):
        print_memoized_versus_fresh(summary["memoized_versus_fresh"])
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


# --- plan --trust: the trust models side by side at the total ---------------------------------------
TRUST_FLAGS = ("--clients",)  # a flag of another task's plan that --trust takes (the mean task's secure sum)
NOT_WITH_TRUST = ("report_dims", "rounds_cap", "categories")  # options --trust does not take (not given: None)


def trust_plan_command(request) -> None:
    """`plan --trust a,b,...`: each trust model's setting at the total and what it predicts
    (ldpfed.planning.trust_plan); with --out trust_plan.csv and trust_plan.json."""
    given = [f"--{name.replace('_', '-')}" for name in NOT_WITH_TRUST if getattr(request, name) is not None]
    if request.participation != 1.0:
        given.append("--participation")  # every client in every round: as compare --trust and secagg run
    if given:
        raise LDPValueError(f"{', '.join(given)} do(es) not apply to plan --trust")
    models = [get_class(name).name for name in parse_list(request.trust, str, "--trust")]
    if request.bits is not None and "secagg" not in models:
        raise LDPValueError("--bits applies to plan --trust secagg")
    config = _trust_config(request)
    with OutputDir.prepare(request.out, overwrite=request.overwrite, command="plan") as destination:
        with progress_steps("plan --trust", 1) as advance:
            rows = plan_trust(tasks.of(config), config, request.total, models, request.accountant)
            advance("settings calibrated")
        summary = _trust_summary(request, config, rows)
        files = {}
        if destination.enabled:
            import pandas as pd  # lazily, as ldpfed.planning.plan: the CLI's start-up loads no pandas

            files = {"trust_plan.csv": pd.DataFrame([row.to_dict() for row in rows]).to_csv(index=False)}
            files["trust_plan.json"] = summary
        written = destination.write(files) if files else []
    if request.as_json:
        print_json(summary)
        return
    _print_trust_plan(config, request.total, rows, summary)
    if written:
        console.print(f"wrote {request.out}/" + ", ".join(written), highlight=False)


RUN_OPTIONS = ("data", "users", "dims", "clients", "model", "coordinate_clip")  # the run's, passed on as given
SHAPE_OPTIONS = (*RUN_OPTIONS, "clip")  # and central's and secagg's L2 clip (compare passes it to central)


def _trust_config(request):
    """The run a comparison would make (task, data, federation, rounds, one pure mechanism), with
    the secure sum's bits and the L2 clip of central's and secagg's updates."""
    names = parse_list(request.mechanism or "laplace", str, "--mechanism")
    if len(names) != 1 or mechanisms.get_class(names[0]).approximate:
        raise LDPValueError(f"plan --trust takes one pure local mechanism (local and shuffle rows), got {names}")
    check_positive_int(request.seed, "--seed", minimum=0)
    flags = {"task": request.task, "rounds": check_positive_int(request.rounds, "--rounds"), "seed": request.seed}
    flags["mechanism"] = names[0]
    flags.update({name: getattr(request, name) for name in RUN_OPTIONS if getattr(request, name) is not None})
    if request.data is None and request.users is not None:  # a synthetic set of that size, as plain plan
        flags["data"] = "gaussian"
    config = resolve(None, flags)
    if request.bits is not None:
        config = replace(config, privacy=replace(config.privacy, bits=request.bits))
    if request.clip is not None:  # central's and secagg's L2 clip (the local rows clip each coordinate)
        config = replace(config, training=replace(config.training, clip=check_positive(request.clip, "--clip")))
    return config


def _trust_summary(request, config, rows) -> dict:
    """The plan's record: its rows and the compare (and simulate) lines that run them."""
    total, models = request.total, ",".join(row.setting.trust for row in rows)
    given = [(name, getattr(request, name)) for name in SHAPE_OPTIONS if getattr(request, name) is not None]
    shape = "".join(f" --{name.replace('_', '-')} {value:g}" if isinstance(value, float) else
                    f" --{name.replace('_', '-')} {value}" for name, value in given)  # fmt: skip
    common = f"--task {config.run.task}{shape} --rounds {config.run.rounds}"
    summary = {
        "task": config.run.task,
        "total_epsilon": total.epsilon,
        "total_delta": total.delta,
        "rounds": config.run.rounds,
        "clients": config.federation.clients,
        "error": TRUST_ERROR,
        "rows": [row.to_dict() for row in rows],
        "compare": f"ldpfed compare {common} --trust {models} --epsilons {total.epsilon:g} --delta {total.delta:g} "
        f"--mechanism {config.privacy.mechanism}",
    }
    if config.privacy.bits != type(config.privacy)().bits and "secagg" in models:  # compare runs secagg at 16 bits
        summary["simulate_secagg"] = (
            f"ldpfed simulate {common} --trust secagg --bits {config.privacy.bits} --max-epsilon {total.epsilon:g} "
            f"--max-delta {total.delta:g}"
        )
    return summary


TRUST_ERROR = "predicted MSE per coordinate of the aggregate and round (its noise's variance)"


def _print_trust_plan(config, total: TotalBudget, rows, summary: dict) -> None:
    table = Table(
        title=f"Plan --trust ({config.run.task}): total eps {total.epsilon:g}, delta {total.delta:g} per client over "
        f"T = {config.run.rounds} rounds, {config.federation.clients} clients"
    )
    columns = [
        ("trust", lambda r: r.setting.trust),
        ("unit", lambda r: r.unit),
        ("eps/round", lambda r: "-" if r.setting.epsilon_per_round is None else f"{r.setting.epsilon_per_round:.4g}"),
        ("eps spent", lambda r: f"{r.spent:.4g}"),
        ("eps against server", lambda r: "none" if r.against_server is None else f"{r.against_server:.4g}"),
        ("noise sd (added)", lambda r: f"{r.noise_sd:.4g}"),
        ("noise sd on mean", lambda r: f"{r.noise_sd_on_mean:.4g}"),
        ("predicted MSE", lambda r: f"{r.error:.4g}"),
        ("bits/value", lambda r: str(r.bits_per_value)),
        ("parameters", _parameters_text),
    ]
    for label, _ in columns:
        table.add_column(label, justify="left" if label in ("trust", "unit", "parameters") else "right")
    for row in rows:
        table.add_row(*(cell(row) for _, cell in columns))
    console.print(table)
    console.print(f"Error: {summary['error']}. Run it: {summary['compare']}", highlight=False, soft_wrap=True)
    if "simulate_secagg" in summary:
        console.print(f"secagg at these bits: {summary['simulate_secagg']}", highlight=False, soft_wrap=True)


def _parameters_text(row) -> str:
    p = row.parameters
    if row.setting.trust == "secagg":
        return (
            f"b={p['bits']} gamma={p['gamma']:.3g} sigma={p['local_stddev']:.4g} beta={p['beta']:.3g} "
            f"D={p['padded_dims']}"
        )
    if row.setting.trust == "central":
        return f"z={p['noise_multiplier']:.4g}, C={p['clip']:g}, qN={p['expected_clients']:g}"
    return row.setting.note


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

"""`ldpfed compare --trust a,b,...`: trust models side by side at equal total (eps, delta) per client.

For every total eps of `--epsilons` (a client's total over the run, at the total's delta `--delta`,
default 1e-5) and every trust model, `ldpfed.planning.trust.equal_budget` gives the simulate
options that spend that total against the model's adversary (local: the randomizer's per-round eps;
shuffle: the largest eps0 whose shuffled rounds compose within it; central: the run's budget, to
which Flower's noise is calibrated; secagg: the budget, to which the clients' shares are calibrated),
and the run is the same `ldpfed simulate` run (the local
harness, or simulations.trust). Each row: the measured error (mean: MSE over the rounds; train:
final accuracy), the noise the model adds (its standard deviation where it is added, and on the
mean), the bits each value costs on the wire (secagg: its modulus; else the task's floats), what
is spent against whom, and what must be trusted. Files: trust.csv, trust.json, trust.png.

Wiring as `compare --task train`: ldpfed's compare finds this runner through the entry point
`trust` of the group `ldpfed.compare_tasks`. The clients' noise root is the run seed (`--seed`), so
a comparison is reproducible and the models see the same data and partition; it compares utility
and makes no privacy statement of its own (every run's summary makes its own). Since that root
is a small integer a server could enumerate, every run is qualified as "private against a server
that does not know the noise seed", and each row carries it (`privacy_qualification`): its figures
against the server are those of a deployment whose clients draw their secrets (ldpfed.protocols.seeds).

`--canaries M` (train): each run hosts M canary clients (ldpfed.protocols.canaries) where its trust
model's harness can (local: the audit speaks to the server, from each client's privatized replies;
central and secagg: to the released model, their canary clients taking part in the trusted
server's sum or the secure sum as any client), and its row gains the audit beside the accounted
eps: the one-run lower bound (Steinke et al.), the cosine estimate and its lower limit (Andrew et
al.), the verdict (AUDIT_COLUMNS). A trust model that cannot host canaries runs without them, and
its row and the console say so (`canary_audit`: "not hosted: ..."), never an empty cell that reads
as a pass. The shuffle model has no train harness: `--trust shuffle --task train` is refused,
canaries or not.
"""

from __future__ import annotations

import math
import signal

import pandas as pd
from rich.table import Table

import ldpfed.mechanisms as mechanisms
import ldpfed.tasks as tasks
from ldpfed.accounting.trust import get_class
from ldpfed.cli.common import error_console, parse_list, progress_steps, show_results
from ldpfed.outputs import OutputDir, dumps
from ldpfed.planning.calibration import TotalBudget
from ldpfed.planning.trust import equal_budget
from ldpfed.tasks import resolve
from ldpfed.tasks.train import CANARY_TRUST
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int
from simulations.federation import Interrupted, run
from simulations.stopping import Stopped, StopRequest, sigint_ignored_notice
from simulations.trust import run_trust

FILES = ["trust.csv", "trust.json", "trust.png"]
DEFAULT_DELTA = 1e-5
LOCAL_ONLY = ("coordinate_clip", "report_dims")  # the local randomizer's (passed to local runs only)
L2_CLIPPED_ONLY = ("clip",)  # the L2 clip of central's and secagg's Gaussian noise
NOT_APPLICABLE = ("aggregators", "domain", "out_of_domain", "header", "l2_reference", "estimator", "chunk_users")


def _models_and_canaries(options: dict, task: str, entry) -> tuple[list[str], int]:
    """The trust models compared and the canaries per training run, checked against the task."""
    wrong = [f"--{name.replace('_', '-')}" for name in NOT_APPLICABLE if options.get(name) is not None]
    if options.get("fraction") not in (None, 1.0):
        wrong.append("--fraction")  # local runs get no amplification from sampling: all clients every round
    if wrong:
        raise LDPValueError(f"{', '.join(wrong)} do(es) not apply to compare --trust")
    models = [get_class(name).name for name in parse_list(options["trust"], str, "--trust")]
    canaries = check_positive_int(options.get("canaries") or 0, "--canaries", minimum=0)
    if canaries and "canaries" not in entry.options:  # the tasks whose runs host canaries
        hosting = [name for name in tasks.available() if "canaries" in tasks.get(name).options]
        raise LDPValueError(f"--canaries audits --task {' or '.join(hosting)} runs, not --task {task}")
    for name in models:
        if task not in get_class(name).tasks:
            hosted = f" (no {name} run of --task {task}, so no canaries under it either)" if canaries else ""
            raise LDPValueError(
                f"--trust {name} applies to --task {', '.join(get_class(name).tasks)}; got {task}{hosted}"
            )
    return models, canaries


def compare_trust(options: dict) -> None:
    task = options["task"]
    compared = [name for name in tasks.available() if tasks.get(name).trust_options]
    if task not in compared:
        raise LDPValueError(f"--trust compares --task {' or '.join(compared)}, not --task {task}")
    entry = tasks.get(task)
    models, canaries = _models_and_canaries(options, task, entry)
    totals = [
        check_epsilon(e, "--epsilons") for e in parse_list(options.get("epsilons") or "1,2,4,8", float, "--epsilons")
    ]
    delta = DEFAULT_DELTA if options.get("delta") is None else float(options["delta"])
    if not 0.0 < delta < 1.0:
        raise LDPValueError(f"--delta (the total's delta) must be in (0, 1), got {delta!r}")
    mechanism = options.get("mechanism") or "laplace"
    if mechanisms.get_class(mechanism).approximate:
        raise LDPValueError(f"compare --trust takes a pure local mechanism; {mechanism} is (eps, delta)")
    repeats = check_positive_int(options.get("repeats") or 1, "--repeats")
    seed = check_positive_int(options.get("seed") or 0, "--seed", minimum=0)
    base = {name: options.get(name) for name in entry.trust_options if options.get(name) is not None}
    base.update(task=task, seed=seed, mechanism=mechanism)
    base.setdefault("rounds", 5)
    probe = resolve(None, {**base, "mechanism": mechanism})  # validates the shared options before any run
    # the shuffle's n per round: the data's users (0 = from the data: a synthetic set's default or a file's rows)
    reports = entry.shuffle_reports(probe)
    settings = [
        equal_budget(trust, TotalBudget(total, delta), probe.run.rounds, mechanism=mechanism, reports=reports)
        for total in totals
        for trust in models
    ]
    output: OutputDir = options["out"]
    planned, rows = len(settings) * repeats, []

    def write(interrupted: bool = False) -> None:
        """The finished runs' files, rewritten after every run (all three or none: OutputDir)."""
        if output.enabled and rows:
            frame = pd.DataFrame(rows)
            record = {"task": task, "mechanism": mechanism, "runs_planned": planned, "runs_finished": len(rows)}
            record.update({"canaries": canaries} if canaries else {})
            output.write(
                {
                    "trust.csv": frame.to_csv(index=False),
                    "trust.json": dumps({**record, "interrupted": interrupted, "rows": rows}) + "\n",
                    "trust.png": _figure(frame, entry),
                }
            )

    notice = sigint_ignored_notice()
    if notice:
        error_console.print(notice, highlight=False, soft_wrap=True, markup=False)
    # Ctrl-C/SIGTERM ends the comparison with the finished runs written: inside a run, the run's own
    # stop request ends it (Interrupted); elsewhere (between runs, a run's set-up, a write) this one
    stop = StopRequest()
    with stop.handling(), progress_steps("compare --trust", planned) as advance:
        try:
            for setting in settings:
                for repeat in range(repeats):
                    rows.append(_run(setting, base, options, seed + repeat, repeat, canaries))
                    write()
                    advance(f"total eps {setting.total.epsilon:g}, {setting.trust}, repeat {repeat}")
        except (Interrupted, KeyboardInterrupt) as stopped:
            signum = signal.SIGTERM if getattr(stopped, "exit_code", 130) == 143 else signal.SIGINT
            stop.record(signum)
            stop.install()  # a further signal is ignored while the files are written
            write(interrupted=True)
            raise Stopped(signum) from None
    frame = pd.DataFrame(rows)
    out = output.path if output.enabled else None
    show_results(
        rows, lambda: _table(frame, entry, bool(canaries)), as_json=options.get("as_json", False), out=out, files=FILES
    )


def _run(setting, base: dict, options: dict, seed: int, repeat: int, canaries: int = 0) -> dict:
    flags = {**base, "seed": seed, **setting.options}
    if canaries and setting.trust in CANARY_TRUST:
        flags["canaries"] = canaries
    gaussian = setting.trust in ("central", "secagg")
    passed = LOCAL_ONLY if setting.trust == "local" else L2_CLIPPED_ONLY if gaussian else ()
    flags.update({name: options[name] for name in passed if options.get(name) is not None})
    if gaussian:
        flags.pop("mechanism", None)  # the noise is Flower's Gaussian, or the clients' discrete Gaussian shares
    if setting.trust == "local":
        flags.update(max_epsilon=setting.total.epsilon, max_delta=setting.total.delta, accountant=setting.accountant)
    else:
        flags["trust"] = setting.trust
    if setting.trust in ("shuffle", "secagg"):
        flags.update(engine=flags.get("engine") or "local")
    config = resolve(None, flags)
    summary = (
        run(config, None, noise_seed=seed) if setting.trust == "local" else run_trust(config, None, noise_seed=seed)
    )
    row = {**setting.to_dict(), "repeat": repeat, "seed": seed}
    row.update(figures(config, summary, setting.trust))
    row["must_be_trusted"] = get_class(setting.trust).trusted
    row["private_against_server"] = get_class(setting.trust).private_against_server
    # the run's noise root is the run seed, which a server may guess: its figures hold only against a
    # server that does not know it (the run's own qualification, carried so the row never claims more)
    row["privacy_qualification"] = summary.get("privacy_qualification") or ""
    if canaries:
        row.update(audit_figures(summary, setting.trust))
        error_console.print(
            f"total eps {setting.total.epsilon:g}, {setting.trust}: canary audit: {row['canary_audit']}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    return row


# the audit's columns of a row with --canaries (None where the run has no such figure)
AUDIT_COLUMNS = (
    "canary_audit",  # "passed", "FAILED", "SUSPECT" (audit.md), or why no audit was made
    "audit_speaks_to",
    "audit_accounted_epsilon",
    "one_run_lower_bound",
    "one_run_confidence",
    "cosine_estimate",
    "cosine_lower_limit",
    "cosine_confidence",
    "cosine_note",  # why the estimate has no lower limit (a Gaussian fit to non-Gaussian noise)
)


def audit_figures(summary: dict, trust: str) -> dict:
    """The row's audit columns from the run's `canary_audit` (ldpfed.protocols.canaries.summary_entry)."""
    row = dict.fromkeys(AUDIT_COLUMNS)
    if trust not in CANARY_TRUST:
        row["canary_audit"] = f"not hosted: --trust {trust} runs no canary clients"
        return row
    audit = summary.get("canary_audit")
    if not audit or audit.get("error"):
        row["canary_audit"] = f"not made: {(audit or {}).get('error') or 'the run finished no round'}"
        return row
    bound, cosine = audit.get("one_run") or {}, audit.get("cosine") or {}
    row.update(
        canary_audit="FAILED" if audit["failed"] else "SUSPECT" if audit["suspect"] else "passed",
        audit_speaks_to=audit["audit_speaks_to"],
        audit_accounted_epsilon=audit["accounted_epsilon"],
        one_run_lower_bound=bound.get("epsilon_lower"),
        one_run_confidence=bound.get("confidence"),
        cosine_estimate=cosine.get("epsilon"),
        cosine_lower_limit=audit.get("cosine_lower_limit"),
        cosine_confidence=audit.get("cosine_confidence"),
        cosine_note=audit.get("cosine_note"),
    )
    return row


def figures(config, summary: dict, trust: str) -> dict:
    """The measured figure, the noise added (the task's `Task.trust_figures`; secagg's from its
    run), the bits each value costs on the wire, and the eps each run's own ledger states."""
    if trust == "secagg":  # the task's figures describe its local or central noise
        metric = tasks.of(config).metric
        measured = {metric: summary.get("mean_mse" if metric == "mse" else metric), **secagg_noise(summary)}
    else:
        measured = tasks.of(config).trust_figures(config, summary, trust)
    bits = summary.get("bits_per_value") or FLOAT_BITS[config.run.task]
    return {**measured, "bits_per_value": bits, **spent_against(summary)}


# what a value costs on the wire where no modulus bounds it: the task's float arrays
FLOAT_BITS = {"mean": 64, "train": 32, "frequency": 64}


def secagg_noise(summary: dict) -> dict:
    """The distributed discrete Gaussian's noise: a client's share (sd sigma, data units) and the
    sd on each coordinate of the mean of n shares, sigma / sqrt(n) (the rounding's gamma^2/4 apart)."""
    sigma, shares = (
        summary["local_stddev"],
        summary.get("fewest_shares_accounted") or summary["planned_shares_per_round"],
    )
    return {
        "noise": f"discrete gaussian shares, {summary['bits_per_value']} bits per value",
        "noise_sd": sigma,
        "noise_sd_on_mean": sigma / math.sqrt(shares),
        # the modular clip: coordinates that wrapped over the run (engine local) and the sum's headroom
        "modular_wraps": summary.get("modular_wraps_total"),
        "modular_headroom": summary.get("largest_modular_headroom"),
    }


def spent_against(summary: dict) -> dict:
    """The run's own ledger's total against the server and against the analyst or the released
    models (`guarantees`: the first party is the one operating the Flower server; None where it
    gets no guarantee)."""
    spent = {"epsilon_spent_run": summary.get("epsilon_spent_max_per_client")}
    if not summary.get("guarantees"):  # a run without its parties (none finished a round)
        return spent
    server, *others = summary["guarantees"]
    return {**spent, "epsilon_against_server": server["epsilon"], "epsilon_against": (others or [server])[-1]["party"]}


def _table(frame: pd.DataFrame, task, audited: bool = False) -> Table:
    metric = task.metric
    table = Table(title=f"trust models at equal total (eps, delta) per client ({task.name})")
    columns = [
        "total eps",
        "trust",
        "local eps/round",
        metric,
        "noise sd (added)",
        "noise sd on the mean",
        "eps spent (against)",
        "eps against the server",
        "bits/value",
    ]
    if audited:  # --canaries: the audit beside the accounted eps (the largest over the repeats)
        columns += ["one-run lower bound", "cosine estimate", "canary audit"]
    for column in columns:
        table.add_column(column)
    grouped = frame.groupby(["total_epsilon", "trust"], sort=False)
    for (total, trust), group in grouped:
        local = group["local_epsilon_per_round"].iloc[0]
        cells = [
            f"{total:g}",
            trust,
            "-" if local is None or (isinstance(local, float) and math.isnan(local)) else f"{local:.4g}",
            f"{group[metric].mean():.4g}",
            f"{group['noise_sd'].iloc[0]:.4g}",
            f"{group['noise_sd_on_mean'].iloc[0]:.4g}",
            f"{group['epsilon_spent_run'].max():.4g} ({AGAINST[trust]})",
            _shown(group["epsilon_against_server"].max()) if "epsilon_against_server" in group else "-",
            f"{group['bits_per_value'].iloc[0]:g}",
        ]
        if audited:
            verdicts = sorted(set(group["canary_audit"]))
            cells += [_shown(group["one_run_lower_bound"].max()), _shown(group["cosine_estimate"].max())]
            cells.append("; ".join(verdicts))
        table.add_row(*cells)
    return table


# whom each trust model's `epsilon_spent_run` holds against, in the console table
AGAINST = {"local": "everyone", "shuffle": "the analyst", "central": "the released models", "secagg": "everyone"}


def _shown(value) -> str:
    return "none" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def _figure(frame: pd.DataFrame, task) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = task.metric
    figure, axis = plt.subplots(figsize=(6, 4))
    for trust, group in frame.groupby("trust", sort=False):
        means = group.groupby("total_epsilon")[metric].mean()
        axis.plot(means.index, means.values, marker="o", label=trust)
    axis.set_xscale("log", base=2)
    if task.metric_log:
        axis.set_yscale("log")
    axis.set_xlabel("total eps per client over the run (delta as given)")
    axis.set_ylabel(task.metric_label)
    axis.legend()
    axis.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=120)
    plt.close(figure)
    return buffer.getvalue()

"""`ldpfed compare --trust a,b,...`: trust models side by side at equal total (eps, delta) per client.

For every total eps of `--epsilons` (a client's total over the run, at the total's delta `--delta`,
default 1e-5) and every trust model, `ldpfed.planning.trust.equal_budget` gives the simulate
options that spend that total against the model's adversary (local: the randomizer's per-round eps;
shuffle: the largest eps0 whose shuffled rounds compose within it; central: the run's budget, to
which Flower's noise is calibrated), and the run is the same `ldpfed simulate` run (the local
harness, or simulations.trust). Each row: the measured error (mean: MSE over the rounds; train:
final accuracy), the noise the model adds (its standard deviation where it is added, and on the
mean), what is spent against whom, and what must be trusted. Files: trust.csv, trust.json, trust.png.

Wiring as `compare --task train`: ldpfed's compare finds this runner through the entry point
`trust` of the group `ldpfed.compare_tasks`. The clients' noise root is the run seed (`--seed`), so
a comparison is reproducible and the models see the same data and partition; it compares utility
and makes no privacy statement of its own (every run's summary makes its own).
"""

from __future__ import annotations

import math
import signal

import numpy as np
import pandas as pd
from rich.table import Table

import ldpfed.mechanisms as mechanisms
from ldpfed.accounting.trust import get_class
from ldpfed.cli.common import error_console, parse_list, progress_steps, show_results
from ldpfed.cli.compare import TRAIN_ONLY
from ldpfed.outputs import OutputDir, dumps
from ldpfed.planning.calibration import TotalBudget
from ldpfed.planning.trust import equal_budget
from ldpfed.protocols import seeds
from ldpfed.protocols.mean import bound as bind
from ldpfed.protocols.mean import mechanism as mean_mechanism
from ldpfed.protocols.mean import report_dims as mean_report_dims
from ldpfed.protocols.train import federated_data
from ldpfed.protocols.train import privatizer as train_privatizer
from ldpfed.tasks import resolve
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int
from simulations.federation import Interrupted, run
from simulations.stopping import Stopped, StopRequest, sigint_ignored_notice
from simulations.trust import run_trust

FILES = ["trust.csv", "trust.json", "trust.png"]
DEFAULT_DELTA = 1e-5
LOCAL_ONLY = ("coordinate_clip", "report_dims")  # the local randomizer's (passed to local runs only)
CENTRAL_ONLY = ("clip",)  # Flower's clipping norm (central runs only)
# compare's options a trust comparison passes to every run (simulate options of the same name); train:
# every train option of compare but the clipping of one trust model and --fraction (refused below)
PASSED = {
    "mean": ("data", "users", "dims", "clients", "rounds", "engine", "nodes", "cpus"),
    "train": ("data", *(name for name in TRAIN_ONLY if name not in (*LOCAL_ONLY, *CENTRAL_ONLY, "fraction"))),
}
NOT_APPLICABLE = ("aggregators", "domain", "out_of_domain", "header", "l2_reference", "estimator", "chunk_users")


def compare_trust(options: dict) -> None:
    task = options["task"]
    if task not in PASSED:
        raise LDPValueError(f"--trust compares --task mean or train, not --task {task}")
    wrong = [f"--{name.replace('_', '-')}" for name in NOT_APPLICABLE if options.get(name) is not None]
    if options.get("fraction") not in (None, 1.0):
        wrong.append("--fraction")  # local runs get no amplification from sampling: all clients every round
    if wrong:
        raise LDPValueError(f"{', '.join(wrong)} do(es) not apply to compare --trust")
    models = [get_class(name).name for name in parse_list(options["trust"], str, "--trust")]
    for name in models:
        if task not in get_class(name).tasks:
            raise LDPValueError(f"--trust {name} applies to --task {', '.join(get_class(name).tasks)}; got {task}")
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
    base = {name: options.get(name) for name in PASSED[task] if options.get(name) is not None}
    base.update(task=task, seed=seed, mechanism=mechanism)
    base.setdefault("rounds", 5)
    probe = resolve(None, {**base, "mechanism": mechanism})  # validates the shared options before any run
    # the shuffle's n per round: the data's users (0 = from the data: a synthetic set's default or a file's rows)
    reports = bind(probe, seeds.data_seed(probe.run.seed)).data.users if task == "mean" else None
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
            output.write(
                {
                    "trust.csv": frame.to_csv(index=False),
                    "trust.json": dumps({**record, "interrupted": interrupted, "rows": rows}) + "\n",
                    "trust.png": _figure(frame, task),
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
                    rows.append(_run(setting, base, options, seed + repeat, repeat))
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
    show_results(rows, lambda: _table(frame, task), as_json=options.get("as_json", False), out=out, files=FILES)


def _run(setting, base: dict, options: dict, seed: int, repeat: int) -> dict:
    flags = {**base, "seed": seed, **setting.options}
    passed = LOCAL_ONLY if setting.trust == "local" else CENTRAL_ONLY if setting.trust == "central" else ()
    flags.update({name: options[name] for name in passed if options.get(name) is not None})
    if setting.trust == "central":
        flags.pop("mechanism", None)  # the noise is Flower's Gaussian
    if setting.trust == "local":
        flags.update(max_epsilon=setting.total.epsilon, max_delta=setting.total.delta, accountant=setting.accountant)
    else:
        flags["trust"] = setting.trust
    if setting.trust == "shuffle":
        flags.update(engine=flags.get("engine") or "local")
    config = resolve(None, flags)
    summary = (
        run(config, None, noise_seed=seed) if setting.trust == "local" else run_trust(config, None, noise_seed=seed)
    )
    row = {**setting.to_dict(), "repeat": repeat, "seed": seed}
    row.update(figures(config, summary, setting.trust))
    row["must_be_trusted"] = get_class(setting.trust).trusted
    row["private_against_server"] = get_class(setting.trust).private_against_server
    return row


def worst_case_variance(mechanism) -> float:
    """max over values t in [-1, 1] of a scalar mechanism's noise variance V(t) = v0 + v1 t + v2 t^2."""
    v0, v1, v2 = mechanism.variance_coefficients
    ends = [-1.0, 1.0] + ([min(1.0, max(-1.0, -v1 / (2.0 * v2)))] if v2 != 0 else [])
    return float(max(v0 + t * (v1 + v2 * t) for t in ends))


def report_noise(mechanism, users: int, dims: int, report_dims: int) -> tuple[float, float]:
    """The mean task's noise: (sd on each reported value, sd on the mean estimate of a dimension).
    Each dimension's estimate averages the users * m / d values reported for it; worst case over
    the values in [-1, 1] (Laplace's is the same at every value)."""
    variance = worst_case_variance(mechanism)
    return math.sqrt(variance), math.sqrt(variance * dims / (users * report_dims))


def update_noise(privatizer, dims: int, weights) -> tuple[float, float]:
    """Local training's noise: (sd added to each reported coordinate, in the update's units before
    the server's d/m rescaling; sd per coordinate of the weighted mean of the privatized updates).

    The second is sqrt(sum_k p_k^2 v) with v the privatizer's own per-coordinate noise variance of
    a privatized update (`per_coordinate_noise`: the m-of-d mask and the d/m scale included, worst
    case over coordinate values in [-C, C]) and p_k the clients' aggregation weights."""
    p = np.asarray(weights, dtype=float)
    p = p / p.sum()
    variance = float(np.mean(privatizer.per_coordinate_noise(dims)[1]))
    added = privatizer.clip * math.sqrt(worst_case_variance(privatizer.per_value_mechanism(dims)))
    return added, math.sqrt(variance * float(np.sum(p**2)))


def figures(config, summary: dict, trust: str) -> dict:
    """The measured figure, the noise added, and the eps each run's own ledger states."""
    task = config.run.task
    if task == "mean":
        config = bind(config, seeds.data_seed(config.run.seed))  # users and dims as read
        noise = mean_mechanism(config)
        sd, on_mean = report_noise(noise, config.data.users, config.data.dims, mean_report_dims(config))
        return {
            "mse": summary.get("mean_mse_over_rounds", summary.get("mean_mse")),
            "noise": f"{config.privacy.mechanism} on each report's value",
            "noise_sd": sd,
            "noise_sd_on_mean": on_mean,
            **spent_against(summary),
        }
    if trust == "central":
        # the safe discrete Gaussian of sd z C (1 + grid) on the sum of the clipped updates, over q N
        sd = summary["noise_stddev_of_sum_per_unit_clip"] * summary["initial_clip"]
        return {
            "final_accuracy": summary["final_accuracy"],
            "noise": "discrete gaussian on the sum of clipped updates (trusted server)",
            "noise_sd": sd,
            "noise_sd_on_mean": sd / summary["expected_clients"],
            **spent_against(summary),
        }
    dims = summary["parameters"]
    update_privatizer = train_privatizer(config)
    m = update_privatizer.dims_reported(dims)
    sizes = federated_data(config, seeds.data_seed(config.run.seed)).client_sizes
    sd, on_mean = update_noise(update_privatizer, dims, sizes)
    return {
        "final_accuracy": summary.get("final_accuracy"),
        "noise": f"{config.privacy.mechanism} on m = {m} of d = {dims} coordinates of each update, scaled by d/m",
        "noise_sd": sd,
        "noise_sd_on_mean": on_mean,
        **spent_against(summary),
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


def _table(frame: pd.DataFrame, task: str) -> Table:
    metric = "mse" if task == "mean" else "final_accuracy"
    table = Table(title=f"trust models at equal total (eps, delta) per client ({task})")
    for column in (
        "total eps",
        "trust",
        "local eps/round",
        metric,
        "noise sd (added)",
        "noise sd on the mean",
        "eps spent (against)",
        "eps against the server",
    ):
        table.add_column(column)
    grouped = frame.groupby(["total_epsilon", "trust"], sort=False)
    for (total, trust), group in grouped:
        local = group["local_epsilon_per_round"].iloc[0]
        table.add_row(
            f"{total:g}",
            trust,
            "-" if local is None or (isinstance(local, float) and math.isnan(local)) else f"{local:.4g}",
            f"{group[metric].mean():.4g}",
            f"{group['noise_sd'].iloc[0]:.4g}",
            f"{group['noise_sd_on_mean'].iloc[0]:.4g}",
            f"{group['epsilon_spent_run'].max():.4g} ({AGAINST[trust]})",
            _shown(group["epsilon_against_server"].max()) if "epsilon_against_server" in group else "-",
        )
    return table


# whom each trust model's `epsilon_spent_run` holds against, in the console table
AGAINST = {"local": "everyone", "shuffle": "the analyst", "central": "the released models"}


def _shown(value) -> str:
    return "none" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def _figure(frame: pd.DataFrame, task: str) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = "mse" if task == "mean" else "final_accuracy"
    figure, axis = plt.subplots(figsize=(6, 4))
    for trust, group in frame.groupby("trust", sort=False):
        means = group.groupby("total_epsilon")[metric].mean()
        axis.plot(means.index, means.values, marker="o", label=trust)
    axis.set_xscale("log", base=2)
    if task == "mean":
        axis.set_yscale("log")
    axis.set_xlabel("total eps per client over the run (delta as given)")
    axis.set_ylabel("MSE (mean over rounds)" if task == "mean" else "final test accuracy")
    axis.legend()
    axis.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=120)
    plt.close(figure)
    return buffer.getvalue()

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
from ldpfed.cli.common import parse_list, progress_steps, show_results
from ldpfed.cli.compare import TRAIN_ONLY
from ldpfed.config import resolve
from ldpfed.outputs import OutputDir, dumps
from ldpfed.planning.calibration import TotalBudget
from ldpfed.planning.trust import equal_budget
from ldpfed.protocols.mean import mechanism as mean_mechanism
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int
from simulations.federation import Interrupted, run
from simulations.stopping import Stopped
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
    reports = probe.data.users if task == "mean" else None
    settings = [
        equal_budget(trust, TotalBudget(total, delta), probe.run.rounds, mechanism=mechanism, reports=reports)
        for total in totals
        for trust in models
    ]
    output: OutputDir = options["out"]
    rows = []
    with progress_steps("compare --trust", len(settings) * repeats) as advance:
        for setting in settings:
            for repeat in range(repeats):
                try:
                    rows.append(_run(setting, base, options, seed + repeat, repeat))
                except Interrupted as stopped:  # Ctrl-C/SIGTERM in a run: the comparison ends, nothing written
                    raise Stopped(signal.SIGTERM if stopped.exit_code == 143 else signal.SIGINT) from None
                advance(f"total eps {setting.total.epsilon:g}, {setting.trust}, repeat {repeat}")
    frame = pd.DataFrame(rows)
    if output.enabled:
        output.write(
            {
                "trust.csv": frame.to_csv(index=False),
                "trust.json": dumps({"task": task, "mechanism": mechanism, "rows": rows}) + "\n",
                "trust.png": _figure(frame, task),
            }
        )
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
    row.update(_figures(config, summary, setting.trust))
    row["must_be_trusted"] = get_class(setting.trust).trusted
    row["private_against_server"] = setting.trust != "central"
    return row


def _figures(config, summary: dict, trust: str) -> dict:
    """The measured figure, the noise added, and the eps each run's own ledger states."""
    task = config.run.task
    if task == "mean":
        noise = mean_mechanism(config)
        sd = float(np.sqrt(noise.variance(np.zeros(1))[0]))
        spent = (
            summary.get("epsilon_spent_max_per_client")
            if trust == "local"
            else summary.get("shuffled_epsilon_total_pld")
        )
        return {
            "mse": summary.get("mean_mse_over_rounds", summary.get("mean_mse")),
            "noise": f"{config.privacy.mechanism} on each report's value",
            "noise_sd": sd,
            "noise_sd_on_mean": sd / math.sqrt(config.data.users),
            "epsilon_spent_run": spent,
        }
    if trust == "central":
        n = summary["expected_clients"]
        return {
            "final_accuracy": summary["final_accuracy"],
            "noise": "gaussian on the sum of clipped updates (Flower's wrapper)",
            "noise_sd": summary["noise_stddev_of_sum"],
            "noise_sd_on_mean": summary["noise_stddev_of_sum"] / n,
            "epsilon_spent_run": summary["epsilon_spent_rdp"],
        }
    m = summary.get("report_dims") or 1
    per_value = mechanisms.get(config.privacy.mechanism, epsilon=config.privacy.epsilon / m)
    sd = config.training.coordinate_clip * float(np.sqrt(per_value.variance(np.zeros(1))[0]))
    dims = summary.get("model_dims") or m
    return {
        "final_accuracy": summary.get("final_accuracy"),
        "noise": f"{config.privacy.mechanism} on each of m = {m} reported coordinates of each update",
        "noise_sd": sd,
        "noise_sd_on_mean": sd * math.sqrt(dims / m) / math.sqrt(config.federation.clients),
        "epsilon_spent_run": summary.get("epsilon_spent_max_per_client"),
    }


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
        "eps spent",
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
            f"{group['epsilon_spent_run'].max():.4g}",
        )
    return table


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

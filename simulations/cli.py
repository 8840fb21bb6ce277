"""`ldpfed simulate`: an LDP federation under Flower (Ray backend), registered on ldpfed's CLI
through the `ldpfed.commands` entry point (so ldpfed itself never imports Flower).

Every option flag is one field of `ldpfed.config.Config`, built from the config (its type and
default) and OPTION_HELP (its help); tests/test_config.py checks that the flags and the fields
agree. `--config FILE` reads a TOML file of the same options, flags win.
`--noise-seed` is not one: the noise root is a secret of the run, kept out of the config, which
is written to config.toml and, under `flwr run`, read by the server.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import inspect
from collections.abc import Callable
from pathlib import Path

import typer

from ldpfed.cli.common import (
    HEADER_HELP,
    OUT_OF_DOMAIN_HELP,
    OUTPUTS_EPILOG,
    console,
    error_console,
    handle_errors,
    print_json,
)
from ldpfed.cli.options import json_option
from ldpfed.config import option_default
from ldpfed.data.partition import PARTITION_HELP
from ldpfed.outputs import named_path
from ldpfed.protocols import seeds
from ldpfed.validation import LDPValueError

HELP = """Run an LDP federation under Flower: --task mean (tuple collection; measured vs predicted
MSE) or --task train (federated LDP-SGD: FedAvg of the privatized updates, re-calibrated by
--aggregator, with the aggregate noise measured against its CLT prediction). With no options: the
default job (configs/default.toml: mean of 10,000 users in 10 dimensions held by 10 clients,
Laplace at eps 2, measured vs predicted MSE over 5 rounds)."""

CLI_ONLY = ("config_file", "noise_seed", "json_output", "verbose")
NOT_SAVED = "no --out: the results are shown, not saved (give --out DIR to write them; docs/outputs.md)"
# simulate's options, one per option of ldpfed.config, in the order --help lists them: the help
# text here, the type and the default (appended to the help) from the config.
OPTION_HELP = {
    # [run]
    "task": "mean | train | frequency (categorical attributes; --dims is then the attributes d).",
    "rounds": "Federated rounds.",
    "seed": (
        "Run seed: the data, the partition and the server's choices (sampling, model initialisation) derive from "
        "it; the clients' noise does not (see --noise-seed)."
    ),
    "engine": "flower (Ray) | local (the same client/server halves in this process, no Flower).",
    "fresh-noise": "Each client draws its own OS entropy, recorded nowhere (the run cannot be replayed).",
    # [data]
    "data": (
        "mean: synthetic set or file of tuples (default gaussian); train: digits | mnist-5k | synthetic-fedprox | "
        "mnist | cifar10 (default digits)."
    ),
    "data-dir": "Directory with mnist/cifar10 files.",
    "users": "mean: users n in total, split over the clients (default: a data file's rows; synthetic 10,000).",
    "dims": (
        "mean: dimensions d of a tuple (default: a data file's columns; synthetic 10); frequency: its attributes."
    ),
    "domain": (
        "mean: LOW,HIGH, the declared domain of a data file's values (default -1,1; the MSE is on the normalised "
        "[-1, 1] scale)."
    ),
    "header": "mean: " + HEADER_HELP,
    "out-of-domain": "mean: " + OUT_OF_DOMAIN_HELP,
    "categories": "frequency: a CSV's categories (K, K1,K2,... or 'a,b;x,y') or the synthetic counts.",
    "partition": PARTITION_HELP,
    "classes-per-client": "k for --partition k-classes.",
    "dirichlet-alpha": "alpha for --partition dirichlet.",
    # [federation]
    "clients": "Number of simulated clients (each with its own data, secret and privacy ledger).",
    "fraction": "train: fraction of clients sampled per round.",
    "cpus": "CPUs Ray may use in total (0 = all).",
    "cpus-per-client": "CPUs Ray reserves per node (a Flower node hosts a cohort of clients).",
    "fail-clients": "Fault injection: comma-separated partition ids that raise in every round (e.g. 3,5).",
    "nodes": (
        "Flower nodes (Ray actors) hosting the clients, each a contiguous block trained at once (0 = min(clients, "
        "CPUs), for mean and frequency at most one per 250 clients or 2^22 values a round; = clients: one per node)."
    ),
    "device": "train: where a node trains its clients: auto (cuda when torch sees a GPU) | cpu | cuda.",
    "gpus-per-node": "GPUs Ray gives each node (fractions allowed: nodes share a GPU).",
    "ray-address": (
        "Run on an existing Ray cluster (the head's HOST:PORT; auto = RAY_ADDRESS) instead of starting a local "
        "Ray: the nodes go where the cluster's CPUs/GPUs are (docs/deployment.md, Ray cluster)."
    ),
    "ray-timeout": "Seconds to wait for the Ray cluster of --ray-address to answer, then fail (exit 2).",
    "node-wait": (
        "Seconds a round waits for an offline node that hosts sampled clients, then fails its clients "
        "(deployments under flwr run: a SuperNode restarting; a simulation's nodes are always online)."
    ),
    "node-reply": (
        "A node replies per client (clients) or with its clients' sum (sum: train sends the count-weighted sum of "
        "updates, one d-vector per node, with --aggregator mean or fedavg only; mean/frequency the summed report "
        "counts)."
    ),
    # [privacy]
    "mechanism": "LDP mechanism (train also: none, not private).",
    "epsilon": (
        "Budget eps per user and round, eps/m per reported value (mean, frequency); train: per client and round."
    ),
    "delta": (
        "The delta of the (eps, delta) guarantee, per user and round (mean, frequency) or per client and round "
        "(train); 0 = pure."
    ),
    "report-dims": "Dimensions each user reports, m (train: each client; 0 = all for mean, Wang's m for train).",
    "max-epsilon": "Per-client budget over the run (0 = none): a client whose total would exceed it stops taking part.",
    "max-delta": (
        "The budget's delta (0 = 1e-5): a client also stops before its total delta would exceed it "
        "(needs --max-epsilon)."
    ),
    "accountant": "The run's accountant (epsilon spent, --max-epsilon): basic | advanced | rdp | pld.",
    "budget": (
        "mean: EPS[,DELTA], a client's total over the run: the per-round epsilon (and delta) and the max-epsilon "
        "budget come from `ldpfed plan`'s calibration under --accountant over --rounds."
    ),
    "trust": (
        "Who is trusted: local (default) | shuffle (mean: a trusted shuffler; amplified eps against the server) | "
        "central (train: the server adds Flower's DP noise, calibrated to --max-epsilon/--max-delta)."
    ),
    "clipping": "--trust central: Flower's fixed | adaptive clipping.",
    "clipping-side": "--trust central: who clips, server | client.",
    "bits": "--trust secagg: bits per value b (the secure sum is modulo 2^b; too few for the clients' sum exits 2).",
    # [aggregation]
    "aggregator": "mean | l1 | l2 | hdr4me | james-stein; train also fedavg (Flower's FedAvg).",
    "alpha": "Confidence level of the aggregator.",
    "deviation": "train: deviation model of the re-calibration, plug-in | model.",
    # [training]
    "model": "train: logreg | mlp | cnn.",
    "local-steps": "train: local SGD steps per round, E.",
    "lr": "train: client learning rate.",
    "batch-size": "train: client minibatch size.",
    "clip": "train: L2 clipping norm C of a client update (gradient noises, --perturbation ldpvec).",
    "coordinate-clip": "train: per-coordinate clipping bound C, each coordinate to [-C, C] (scalar mechanisms, none).",
    "perturbation": (
        "train: numeric (per coordinate, or a gradient noise) | ldpvec (directional; --mechanism is its base "
        "randomizer)."
    ),
    "beta": "train, ldpvec: angle window width beta*pi, in (0, 1] (1 = no angle clipping).",
    "window": "train, ldpvec: fixed (the thesis) | centred (on the previous global step, broadcast by the server).",
    "magnitude": (
        "train, ldpvec: split (eps/d to the norm) | normalize (norm set to C) | exact-unsafe (norm without noise: "
        "NOT private)."
    ),
    "rotation": "train, ldpvec: none | hadamard (public random rotation, seeded by the server per round).",
    "chunk-clients": "train: clients a node trains at once (0 = as many as a 512 MiB working memory allows).",
    "canaries": (
        "train: canary clients of the in-run privacy audit, added to --clients (secret coins; the verdict beside "
        "the accounted eps; a failed audit exits 1)."
    ),
    # [output]
    "out": (
        "Directory for metrics.csv, privacy.csv/json, summary.json, config.toml, plot.png (checked before any work)."
    ),
    "overwrite": (
        "Replace the results of another run in --out (ldpfed's files only); without it such a directory is refused."
    ),
    "plot": (
        "Draw the run's figures (plot.png; label_counts.png for training). --no-plot leaves them out (the rest is "
        "unchanged); `ldpfed plot DIR` draws plot.png later from the run's files."
    ),
    "diagnostics": (
        "Clients write their clean values to the run's local output for the noise-measured-vs-predicted figures "
        "(never sent to the server)."
    ),
}


def register(app: typer.Typer) -> None:
    app.command("simulate", help=HELP, epilog=OUTPUTS_EPILOG)(simulate)


def config_option(flag: str) -> inspect.Parameter:
    """The option `flag` of ldpfed.config as a parameter of `simulate`. It defaults to None, "not
    given", so that it does not override a --config file's value; its help ends with the config's
    default. Booleans are --flag/--no-flag switches, --header too (the config holds auto | yes | no)."""
    default = option_default(flag)
    kind = bool if flag == "header" else type(default)
    declarations = (f"--{flag}/--no-{flag}",) if kind is bool else (f"--{flag}",)
    # "": the task's default, which the help names; \\[: a bracket, not Rich markup
    shown = "" if default in (None, "") else f" \\[default: {_shown(default)}]"
    option = typer.Option(None, *declarations, help=OPTION_HELP[flag] + shown)
    return inspect.Parameter(
        flag.replace("-", "_"), inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind | None
    )


def with_config_options(command: Callable) -> Callable:
    """`command` with its own options (CLI_ONLY; --config first) and, after --config, one option per
    entry of OPTION_HELP, which it receives as keyword arguments (None: not given)."""
    own = inspect.signature(command).parameters
    first, *rest = (own[name] for name in CLI_ONLY)
    command.__signature__ = inspect.Signature([first, *map(config_option, OPTION_HELP), *rest])
    return command


def _shown(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _print_plan(plan: dict) -> None:
    delta = f", delta {plan['delta_per_round']:.3g}" if plan["delta_per_round"] else ""
    total = f"{plan['total_epsilon']:g}" + (f", delta {plan['total_delta']:g}" if plan["total_delta"] else "")
    console.print(
        f"plan: total ({total}) over {plan['rounds']} rounds by {plan['accountant']}: "
        f"eps {plan['epsilon_per_round']:.6g}{delta} per round; "
        + (
            f"measured MSE per round {plan['measured_mse_round']:.4g} (mean over the rounds) vs "
            f"predicted {plan['predicted_mse_round']:.4g}; "
            if plan["measured_mse_round"] is not None and plan["predicted_mse_round"] is not None
            else f"aggregate noise measured / predicted {_ratio(plan.get('noise_measured_over_predicted'))}; "
        )
        + "largest eps spent by a client "
        f"{plan['epsilon_spent_max_per_client']:.6g}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def _say_if_not_saved(output) -> None:
    """A finished run without --out: one line on stderr that nothing was written."""
    if not output.enabled:
        error_console.print(NOT_SAVED, highlight=False, soft_wrap=True, markup=False)


def _report_audit(summary: dict) -> None:
    """--canaries: the audit's lines on stderr (the accounted eps beside the empirical figures); a
    failed audit (the one-run lower bound above the accounted eps) exits 1, like `ldpfed audit`."""
    audit = summary.get("canary_audit")
    if not audit:
        return
    lines = audit.get("lines") or [f"canary audit not made: {audit.get('error')}"]
    for line in lines:
        error_console.print(
            f"canary audit against {audit['audit_speaks_to']}: {line}", highlight=False, soft_wrap=True, markup=False
        )
    if audit.get("failed"):
        raise typer.Exit(code=1)


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def _check_task_flags(task: str, flags: dict) -> None:
    """A flag given for another task is an error naming it (the rule of `ldpfed.tasks.foreign_flags`)."""
    from ldpfed.tasks import foreign_flags

    foreign = foreign_flags(task, flags)
    if foreign:
        raise LDPValueError(f"{', '.join(foreign)} do(es) not apply to --task {task}")


def spare_the_exit() -> None:
    """Once a run has ended (everything written, Ray down): at the interpreter's exit, its heap
    (torch, Ray, Flower) is frozen before the final garbage collections, which it spares (1.3-1.7 s
    of the default job's exit on the shared 2-core machine, more on a loaded one). At the exit
    only: a process that runs on (a test calling the command) keeps collecting its garbage."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


@handle_errors
@with_config_options
def simulate(
    *,
    config_file: Path | None = typer.Option(
        None, "--config", help="TOML file of options, one table per section (flags override it)."
    ),
    noise_seed: str | None = typer.Option(
        None,
        help=(
            "Root of the clients' noise, to replay a run: its OUT/noise_secret (decimal or 0x hex). Default: 128 bits "
            "of OS entropy, written to OUT/noise_secret. A seed you choose makes the run private only against a server"
            " that cannot guess it (the summary says so). Not a config-file option."
        ),
    ),
    json_output: bool = json_option("the summary as JSON on stdout"),
    verbose: bool = typer.Option(False, "--verbose", help="Show Flower's and Ray's logs."),
    **flags,
) -> None:
    named_path(flags["out"])  # `--out ""` is an error here; `out = ""` in a config file means no files
    header = flags["header"]
    flags["header"] = None if header is None else "yes" if header else "no"  # data.header (ldpfed.config.HEADERS)
    from ldpfed.tasks import layout, planned_config, preflight, resolve

    config = resolve(config_file, flags)
    _check_task_flags(config.run.task, flags)
    config, round_budget = planned_config(config, flags)  # --budget: the plan's per-round settings
    root = None if noise_seed is None else seeds.parse_noise_seed(noise_seed)
    if root is not None and config.run.fresh_noise:
        raise LDPValueError("--noise-seed and --fresh-noise exclude each other (fresh noise is never recorded)")
    from ldpfed.protocols.recorder import output_dir
    from simulations.runner import RayStart, cluster_address
    from simulations.stopping import sigint_ignored_notice

    cluster_address(config)  # ray-address auto without RAY_ADDRESS: an error before anything is written

    output = output_dir(config)  # before any work: writable, no other run's results
    notice = sigint_ignored_notice()
    if notice:
        error_console.print(notice, highlight=False, soft_wrap=True, markup=False)
    if config.privacy.trust != "local":
        _simulate(config, output, root, verbose, json_output, round_budget)
        return
    config, described = preflight(config)  # reads the data: users and dims of a file come from it
    if described:
        error_console.print(f"data: {described}", highlight=False, soft_wrap=True, markup=False)
    # the last check passed: Ray's start begins here, before Flower's runtime is imported
    # (simulations.federation) and the run makes its clients' secrets (canaries change the nodes)
    nodes = layout(config).nodes if config.training.canaries == 0 else 0
    with RayStart.ahead(config, nodes, verbose) if nodes else contextlib.nullcontext():
        _simulate(config, output, root, verbose, json_output, round_budget)


def _simulate(config, output, root, verbose: bool, json_output: bool, round_budget) -> None:
    """The run of `simulate` once its options and data are checked (local trust: preflight done)."""
    from simulations.federation import Interrupted, run
    from simulations.progress import RoundProgress

    try:
        if config.privacy.trust != "local":
            from simulations.progress import TrustProgress
            from simulations.trust import run_trust

            progress = TrustProgress(config)
            summary = run_trust(config, output, verbose=verbose, noise_seed=root, progress=progress)
            spare_the_exit()
            print_json(summary) if json_output else progress.print_summary(summary)
            _say_if_not_saved(output)
            _report_audit(summary)
            return
        progress = RoundProgress(config)
        summary = run(config, progress, output=output, verbose=verbose, noise_seed=root)
        spare_the_exit()
    except Interrupted as stop:
        where = (
            f"; results of the finished rounds in {config.output.out}/"
            if config.output.out and stop.summary["rounds_finished"]
            else ""
        )
        error_console.print(f"{stop}{where}", highlight=False, soft_wrap=True)
        spare_the_exit()
        raise typer.Exit(code=stop.exit_code) from None  # 130 SIGINT, 143 SIGTERM
    if round_budget is not None:
        from ldpfed.planning.run import plan_report  # here: the planners load dp-accounting and scipy.stats

        summary["plan"] = plan_report(round_budget, summary)
        if output.enabled:  # summary.json gets the plan beside what was measured
            output.write({"summary.json": summary})
    if json_output:
        print_json(summary)
    else:
        progress.print_summary(summary)
        if round_budget is not None:
            _print_plan(summary["plan"])
    _say_if_not_saved(output)
    _report_audit(summary)
    if summary["clients_replied_total"] == 0:
        error_console.print(
            f"[bold red]error:[/] every client failed in every round ({summary['failure_reasons']})",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(code=1)

"""`ldpfed compare`: aggregators x mechanisms x budgets, measured beside the predicted MSE.

The command checks what every task shares (the task, a total budget or none, the flags of other
tasks: `ldpfed.tasks.foreign_flags`) and hands the options to the task's comparison: mean
(`ldpfed.cli.mean`) and frequency (`ldpfed.cli.frequency`) run in process; train needs Flower and
the apps in `simulations/`, which the core library must never import, so its runner is looked up
through the entry point `train` of the group `ldpfed.compare_tasks` (declared in pyproject.toml:
`simulations.compare_train:compare_train`), as is `--trust`'s (`trust`). Dependencies stay one-way
(simulations -> ldpfed). Options shared by the tasks default per task (None below = "the task's
default").
"""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

from ldpfed.cli import frequency as frequency_cli
from ldpfed.cli.common import HEADER_HELP, OUT_OF_DOMAIN_HELP, OUTPUTS_EPILOG, handle_errors
from ldpfed.cli.mean import DEFAULT_DIMS, DEFAULT_USERS, compare_mean
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
from ldpfed.data.partition import PARTITION_HELP
from ldpfed.outputs import OutputDir
from ldpfed.planning.run import DEFAULT_STUDY_ACCOUNTANT, StudyBudget
from ldpfed.tasks import foreign_flags, foreign_options
from ldpfed.validation import LDPValueError

TASKS = ("mean", "train", "frequency")
TASK_PLUGIN_GROUP = "ldpfed.compare_tasks"


def _compare_train(options: dict, study) -> None:
    """The federated comparison of the simulations package (found through its entry point)."""
    runner = _task_runner("train")
    out, overwrite = options.pop("out"), options.pop("overwrite")
    # Checked before any federation starts; the runner writes through it (ldpfed.outputs).
    with OutputDir.prepare(out, overwrite=overwrite, command="compare --task train") as output:
        runner({**options, "out": output})


def _compare_frequency(options: dict, study) -> None:
    frequency_cli.compare_frequency(**options, unsupported={}, study=study)


# each task's comparison; the tasks whose runner needs Flower (found through an entry point) refuse a total
COMPARERS = {"mean": compare_mean, "frequency": _compare_frequency, "train": _compare_train}
PLUGIN_TASKS = ("train",)


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
    partition: str | None = typer.Option(None, "--partition", help=PARTITION_HELP),
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
    canaries: int | None = typer.Option(
        None,
        "--canaries",
        help="With --trust, train: canary clients of each run's in-run privacy audit (the trust models that host "
        "them: local, central); beside each run's accounted eps, its one-run lower bound and cosine estimate.",
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
    options = dict(context.params)  # every option as given (None: not given)
    planned = {name: options.pop(name) for name in ("budget", "accountant")}
    task = options.pop("task")
    if task not in TASKS:
        raise LDPValueError(f"--task must be one of {TASKS}, got {task!r}")
    if trust is None and options.pop("canaries") is not None:
        raise LDPValueError("--canaries audits the runs of compare --trust (--task train); give --trust")
    if options.pop("trust") is not None:  # the runs are simulate's (Flower, the trust harness)
        _refuse_budget(planned, "compare --trust (its --epsilons are each client's totals over the run)")
        with OutputDir.prepare(out, overwrite=overwrite, command="compare --trust") as output:
            _task_runner("trust")({**options, "task": task, "trust": trust, "out": output})
        return
    if task in PLUGIN_TASKS:
        _refuse_budget(planned, f"--task {task} (a training run from a total budget: ldpfed simulate --budget)")
        study = None
    else:
        study = _study(planned, options.pop("rounds"), epsilons, delta)
    foreign = foreign_flags(task, options, "compare_options")
    if foreign:
        raise LDPValueError(f"{', '.join(foreign)} do(es) not apply to --task {task}")
    for name in foreign_options(task, "compare_options"):
        options.pop(name, None)
    COMPARERS[task](options, study)


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


def register(app: typer.Typer) -> None:
    app.command("compare", epilog=OUTPUTS_EPILOG)(compare)

"""Shared CLI plumbing: clean errors for bad input and Ctrl-C, JSON output, parsing of list
options, reading tuple data, progress."""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

import ldpfed.mechanisms as mechanisms
from ldpfed.data import Tuples, read_tuples, scale_note  # noqa: F401 (scale_note re-exported)
from ldpfed.experiments.plan import ExperimentPlan
from ldpfed.mechanisms.square_wave import ESTIMATORS
from ldpfed.outputs import EXIT_INTERRUPTED, Interrupted, dumps
from ldpfed.validation import OUT_OF_DOMAIN, LDPValueError, out_of_domain_policy, parse_domain  # noqa: F401 (re-exported)

if TYPE_CHECKING:  # annotations only: the planners load dp-accounting and scipy.stats (about 1.2 s)
    from ldpfed.planning.run import BudgetGroup, StudyBudget


def log_console(file=None) -> Console:
    """A console for lines on stderr (or `file`): off a terminal (a log, a pipe, CI) each line is
    written whole, never wrapped at the 80 columns rich assumes without a terminal."""
    log = Console(file=file, stderr=file is None)
    log.soft_wrap = not log.is_terminal
    return log


# Tables stay readable when piped (rich falls back to 80 columns without a terminal).
console = Console(width=None if sys.stdout.isatty() else 160)
error_console = log_console()

EXIT_BAD_INPUT = 2
OUTPUTS_EPILOG = "Outputs (files, JSON keys, CSV columns with their units): docs/outputs.md"
OUT_OF_DOMAIN_HELP = "Data outside --domain: error (default) or clip (clip to the domain, count printed)."
HEADER_HELP = (
    "CSV files: the first row is (not) a header. Default: a header when a first-row field is not a number, "
    "or when the row is 0,1,...,d-1 (pandas' column names) above values that are not all integers."
)


def progress_bar(label: str, *extra_columns, transient: bool = False) -> Progress:
    """The bar shown during long work: on stderr, so stdout stays clean for --json."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        *extra_columns,
        console=error_console,
        transient=transient,
    )


def show_results(rows: list, table: Callable, *, as_json: bool, out, files: list[str]) -> None:
    """The end of a results command: JSON rows on stdout, or the table and the `files` written into `out`."""
    if as_json:
        print_json(rows)
        return
    console.print(table())
    if out is not None:
        console.print(f"wrote {out}/" + ", ".join(files))


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print `error: message` on stderr as one line and exit with `code` (2: bad input, nothing written)."""
    error_console.print(
        f"[bold red]error:[/] {escape(' '.join(str(message).split()))}", highlight=False, soft_wrap=True, emoji=False
    )
    raise typer.Exit(code=code)


def handle_errors(command: Callable) -> Callable:
    """Bad user input (LDPValueError) -> one line, exit code 2; Ctrl-C -> one line saying what was
    written (`ldpfed.outputs.Interrupted`), exit code 130."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except LDPValueError as error:
            fail(str(error))
        except Interrupted as error:
            fail(str(error), getattr(error, "exit_code", EXIT_INTERRUPTED))
        except KeyboardInterrupt as error:  # a SIGTERM turned into one carries its own code (143)
            fail("interrupted; no results written", getattr(error, "exit_code", EXIT_INTERRUPTED))

    return wrapper


def print_json(payload) -> None:
    sys.stdout.write(dumps(payload) + "\n")


def parse_list(text: str, convert: Callable = str, name: str = "list") -> list:
    """'a,b,c' -> [convert(a), ...]; an empty item ('1,', '1,,2') or a repeated one ('1,1.0') is an
    error naming the option, not silently dropped or merged."""
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise LDPValueError(f"{name} must be a non-empty comma-separated list")
    if not all(items):
        raise LDPValueError(f"{name} has an empty item: {text!r}")
    try:
        values = [convert(item) for item in items]
    except ValueError:
        raise LDPValueError(f"{name} must be a comma-separated list of {convert.__name__}, got {text!r}") from None
    repeated = sorted({str(value) for value in values if values.count(value) > 1})
    if repeated:
        raise LDPValueError(f"{name} lists {', '.join(repeated)} more than once: {text!r}")
    return values


def read_data(
    spec: str,
    *,
    users,
    dims,
    seed: int,
    domain: tuple[float, float],
    header: bool | None,
    out_of_domain: str,
    rng: np.random.Generator | None = None,
) -> Tuples:
    """Tuple data for a command (`ldpfed.data.read_tuples`), with "what was read" on stderr.

    Synthetic sets draw from `rng` (default `default_rng(seed)`); `out_of_domain` is the CLI's
    name (error | clip). For any command that reads tuples (predict, compare, simulate).
    """
    rng = np.random.default_rng(seed) if rng is None else rng
    tuples = read_tuples(
        spec,
        users=users,
        dims=dims,
        rng=rng,
        domain=domain,
        header=header,
        out_of_domain=out_of_domain_policy(out_of_domain),
    )
    seeded = f" (seed {seed})" if tuples.source.startswith("synthetic") else ""
    error_console.print(f"data: {tuples.description}{seeded}", highlight=False, soft_wrap=True, markup=False)
    return tuples


@contextlib.contextmanager
def progress_steps(label: str, total: int):
    """Progress over `total` steps: a bar on a terminal; otherwise (a log, CI) a line on stderr per
    call `advance(text)` that carries a text. Yields `advance(text=None)`."""
    if error_console.is_terminal:
        with progress_bar(label, transient=True) as bar:
            task_id = bar.add_task(label, total=total)
            yield lambda text=None: bar.advance(task_id)
        return
    start, done = time.perf_counter(), [0]

    def advance(text=None):
        done[0] += 1
        if text is not None:
            error_console.print(
                f"{label}: {done[0]}/{total} {text} ({time.perf_counter() - start:.1f} s)",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )

    yield advance


def check_estimator(estimator: str | None) -> str | None:
    """The --estimator option (square wave's raw | debiased), or None when not given."""
    if estimator is not None and estimator not in ESTIMATORS:
        raise LDPValueError(f"--estimator must be one of {ESTIMATORS}, got {estimator!r}")
    return estimator


def estimator_options(name: str, estimator: str | None) -> dict:
    """--estimator goes to every chosen mechanism that takes an `estimator` option."""
    takes = "estimator" in mechanisms.get_class(name).option_choices
    return {"estimator": estimator} if estimator is not None and takes else {}


# ---- comparisons from a total budget (compare --budget): shared by the mean and frequency tasks ----
BUDGET_KEYS = ("total_epsilon", "total_delta", "rounds", "accountant", "delta_per_round", "epsilon_spent")
STUDY_KEYS = ("studies", "mse_final", "mse_final_std", "predicted_mse_final")


def study_plans(
    task: str, study: StudyBudget, groups: list[BudgetGroup], aggregators: tuple, shared: dict
) -> list[ExperimentPlan]:
    """One plan per group of mechanisms that the total gives the same per-round (eps, delta), its
    repetitions measured as T-round studies; `shared`: the options common to the plans."""
    return [
        ExperimentPlan.build(task, [group.epsilon], aggregators, delta=group.delta, study_rounds=study.rounds, **shared)
        for group in groups
    ]


def study_keys(row: dict) -> dict:
    """A summary row's planned settings and T-round studies (none without --budget), JSON-ready."""
    keys = {}
    for key in (key for key in (*BUDGET_KEYS, *STUDY_KEYS) if key in row):
        value = row[key]
        if key == "accountant":
            keys[key] = value
        elif key in ("rounds", "studies"):
            keys[key] = int(value)
        else:
            keys[key] = _finite(value)
    return keys


FINAL_COLUMNS = ("final mean ± se", "predicted final")


def budget_title(budget: dict) -> str:
    """The total, its rounds and accountant, and how the final estimates were measured."""
    delta = f", {budget['delta']:g}" if budget["delta"] else ""
    return (
        f"total ({budget['epsilon']:g}{delta}) per client over T = {budget['rounds']} rounds ({budget['accountant']}); "
        f"final: the average of T rounds, measured over {budget['studies']} T-round study(ies)"
    )


def final_cells(row) -> list[str]:
    """The plain mean's spent eps, its T-round final MSE measured (± standard error) and predicted."""
    if row is None:
        return ["-"] * (1 + len(FINAL_COLUMNS))
    spent = _finite(row.epsilon_spent)
    spent = "-" if spent is None else f"{spent:.7g}"
    return [spent, f"{row.mse_final:.3g} ±{row.mse_final_se:.2g}", f"{row.predicted_mse_final:.3g}"]


def _finite(value) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def budget_figure(summary, labels: list[str], budget: dict):
    """A total budget's comparison: per mechanism (`labels`, one per summary row, at its per-round
    eps), each aggregator's MSE of one round (circles) and of the T-round final estimate (squares),
    standard errors as bars, the plain mean's predictions as black bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = summary.assign(label=labels)
    names = list(dict.fromkeys(frame["label"]))
    aggregators = list(dict.fromkeys(frame["aggregator"]))
    width = 0.8 / max(1, len(aggregators))
    figure, axis = plt.subplots(figsize=(max(6.0, 1.8 * len(names) + 2), 4.5))
    for a, aggregator in enumerate(aggregators):
        rows = frame[frame["aggregator"] == aggregator].set_index("label").reindex(names)
        x = np.arange(len(names)) - 0.4 + (a + 0.5) * width
        colour = f"C{a}"
        axis.errorbar(x - width / 4, rows["mse"], yerr=rows["mse_se"], fmt="o", color=colour, ms=4, capsize=2)
        axis.errorbar(
            x + width / 4, rows["mse_final"], yerr=rows["mse_final_se"], fmt="s", color=colour, ms=4, capsize=2
        )
        axis.plot([], [], "o", color=colour, label=aggregator)
        if aggregator == "mean":
            axis.plot(x - width / 4, rows["predicted_mse"], "_", color="black", ms=14, mew=2)
            axis.plot(x + width / 4, rows["predicted_mse_final"], "_", color="black", ms=14, mew=2)
    axis.plot([], [], "o", color="grey", label="one round")
    axis.plot([], [], "s", color="grey", label=f"final (average of T = {budget['rounds']})")
    axis.plot([], [], "_", color="black", ms=14, mew=2, label="predicted (plain mean)")
    axis.set_xticks(np.arange(len(names)), names)
    axis.set_yscale("log")
    axis.set_ylabel("MSE (bars: standard error)")
    delta = f", {budget['delta']:g}" if budget["delta"] else ""
    axis.set_title(
        f"Total ({budget['epsilon']:g}{delta}) per client over T = {budget['rounds']} rounds ({budget['accountant']})"
    )
    axis.grid(True, axis="y", which="both", alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    return figure

"""Shared CLI plumbing: clean errors for bad input and Ctrl-C, JSON output, parsing of list
options, reading tuple data, progress."""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

import ldpfed.mechanisms as mechanisms
from ldpfed.data import Tuples, read_tuples, scale_note  # noqa: F401 (scale_note re-exported)
from ldpfed.mechanisms.square_wave import ESTIMATORS
from ldpfed.outputs import EXIT_INTERRUPTED, Interrupted, dumps
from ldpfed.validation import OUT_OF_DOMAIN, LDPValueError, out_of_domain_policy, parse_domain  # noqa: F401 (re-exported)


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

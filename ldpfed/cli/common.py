"""Shared CLI plumbing: clean errors for bad input, JSON output, parsing of list options."""

from __future__ import annotations

import functools
import json
import sys
from typing import Callable

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

import ldpfed.mechanisms as mechanisms
from ldpfed.mechanisms.square_wave import ESTIMATORS
from ldpfed.validation import LDPValueError

# Tables stay readable when piped (rich falls back to 80 columns without a terminal).
console = Console(width=None if sys.stdout.isatty() else 160)
error_console = Console(stderr=True)

EXIT_BAD_INPUT = 2


def progress_bar(label: str, *extra_columns, transient: bool = False) -> Progress:
    """The bar shown during long work: on stderr, so stdout stays clean for --json."""
    return Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
        *extra_columns, console=error_console, transient=transient,
    )


def show_results(rows: list, table: Callable, *, as_json: bool, out, files: list[str]) -> None:
    """The end of a results command: JSON rows on stdout, or the table and the files written."""
    if as_json:
        print_json(rows)
        return
    console.print(table())
    if out is not None:
        console.print(f"wrote {out}/" + ", ".join(files))


def fail(message: str) -> None:
    """Print `error: message` on stderr and exit with code 2 (nothing written)."""
    error_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=EXIT_BAD_INPUT)


def handle_errors(command: Callable) -> Callable:
    """Turn LDPValueError (bad user input) into a one-line error and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except LDPValueError as error:
            fail(str(error))

    return wrapper


def _to_jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def dumps(payload) -> str:
    """JSON with numpy arrays and scalars converted; NaN/inf become null (valid JSON)."""
    text = json.dumps(payload, default=_to_jsonable, indent=2, allow_nan=True)
    return text.replace("NaN", "null").replace("-Infinity", "null").replace("Infinity", "null")


def print_json(payload) -> None:
    sys.stdout.write(dumps(payload) + "\n")


def parse_list(text: str, convert: Callable = str, name: str = "list") -> list:
    """'a,b,c' -> [convert(a), ...]; a clear error naming the option for a bad item."""
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    if not items:
        raise LDPValueError(f"{name} must be a non-empty comma-separated list")
    try:
        return [convert(item) for item in items]
    except ValueError:
        raise LDPValueError(f"{name} must be a comma-separated list of {convert.__name__}, got {text!r}") from None


def check_estimator(estimator: str | None) -> str | None:
    """The --estimator option (square wave's raw | debiased), or None when not given."""
    if estimator is not None and estimator not in ESTIMATORS:
        raise LDPValueError(f"--estimator must be one of {ESTIMATORS}, got {estimator!r}")
    return estimator


def estimator_options(name: str, estimator: str | None) -> dict:
    """--estimator goes to every chosen mechanism that takes an `estimator` option."""
    takes = "estimator" in mechanisms.get_class(name).option_choices
    return {"estimator": estimator} if estimator is not None and takes else {}

"""Where a results command writes: checked before any work, written atomically, all files or none.

Use it in every command that writes results (`compare`, `predict`, `simulate`):

    with OutputDir.prepare(out, overwrite=overwrite, command="compare") as output:  # before any work
        ...                                                     # the work (may take hours)
        output.write({"runs.csv": frame, "summary.json": payload, "plot.png": figure})

- `prepare` raises LDPValueError (the CLI: one line, exit code 2) when `out` is a file,
  cannot be created or written (a read-only or missing-and-uncreatable parent), or holds results of
  another ldpfed run and `overwrite` is False. It writes nothing: the directory (and any missing
  parents) is created at the first `write`. `out=None` gives a destination that writes nothing, so
  commands need no `if out` branches. An empty `out` (`--out ""`, an unset shell variable) is an
  error, never the current directory (`named_path`); give "." for that.
- `write(files)` takes {file name: content}; content is a DataFrame (CSV, or Parquet by suffix), a
  matplotlib Figure (PNG), str (text; a `Secret` is readable by its owner only), bytes, or a JSON
  payload (`write_content`).
  Every file is first written under a hidden temporary name in the directory, then all are renamed
  into place with SIGINT held back: after Ctrl-C a write has left all of its files or none. Call it
  as often as needed (e.g. once per finished round: the same names are replaced).
- With `overwrite`, the first `write` first removes ldpfed's own files of the earlier run (those
  its manifest lists, and the known result names of ldpfed's commands); other files stay. An
  earlier run's results therefore survive a run that fails or is interrupted before it writes.
- A manifest `.ldpfed-run.json` marks the directory as one run's results: the command, its files
  and the environment the results depend on (`ldpfed.manifest.environment`: package versions, git
  commit and dirty flag, numpy's SIMD level and CPU features, torch's threads and device, Python,
  OS), rewritten with every write that changes it (a file's first write, torch loaded since).
- `discard()` removes what the writes put there (their files, the manifest, the directories they
  created): a run that fails before it has begun (`ldpfed simulate` when Ray does not come up)
  leaves no files of its own. An earlier run's files that `overwrite` removed stay removed.
- Leaving the `with` block by Ctrl-C raises `Interrupted`, whose message says what is on disk; the
  CLI prints it as one line and exits with code 130.

Files, one by one. Writing results so that nothing is half-written: every file goes to a temporary name in the
same directory first and is renamed into place (atomic on POSIX).

`dumps` is the one JSON spelling of results: numpy arrays and scalars become lists and numbers,
and non-finite numbers (NaN, +-inf) become `null` value by value, so JSON stays valid and strings
that merely contain "NaN" (a path such as "results/NaN_runs.csv") are left alone.
`write_content` writes one result (table, figure, text or JSON payload) by its type; the
destinations above use it for their staged files.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldpfed.manifest import environment
from ldpfed.validation import LDPValueError

if TYPE_CHECKING:
    import pandas as pd


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def jsonable(value):
    """`value` with numpy types converted and every non-finite float replaced by None."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc" and not np.all(np.isfinite(value)):
            return np.where(np.isfinite(value), value.astype(object), None).tolist()
        return value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(payload) -> str:
    """JSON text of `payload`; NaN/inf become null at the value level (never by editing text)."""
    return json.dumps(jsonable(payload), indent=2, allow_nan=False)


def records_csv(rows: list[dict]) -> str | None:
    """`pandas.DataFrame(rows).to_csv(index=False)`'s text, without pandas, for rows of plain
    values (bool, int, float, str, None and their numpy scalars); None for any other value (the
    caller then uses pandas). A run's metrics.csv is rewritten after every round: pandas costs
    ~0.3 s of CPU to import and ~10 ms a call, this a fraction of a ms for a few rows.

    pandas' rules, column by column: columns in the order keys first appear; a missing key or None
    is an empty field, as is NaN; a column of ints and missing values or floats is a float column
    (3 is written 3.0); a column of only bools or only ints is written as its values; a column that
    mixes kinds otherwise (str, bool with numbers) holds objects, each written as str() writes it;
    floats as repr writes them; fields quoted as csv.QUOTE_MINIMAL quotes them."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    if not columns:
        return None
    cells = []
    for column in columns:
        values = [row.get(column) for row in rows]
        rendered = _column_cells(values)
        if rendered is None:
            return None
        cells.append(rendered)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(zip(*cells))
    return buffer.getvalue()


def csv_records(text: str) -> list[dict]:
    """The rows of a CSV table (as `records_csv` writes them) read back to plain values: an empty
    field None, True/False bools, integer and float literals numbers, any other field its text.
    Numbers read back equal to the values written (floats are written as repr writes them), so a
    figure drawn from the rows read back is the one drawn from the rows written."""
    lines = csv.reader(io.StringIO(text))
    columns = next(lines, [])
    return [{column: _csv_value(field) for column, field in zip(columns, fields)} for fields in lines if fields]


def _csv_value(field: str):
    if field == "":
        return None
    if field in ("True", "False"):
        return field == "True"
    for kind in (int, float):
        try:
            return kind(field)
        except ValueError:
            continue
    return field


def _column_cells(values: list) -> list[str] | None:
    """One column's fields as pandas writes them (records_csv), or None for a value it does not know."""
    kinds = set()
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            kinds.add("missing")
        elif isinstance(value, (bool, np.bool_)):
            kinds.add("bool")
        elif isinstance(value, (int, np.integer)):
            if not -(2**63) <= int(value) < 2**63:
                return None
            kinds.add("int")
        elif isinstance(value, float) and type(value) in (float, np.float64):
            kinds.add("float")
        elif isinstance(value, str):
            kinds.add("str")
        else:
            return None
    numbers = kinds - {"missing"}
    as_float = numbers <= {"int", "float"} and ("float" in numbers or ("int" in numbers and "missing" in kinds))
    cells = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            cells.append("")
        elif as_float:
            cells.append(repr(float(value)))
        elif isinstance(value, (bool, np.bool_)):
            cells.append(str(bool(value)))
        elif isinstance(value, (int, np.integer)):
            cells.append(str(int(value)))
        elif isinstance(value, float):
            cells.append(repr(float(value)))
        else:
            cells.append(value)
    return cells


def temporary_path(directory: Path, name: str) -> Path:
    """A new empty file in `directory` with ordinary permissions, named after `name` (hidden)."""
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    os.close(handle)
    os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are ordinary files
    return Path(temporary)


# A figure with this attribute set to True is saved as laid out (no tight bounding box).
FIXED_LAYOUT = "ldpfed_fixed_layout"


def write_content(path: str | Path, content, *, suffix: str | None = None) -> None:
    """Write one result to `path` (not atomically; see `_atomic_write`), chosen by its type:
    a DataFrame as CSV (Parquet if `suffix` is .parquet), a matplotlib Figure as PNG (then closed),
    str as text, bytes as bytes, anything else as JSON (`dumps`). `suffix` defaults to path's."""
    path = Path(path)
    suffix = (path.suffix if suffix is None else suffix).lower()
    pandas = sys.modules.get("pandas")  # not imported by this module: a DataFrame implies it is loaded
    if pandas is not None and isinstance(content, pandas.DataFrame):
        if suffix == ".parquet":
            content.to_parquet(path, index=False)
        else:
            content.to_csv(path, index=False)
    elif hasattr(content, "savefig"):
        # A figure laid out for its own size (FIXED_LAYOUT) is saved as it is (the tight bounding
        # box costs a full extra draw), with zlib's fastest level (~5x faster than the default 6,
        # the same pixels). One made by pyplot is closed there (pyplot is loaded then).
        fixed = getattr(content, FIXED_LAYOUT, False)
        options = {"bbox_inches": None, "pil_kwargs": {"compress_level": 1}} if fixed else {"bbox_inches": "tight"}
        try:
            content.savefig(path, format="png", dpi=120, **options)
        finally:
            pyplot = sys.modules.get("matplotlib.pyplot")
            if pyplot is not None:
                pyplot.close(content)
    elif isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(dumps(content) + "\n")


def _atomic_write(path: Path, content) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_path(path.parent, path.name)
    try:
        write_content(temporary, content, suffix=path.suffix)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | Path, payload) -> Path:
    if isinstance(payload, (str, bytes)):
        return write_text(path, json.dumps(payload))
    return _atomic_write(Path(path), payload)


def write_table(path: str | Path, frame: pd.DataFrame) -> Path:
    """CSV or Parquet by suffix."""
    return _atomic_write(Path(path), frame)


def save_figure(path: str | Path, figure) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    return _atomic_write(Path(path), figure)


def write_text(path: str | Path, text: str) -> Path:
    return _atomic_write(Path(path), str(text))


__all__ = ["dumps", "jsonable", "save_figure", "write_content", "write_json", "write_table", "write_text"]


MANIFEST = ".ldpfed-run.json"
# Files that ldpfed's commands write into an --out directory (predict, compare, compare --task train,
# simulate, plan): a directory holding any of them holds results of an earlier run.
RESULT_FILES = frozenset(
    {
        MANIFEST,
        "runs.csv",
        "summary.csv",
        "summary.json",
        "mse_vs_epsilon.png",
        "rounds.csv",
        "accuracy_per_round.png",
        "metrics.csv",
        "privacy.csv",
        "privacy.json",
        "privacy_entries.csv",
        "canaries.json",
        "config.toml",
        "trust.csv",
        "trust.json",
        "trust.png",
        "plot.png",
        "frequencies.csv",
        "frequencies.png",
        "mse_per_aggregator.png",
        "noise_secret",
        "prediction.json",
        "per_dimension.csv",
        "per_category.csv",
        "plan.csv",
        "plan.json",
        "mse_vs_rounds.csv",
        "mse_vs_rounds.png",
        "label_counts.csv",
        "label_counts.png",
    }
)
EXIT_INTERRUPTED = 130
HELD_BACK = (signal.SIGINT, signal.SIGTERM)  # signals that would stop a write between two renames


def add_to_manifest(directory: str | Path, names: list[str]) -> None:
    """List `names` among the files of the run in `directory` (its manifest's `files`, which
    `--overwrite` removes), for a file written there after the run (e.g. its figure, drawn
    later); the rest of the manifest, the run's environment included, is kept. Without a manifest
    nothing is done."""
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        return
    files = manifest.get("files", [])
    manifest["files"] = files + [name for name in names if name not in files]
    write_json(path, manifest)


class Secret(str):
    """Text that only the owner may read (mode 0600 from before it is written): e.g. a run's noise root."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a results command; the message says which output files are on
    disk; `exit_code` is the shell's 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, message: str, exit_code: int = EXIT_INTERRUPTED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextlib.contextmanager
def _sigint_held_back():
    """Run the block without being interrupted by SIGINT or SIGTERM (which `ldpfed simulate` treats
    as a Ctrl-C); a signal received during it is raised after it, through the previous handler.

    Only the main thread can install signal handlers; elsewhere the block runs unprotected.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = {signum: signal.signal(signum, lambda signum, frame: received.append(signum)) for signum in HELD_BACK}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(received):
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL and signum == signal.SIGINT:
                raise KeyboardInterrupt
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


def _check_writable_location(path: Path, flag: str) -> None:
    """`path` (absent or a directory) can be created and written: its nearest existing ancestor
    is a directory in which a file can be created (tried with a temporary file, then removed)."""
    ancestor = path
    while not ancestor.exists():
        if ancestor.parent == ancestor:
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        what = "exists and is not a directory" if ancestor == path else f"cannot be created: {ancestor} is a file"
        raise LDPValueError(f"{flag} {path} {what}")
    try:
        temporary_path(ancestor, "ldpfed-write-check").unlink()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        where = "" if ancestor == path else f" (in {ancestor})"
        raise LDPValueError(f"{flag} {path} cannot be written{where}: {reason}") from None


def _missing_directories(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not path.exists() and path.parent != path:
        missing.append(path)
        path = path.parent
    return missing


def _remove_empty(directories: list[Path]) -> None:
    """Remove each of `directories` (deepest first) that is empty."""
    for directory in directories:
        with contextlib.suppress(OSError):
            directory.rmdir()


def _commit(staged: dict[Path, Path]) -> None:
    """Rename every staged temporary onto its final name, SIGINT held back."""
    with _sigint_held_back():
        for temporary, final in staged.items():
            os.replace(temporary, final)


def _stage(directory: Path, files: dict[str, object]) -> dict[Path, Path]:
    """{temporary: final path} with every content written under its temporary name."""
    staged: dict[Path, Path] = {}
    try:
        for name, content in files.items():
            final = directory / name
            if final.parent != directory:
                raise LDPValueError(f"output file name {name!r} must be a plain file name")
            temporary = temporary_path(directory, name)
            staged[temporary] = final
            if isinstance(content, Secret):
                os.chmod(temporary, 0o600)
            write_content(temporary, content, suffix=final.suffix)
    except BaseException:
        for temporary in staged:
            temporary.unlink(missing_ok=True)
        raise
    return staged


def named_path(value, flag: str = "--out"):
    """`value` unchanged, unless it is empty or blank: then an error, since Path("") is the current
    directory and `--out ""` (e.g. an unset shell variable) would write results there."""
    if value is not None and not str(value).strip():
        raise LDPValueError(
            f"{flag} is empty; give a directory ('.' for the current one), or leave {flag} out to write no files"
        )
    return value


class OutputDir:
    """A results directory (see the module docstring): `prepare`, then `write` once or more."""

    def __init__(self, path: Path | None, *, overwrite: bool, command: str, flag: str) -> None:
        self.path, self.overwrite, self.command, self.flag = path, overwrite, command, flag
        self.written: list[str] = []
        self.created: list[Path] = []  # the directories the first write created, deepest first
        self.manifest: dict | None = None  # as last written (a write that would not change it leaves it)

    @classmethod
    def prepare(cls, out, *, overwrite: bool = False, command: str, flag: str = "--out") -> OutputDir:
        """Check `out` before any work (see the module docstring); None: write nothing."""
        if out is None:
            return cls(None, overwrite=overwrite, command=command, flag=flag)
        path = Path(named_path(out, flag))
        _check_writable_location(path, flag)
        if path.is_dir() and not overwrite:
            earlier = sorted(name for name in os.listdir(path) if name in RESULT_FILES)
            if earlier:
                raise LDPValueError(
                    f"{flag} {path} holds results of another run ({', '.join(earlier)}); "
                    "choose another directory or pass --overwrite to replace them"
                )
        return cls(path, overwrite=overwrite, command=command, flag=flag)

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def write(self, files: dict[str, object]) -> list[str]:
        """Write {name: content} into the directory, all files or none; returns the names."""
        if self.path is None:
            return []
        created = _missing_directories(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        names = list(self.written) + [name for name in files if name not in self.written]
        manifest = {"command": self.command, "files": names, "environment": environment()}
        changed = {} if manifest == self.manifest else {MANIFEST: manifest}  # a round's metrics: unchanged
        try:
            staged = _stage(self.path, {**files, **changed})
        except BaseException:
            _remove_empty(created)  # only what this write created
            raise
        with _sigint_held_back():
            if not self.written and self.overwrite:
                self._remove_earlier_results()
            _commit(staged)
        if not self.written:
            self.created = created
        self.written, self.manifest = names, manifest
        return list(files)

    def discard(self) -> None:
        """Remove the files the writes put here (the manifest too) and the directories they created,
        when empty (see the module docstring)."""
        if self.path is None or not self.written:
            return
        with _sigint_held_back():
            for name in [*self.written, MANIFEST]:
                (self.path / name).unlink(missing_ok=True)
        _remove_empty(self.created)
        self.written, self.created, self.manifest = [], [], None

    def _remove_earlier_results(self) -> None:
        """ldpfed's own files of the earlier run: the manifest's list and the known names."""
        listed: set[str] = set()
        with contextlib.suppress(OSError, ValueError, TypeError):
            listed = set(json.loads((self.path / MANIFEST).read_text()).get("files", []))
        for name in sorted((listed | RESULT_FILES) & set(os.listdir(self.path))):
            target = self.path / name
            if target.is_file() and target.parent == self.path:
                target.unlink()

    def interrupted_message(self) -> str:
        if self.path is None:
            return "interrupted; no results written"
        if not self.written:
            return f"interrupted; nothing written to {self.path}"
        return f"interrupted; {self.path} holds complete {', '.join(self.written)} (written before the interrupt)"

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is not None and issubclass(kind, KeyboardInterrupt) and not issubclass(kind, Interrupted):
            raise Interrupted(self.interrupted_message(), getattr(error, "exit_code", EXIT_INTERRUPTED)) from None


def options_text(options: dict) -> str:
    """A mechanism's options as one sorted "key=value,..." cell of a table."""
    return ",".join(f"{key}={value}" for key, value in sorted(options.items()))

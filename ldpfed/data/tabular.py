"""Tuple data from a user's file (rows = users, columns = dimensions) or a synthetic spec.

CSV files may or may not start with a header row: by default the first row is a
header when one of its fields is not a number (`has_header_row`), or when its fields are exactly
0,1,...,d-1 (`pandas_column_names`: what pandas writes for unnamed columns) above values that are
not all integers; above integer values such a row is ambiguous, stays data, and the description
(and an out-of-domain error) says that `--header` skips it. `header=True/False` overrides that.
Values outside the declared domain are an error, or clipped to it with `out_of_domain="clip"`
(said in the description). `read_tuples` returns the values with a one-line
description of what was read (rows, columns, header, domain, clipping), which commands print.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpfed.data.synthetic import SYNTHETIC_SETS, generate
from ldpfed.validation import OUT_OF_DOMAIN_POLICIES, LDPValueError, OutOfDomain, check_values

TABLE_SUFFIXES = (".csv", ".npy", ".parquet")


@dataclass(frozen=True)
class Tuples:
    """users x dims values in [-1, 1] and where they came from."""

    values: np.ndarray
    source: str  # short label: "synthetic gaussian (seed 0)" or "file data.csv"
    description: str  # one line: what was read, e.g. "read 20000 rows x 20 columns from data.csv (no header row)"


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def has_header_row(path: str | Path) -> bool:
    """True when the first row of a CSV file has a field that is not a number (a header row)."""
    with open(path, newline="") as handle:
        first = next(csv.reader(handle), [])
    return any(not _is_number(field.strip()) for field in first)


def pandas_column_names(fields: list[str]) -> bool:
    """True when a CSV row is exactly 0,1,...,d-1: the header `DataFrame.to_csv(index=False)` writes
    for columns without names."""
    return [field.strip() for field in fields] == [str(i) for i in range(len(fields))]


PANDAS_NAMES = "its first row 0,1,...,d-1 may be pandas' column names: --header skips it"


def _read_csv(path: Path, header: bool | None) -> tuple[np.ndarray, str]:
    """(values, what became of the first row) of a CSV file; `header` None: detected (module docstring)."""
    import pandas as pd

    detect = header is None
    header = has_header_row(path) if detect else header
    table = pd.read_csv(path, header=0 if header else None).to_numpy(dtype=float)
    if header:
        return table, "header row skipped"
    with open(path, newline="") as handle:
        if not detect or not pandas_column_names(next(csv.reader(handle), [])):
            return table, "no header row"
    if np.any(np.mod(table[1:], 1.0) != 0.0):
        return table[1:], "header row 0,1,...,d-1 skipped: pandas' column names; --no-header reads it as data"
    return table, f"no header row; {PANDAS_NAMES}"


def _check_domain(domain) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in domain)
    except (TypeError, ValueError):
        raise LDPValueError(f"domain must be (low, high), got {domain!r}") from None
    if not high > low:
        raise LDPValueError(f"domain must be (low, high) with low < high, got {domain!r}")
    return low, high


def read_table(
    path: str | Path,
    domain: tuple[float, float] = (-1.0, 1.0),
    *,
    header: bool | None = None,
    out_of_domain: OutOfDomain = "raise",
) -> Tuples:
    """Read a 2-D numeric table and map its declared `domain` [low, high] onto [-1, 1].

    header: CSV only; None detects it (`has_header_row`). Raises LDPValueError for a missing or
    unreadable file, an unknown suffix, a non-2-D or non-numeric table, NaN/inf, or values outside
    the declared domain (unless out_of_domain="clip").
    """
    path = Path(path)
    low, high = _check_domain(domain)
    if out_of_domain not in OUT_OF_DOMAIN_POLICIES:
        raise LDPValueError(f"out_of_domain must be one of {OUT_OF_DOMAIN_POLICIES}, got {out_of_domain!r}")
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise LDPValueError(f"data file {path} must end in one of {TABLE_SUFFIXES}")
    if path.is_dir():
        raise LDPValueError(f"data file {path} is a directory")
    if not path.is_file():
        raise LDPValueError(f"data file {path} does not exist")
    if header is not None and suffix != ".csv":
        raise LDPValueError(f"header/no-header applies to .csv files, not to {path.name}")
    try:
        if suffix == ".npy":
            with open(path, "rb") as handle:
                if handle.read(6) != b"\x93NUMPY":  # numpy's magic: anything else is not a saved array
                    raise LDPValueError("it is not in numpy's .npy format (np.save)")
            table = np.load(path, allow_pickle=False)
        elif suffix == ".csv":
            table, first_row = _read_csv(path, header)
        else:
            import pandas as pd

            table = pd.read_parquet(path).to_numpy()
        table = np.asarray(table, dtype=float)
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as error:
        raise LDPValueError(f"cannot read {path} as a numeric table: {error}") from None
    if table.ndim == 1:
        table = table[:, None]
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
        raise LDPValueError(f"{path} must hold a 2-D table (rows = users, columns = dims); got shape {table.shape}")
    outside = 0
    if out_of_domain == "clip":
        outside = int(np.count_nonzero((table < low) | (table > high)))
    try:
        table = check_values(table, low=low, high=high, out_of_domain=out_of_domain, name=f"values in {path.name}")
    except LDPValueError as error:
        if suffix == ".csv" and first_row.endswith(PANDAS_NAMES):
            raise LDPValueError(f"{error}; {PANDAS_NAMES}") from None
        raise
    details = []
    if suffix == ".csv":
        details.append(first_row)
    if (low, high) != (-1.0, 1.0):
        details.append(f"values mapped from [{low:g}, {high:g}] to [-1, 1]")
    if out_of_domain == "clip":
        details.append(f"{outside} value(s) outside the domain clipped")
    rows, columns = table.shape
    description = f"read {rows} rows x {columns} columns from {path}" + (f" ({'; '.join(details)})" if details else "")
    if (low, high) != (-1.0, 1.0):  # the default domain needs no map: (t + 1) - 1 would round small values
        table = 2.0 * (table - low) / (high - low) - 1.0
    return Tuples(table, f"file {path}", description)


def load_table(path: str | Path, domain: tuple[float, float] = (-1.0, 1.0), **options) -> np.ndarray:
    """The values of `read_table` (same options)."""
    return read_table(path, domain, **options).values


def read_tuples(
    spec: str | Path,
    *,
    users: int | None = None,
    dims: int | None = None,
    rng: np.random.Generator | None = None,
    domain: tuple[float, float] = (-1.0, 1.0),
    header: bool | None = None,
    out_of_domain: OutOfDomain = "raise",
) -> Tuples:
    """users x dims values in [-1, 1] from a synthetic set name or a file path, described.

    Synthetic sets need users, dims and rng. For a file, given users/dims must match its shape;
    `domain`, `header` and `out_of_domain` apply to files (see `read_table`).
    """
    if str(spec) in SYNTHETIC_SETS:
        if users is None or dims is None or rng is None:
            missing = [name for name, value in (("users", users), ("dims", dims), ("rng", rng)) if value is None]
            raise LDPValueError(f"synthetic data {spec!r} needs {' and '.join(missing)}")
        if header is not None:
            raise LDPValueError(f"header/no-header applies to .csv files, not to the synthetic set {spec!r}")
        if tuple(float(v) for v in domain) != (-1.0, 1.0):
            raise LDPValueError(f"a domain applies to data files; the synthetic set {spec!r} lies in [-1, 1]")
        values = generate(str(spec), users, dims, rng)
        return Tuples(values, f"synthetic {spec}", f"generated {users} rows x {dims} columns of synthetic {spec}")
    path = Path(spec)
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise LDPValueError(
            f"data spec {str(spec)!r} is neither a synthetic set ({', '.join(SYNTHETIC_SETS)}) "
            f"nor a file ending in {TABLE_SUFFIXES}"
        )
    tuples = read_table(path, domain, header=header, out_of_domain=out_of_domain)
    n, d = tuples.values.shape
    if users is not None and users != n:
        raise LDPValueError(f"{path} has {n} rows (users) but users={users} was requested")
    if dims is not None and dims != d:
        raise LDPValueError(f"{path} has {d} columns (dims) but dims={dims} was requested")
    return tuples


def scale_note(domain: tuple[float, float]) -> dict:
    """What scale errors are on when a file's values were mapped from `domain` onto [-1, 1]."""
    low, high = domain
    factor = ((high - low) / 2.0) ** 2
    return {
        "scale": "normalised [-1, 1]",
        "domain": [low, high],
        "mse_to_data_units": factor,
        "note": f"errors are on the normalised [-1, 1] scale; multiply an MSE by ((HIGH-LOW)/2)^2 = {factor:g} "
        f"for the data's units (domain [{low:g}, {high:g}])",
    }


def load_tuples(spec: str | Path, **options) -> np.ndarray:
    """The values of `read_tuples` (same options): users x dims in [-1, 1]."""
    return read_tuples(spec, **options).values

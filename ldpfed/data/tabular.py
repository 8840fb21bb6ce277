"""Tuple data from a user's file (rows = users, columns = dimensions) or a synthetic spec."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ldpfed.data.synthetic import SYNTHETIC_SETS, generate
from ldpfed.validation import LDPValueError, check_values

TABLE_SUFFIXES = (".csv", ".npy", ".parquet")


def load_table(path: str | Path, domain: tuple[float, float] = (-1.0, 1.0)) -> np.ndarray:
    """Read a 2-D numeric table and map its declared `domain` [low, high] onto [-1, 1].

    Raises LDPValueError for a missing/unreadable file, an unknown suffix, a non-2-D or
    non-numeric table, NaN/inf, or values outside the declared domain.
    """
    path = Path(path)
    low, high = (float(v) for v in domain)
    if not high > low:
        raise LDPValueError(f"domain must be (low, high) with low < high, got {domain!r}")
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise LDPValueError(f"data file {path} must end in one of {TABLE_SUFFIXES}")
    if not path.is_file():
        raise LDPValueError(f"data file {path} does not exist")
    try:
        if path.suffix.lower() == ".npy":
            table = np.load(path, allow_pickle=False)
        else:
            import pandas as pd

            frame = pd.read_csv(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
            table = frame.to_numpy()
        table = np.asarray(table, dtype=float)
    except (OSError, ValueError, TypeError) as error:
        raise LDPValueError(f"cannot read {path} as a numeric table: {error}") from None
    if table.ndim == 1:
        table = table[:, None]
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
        raise LDPValueError(f"{path} must hold a 2-D table (rows = users, columns = dims); got shape {table.shape}")
    table = check_values(table, low=low, high=high, name=f"values in {path.name}")
    return 2.0 * (table - low) / (high - low) - 1.0


def load_tuples(
    spec: str | Path,
    *,
    users: int | None = None,
    dims: int | None = None,
    rng: np.random.Generator | None = None,
    domain: tuple[float, float] = (-1.0, 1.0),
) -> np.ndarray:
    """users x dims values in [-1, 1] from a synthetic set name or a file path.

    Synthetic sets need users, dims and rng. For a file, given users/dims must match its shape.
    """
    if str(spec) in SYNTHETIC_SETS:
        if users is None or dims is None or rng is None:
            raise LDPValueError(f"synthetic data {spec!r} needs users, dims and a seed")
        return generate(str(spec), users, dims, rng)
    path = Path(spec)
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise LDPValueError(
            f"data spec {spec!r} is neither a synthetic set ({', '.join(SYNTHETIC_SETS)}) "
            f"nor a file ending in {TABLE_SUFFIXES}"
        )
    table = load_table(path, domain)
    n, d = table.shape
    if users is not None and users != n:
        raise LDPValueError(f"{path} has {n} rows (users) but users={users} was requested")
    if dims is not None and dims != d:
        raise LDPValueError(f"{path} has {d} columns (dims) but dims={dims} was requested")
    return table

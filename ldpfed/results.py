"""Writing results so that nothing is half-written: every file goes to a temporary name in the
same directory first and is renamed into place (atomic on POSIX).

`dumps` is the one JSON spelling of results: numpy arrays and scalars become lists and numbers,
and non-finite numbers (NaN, +-inf) become `null` value by value, so JSON stays valid and strings
that merely contain "NaN" (a path such as "results/NaN_runs.csv") are left alone.
`write_content` writes one result (table, figure, text or JSON payload) by its type; the
`ldpfed.outputs` destinations use it for their staged files.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

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


def temporary_path(directory: Path, name: str) -> Path:
    """A new empty file in `directory` with ordinary permissions, named after `name` (hidden)."""
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    os.close(handle)
    os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are ordinary files
    return Path(temporary)


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
        import matplotlib.pyplot as plt

        try:
            content.savefig(path, format="png", dpi=120, bbox_inches="tight")
        finally:
            plt.close(content)
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

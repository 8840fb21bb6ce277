"""Writing results so that nothing is half-written: every file goes to a temporary name in the
same directory first and is renamed into place (atomic on POSIX)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def _atomic_write(path: Path, write) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are ordinary files
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | Path, payload) -> Path:
    from ldpfed.cli.common import dumps

    def write(temporary):
        Path(temporary).write_text(dumps(payload) + "\n")

    return _atomic_write(Path(path), write)


def write_table(path: str | Path, frame: pd.DataFrame) -> Path:
    """CSV or Parquet by suffix."""
    path = Path(path)
    if path.suffix == ".parquet":
        return _atomic_write(path, lambda temporary: frame.to_parquet(temporary, index=False))
    return _atomic_write(path, lambda temporary: frame.to_csv(temporary, index=False))


def save_figure(path: str | Path, figure) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    def write(temporary):
        figure.savefig(temporary, format="png", dpi=120, bbox_inches="tight")

    try:
        return _atomic_write(Path(path), write)
    finally:
        plt.close(figure)


def write_text(path: str | Path, text: str) -> Path:
    return _atomic_write(Path(path), lambda temporary: Path(temporary).write_text(text))


__all__ = ["save_figure", "write_json", "write_table", "write_text"]

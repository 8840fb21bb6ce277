"""Data for experiments: the thesis' synthetic tuples, user files, and federated data sets.

`read_tuples(spec, ...)` is the one entry point for mean estimation (`load_tuples` returns only
its values): SPEC is the name of a synthetic set (`available_synthetic()`) or a path to a
.csv/.npy/.parquet file; the result says in one line what was read.
"""

from ldpfed.data.synthetic import (
    DEFAULT_DIMS,
    DEFAULT_SET,
    DEFAULT_USERS,
    SYNTHETIC_SETS,
    available_synthetic,
    generate,
)
from ldpfed.data.tabular import (
    Tuples,
    has_header_row,
    load_table,
    load_tuples,
    read_table,
    read_tuples,
    scale_note,
)

__all__ = [
    "DEFAULT_DIMS",
    "DEFAULT_SET",
    "DEFAULT_USERS",
    "SYNTHETIC_SETS",
    "Tuples",
    "available_synthetic",
    "generate",
    "has_header_row",
    "load_table",
    "load_tuples",
    "read_table",
    "read_tuples",
    "scale_note",
]

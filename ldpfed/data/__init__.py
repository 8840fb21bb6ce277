"""Data for experiments: the thesis' synthetic tuples, user files, and federated data sets.

`load_tuples(spec, ...)` is the one entry point for mean estimation: SPEC is the name of a
synthetic set (`available_synthetic()`) or a path to a .csv/.npy/.parquet file.
"""

from ldpfed.data.synthetic import SYNTHETIC_SETS, available_synthetic, generate
from ldpfed.data.tabular import load_table, load_tuples

__all__ = ["SYNTHETIC_SETS", "available_synthetic", "generate", "load_table", "load_tuples"]

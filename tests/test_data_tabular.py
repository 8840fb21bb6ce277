"""Reading a tuple file (ldpfed.data.tabular): values in the default domain [-1, 1] are used as
stored, bit for bit (no mapping pass: mapping (t + 1) - 1 rounded small values); pandas' column
names are a header above real values, named as a possible header above integers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ldpfed.data.tabular import read_table
from ldpfed.validation import LDPValueError


def test_values_in_the_default_domain_are_read_unchanged(tmp_path):
    values = np.array([[1e-20, -0.3], [0.1, 1.0], [-1.0, 2.0**-60]])
    np.save(tmp_path / "data.npy", values)
    np.testing.assert_array_equal(read_table(tmp_path / "data.npy").values, values)
    # a declared domain is still mapped onto [-1, 1]
    mapped = read_table(tmp_path / "data.npy", (-2.0, 2.0)).values
    np.testing.assert_allclose(mapped, values / 2.0, rtol=0, atol=1e-16)


def test_pandas_column_names_above_real_values_are_a_header_not_a_user(tmp_path):
    """`DataFrame.to_csv(index=False)` writes 0,1,2 above the values: skipped, not read as a user
    (which, out of the domain, drew an error suggesting --domain or clipping: a fake user)."""
    values = np.random.default_rng(0).uniform(-1, 1, (20, 3))
    pd.DataFrame(values).to_csv(tmp_path / "real.csv", index=False)
    read = read_table(tmp_path / "real.csv")
    np.testing.assert_allclose(read.values, values, rtol=1e-15)
    assert "pandas' column names" in read.description
    assert read_table(tmp_path / "real.csv", header=False, out_of_domain="clip").values.shape == (21, 3)


def test_pandas_column_names_above_integer_values_stay_data_and_the_header_option_is_named(tmp_path):
    integers = np.random.default_rng(0).integers(0, 2, (20, 2))
    pd.DataFrame(integers).to_csv(tmp_path / "binary.csv", index=False)
    read = read_table(tmp_path / "binary.csv")  # 0,1 is also a valid user here: kept, and said
    assert read.values.shape == (21, 2) and "--header skips it" in read.description
    assert read_table(tmp_path / "binary.csv", header=True).values.shape == (20, 2)
    pd.DataFrame(integers + 3).to_csv(tmp_path / "counts.csv", index=False)
    with pytest.raises(LDPValueError, match="--domain.*pandas' column names: --header skips it"):
        read_table(tmp_path / "counts.csv")

"""Reading a tuple file (ldpfed.data.tabular): values in the default domain [-1, 1] are used as
stored, bit for bit (no mapping pass: mapping (t + 1) - 1 rounded small values)."""

from __future__ import annotations

import numpy as np

from ldpfed.data.tabular import read_table


def test_values_in_the_default_domain_are_read_unchanged(tmp_path):
    values = np.array([[1e-20, -0.3], [0.1, 1.0], [-1.0, 2.0**-60]])
    np.save(tmp_path / "data.npy", values)
    np.testing.assert_array_equal(read_table(tmp_path / "data.npy").values, values)
    # a declared domain is still mapped onto [-1, 1]
    mapped = read_table(tmp_path / "data.npy", (-2.0, 2.0)).values
    np.testing.assert_allclose(mapped, values / 2.0, rtol=0, atol=1e-16)

"""The data pass's last step per strip (moments._finish_columns, compiled, and _numpy_finish): the
power means and S_j^2 formed from each strip's sums in place. Both implementations must give, bit
for bit, what the formula gives on the row-order sums in plain Python floats:
mean = s1 / n and S_j^2 = max(s2 - (n mean) mean, 0) / (n - 1), 0 for a single user."""

from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

import ldpfed.analysis.moments as moments_module
from ldpfed.analysis import ColumnMoments
from ldpfed.validation import LDPValueError


@pytest.fixture(params=["numpy", "compiled"], autouse=True)
def implementation(request, monkeypatch):
    monkeypatch.setattr(moments_module, "_COMPILED_MINIMUM", 0 if request.param == "compiled" else 1 << 62)
    return request.param


def expected_variance(column: list[float]) -> float:
    users = float(len(column))
    s1 = functools.reduce(operator.add, column, 0.0)
    s2 = functools.reduce(operator.add, (t * t for t in column), 0.0)
    mean = s1 / users
    spread = s2 - users * mean * mean
    spread = 0.0 if spread < 0.0 else spread
    return spread / (users - 1.0) if users > 1.0 else 0.0


@pytest.mark.parametrize("users", [1, 2, 37])
def test_variance_is_the_formula_on_the_row_order_sums_bit_for_bit(users):
    values = np.random.default_rng(21).uniform(-1, 1, size=(users, 11))
    values[:, 3] = 0.3  # a constant column: the spread rounds to about 0 and is clamped at 0, never negative
    moments = ColumnMoments.from_array(values, width=4, block=24, workers=2)
    expected = [expected_variance(column) for column in values.T.tolist()]
    np.testing.assert_array_equal(moments.variance, expected)
    assert np.all(moments.variance >= 0.0)
    if users == 1:
        assert np.all(moments.variance == 0.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1.5, -1.0 - 2**-40])
def test_a_value_out_of_domain_in_any_strip_is_refused(bad):
    """The domain check now runs per strip with the finishing step: a bad value in the last strip
    (or a NaN, which the extremes alone would miss) still raises the validation's error."""
    values = np.random.default_rng(22).uniform(-1, 1, size=(9, 10))
    values[8, 9] = bad
    with pytest.raises(LDPValueError):
        ColumnMoments.from_array(values, width=4, workers=1)

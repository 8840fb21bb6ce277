"""The data pass of the predictor (ColumnMoments.from_array) on several threads:
column strips go to a thread pool, each strip's sums are written to its own columns in the serial
order, so the moments are the serial ones bit for bit, and NaN/inf/out-of-domain values are still
refused whichever thread meets them. Every test runs on both implementations of a strip (numpy
below _COMPILED_MINIMUM values, the compiled kernel from it on), which must agree bit for bit."""

from __future__ import annotations

import functools
import math
import operator

import numpy as np
import pytest

import ldpfed.analysis.moments as moments_module
from ldpfed.analysis import ColumnMoments
from ldpfed.validation import LDPValueError

FIELDS = ("mean", "mean_sq", "variance", "mean_fourth", "minimum", "maximum")
SMALL_TILES = {"block": 24, "width": 4}  # strips of 4 columns, tiles of 6 rows: 6 strips below, partial tiles both ways


@pytest.fixture(params=["numpy", "compiled"], autouse=True)
def implementation(request, monkeypatch):
    """Runs a test on the numpy strips (small data) and on the compiled kernel (large data)."""
    monkeypatch.setattr(moments_module, "_COMPILED_MINIMUM", 0 if request.param == "compiled" else 1 << 62)
    return request.param


@pytest.fixture
def pools(monkeypatch):
    """Records the thread pools the pass opens (their sizes), so a test can tell the pass was threaded."""
    sizes = []

    class RecordingPool(moments_module.ThreadPoolExecutor):
        def __init__(self, max_workers=None, *args, **kwargs):
            sizes.append(max_workers)
            super().__init__(max_workers, *args, **kwargs)

    monkeypatch.setattr(moments_module, "ThreadPoolExecutor", RecordingPool)
    return sizes


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("workers", [2, 3, 7])
def test_threaded_pass_equals_the_serial_pass_bit_for_bit(pools, workers, dtype):
    values = np.random.default_rng(11).uniform(-1, 1, size=(41, 23)).astype(dtype)
    serial = ColumnMoments.from_array(values, ranges=True, workers=1, **SMALL_TILES)
    threaded = ColumnMoments.from_array(values, ranges=True, workers=workers, **SMALL_TILES)
    assert pools == [min(workers, 6)]  # one pool, never more threads than strips; none for workers=1
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(threaded, name), getattr(serial, name), err_msg=name)
    wide = values.astype(float)  # and both agree with plain numpy
    np.testing.assert_allclose(threaded.mean, wide.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(threaded.mean_fourth, np.mean(wide**4, axis=0), rtol=1e-13)
    np.testing.assert_allclose(threaded.variance, wide.var(axis=0, ddof=1), rtol=1e-12)


@pytest.mark.parametrize("row", [1, 40])  # in a group of four rows, and the last (partial) row tile
@pytest.mark.parametrize("column", [0, 13, 22])  # the first, a middle and the last (partial) strip
@pytest.mark.parametrize(
    "bad, message",
    [
        (np.nan, "NaN"),
        (-np.inf, "NaN or inf"),
        (np.inf, "NaN or inf"),
        (1.0 + 1e-12, r"\[-1.0, 1.0\]"),
        (-1e200, r"\[-1.0, 1.0\]"),  # t^4 overflows to inf: still the domain message, not "NaN or inf"
    ],
)
def test_threaded_pass_still_refuses_bad_values_in_any_strip(pools, row, column, bad, message):
    values = np.random.default_rng(12).uniform(-1, 1, size=(41, 23))
    values[row, column] = bad
    with pytest.raises(LDPValueError, match=message):
        ColumnMoments.from_array(values, workers=3, **SMALL_TILES)
    assert pools == [3]


def test_default_threads_only_for_large_data(pools, monkeypatch):
    values = np.random.default_rng(13).uniform(-1, 1, size=(41, 23))
    ColumnMoments.from_array(values, **SMALL_TILES)
    assert pools == []  # 943 values: starting threads would cost more than the pass
    monkeypatch.setattr(moments_module, "_PARALLEL_MINIMUM", 1)
    monkeypatch.setattr(moments_module, "usable_cores", lambda: 2)
    ColumnMoments.from_array(values, **SMALL_TILES)
    assert pools == [2]


def test_workers_must_be_a_positive_integer():
    with pytest.raises(LDPValueError, match="workers"):
        ColumnMoments.from_array(np.zeros((3, 3)), workers=0)


def sequential_sum(terms) -> float:
    """The contract's sum: Python floats (IEEE double) added left to right (not builtin sum, which
    compensates since Python 3.12)."""
    return functools.reduce(operator.add, (float(term) for term in terms), 0.0)


LAYOUTS = {
    "C float64": lambda v: v,
    "F order": np.asfortranarray,
    "float32": lambda v: v.astype(np.float32),
    "read-only": lambda v: np.lib.stride_tricks.as_strided(v, writeable=False),
    "strided view": lambda v: np.repeat(v, 2, axis=1)[:, ::2],
    "int8": lambda v: np.sign(v).astype(np.int8),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_moments_are_the_row_order_sums_bit_for_bit(layout, monkeypatch):
    """The accuracy contract (from_array): each power sum is the float64 sum in row order, on any
    array layout or dtype (converted tiles included), whichever implementation: checked against
    plain Python additions, bit for bit. 43 rows: groups of eight plus a remainder; converted tiles
    of 3 columns in strips of 4."""
    monkeypatch.setattr(moments_module, "_TILE_WIDTH", 3)
    values = LAYOUTS[layout](np.random.default_rng(14).uniform(-1, 1, size=(43, 9)))
    moments = ColumnMoments.from_array(values, ranges=True, **SMALL_TILES)
    columns = np.asarray(values, dtype=float).T.tolist()
    users = len(columns[0])
    expected = {
        "mean": [sequential_sum(c) / users for c in columns],
        "mean_sq": [sequential_sum(t * t for t in c) / users for c in columns],
        "mean_fourth": [sequential_sum((t * t) * (t * t) for t in c) / users for c in columns],
        "minimum": [min(c) for c in columns],
        "maximum": [max(c) for c in columns],
    }
    for name, column_values in expected.items():
        np.testing.assert_array_equal(getattr(moments, name), column_values, err_msg=name)


def test_power_sums_are_within_the_documented_rounding_bound_of_the_exact_sums():
    """|computed - exact| <= (n - 1) u sum_i |s_i| (Higham 2002, eq. 4.4) for each power sum,
    against math.fsum (the correctly rounded exact sum of the same terms) on columns built to
    cancel: large values of alternating sign with small ones between them."""
    rng = np.random.default_rng(15)
    users = 1001
    values = rng.uniform(-1, 1, size=(users, 6)) * np.array([1.0, 1e-3, 1e-8, 1.0, 1.0, 1.0])
    values[::2, 3:] = np.array([1.0, -1.0 + 2**-30, 0.5])  # half the rows cancel to nothing
    values[1::4, 3:] *= -1.0
    moments = ColumnMoments.from_array(values, workers=2, width=2)
    unit_roundoff = 2.0**-53
    for name, power in (("mean", 1), ("mean_sq", 2), ("mean_fourth", 4)):
        terms = values if power == 1 else values**2 if power == 2 else (values**2) ** 2
        exact = np.array([math.fsum(column) for column in terms.T])
        bound = (users - 1) * unit_roundoff * np.abs(terms).sum(axis=0) + np.spacing(np.abs(exact))
        error = np.abs(getattr(moments, name) * users - exact)
        assert np.all(error <= bound), (name, error, bound)
    sequential = np.array([sequential_sum(column) for column in values.T])
    assert np.any(sequential != [math.fsum(column) for column in values.T])  # the bound is not vacuous here


def test_small_data_never_loads_the_compiled_kernel(monkeypatch, implementation):
    """Below _COMPILED_MINIMUM values the pass stays in numpy: no numba import, no compile (the
    CLI's default data set, 10,000 x 10, pays neither); from it on the kernel is used."""
    loads = []
    kernel = moments_module._compiled_kernel
    monkeypatch.setattr(moments_module, "_compiled_kernel", lambda: loads.append(1) or kernel())
    monkeypatch.setattr(moments_module, "_COMPILED_MINIMUM", 1 << 20)  # the shipped threshold
    values = np.random.default_rng(16).uniform(-1, 1, size=(10_000, 10))
    small = ColumnMoments.from_array(values)
    assert loads == []
    monkeypatch.setattr(moments_module, "_COMPILED_MINIMUM", values.size)
    large = ColumnMoments.from_array(values)
    assert loads == [1]
    for name in FIELDS[:4]:
        np.testing.assert_array_equal(getattr(large, name), getattr(small, name), err_msg=name)

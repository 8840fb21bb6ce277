"""The data pass of the predictor (ColumnMoments.from_array) on several threads (issue 11 item 9):
column strips go to a thread pool, each strip's sums are written to its own columns in the serial
order, so the moments are the serial ones bit for bit, and NaN/inf/out-of-domain values are still
refused whichever thread meets them."""

from __future__ import annotations

import numpy as np
import pytest

import ldpfed.analysis.moments as moments_module
from ldpfed.analysis import ColumnMoments
from ldpfed.validation import LDPValueError

FIELDS = ("mean", "mean_sq", "variance", "mean_fourth", "minimum", "maximum")
SMALL_TILES = {"block": 24, "width": 4}  # strips of 4 columns, tiles of 6 rows: 6 strips below, partial tiles both ways


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


@pytest.mark.parametrize("column", [0, 13, 22])  # the first, a middle and the last (partial) strip
@pytest.mark.parametrize("bad, message", [(np.nan, "NaN"), (-np.inf, "NaN or inf"), (1.0 + 1e-12, r"\[-1.0, 1.0\]")])
def test_threaded_pass_still_refuses_bad_values_in_any_strip(pools, column, bad, message):
    values = np.random.default_rng(12).uniform(-1, 1, size=(41, 23))
    values[40, column] = bad  # the last (partial) row tile
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

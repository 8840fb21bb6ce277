"""Categorical data for frequency estimation: CSV, synthetic laws, fair."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ldpfed.data.categorical import (
    FAIR_COLUMNS,
    category_law,
    parse_categories,
    read_categorical,
    synthetic_categorical,
)
from ldpfed.validation import LDPValueError


def _csv(tmp_path, text: str, name: str = "c.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_csv_labels_are_inferred_sorted_with_header(tmp_path):
    data = read_categorical(_csv(tmp_path, "colour,size\nred,L\nblue,S\nred,M\ngreen,S\n"))
    assert data.names == ("colour", "size")
    assert data.labels == (("blue", "green", "red"), ("L", "M", "S"))
    np.testing.assert_array_equal(data.codes, [[2, 0], [0, 2], [2, 1], [1, 2]])
    np.testing.assert_allclose(data.frequencies(), [0.25, 0.25, 0.5, 0.25, 0.25, 0.5])


def test_csv_integers_sort_numerically_and_accept_given_counts(tmp_path):
    path = _csv(tmp_path, "10,0\n2,1\n10,1\n")
    inferred = read_categorical(path)
    assert inferred.labels[0] == ("2", "10")  # numeric order, not "10" < "2"
    given = read_categorical(path, categories="11,3")
    assert given.categories.tolist() == [11, 3]
    np.testing.assert_array_equal(given.codes[:, 0], [10, 2, 10])


def test_categories_option_forms():
    assert parse_categories("3", 2) == [("0", "1", "2")] * 2
    assert parse_categories("a,b;x,y,z", 2) == [("a", "b"), ("x", "y", "z")]
    assert parse_categories("a,b", 3) == [("a", "b")] * 3
    with pytest.raises(LDPValueError, match="2 attribute"):
        parse_categories("a,b;c,d", 3)
    with pytest.raises(LDPValueError, match="at least 2 distinct"):
        parse_categories("a,a;c,d", 2)


@pytest.mark.parametrize(
    ("text", "categories", "message"),
    [
        ("a,b\nc,\n", None, "empty or NaN"),
        ("1,2\nnan,1\n", None, "empty or NaN"),
        ("a\nb\nq\n", "a,b", "outside its categories"),
        ("5\n1\n", "3", "outside its categories"),
        ("", None, "no data rows"),
        ("name\n", None, "no data rows"),
        ("a,b\nc\n", None, "every row"),
        ("a\na\n", None, "at least 2 categories"),
    ],
)
def test_bad_csv_is_one_clear_error(tmp_path, text, categories, message):
    with pytest.raises(LDPValueError, match=message):
        read_categorical(_csv(tmp_path, text), categories=categories, header=False if text != "name\n" else True)


def test_unknown_spec_and_missing_file(tmp_path):
    with pytest.raises(LDPValueError, match="unknown categorical data"):
        read_categorical("mystery")
    with pytest.raises(LDPValueError, match="no such file"):
        read_categorical(str(tmp_path / "none.csv"))
    with pytest.raises(LDPValueError, match="zipf:S"):
        read_categorical("zipf:x", rng=np.random.default_rng(0))


@pytest.mark.parametrize("law", ["zipf", "uniform"])
def test_synthetic_law_frequencies_match_within_multinomial_error(law):
    users, counts = 20_000, np.array([3, 7, 12])
    codes = synthetic_categorical(law, users, 3, counts, np.random.default_rng(5))
    for j, k in enumerate(counts):
        p = category_law(law, int(k))
        observed = np.bincount(codes[:, j], minlength=k) / users
        assert observed.shape == (k,)
        z = (observed - p) / np.sqrt(p * (1 - p) / users)
        assert np.max(np.abs(z)) < 4.5  # 22 cells, each ~N(0, 1)


def test_zipf_exponent_and_defaults():
    data = read_categorical("zipf:2", rng=np.random.default_rng(0))
    assert data.users == 10_000 and data.attributes == 4 and data.categories.tolist() == [10] * 4
    p = category_law("zipf", 10, 2.0)
    assert p[0] / p[1] == pytest.approx(4.0)
    assert "S = 2" in data.description


def test_fair_data_set_shape_and_citation():
    data = read_categorical("fair")
    assert data.codes.shape == (6366, len(FAIR_COLUMNS))
    assert data.categories.tolist() == [5, 6, 7, 6, 4, 6, 6, 6]
    assert "Fair" in data.description and "1978" in data.description
    with pytest.raises(LDPValueError, match="users=10"):
        read_categorical("fair", users=10)


def test_fair_without_statsmodels_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "statsmodels.datasets", None)  # import fails as if not installed
    with pytest.raises(LDPValueError, match=r"pip install 'ldpfed\[categorical\]'"):
        read_categorical("fair")

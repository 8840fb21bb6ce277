"""metrics.csv without pandas (ldpfed.outputs.records_csv): the same text as
pandas.DataFrame(rows).to_csv(index=False), the reference, on the kinds of values a run's rows hold
and on random mixtures of them; a value it does not know gives None (the caller uses pandas)."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from ldpfed.outputs import records_csv

TABLES = {
    "a round's row": [
        {"round": 1, "clients_failed": 0, "failure_reasons": "", "mse": 0.16704495926704407, "seconds": 1e-05},
        {"round": 2, "clients_failed": 3, "failure_reasons": "timeout, node 2", "mse": 2.0, "seconds": 1e16},
    ],
    "a key missing in a row (ints become floats)": [{"round": 1, "loss": 0.5}, {"round": 2, "extra": 7}],
    "NaN, None, inf and -0.0": [{"loss": float("nan"), "x": None, "y": float("inf"), "z": -0.0}, {"loss": 1.0}],
    "bools, alone and with missing values": [{"private": True, "b": False}, {"private": False}],
    "numbers mixed with text or bools": [{"v": 1, "w": True}, {"v": 'a"b', "w": 2.5}, {"v": 3.0, "w": 4}],
    "numpy scalars": [{"i": np.int64(3), "f": np.float64(0.1), "b": np.bool_(True)}],
}


@pytest.mark.parametrize("name", TABLES)
def test_rows_render_as_pandas_renders_them(name):
    rows = TABLES[name]
    assert records_csv(rows) == pd.DataFrame(rows).to_csv(index=False)


def test_random_mixtures_render_as_pandas_renders_them():
    """300 random tables: columns drawing from one or two kinds, keys missing at random."""
    rng = random.Random(5)

    def draw(kind: int):
        return [None, float("nan"), rng.random() < 0.5, rng.randrange(-(10**6), 10**6),
                rng.random() * 10 ** rng.randrange(-12, 20), float("-inf"), -0.0, "a,b", 'q"x\nz', "",
                np.int64(rng.randrange(99)), np.float64(rng.random())][kind]  # fmt: skip

    for _ in range(300):
        kinds = [[rng.randrange(12) for _ in range(rng.randrange(1, 3))] for _ in range(rng.randrange(1, 5))]
        rows = [
            {f"c{c}": draw(rng.choice(k)) for c, k in enumerate(kinds) if rng.random() > 0.15}
            for _ in range(rng.randrange(1, 5))
        ]
        if not any(rows):
            continue
        assert records_csv(rows) == pd.DataFrame(rows).to_csv(index=False), rows


@pytest.mark.parametrize("value", [np.float32(0.1), [1, 2], {"a": 1}, 2**70])
def test_other_values_are_left_to_pandas(value):
    assert records_csv([{"a": 1, "b": value}]) is None

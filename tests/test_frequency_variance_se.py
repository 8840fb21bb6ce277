"""The standard error of the frequency-variance grid (scripts/frequency_variance.py): the SE of a mean
of squared errors from their fourth moment, the chance of the z-scores beyond 3, and the recheck of
the cells beyond it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import poisson

from scripts.frequency_variance import (
    RECHECK_FACTOR,
    grid_cells,
    measure,
    not_run_lines,
    poisson_tail,
    recheck,
    standard_error,
)


def test_standard_error_of_heavy_tailed_errors_uses_their_kurtosis():
    """400 batches of m = 256 Laplace errors (V = 2, kurtosis 6): z = (mean e^2 - V) / SE has sd ~1
    with the measured kurtosis (the sample kurtosis of 256 values runs a little low: sd 1 + O(m^-1/2);
    the sd of 400 z-scores has SE ~0.04, so |sd - 1| < 0.15 is > 3 SE); normal theory's
    SE = V sqrt(2/m) gives sd sqrt((6 - 1)/2) = 1.58."""
    errors = np.random.default_rng(5).laplace(0.0, 1.0, size=(400, 256))
    squared = (errors**2).mean(axis=1)
    kurtosis = (errors**4).mean(axis=1) / squared**2
    z = (squared - 2.0) / np.array([standard_error(2.0, k, 256, 1.0) for k in kurtosis])
    assert abs(np.std(z) - 1.0) < 0.15
    normal_theory = (squared - 2.0) / standard_error(2.0, 3.0, 256, 1.0)
    assert np.std(normal_theory) > 1.35
    assert standard_error(2.0, 3.0, 256, 1.0) == pytest.approx(2.0 * math.sqrt(2 / 256))  # Gaussian: normal theory


def test_measure_records_each_half_kurtosis_and_its_z():
    """GRR's errors are sums of 2,000 users: kurtosis near 3 (the sample kurtosis of m = 32 values,
    SE ~ sqrt(24/32) ~ 0.9: within 3 of it), and the z-score uses that kurtosis."""
    row = measure("grr", 2.0, 8, 2000, 8, seed=1)
    for label in ("empty", "populated"):
        assert abs(row[f"{label}_kurtosis"] - 3.0) < 2.6
        se = standard_error(row[f"{label}_expected"], row[f"{label}_kurtosis"], 32, 1 + 1 / 7)
        assert row[f"{label}_z"] == pytest.approx((row[f"{label}_measured"] - row[f"{label}_expected"]) / se)


def test_chance_of_that_many_z_scores_beyond_the_limit_is_the_poisson_tail():
    assert poisson_tail(4, 1.07) == pytest.approx(poisson.sf(3, 1.07), rel=1e-12)
    assert poisson_tail(0, 1.07) == pytest.approx(1.0)


def test_recheck_reruns_only_flagged_cells_from_an_independent_seed_with_more_repetitions():
    """A cell marked beyond 3 is measured again from another seed with RECHECK_FACTOR times its
    repetitions, and its grid z rescored with the SE from its own errors' kurtosis (the grid's seed:
    the same errors); an unflagged cell, or one already rechecked, is not rerun."""
    rows = [measure("grr", 2.0, d, 2000, 2, seed=3) | {"seconds": 0.0} for d in (8, 16)]
    table = pd.DataFrame(rows).drop(columns=["empty_kurtosis", "populated_kurtosis"])
    table.loc[0, "empty_z"] = 5.0  # as if flagged
    rechecked = recheck(table, 2000, 3, log=lambda line: None)
    assert len(rechecked) == 1 and rechecked.repetitions.iloc[0] == 2 * RECHECK_FACTOR
    assert rechecked.d.iloc[0] == 8 and rechecked.grid_empty_z.iloc[0] == 5.0
    assert rechecked.grid_empty_kurtosis_z.iloc[0] == pytest.approx(rows[0]["empty_z"])  # same seed, same errors
    assert rechecked.empty_z.iloc[0] != pytest.approx(rows[0]["empty_z"])  # an independent seed
    kept = recheck(table, 2000, 3, done=rechecked, log=lambda line: None)
    assert kept.equals(rechecked)


def test_the_page_names_the_grid_cells_not_run():
    table = pd.DataFrame({"oracle": ["cms"] * 2, "epsilon": [4.0, 0.5], "d": [16384, 1024]})
    (line, _) = not_run_lines(table)
    assert line.count("eps ") == len(grid_cells()) - 2 and "eps 4, d 4;" in line and "d 16384" not in line
    assert (
        not_run_lines(
            pd.DataFrame(
                {"oracle": ["grr"] * 22, "epsilon": [c[0] for c in grid_cells()], "d": [c[1] for c in grid_cells()]}
            )
        )
        == []
    )

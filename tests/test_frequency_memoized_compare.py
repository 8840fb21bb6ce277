"""compare --task frequency with a memoized (longitudinal) oracle: the T-round prediction keeps the
permanent randomization's share (`FrequencyPrediction.mse_of_average`), and every study draws its own
memo (`ldpfed.experiments.frequency`), so that the spread over studies is the error of a study."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ldpfed.analysis.frequency import predict_frequency
from ldpfed.data.categorical import CategoricalData
from ldpfed.experiments.frequency import run_frequency_plan
from ldpfed.experiments.plan import ExperimentPlan
from ldpfed.frequency.categorical import AttributeOracles


def _table(users: int, categories: tuple[int, ...], seed: int = 3) -> CategoricalData:
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, k, size=users) for k in categories])
    labels = tuple(tuple(f"c{i}" for i in range(k)) for k in categories)
    names = tuple(f"a{j}" for j in range(len(categories)))
    return CategoricalData(codes, labels, names, "test", "uniform test table")


def test_memoized_prediction_of_the_average_is_the_closed_form_not_one_round_over_t():
    """m = d: the T-round MSE of L-GRR is the mean of its exact `variance_of_average` (the estimate is
    unbiased), well above Var(one round) / T (the permanent report does not average away)."""
    table = _table(3000, (4,))
    oracles = AttributeOracles.build("l-grr", 2.0, table.categories)
    prediction = predict_frequency(oracles, table.frequencies(), table.users)
    closed = float(np.mean(oracles.oracles[0].variance_of_average(table.frequencies(), table.users, 8)))
    assert prediction.mse_of_average(8) == pytest.approx(closed, rel=1e-12)
    assert prediction.mse_of_average(8) > 2 * prediction.mse / 8
    assert prediction.mse_of_average(1) == pytest.approx(prediction.mse, rel=1e-12)


def test_a_permanent_report_repeated_every_round_gains_nothing_from_averaging_even_when_sampling():
    """dBitFlipPM repeats its permanent report: the average of T rounds is one round, whatever T, also
    when each user reports m = 1 of 2 attributes (the same attribute every round: memoized)."""
    table = _table(2000, (5, 3))
    oracles = AttributeOracles.build("dbitflippm", 2.0, table.categories, report_dims=1)
    prediction = predict_frequency(oracles, table.frequencies(), table.users)
    assert prediction.mse_of_average(10) == pytest.approx(prediction.mse, rel=1e-12)


def _plan(repeats: int, rounds: int, epsilon: float = 2.0, seed: int = 11) -> ExperimentPlan:
    return ExperimentPlan.build("frequency", [epsilon], ["mean"], repeats=repeats, study_rounds=rounds, seed=seed)


def test_each_study_draws_its_own_memo():
    """dBitFlipPM's rounds repeat the memo exactly: within a study the repetitions' errors are equal,
    two studies' differ (one memo for all repetitions made every error the same)."""
    result = run_frequency_plan(_table(500, (6,)), ["dbitflippm"], _plan(repeats=6, rounds=2))
    mse = result.runs.sort_values("repeat")["mse"].to_numpy()
    assert mse[0] == mse[1] and mse[2] == mse[3] and mse[4] == mse[5]
    assert len({mse[0], mse[2], mse[4]}) == 3


def test_measured_study_error_of_a_memoized_oracle_matches_its_prediction():
    """L-GRR (eps_inf 1, k = 4, n = 1,000), 60 studies of T = 8 rounds: the mean study error is within
    4 of its standard errors (the SE of a mean of 60 independent study errors, measured: ~10% of it)
    of `predicted_mse_final` (the exact variance of the average); the one-round variance / T, 2.4 times
    smaller, is not."""
    table = _table(1000, (4,))
    result = run_frequency_plan(table, ["l-grr"], _plan(repeats=480, rounds=8, epsilon=1.0))
    row = result.summary.iloc[0]
    assert row["studies"] == 60
    assert abs(row["mse_final"] - row["predicted_mse_final"]) <= 4 * row["mse_final_se"]
    one_round_over_t = row["predicted_mse"] / 8
    assert abs(row["mse_final"] - one_round_over_t) > 4 * row["mse_final_se"]


def test_compare_repeats_of_a_memoized_oracle_are_independent_studies(tmp_path):
    """`ldpfed compare --task frequency -m dbitflippm`: each repetition is a study of one round with its
    own memo, so the repetitions' errors differ (dBitFlipPM adds no noise after its memo: one memo
    for all gave one error three times)."""
    from typer.testing import CliRunner

    from ldpfed.cli.main import app

    out = tmp_path / "out"
    arguments = ["compare", "--task", "frequency", "-m", "dbitflippm", "-e", "2", "--users", "300", "--dims", "1"]
    result = CliRunner().invoke(app, [*arguments, "--categories", "4", "-r", "3", "-a", "mean", "--out", str(out)])
    assert result.exit_code == 0, result.output
    runs = pd.read_csv(out / "runs.csv")
    assert runs["mse"].nunique() == 3

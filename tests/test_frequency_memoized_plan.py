"""Memoized against fresh collection at one budget over T rounds, as `plan --task frequency` and
`compare --task frequency --budget --rounds` show it: the guarantees against each observer, the
predicted MSE of the T-round average, and (compare) the measured one through the task's halves."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from ldpfed.cli.main import app
from ldpfed.data.categorical import read_categorical
from ldpfed.frequency.categorical import AttributeOracles
from ldpfed.planning.calibration import TotalBudget, calibrate_round
from ldpfed.planning.frequency import make_frequency_plan, measure_memoized_versus_fresh, memoized_versus_fresh

runner = CliRunner()


def _table(users: int = 1500):
    return read_categorical("zipf", users=users, attributes=2, categories="5", rng=np.random.default_rng(2))


def test_rows_state_each_guarantee_and_the_memoized_variance():
    """eps = 2 over T = 8: memoized rows charge 2 once (eps_1 = 1, dbitflippm 2, against one round),
    fresh rows 0.25 per round and 8 x 0.25 = 2 over all rounds; with every attribute reported, the
    memoized MSE is the mean of `variance_of_average` (no sampling term), computed here per attribute."""
    table = _table()
    rows = memoized_versus_fresh(table, 2.0, 8)
    by_oracle = {row["oracle"]: row for row in rows}
    assert [row["mse_of_average"] for row in rows] == sorted(row["mse_of_average"] for row in rows)
    for name in ("l-grr", "l-osue", "rappor"):
        assert (by_oracle[name]["epsilon_against_one_round"], by_oracle[name]["epsilon_against_all_rounds"]) == (
            pytest.approx(1.0),
            2.0,
        )
    assert by_oracle["dbitflippm"]["epsilon_against_one_round"] == 2.0
    for name in ("grr", "oue", "olh"):
        assert by_oracle[name]["epsilon_per_round"] == 0.25
        assert by_oracle[name]["epsilon_against_all_rounds"] == pytest.approx(2.0)
    oracles = AttributeOracles.build("l-grr", 2.0, table.categories)
    f = table.frequencies()
    expected = np.mean(
        [o.variance_of_average(f[a:b], table.users, 8) for o, a, b in zip(oracles.oracles, [0, 5], [5, 10])]
    )
    assert by_oracle["l-grr"]["mse_of_average"] == pytest.approx(expected, rel=1e-12)


def test_measured_agrees_with_the_prediction():
    """12 studies of T = 4 rounds: each measured mean within 4 standard errors of the prediction (the
    squared error of a study is a sum over 10 entries of near-Gaussian squares: its mean over 12
    studies has the standard error measured from them; 4 SE over 7 rows keeps a false alarm rare)."""
    table = _table(800)
    rows = measure_memoized_versus_fresh(table, memoized_versus_fresh(table, 2.0, 4), 12, 3)
    for row in rows:
        assert abs(row["measured_mse_of_average"] - row["mse_of_average"]) <= 4 * row["measured_se"], row


def test_the_plan_summary_holds_the_comparison():
    plan = make_frequency_plan(_table(), TotalBudget(2.0, 0.0), 10, mechanisms=["grr"])
    rows = plan.summary()["memoized_versus_fresh"]
    assert {row["collection"] for row in rows} == {"memoized", "fresh"} and rows[0]["rounds"] == 10


def test_compare_with_a_budget_shows_memoized_against_fresh(tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", "--task", "frequency", "-m", "grr", "--budget", "2", "--rounds", "3", "--users", "400"]
    result = runner.invoke(app, [*args, "--dims", "1", "--categories", "4", "--repeats", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Memoized vs fresh" in result.output and "eps vs one round's observer" in result.output
    config = json.loads((out / "summary.json").read_text())["config"]
    rows = config["memoized_versus_fresh"]
    assert {row["oracle"] for row in rows} >= {"l-grr", "rappor", "grr"} and "measured_mse_of_average" in rows[0]


def test_plan_prints_memoized_against_fresh():
    args = ["plan", "--task", "frequency", "-m", "grr", "--budget", "2", "--rounds", "3", "--users", "400"]
    result = runner.invoke(app, [*args, "--dims", "1", "--categories", "4"])
    assert result.exit_code == 0, result.output
    assert "Memoized vs fresh" in result.output and "eps vs one round's observer" in result.output


def test_plan_takes_an_oracles_alias_as_its_name():
    args = ["plan", "--task", "frequency", "-m", "hr,krr", "--budget", "2", "--rounds", "3", "--users", "400"]
    result = runner.invoke(app, [*args, "--dims", "1", "--categories", "4", "--json"])
    assert result.exit_code == 0, result.output
    assert {row["mechanism"] for row in json.loads(result.stdout)["rows"]} == {"hadamard", "grr"}


@pytest.mark.parametrize("accountant", ["basic", "pld"])
def test_a_memoized_oracles_round_budget_is_the_total_charged_once(accountant):
    """A memoized oracle's permanent report is its eps_inf, charged once: the round's budget is the
    total however many rounds, and every accountant's spend of it is the total (not T times it)."""
    budget = calibrate_round("l-grr", TotalBudget(2.0, 0.0), 10, accountant)
    assert budget.epsilon == 2.0 and budget.delta is None and "charged once" in budget.method
    assert budget.spent[accountant].epsilon == pytest.approx(2.0, rel=1e-4)


def test_compare_with_a_budget_runs_a_memoized_oracle(tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", "--task", "frequency", "-m", "l-grr", "--budget", "2", "--rounds", "3", "--users", "400"]
    result = runner.invoke(app, [*args, "--dims", "1", "--categories", "4", "--repeats", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert {row["mechanism"] for row in rows} == {"l-grr"}
    assert all(row["epsilon"] == 2.0 and 1.999 < row["epsilon_spent"] <= 2.0 for row in rows)  # once, not 3 times

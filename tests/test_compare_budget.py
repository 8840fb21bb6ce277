"""`ldpfed compare --budget EPS[,DELTA] --rounds T [--accountant A]` (mean and frequency tasks;
docs/decisions.md, Privacy accounting: "Comparing mechanisms at one total budget"): each mechanism
runs at the per-round budget `ldpfed plan` gives it, the rows carry the plan's per-round eps, the
total spent and its predicted MSE, and the MSE of a T-round study's final estimate (the average of
its T rounds), measured from whole studies of T repetitions, beside its prediction."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ldpfed.cli.main import app
from ldpfed.experiments.plan import ExperimentPlan, study_errors
from ldpfed.planning import TotalBudget, calibrate_round
from ldpfed.planning.run import budget_groups, study_repeats
from ldpfed.validation import LDPValueError

runner = CliRunner()


def invoke(arguments: list[str]) -> list[dict]:
    result = runner.invoke(app, [*arguments, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def tuples_file(tmp_path_factory) -> str:
    """2,000 users x 4 dimensions in [-1, 1] (a file, so that compare and plan read the same data)."""
    rng = np.random.default_rng(np.random.SeedSequence(11))
    values = np.clip(rng.normal([0.3, -0.2, 0.0, 0.6], 0.3, size=(2000, 4)), -1, 1)
    path = tmp_path_factory.mktemp("data") / "tuples.npy"
    np.save(path, values)
    return str(path)


# --- the per-round settings ---------------------------------------------------------------------
def test_pure_mechanisms_share_one_per_round_budget_and_the_gaussian_has_its_own():
    groups = budget_groups(["laplace", "piecewise", "gaussian"], TotalBudget(4.0, 1e-5), 100, "pld")
    assert [g.mechanisms for g in groups] == [("laplace", "piecewise"), ("gaussian",)]
    pure, gaussian = groups
    assert pure.epsilon == calibrate_round("laplace", TotalBudget(4.0, 1e-5), 100, "pld").epsilon
    assert pure.epsilon == pytest.approx(0.0939, abs=1e-4) and pure.delta is None
    assert gaussian.delta == pytest.approx(1e-5 / 200) and gaussian.epsilon != pure.epsilon
    basic = budget_groups(["laplace", "duchi"], TotalBudget(4.0), 10, "basic")
    assert len(basic) == 1 and basic[0].epsilon == 0.4  # eps / T exactly


def test_repeats_make_whole_studies():
    assert study_repeats(None, 10, 5) == 10 and study_repeats(None, 2, 5) == 6 and study_repeats(None, 1, 5) == 5
    assert study_repeats(30, 10, 5) == 30
    with pytest.raises(LDPValueError, match="multiple of 10"):
        study_repeats(25, 10, 5)
    with pytest.raises(LDPValueError, match="not a multiple of the study.s 3 rounds"):
        ExperimentPlan.build("mean", [1.0], ["mean"], repeats=5, study_rounds=3)


def test_a_study_error_is_the_squared_error_of_the_average_of_its_rounds():
    estimates = np.array([[1.0, 0.0], [3.0, 2.0], [0.0, 0.0], [2.0, -2.0]])  # two studies of two rounds
    truth = np.array([1.0, 1.0])
    # study 1 averages to (2, 1): error (1, 0); study 2 to (1, -1): error (0, -2)
    np.testing.assert_array_equal(study_errors(estimates, truth, 2), [0.5, 2.0])


# --- the mean task --------------------------------------------------------------------------------
def test_each_row_carries_its_plan_per_round_budget_total_spent_and_predicted_mse(tuples_file):
    total = ["--budget", "4,1e-5", "--rounds", "10", "--accountant", "pld"]
    rows = invoke(["compare", "-m", "laplace,piecewise,gaussian", *total, "--data", tuples_file, "-a", "mean,hdr4me"])
    plan = invoke(["plan", "-m", "laplace,piecewise,gaussian", *total, "--data", tuples_file])
    planned = {row["mechanism"]: row for row in plan["rows"]}
    means = {row["mechanism"]: row for row in rows if row["aggregator"] == "mean"}
    assert set(means) == set(planned) and len(rows) == 6
    for name, row in means.items():
        expected = planned[name]
        assert row["epsilon"] == expected["epsilon_per_round"]  # the same calibration, exactly
        assert row["delta_per_round"] == expected["delta_per_round"]
        assert row["epsilon_spent"] == expected["total_epsilon_pld"] and 3.96 <= row["epsilon_spent"] <= 4.0
        assert (row["total_epsilon"], row["total_delta"], row["rounds"]) == (4.0, 1e-5, 10)
        assert row["predicted_mse"] == pytest.approx(expected["mse_round_mean"], rel=1e-12)
        assert row["predicted_mse_final"] == pytest.approx(expected["mse_final"], rel=1e-12)
        assert row["studies"] == 1  # default repeats: the smallest multiple of T >= 5
    assert means["laplace"]["epsilon"] == means["piecewise"]["epsilon"] != means["gaussian"]["epsilon"]
    hdr4me = [row for row in rows if row["aggregator"] == "hdr4me"]
    assert all(row["predicted_mse_final"] is None and row["mse_final"] > 0 for row in hdr4me)


def test_the_final_estimate_of_t_rounds_measures_its_prediction(tuples_file):
    """40 studies of T = 5 rounds: the mean over studies of the final estimate's MSE within 4
    standard errors of the prediction (the standard error from the studies' spread), and the
    per-round MSE within 4 standard errors of its own."""
    arguments = ["compare", "-m", "laplace,duchi", "--budget", "2", "--rounds", "5", "--accountant", "basic"]
    rows = invoke([*arguments, "--data", tuples_file, "-a", "mean", "--repeats", "200", "--seed", "3"])
    for row in rows:
        assert row["epsilon"] == 0.4 and row["studies"] == 40
        final_se = row["mse_final_std"] / np.sqrt(row["studies"])
        assert abs(row["mse_final"] - row["predicted_mse_final"]) <= 4 * final_se, row
        assert abs(row["mse"] - row["predicted_mse"]) <= 4 * row["mse_std"] / np.sqrt(200), row
        assert row["mse_final"] < row["mse"] / 3  # averaging 5 rounds divides the (unbiased) variance


def test_a_mechanism_gives_the_same_rows_alone_and_beside_others(tuples_file):
    """Common random numbers: each per-round group runs as its own plan from the same seed."""
    base = ["compare", "--budget", "4,1e-5", "--rounds", "2", "--data", tuples_file, "-a", "mean"]
    alone = invoke([*base, "-m", "laplace"])
    beside = [row for row in invoke([*base, "-m", "gaussian,laplace"]) if row["mechanism"] == "laplace"]
    assert alone == beside


def test_the_files_carry_the_budget_and_the_studies(tmp_path, tuples_file):
    out = tmp_path / "out"
    arguments = ["compare", "-m", "laplace", "--budget", "1", "--rounds", "3", "--data", tuples_file]
    result = runner.invoke(app, [*arguments, "-a", "mean", "--out", str(out)], terminal_width=250)
    assert result.exit_code == 0, result.output
    assert "total (1) per client over T = 3 rounds (pld)" in " ".join(result.stdout.split())
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs["study"]) == [0, 0, 0, 1, 1, 1]  # 6 repetitions: two studies of three rounds
    summary = pd.read_csv(out / "summary.csv")
    assert {"epsilon_spent", "mse_final", "predicted_mse_final", "studies", "accountant"} <= set(summary.columns)
    config = json.loads((out / "summary.json").read_text())["config"]
    assert config["budget"]["rounds"] == 3 and config["budget"]["studies"] == 2
    assert config["budget"]["per_round"][0]["epsilon_per_round"] == pytest.approx(1 / 3)


# --- the frequency task ---------------------------------------------------------------------------
def test_the_frequency_task_runs_the_plan_and_measures_its_final_estimate(tmp_path):
    rng = np.random.default_rng(np.random.SeedSequence(5))
    path = tmp_path / "answers.csv"
    codes = np.stack([rng.choice(4, 3000, p=[0.5, 0.3, 0.15, 0.05]), rng.choice(3, 3000)], axis=1)
    pd.DataFrame(codes, columns=["a", "b"]).to_csv(path, index=False)
    total = ["--budget", "4", "--rounds", "4", "--accountant", "basic"]
    rows = invoke(
        ["compare", "--task", "frequency", "-m", "grr,oue", *total, "--data", str(path), "-a", "mean"]
        + ["--repeats", "120", "--seed", "2"]
    )
    plan = invoke(["plan", "--task", "frequency", "-m", "grr,oue", *total, "--data", str(path)])
    planned = {row["mechanism"]: row for row in plan["rows"]}
    for row in rows:
        expected = planned[row["mechanism"]]
        assert row["epsilon"] == expected["epsilon_per_round"] == 1.0 and row["epsilon_spent"] == 4.0
        assert row["predicted_mse_final"] == pytest.approx(expected["mse_final"], rel=1e-12)
        assert row["studies"] == 30
        assert abs(row["mse_final"] - row["predicted_mse_final"]) <= 4 * row["mse_final_std"] / np.sqrt(30), row


def test_frequency_files_are_written_when_mechanisms_run_at_different_per_round_budgets(tmp_path):
    """The Gaussian's per-round eps differs from GRR's: the figures take each mechanism's own."""
    out = tmp_path / "out"
    arguments = ["compare", "--task", "frequency", "-m", "grr,gaussian", "--budget", "4,1e-5", "--rounds", "2"]
    result = runner.invoke(app, [*arguments, "--users", "300", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert {"frequencies.png", "mse_per_aggregator.png", "summary.csv"} <= {p.name for p in out.iterdir()}
    assert pd.read_csv(out / "summary.csv")["epsilon"].nunique() == 2


# --- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--budget", "4", "--rounds", "10", "--epsilons", "1"], "drop --epsilons"),
        (["--budget", "4,1e-5", "--rounds", "10", "--delta", "1e-5"], "drop --delta"),
        (["--budget", "4"], "--budget needs --rounds"),
        (["--budget", "4", "--rounds", "0"], "--rounds"),
        (["--budget", "-1", "--rounds", "10"], "finite number > 0"),
        (["--budget", "4,nan", "--rounds", "10"], "delta must be in [0, 1)"),
        (["--budget", "4,1e-5", "--rounds", "10", "--accountant", "rdp"], "rdp accountant cannot account"),
        (["--budget", "4", "--rounds", "10", "-m", "gaussian"], "give the total budget's delta"),
        (["--budget", "1e-300", "--rounds", "10"], "per round"),
        (["--budget", "4", "--rounds", "10", "--repeats", "5"], "multiple of 10"),
        (["--budget", "4", "--rounds", "10", "--accountant", "prv"], "unknown accountant"),
        (["--accountant", "pld"], "--accountant applies with --budget"),
        (["--rounds", "5"], "--rounds applies to --task train, or with --budget"),
        (["--task", "frequency", "--rounds", "5"], "--rounds applies"),
        (["--task", "frequency", "--budget", "4", "--rounds", "10", "-e", "1"], "drop --epsilons"),
        (["--task", "frequency", "--budget", "4", "--rounds", "10", "-m", "gaussian"], "delta"),
        (["--task", "train", "--budget", "4", "--rounds", "3"], "--task train"),
        (["--trust", "local,shuffle", "--budget", "4"], "compare --trust"),
    ],
)
def test_bad_budgets_are_one_line_exit_2_and_nothing_written(tmp_path, arguments, message):
    out = tmp_path / "out"
    result = runner.invoke(app, ["compare", *arguments, "--users", "300", "--dims", "2", "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("data:")]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in " ".join(lines[0].split()), result.output
    assert not out.exists()

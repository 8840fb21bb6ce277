"""`ldpfed plan` and `simulate --budget` (ldpfed.planning; docs/decisions.md, Privacy accounting:
"Planning from a total budget"): the per-round budget a total allows, checked against dp-accounting
called directly; the plan's predictions against `ldpfed predict` and Monte Carlo; a run of the plan
ends within the total for every client; bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from typer.testing import CliRunner

from ldpfed.accounting import GaussianDpEvent, create_accountant
from ldpfed.analysis import simulate_deviations
from ldpfed.analysis.predictor import load_moments
from ldpfed.cli.main import app
from ldpfed.data import load_tuples
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.planning import RELATIVE_TOLERANCE, TotalBudget, calibrate_round
from ldpfed.planning.plan import make_plan
from ldpfed.planning.train import make_train_plan
from ldpfed.tasks import planned_config, resolve
from ldpfed.training.noise_privatizer import NoisePrivatizer
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError

runner = CliRunner()


def library_pld_epsilon(epsilon: float, rounds: int, delta: float) -> float:
    """dp-accounting alone: `rounds` generic eps-DP rounds composed by its PLD, on a grid whose step
    divides eps (its default 1e-4 grid rounds eps up pessimistically: 4.0032 for the plan's figure)."""
    one = pld_lib.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(epsilon), value_discretization_interval=epsilon / 100
    )
    return float(one.self_compose(rounds).get_epsilon_for_delta(delta))


def test_basic_composition_of_ten_laplace_rounds_is_exactly_a_tenth():
    assert calibrate_round("laplace", TotalBudget(4.0), rounds=10, accountant="basic").epsilon == 0.4
    assert calibrate_round("laplace", TotalBudget(4.0, 1e-5), rounds=100, accountant="basic").epsilon == 0.04


def test_pld_allows_about_0_094_per_round_whose_100_fold_composition_is_4():
    planned = calibrate_round("laplace", TotalBudget(4.0, 1e-5), rounds=100, accountant="pld")
    assert planned.epsilon == pytest.approx(0.094, abs=5e-4)
    # dp-accounting called directly: the plan's figure composes to 4 within the stated tolerance, and
    # one larger by 10x that tolerance would not fit
    composed = library_pld_epsilon(planned.epsilon, 100, 1e-5)
    assert 4.0 * (1 - 10 * RELATIVE_TOLERANCE) <= composed <= 4.0
    assert library_pld_epsilon(planned.epsilon * (1 + 10 * RELATIVE_TOLERANCE), 100, 1e-5) > 4.0
    assert planned.spent["pld"].epsilon <= 4.0
    assert planned.spent["pld"].epsilon >= 4.0 * (1 - 10 * RELATIVE_TOLERANCE)
    assert planned.spent["basic"].epsilon == pytest.approx(100 * planned.epsilon)


@pytest.mark.parametrize("accountant", ["advanced", "pld"])
def test_the_gaussian_is_calibrated_within_the_total_epsilon_and_delta(accountant):
    planned = calibrate_round("gaussian", TotalBudget(4.0, 1e-5), rounds=50, accountant=accountant)
    spent = planned.spent[accountant]
    assert spent.epsilon <= 4.0 and spent.delta <= 1e-5
    assert spent.epsilon >= 4.0 * (1 - 1e-4)  # tight: nothing of the budget left unused
    assert 0 < planned.delta < 1e-5 / 50


def test_a_bracket_with_no_sign_change_is_resolved_or_refused_not_a_library_traceback():
    """Brent's method needs the total crossed between eps/k and eps. A tiny total whose delta covers
    every round (pld's figure is 0 at both ends) gives the round the total; an accountant whose
    figure exceeds the total even at basic's eps/k (rdp's floor for a huge noise) is refused."""
    planned = calibrate_round("laplace", TotalBudget(1e-9, 1e-5), rounds=100_000, accountant="pld")
    assert planned.epsilon == 1e-9 and planned.spent["pld"].epsilon <= 1e-9
    with pytest.raises(LDPValueError, match="the rdp accountant cannot hold 100 rounds of gaussian"):
        calibrate_round(
            "gaussian", TotalBudget(1e-3, 1e-5), 100, "rdp", event_of=lambda eps, delta: GaussianDpEvent(1 / eps)
        )


def test_a_cap_on_rounds_taken_is_what_a_client_spends():
    capped = calibrate_round("laplace", TotalBudget(4.0), rounds=100, accountant="basic", cap=10)
    assert capped.taken == 10 and capped.epsilon == 0.4


def test_the_plan_predicts_what_ldpfed_predict_predicts_at_the_per_round_epsilon():
    result = runner.invoke(
        app, ["plan", "--budget", "4,1e-5", "--rounds", "100", "--mechanism", "laplace,piecewise", "--json"]
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    best = plan["recommended"]
    predicted = runner.invoke(
        app,
        ["predict", "--mechanism", best["mechanism"], "--epsilon", repr(best["epsilon_per_round"]), "--json"],
    )
    assert predicted.exit_code == 0, predicted.output
    assert json.loads(predicted.stdout)["mse"] == pytest.approx(best["mse_round_mean"], rel=1e-12)
    assert best["epsilon_per_round"] == pytest.approx(0.094, abs=5e-4)
    assert plan["rows"][0]["mse_final"] <= plan["rows"][1]["mse_final"]  # ranked by the final error
    assert "no amplification" in plan["guarantee"]


@pytest.mark.parametrize("data", ["gaussian", "uniform", "poisson"])
def test_the_recommended_row_matches_monte_carlo_within_5_percent(data):
    """One round's MSE of the recommended row, and the MSE of the average of its T rounds, against
    the actual mechanism with m-of-d sampling; tolerance 4 standard errors of the Monte Carlo mean
    (and 5% for the per-round figure: 2,000 repetitions make 4 se about 4%)."""
    moments, _ = load_moments(data, 2000, 10, 0)
    values = load_values(data)
    plan = make_plan(moments, TotalBudget(4.0, 1e-5), 10, accountant="pld", report_dims="auto")
    best = plan.best
    mechanism = per_value_mechanism(best.budget.mechanism, best.budget.epsilon, best.report_dims, best.budget.delta)
    runs = simulate_deviations(values, mechanism, best.report_dims, 2000, seed=np.random.SeedSequence(7))
    per_rep = runs.squared_error_per_repetition()
    se = per_rep.std(ddof=1) / np.sqrt(per_rep.size)
    assert abs(per_rep.mean() - best.mse_round_mean) <= min(4 * se, 0.05 * best.mse_round_mean)
    averaged = runs.deviations.reshape(-1, 10, values.shape[1]).mean(axis=1)  # 200 studies of T = 10 rounds
    final = np.mean(averaged**2, axis=1)
    assert abs(final.mean() - best.mse_final) <= 4 * final.std(ddof=1) / np.sqrt(final.size)


def load_values(data: str) -> np.ndarray:
    return load_tuples(data, users=2000, dims=10, rng=np.random.default_rng(0))


def test_simulate_with_a_budget_ends_within_the_total_for_every_client(tmp_path):
    out = tmp_path / "run"
    arguments = ["simulate", "--engine", "local", "--task", "mean", "--users", "2000", "--budget", "4,1e-5"]
    arguments += ["--rounds", "100", "--accountant", "pld", "--noise-seed", "1", "--out", str(out)]
    result = runner.invoke(app, arguments, terminal_width=300)
    assert result.exit_code == 0, result.output
    privacy = pd.read_csv(out / "privacy.csv")
    assert len(privacy) == 10 and (privacy["rounds"] == 100).all()
    assert privacy["pld_epsilon"].between(3.96, 4.0).all()
    assert "measured MSE per round" in result.stdout and "vs predicted" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["epsilon_spent_max_per_client"] <= 4.0


@pytest.mark.parametrize(
    "arguments",
    [
        ["plan", "--budget", "4", "--rounds", "0"],
        ["plan", "--budget", "-1", "--rounds", "10"],
        ["plan", "--budget", "4,nan", "--rounds", "10"],
        ["plan", "--budget", "1e-4,1e-5", "--rounds", "1000", "--mechanism", "gaussian"],  # too small
        ["plan", "--budget", "1e-9,1e-5", "--rounds", "100000"],  # every mechanism's per-value eps too small
        ["compare", "--budget", "1e-9,1e-5", "--rounds", "100000"],
        ["plan", "--budget", "4,1e-5", "--rounds", "10", "--accountant", "rdp"],  # cannot account pure rounds
        ["plan", "--budget", "4", "--rounds", "10", "--mechanism", "gaussian"],  # no delta for an (eps, delta) one
        ["plan", "--budget", "4", "--rounds", "10", "--mechanism", "nope"],
        ["plan", "--budget", "4", "--rounds", "10", "--task", "nope"],
        ["plan", "--budget", "4", "--rounds", "10", "--categories", "3"],  # frequency only
        ["plan", "--task", "frequency", "--budget", "4", "--rounds", "10", "--mechanism", "grr", "--dims", "0"],
        ["plan", "--budget", "4", "--rounds", "10", "--participation", "0"],
        ["simulate", "--engine", "local", "--budget", "4", "--epsilon", "1"],  # contradictory
        ["simulate", "--engine", "local", "--budget", "4", "--max-epsilon", "8"],
        ["simulate", "--engine", "local", "--task", "train", "--mechanism", "plrvo", "--budget", "4,1e-5"],
        ["plan", "--budget", "4", "--rounds", "10", "--model", "mlp"],  # train only
        ["plan", "--task", "train", "--budget", "4", "--rounds", "10", "--report-dims", "2"],
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, arguments):
    out = tmp_path / "out"
    result = runner.invoke(app, [*arguments, "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("data:")]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert not out.exists()


def test_the_plan_table_names_the_mse_of_the_t_round_average_not_a_final_round():
    """simulate's final_mse is the last round's; the plan's figure is the MSE of the T rounds' average."""
    result = runner.invoke(app, ["plan", "--budget", "4,1e-5", "--rounds", "10", "--mechanism", "laplace"])
    assert result.exit_code == 0, result.output
    assert "MSE of the T-round average" in result.stdout and "MSE final" not in result.stdout


def test_plan_writes_its_files(tmp_path):
    out = tmp_path / "plan"
    result = runner.invoke(
        app, ["plan", "--budget", "4,1e-5", "--rounds", "20", "--mechanism", "laplace", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert {"plan.csv", "plan.json", "mse_vs_rounds.csv", "mse_vs_rounds.png"} <= {p.name for p in out.iterdir()}
    curve = pd.read_csv(out / "mse_vs_rounds.csv")
    basic = curve[curve["accountant"] == "basic"].set_index("rounds")["mse_final"]
    pld = curve[curve["accountant"] == "pld"].set_index("rounds")["mse_final"]
    assert (pld <= basic * (1 + 1e-9)).all() and pld[1000] < basic[1000] / 10  # the shapes differ


def test_plan_shows_its_progress_on_stderr_a_line_per_candidate_and_curve(tmp_path):
    arguments = ["plan", "--task", "frequency", "--budget", "4,1e-5", "--rounds", "20", "--mechanism", "grr,oue"]
    result = runner.invoke(app, [*arguments, "--out", str(tmp_path / "plan"), "--json"])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout holds the JSON alone
    steps = [line for line in result.stderr.splitlines() if not line.startswith("data:")]
    assert steps[0].startswith("plan: 1/2 grr m=4 (") and steps[1].startswith("plan: 2/2 oue m=4 (")
    assert len(steps) == 6
    assert all(step.startswith(f"plan: MSE against T: {i}/4 ") for i, step in enumerate(steps[2:], start=1))


# --- the frequency task ------------------------------------------------------------------------------
def test_the_frequency_plan_predicts_what_predict_frequency_predicts_at_the_per_round_epsilon():
    arguments = ["plan", "--task", "frequency", "--budget", "4,1e-5", "--rounds", "100", "--users", "20000"]
    result = runner.invoke(app, [*arguments, "--dims", "5", "--report-dims", "auto", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    best = plan["recommended"]
    assert plan["task"] == "frequency" and plan["entries"] == 50
    assert {row["mechanism"] for row in plan["rows"]} >= {"grr", "oue", "laplace", "piecewise"}
    assert best["epsilon_per_round"] == pytest.approx(0.094, abs=5e-4)  # the same rounds as the mean task's
    predicted = runner.invoke(
        app,
        ["predict", "--task", "frequency", "--mechanism", best["mechanism"]]
        + ["--epsilon", repr(best["epsilon_per_round"]), "--users", "20000", "--dims", "5"]
        + ["--report-dims", str(best["report_dims"]), "--json"],
    )
    assert predicted.exit_code == 0, predicted.output
    assert json.loads(predicted.stdout)["predictions"][0]["mse"] == pytest.approx(best["mse_round_mean"], rel=1e-12)
    assert best["mse_final"] == min(row["mse_final"] for row in plan["rows"])
    assert best["valid"] and best["berry_esseen"] < 0.1


def test_simulate_frequency_with_a_budget_measures_what_the_plan_predicts(tmp_path):
    """The run of the plan's best oracle: every client within the total, and the measured MSE per
    round within 4 standard errors of the plan's prediction (30 independent rounds)."""
    planned = runner.invoke(
        app,
        ["plan", "--task", "frequency", "--budget", "4,1e-5", "--rounds", "30", "--users", "5000", "--dims", "3"]
        + ["--report-dims", "auto", "--json"],
    )
    assert planned.exit_code == 0, planned.output
    best = json.loads(planned.stdout)["recommended"]
    out = tmp_path / "run"
    arguments = ["simulate", "--engine", "local", "--task", "frequency", "--users", "5000", "--dims", "3"]
    arguments += ["--mechanism", best["mechanism"], "--report-dims", str(best["report_dims"]), "--budget", "4,1e-5"]
    arguments += ["--rounds", "30", "--accountant", "pld", "--noise-seed", "3", "--out", str(out)]
    result = runner.invoke(app, arguments, terminal_width=300)
    assert result.exit_code == 0, result.output
    privacy = pd.read_csv(out / "privacy.csv")
    assert privacy["pld_epsilon"].between(3.96, 4.0).all()
    mse = pd.read_csv(out / "metrics.csv")["mse"].to_numpy()
    assert mse.size == 30
    assert abs(mse.mean() - best["mse_round_mean"]) <= 4 * mse.std(ddof=1) / np.sqrt(mse.size)
    summary = json.loads((out / "summary.json").read_text())
    # the run's prediction is on its own data set (drawn from the run's seed)
    assert summary["plan"]["predicted_mse_round"] == pytest.approx(best["mse_round_mean"], rel=1e-3)


# --- the train task ----------------------------------------------------------------------------------
def train_config(**flags):
    return resolve(None, {"task": "train", "clients": 20, "accountant": "rdp", "aggregator": "fedavg", **flags})


def test_the_inid_gaussian_round_meets_the_total_under_rdp_and_its_noise_is_the_round_prediction():
    config = train_config(mechanism="inid-gaussian", clip=0.05)
    plan = make_train_plan(config, TotalBudget(4.0, 1e-5), 10, mechanisms=["inid-gaussian"], dims=650)
    row = plan.best
    budget = row.budget
    assert budget.accountant == "rdp" and budget.delta == pytest.approx(1e-5 / 20)
    # the event a run records, composed 10 times by the accountant directly: the total, tight
    noise = NoisePrivatizer("inid-gaussian", epsilon=budget.epsilon, delta=budget.delta, clip=0.05).noise(650)
    spent = create_accountant("rdp").compose(noise.event(), 10).spent_within(1e-5)
    assert 4.0 * (1 - 1e-4) <= spent.epsilon <= 4.0
    assert row.noise_multiplier == pytest.approx(noise.noise_multiplier, rel=1e-12)
    # the aggregate noise of the mean of K = 20 updates: sum of the coordinate variances / K
    update = np.full(650, 0.05 / np.sqrt(650))
    assert row.aggregate_noise == pytest.approx(np.sum(noise.release_variance(update[None, :])) / 20, rel=1e-12)
    assert row.signal_to_noise == pytest.approx(0.05 / np.sqrt(row.aggregate_noise))


def test_the_scalar_rounds_noise_matches_monte_carlo():
    """Laplace per coordinate at the plan's per-round eps: the squared distance of the mean of K = 20
    privatized updates to the clipped update, over 200 rounds, within 4 standard errors."""
    config = train_config(mechanism="laplace", coordinate_clip=0.05, accountant="pld")
    plan = make_train_plan(config, TotalBudget(4.0), 10, mechanisms=["laplace"], dims=650)
    row = plan.best
    assert row.budget.epsilon == pytest.approx(0.4, rel=1e-3) and row.report_dims == 1
    privatizer = UpdatePrivatizer("laplace", row.budget.epsilon, 0.05, report_dims=row.report_dims)
    update = np.full((20, 650), 0.05)
    rngs = [np.random.default_rng(seed) for seed in np.random.SeedSequence(11).spawn(20)]
    draws = np.array([np.sum((privatizer.privatize_rows(update, rngs).mean(axis=0) - 0.05) ** 2) for _ in range(200)])
    assert abs(draws.mean() - row.aggregate_noise) <= 4 * draws.std(ddof=1) / np.sqrt(draws.size)


def test_plrvo_is_calibrated_over_the_rounds_by_its_own_accountant():
    config = train_config(mechanism="plrvo", clip=0.05)
    plan = make_train_plan(config, TotalBudget(4.0, 1e-5), 10, mechanisms=["plrvo"], dims=650)
    budget = plan.best.budget
    assert budget.accountant == "rdp" and budget.spent["pld"] is None
    assert 3.9 <= budget.spent["rdp"].epsilon <= 4.0
    assert "joint accountant" in budget.method


def test_a_train_budget_sets_the_run_per_round_settings():
    config = train_config(mechanism="inid-gaussian", clip=0.05, budget="4,1e-5", rounds=5)
    planned, budget = planned_config(config)
    assert planned.privacy.max_epsilon == 4.0 and planned.privacy.epsilon == budget.epsilon
    assert budget.spent["rdp"].epsilon <= 4.0
    with pytest.raises(LDPValueError, match="--accountant rdp"):
        planned_config(train_config(mechanism="inid-gaussian", budget="4,1e-5", accountant="pld"))


def test_a_train_plan_says_why_a_row_is_not_under_the_accountant_asked_for():
    """rdp has no curve for a scalar randomizer's generic eps-DP round: its row is pld's, and says so."""
    arguments = ["plan", "--task", "train", "--budget", "4,1e-5", "--rounds", "3", "--clients", "4"]
    result = runner.invoke(app, [*arguments, "--accountant", "rdp", "--mechanism", "laplace,gaussian"])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stdout.splitlines() if "accounted by" in line]
    assert len(notes) == 1 and notes[0].startswith("laplace: accounted by pld: the rdp accountant cannot account")


@pytest.mark.slow
def test_plan_train_then_simulate_train_with_the_budget(tmp_path):
    planned = runner.invoke(
        app,
        ["plan", "--task", "train", "--budget", "4,1e-5", "--rounds", "3", "--clients", "4", "--accountant", "rdp"]
        + ["--mechanism", "gaussian,inid-gaussian", "--json"],
    )
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert plan["task"] == "train" and {row["mechanism"] for row in plan["rows"]} == {"gaussian", "inid-gaussian"}
    assert plan["rows"][0]["signal_to_noise"] >= plan["rows"][1]["signal_to_noise"]
    out = tmp_path / "run"
    arguments = ["simulate", "--engine", "local", "--task", "train", "--clients", "4", "--rounds", "3"]
    arguments += ["--mechanism", "inid-gaussian", "--aggregator", "fedavg", "--budget", "4,1e-5"]
    arguments += ["--accountant", "rdp", "--noise-seed", "1", "--out", str(out)]
    result = runner.invoke(app, arguments, terminal_width=300)
    assert result.exit_code == 0, result.output
    privacy = pd.read_csv(out / "privacy.csv")
    assert privacy["rdp_epsilon"].between(3.96, 4.0).all()
    summary = json.loads((out / "summary.json").read_text())
    inid = next(row for row in plan["rows"] if row["mechanism"] == "inid-gaussian")
    assert summary["plan"]["epsilon_per_round"] == pytest.approx(inid["epsilon_per_round"], rel=1e-9)
    assert "aggregate noise measured / predicted" in result.stdout

"""`ldpfed simulate --max-epsilon B` (docs/decisions.md, Privacy accounting): a client whose total would exceed B
stops taking part, the round records it, and no client ends above B; a budget that cannot be held
is one clear error before any federation starts."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import run_collecting_rows
from helpers import ldpfed, ldpfed_json

from ldpfed.config import Config
from ldpfed.tasks import preflight, validated
from ldpfed.validation import LDPValueError


def config_of(**options) -> Config:
    return validated(Config().with_options({"engine": "local", **options}))


def run_rows(config: Config, out=None) -> tuple[dict, pd.DataFrame]:
    preflight(config)
    return run_collecting_rows(config)


def test_train_clients_stop_before_exceeding_the_budget(tmp_path):
    """eps = 2 per round, budget 5: every client takes part in 2 rounds (4 <= 5), then stops."""
    config = config_of(
        task="train", clients=4, rounds=4, **{"local-steps": 1, "max-epsilon": 5.0}, epsilon=2.0, out=str(tmp_path)
    )
    summary, rows = run_rows(config)
    assert rows["clients_sampled"].tolist() == [4, 4, 0, 0]
    assert rows["clients_stopped_by_budget"].tolist() == [0, 0, 4, 4]
    assert rows["stopped_partitions"].iloc[-1] == "0,1,2,3"
    assert summary["epsilon_spent_max_per_client"] == 4.0
    privacy = pd.read_csv(tmp_path / "privacy.csv")
    assert (privacy["basic_epsilon"] <= 5.0).all() and (privacy["rounds"] == 2).all()


def test_a_tighter_accountant_admits_more_rounds_under_the_same_budget():
    """Mean task, eps = 0.1 per round, budget 2: basic admits 20 rounds; pld 28 (eps 1.99 at 1e-5)."""
    options = {"task": "mean", "clients": 2, "users": 200, "dims": 2, "rounds": 30, "epsilon": 0.1, "max-epsilon": 2.0}
    _, basic = run_rows(config_of(**options))
    _, pld = run_rows(config_of(**options, accountant="pld"))
    assert (basic["clients_sampled"] == 2).sum() == 20 and (basic["clients_sampled"] == 0).sum() == 10
    assert (pld["clients_sampled"] == 2).sum() == 28
    assert pld["clients_stopped_by_budget"].iloc[-1] == 2


def test_without_a_budget_nothing_changes():
    _, rows = run_rows(config_of(task="mean", clients=2, users=200, dims=2, rounds=2))
    assert "clients_stopped_by_budget" not in rows and (rows["clients_sampled"] == 2).all()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mechanism": "none", "max-epsilon": 5.0}, "needs a private mechanism"),
        ({"max-epsilon": -1.0}, "max-epsilon"),
        ({"accountant": "prv"}, "unknown accountant"),
    ],
)
def test_bad_budget_options(options, message):
    with pytest.raises(LDPValueError, match=message):
        config_of(task="train", **options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"task": "mean", "max-epsilon": 1.0, "epsilon": 2.0}, "below one round's cost"),
        ({"task": "mean", "max-epsilon": 5.0, "accountant": "rdp"}, "rdp accountant cannot"),
        ({"task": "train", "max-epsilon": 1.0, "epsilon": 2.0}, "below one round's cost"),
    ],
)
def test_a_budget_that_cannot_hold_one_round_fails_in_preflight(options, message):
    with pytest.raises(LDPValueError, match=message):
        preflight(config_of(**options))


def test_cli_budget_error_is_one_line_and_exit_2(tmp_path):
    run = "simulate --engine local --clients 2 --users 200 --dims 2 --epsilon 2"
    result = ldpfed(run, "--rounds 2 --max-epsilon 1 --out", tmp_path / "o")
    assert result.exit_code == 2 and "below one round's cost" in " ".join(result.output.split())
    assert not (tmp_path / "o").exists()
    assert ldpfed_json(run, "--rounds 3 --max-epsilon 4")["epsilon_spent_max_per_client"] == 4.0


def test_epsilon_spent_is_reported_by_the_runs_accountant():
    """Under pld the headline stays within the budget (basic composition of the same rounds would
    read 2.8 > 2), and privacy.csv keeps every accountant's figure."""
    options = {"task": "mean", "clients": 2, "users": 200, "dims": 2, "rounds": 30, "epsilon": 0.1, "max-epsilon": 2.0}
    summary, rows = run_rows(config_of(**options, accountant="pld"))
    assert rows["epsilon_spent"].is_monotonic_increasing
    assert 1.9 < summary["epsilon_spent_max_per_client"] <= 2.0


def test_an_accountant_that_cannot_account_the_mechanism_fails_in_preflight_without_a_budget_too():
    with pytest.raises(LDPValueError, match="rdp accountant cannot"):
        preflight(config_of(task="mean", accountant="rdp"))


def test_a_budget_bounds_delta_too():
    """Gaussian (1, 1e-3) per round, basic composition, budget 8: with max-delta 0.005 clients stop
    after 5 rounds (delta 0.005; eps 5); without it (delta budget 1e-5) no round fits: an error."""
    options = {"task": "mean", "clients": 2, "users": 200, "dims": 2, "rounds": 10, "mechanism": "gaussian"}
    options.update({"epsilon": 1.0, "delta": 1e-3, "max-epsilon": 8.0})
    summary, rows = run_rows(config_of(**options, **{"max-delta": 0.005}))
    assert (rows["clients_replied"] == 2).sum() == 5 and (rows["clients_replied"] == 0).sum() == 5
    assert (
        summary["delta_spent_max_per_client"] == pytest.approx(0.005) and summary["epsilon_spent_max_per_client"] == 5
    )
    assert summary["budget"] == {"max_epsilon": 8.0, "max_delta": 0.005, "accountant": "basic"}
    with pytest.raises(LDPValueError, match="max-delta 1e-05 is below one round's delta"):
        preflight(config_of(**options))
    with pytest.raises(LDPValueError, match="max-delta is the delta of a budget"):
        config_of(task="mean", **{"max-delta": 1e-6})
    with pytest.raises(LDPValueError, match="max-delta"):
        config_of(task="mean", **{"max-epsilon": 1.0, "max-delta": 1.5})


def test_an_exhausted_budget_says_so_and_reports_the_last_round_with_reports(tmp_path):
    """The README's pld example, smaller: eps 0.5 per round, budget 8, 30 rounds: the clients stop
    after round 16 (pld at 1e-5: 16 rounds 7.98, 17 rounds 8.47); rounds 17-30 run without reports,
    the console says so, and the summary's figures are round 16's (finite), not the empty last
    round's NaN (JSON null)."""
    options = {"task": "mean", "clients": 2, "users": 200, "dims": 2, "rounds": 30, "epsilon": 0.5}
    options.update({"max-epsilon": 8.0, "accountant": "pld", "out": str(tmp_path)})
    summary, rows = run_rows(config_of(**options))
    last = int(rows.loc[rows["clients_replied"] > 0, "round"].max())
    assert last == 16 and (rows.loc[rows["round"] > last, "clients_replied"] == 0).all()
    assert summary["last_round_with_reports"] == last == summary["budget_exhausted_after_round"]
    assert rows["budget_exhausted"].tolist() == [False] * (last - 1) + [True] * (31 - last)
    assert summary["final_mse"] == rows.loc[rows["round"] == last, "mse"].item()
    assert math.isfinite(summary["final_mse"]) and summary["epsilon_spent_max_per_client"] <= 8.0
    result = ldpfed(
        "simulate --engine local --clients 2 --users 200 --dims 2 --rounds 30 --epsilon 0.5 --max-epsilon 8 "
        "--accountant pld"
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"every client's budget was spent after round {last}: rounds {last + 1}-30 had no reports" in text
    assert f"round {last}: mse" in text and "every client's budget is spent: later rounds have no reports" in text
    assert text.count("no reports: every client's budget is spent") == 30 - last

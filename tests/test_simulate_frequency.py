"""`ldpfed simulate --task frequency`: clients hold cohorts of users and run the
same client and server halves as `compare --task frequency`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import ray_released, run_collecting_rows
from typer.testing import CliRunner

from ldpfed.cli.main import app
from ldpfed.config import DEFAULT_DATA, Config
from ldpfed.data.categorical import read_categorical
from ldpfed.experiments.frequency import run_frequency_experiment
from ldpfed.protocols import seeds
from ldpfed.tasks import validated

runner = CliRunner()


def _config(**options) -> Config:
    return validated(Config().with_options({"task": "frequency", "engine": "local", **options}))


def test_simulate_frequency_with_one_client_is_compare():
    """One path: compare's per-repetition plain-mean MSE is simulate's per-round one (same seed, given
    to simulate as run seed and noise seed: compare's noise comes from the secret that seed spawns)."""
    config = _config(
        clients=1,
        users=600,
        dims=3,
        categories="4",
        rounds=3,
        seed=5,
        epsilon=1.5,
        mechanism="grr",
        report_dims=2,
        aggregator="hdr4me",
    )
    summary, rows = run_collecting_rows(config, noise_seed=config.run.seed)
    assert summary["task"] == "frequency" and summary["private"] is True
    data, privacy, run = config.data, config.privacy, config.run
    table = read_categorical(
        DEFAULT_DATA["frequency"],
        users=data.users,
        attributes=data.dims,
        categories=data.categories,
        rng=np.random.default_rng(seeds.data_seed(run.seed)),
    )
    result = run_frequency_experiment(
        table,
        [privacy.mechanism],
        [privacy.epsilon],
        aggregators=["mean", config.aggregation.aggregator],
        report_dims=privacy.report_dims,
        repeats=run.rounds,
        seed=run.seed,
    )
    runs = result.runs
    np.testing.assert_allclose(runs[runs["aggregator"] == "mean"]["mse"], rows["mse_plain_mean"], rtol=1e-12)
    np.testing.assert_allclose(runs[runs["aggregator"] == "hdr4me"]["mse"], rows["mse"], rtol=1e-12)


def test_simulate_frequency_cohorts_agree_with_the_prediction_and_account_each_round():
    """3 clients x 1,000 users, OUE at eps 1 over m = 1 of 2 attributes, 12 rounds: the measured
    plain-mean MSE is within 5 standard errors of the prediction; every client spends eps per round."""
    summary, rows = run_collecting_rows(
        _config(
            clients=3,
            users=3000,
            dims=2,
            categories="6",
            rounds=12,
            seed=2,
            epsilon=1.0,
            mechanism="oue",
            report_dims=1,
        ),
        noise_seed=1,  # a fixed noise root: a statistical check reproduces (OS entropy made it flaky)
    )
    measured, predicted = rows["mse_plain_mean"].to_numpy(), rows["predicted_mse"].to_numpy()
    assert np.allclose(predicted, predicted[0])
    assert abs(measured.mean() - predicted[0]) <= 5 * measured.std(ddof=1) / np.sqrt(measured.size)
    assert summary["epsilon_spent_max_per_client"] == pytest.approx(12.0)
    assert (rows["users_reported"] == 3000).all()


@pytest.mark.parametrize(
    "options",
    [{"mechanism": "nope"}, {"aggregator": "median"}, {"users": 2, "clients": 3}, {"dims": 2, "report_dims": 3}],
)
def test_bad_frequency_config_is_rejected(options):
    from ldpfed.validation import LDPValueError

    with pytest.raises(LDPValueError):
        _config(**options)


@pytest.mark.slow
def test_simulate_frequency_under_flower_writes_its_files(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "simulate",
            "--task",
            "frequency",
            "--data",
            "fair",
            "--clients",
            "3",
            "--rounds",
            "2",
            "--mechanism",
            "piecewise",
            "--epsilon",
            "2",
            "--report-dims",
            "2",
            "--aggregator",
            "simplex",
            "--cpus",
            "2",
            "--cpus-per-client",
            "1",
            "--seed",
            "1",
            "--noise-seed",
            "1",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert ray_released()
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["engine"], summary["task"], summary["users"], summary["dims"]) == ("flower", "frequency", 6366, 8)
    metrics = pd.read_csv(out / "metrics.csv")
    assert (metrics["clients_replied"] == 3).all() and np.isfinite(metrics["mse"]).all()
    # the same halves as the local engine: the same numbers for the same seed and noise root
    local, rows = run_collecting_rows(
        _config(
            data="fair",
            clients=3,
            rounds=2,
            mechanism="piecewise",
            epsilon=2.0,
            report_dims=2,
            aggregator="simplex",
            seed=1,
        ),
        noise_seed=1,
    )
    np.testing.assert_allclose(metrics["mse"], rows["mse"], rtol=1e-12)

"""`ldpfed simulate` under Flower (issue 5; spec: federated.md, analysis.md).

Fast tests of the option resolution and of the task logic without Flower, and four small Ray
federations (4-5 clients, 1 CPU each, at most 2 CPUs): the mean task against the CLT prediction
with a failing client and the output files (through the CLI), noise-free FedAvg reaching a stated
accuracy, and an LDP training run twice from the same seed (identical results).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ldpfed.cli.main import app
from ldpfed.validation import LDPValueError
from simulations import config as simulation_config
from simulations.config import SimulationConfig

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


# ---- options -----------------------------------------------------------------------------------
def test_default_config_file_and_flower_run_config_equal_the_builtin_defaults():
    defaults = SimulationConfig().to_flat()
    assert simulation_config.load_file(ROOT / "configs" / "default.toml").to_flat() == defaults
    flower = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    assert simulation_config.from_mapping(flower).to_flat() == defaults


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "configs").glob("*.toml")))
def test_shipped_configs_are_valid(name):
    simulation_config.resolve(ROOT / "configs" / name)


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('task = "train"\nclients = 7\nlocal-steps = 3\nlr = 1\n')
    config = simulation_config.resolve(path, {"clients": 5, "rounds": None})
    assert (config.task, config.clients, config.local_steps, config.lr) == ("train", 5, 3, 1.0)
    assert config.rounds == SimulationConfig().rounds


@pytest.mark.parametrize(
    "text, message",
    [
        ("clientz = 3\n", "unknown option 'clientz'"),
        ('clients = "four"\n', "'clients' must be an int"),
        ("epsilon = true\n", "'epsilon' must be a float"),
        ("epsilon = -1.0\n", "epsilon"),
        ('mechanism = "laplase"\n', "unknown mechanism"),
        ("[section]\nx = 1\n", "flat table"),
        ("clients = \n", "not valid TOML"),
    ],
)
def test_bad_config_file_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(LDPValueError, match=message):
        simulation_config.resolve(path)


def test_cli_bad_config_exits_2_and_writes_nothing(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("clients = 4\nnot_an_option = 1\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["simulate", "--config", str(path), "--out", str(out)])
    assert result.exit_code == 2
    assert "unknown option 'not_an_option'" in " ".join(result.output.split())
    assert not out.exists()
    result = runner.invoke(app, ["simulate", "--fail-clients", "9", "--clients", "4", "--out", str(out)])
    assert result.exit_code == 2 and not out.exists()


# ---- task logic without Flower ---------------------------------------------------------------
def test_cohorts_partition_the_users_and_client_noise_is_reproducible():
    from simulations.mean_task import client_reply, cohort, sums_from_reply

    config = replace(SimulationConfig(), users=103, clients=4)
    rows = np.concatenate([cohort(config, pid) for pid in range(4)])
    np.testing.assert_array_equal(rows, np.arange(103))
    first = sums_from_reply(client_reply(config, 2, 1))
    again = sums_from_reply(client_reply(config, 2, 1))
    other_round = sums_from_reply(client_reply(config, 2, 2))
    np.testing.assert_array_equal(first.total, again.total)
    assert not np.array_equal(first.total, other_round.total)


def test_client_sampling_is_reproducible_and_of_the_right_size():
    from simulations.train_task import TrainServer

    config = replace(SimulationConfig(), task="train", data="synthetic-fedprox", clients=10, fraction=0.3)
    server, twin = TrainServer(config), TrainServer(config)
    assert server.sample(3) == twin.sample(3)
    assert len(server.sample(3)) == 3 and len(set(server.sample(3))) == 3
    assert {tuple(server.sample(r)) for r in range(1, 6)} != {tuple(server.sample(1))}


# ---- Flower federations (Ray) ----------------------------------------------------------------
def _assert_ray_stopped():
    import ray

    assert not ray.is_initialized()


def test_mean_task_under_flower_agrees_with_prediction_and_survives_a_failing_client(tmp_path):
    """4 clients x 1,000 users, d = 40, Laplace eps = 4 (m = d), 20 rounds; client 1 always fails.

    Each round's MSE is an independent draw (fresh local randomness); the prediction is for the
    3,000 users whose clients replied. Tolerance: 5 standard errors of the mean over the rounds,
    computed from the measured rounds.
    """
    out = tmp_path / "run"
    args = [
        "simulate", "--task", "mean", "--clients", "4", "--users", "4000", "--dims", "40",
        "--epsilon", "4", "--rounds", "20", "--cpus", "2", "--cpus-per-client", "1",
        "--fail-clients", "1", "--seed", "3", "--out", str(out), "--json",
    ]
    result = runner.invoke(app, args)
    _assert_ray_stopped()
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["engine"] == "flower" and summary["task"] == "mean"
    assert (summary["clients"], summary["rounds"]) == (4, 20)
    metrics = pd.read_csv(out / "metrics.csv")
    assert len(metrics) == 20
    assert (metrics["clients_replied"] == 3).all() and (metrics["clients_failed"] == 1).all()
    assert (metrics["failed_partitions"].astype(str) == "1").all()
    assert metrics["failure_reasons"].str.contains("injected failure").all()
    assert (metrics["users_reported"] == 3000).all()
    measured = metrics["mse"].to_numpy()
    predicted = metrics["predicted_mse"].to_numpy()
    assert np.allclose(predicted, predicted[0])
    standard_error = measured.std(ddof=1) / np.sqrt(measured.size)
    assert abs(measured.mean() - predicted[0]) <= 5 * standard_error
    assert summary["final_mse"] == pytest.approx(measured[-1])
    assert summary["predicted_mse"] == pytest.approx(predicted[-1])
    # Per-client privacy: the three replying clients spent 20 x eps; the failing one nothing.
    privacy = pd.read_csv(out / "privacy.csv")
    assert sorted(privacy["client_id"]) == [0, 2, 3]
    assert np.allclose(privacy["basic_epsilon"], 80.0)
    assert metrics["epsilon_spent"].tolist() == [4.0 * r for r in range(1, 21)]
    # The other files exist and parse.
    assert json.loads((out / "summary.json").read_text())["final_mse"] == pytest.approx(summary["final_mse"])
    assert simulation_config.load_file(out / "config.toml").fail_clients == "1"
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _train_config(tmp_path, **options) -> SimulationConfig:
    base = dict(
        task="train", data="synthetic-fedprox", model="logreg", clients=5, rounds=10, local_steps=10,
        lr=0.1, batch_size=32, clip=1.0, cpus=2, cpus_per_client=1.0, seed=0, out=str(tmp_path),
    )
    return simulation_config.from_mapping({**base, **options}).validated()


def test_noise_free_fedavg_reaches_the_stated_accuracy(tmp_path):
    """Logistic regression on FedProx Synthetic(1,1), 5 clients, 10 rounds of 10 local steps:
    stated target 85% test accuracy (and 20 points above always guessing the majority class)."""
    from simulations.runner import run
    from simulations.train_task import federated_data

    config = _train_config(tmp_path, mechanism="none")
    summary = run(config)
    _assert_ray_stopped()
    test_labels = federated_data(config).test[1]
    majority = np.bincount(test_labels).max() / test_labels.size
    assert summary["final_accuracy"] >= max(0.85, majority + 0.20)
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert metrics["accuracy"].iloc[-1] > metrics["accuracy"].iloc[0]
    assert (metrics["predicted_noise"] == 0).all()


def test_ldp_training_is_reproducible_from_the_seed(tmp_path):
    """Piecewise per coordinate, 3 of 5 clients sampled per round: the same seed twice gives the
    same sampling, noise and hence identical metrics; the noise prediction is recorded."""
    from simulations.runner import run

    runs = []
    for name in ("a", "b"):
        config = _train_config(tmp_path / name, mechanism="laplace", epsilon=8.0, fraction=0.6, rounds=3, clip=0.05)
        run(config)
        _assert_ray_stopped()
        runs.append(pd.read_csv(tmp_path / name / "metrics.csv").drop(columns=["seconds"]))
    pd.testing.assert_frame_equal(runs[0], runs[1])
    metrics = runs[0]
    assert (metrics["clients_sampled"] == 3).all() and (metrics["clients_replied"] == 3).all()
    assert (metrics["predicted_noise"] > 0).all()
    # Each client spent eps = 8 per round it took part in; the maximum is at most 8 * rounds.
    assert metrics["epsilon_spent"].iloc[-1] <= 8.0 * 3 and metrics["epsilon_spent"].iloc[0] == 8.0


# ---- `flwr run .` (Flower's own launcher; starts a background SuperLink) --------------------
def _processes_with_env(key: str, value: str) -> list[int]:
    """PIDs of processes whose environment has key=value (what this test started)."""
    needle = f"{key}={value}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_flwr_run_uses_the_same_apps_and_config(tmp_path):
    """`flwr run .` with a temporary FLWR_HOME, the pyproject run config plus overrides; the
    SuperLink (and everything it started) is stopped by PID afterwards. `flwr run` exits 0 even
    when the ServerApp raises, so success is judged by the files written."""
    import os
    import signal
    import subprocess
    import sys

    home = tmp_path / "flwr-home"
    out = tmp_path / "out"
    env = {
        **os.environ,
        "FLWR_HOME": str(home),
        "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",  # use this venv, no `uv sync`
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    try:
        completed = subprocess.run(
            [
                "flwr", "run", ".", "--stream", "--federation-config", "num-supernodes=4",
                "--run-config", f'clients=4 rounds=2 users=2000 out="{out}"',
            ],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
    finally:
        for pid in _processes_with_env("FLWR_HOME", str(home)):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["engine"], summary["task"], summary["clients"], summary["rounds"]) == ("flower", "mean", 4, 2)
    assert len(pd.read_csv(out / "metrics.csv")) == 2

"""`ldpfed simulate` (issues 5 and 10; spec: federated.md, analysis.md).

The protocol logic is tested on the local engine (the same client and server halves, no Flower);
two small Ray federations check the Flower adapters (the mean task through the CLI with a failing
client and the output files; the train task equal to the local engine), and one `flwr run .`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import processes_with_env, ray_released, run_collecting_rows
from helpers import ldpfed
from typer.testing import CliRunner

from ldpfed.cli.main import app
from ldpfed.config import Config, load_file
from ldpfed.protocols import seeds
from ldpfed.protocols.session import World
from ldpfed.tasks import client_half, server_half, validated
from ldpfed.validation import LDPValueError

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def config_of(**options) -> Config:
    return validated(Config().with_options({"engine": "local", **options}))


# ---- seeds: who knows what ---------------------------------------------------------------------
def test_the_harness_spawns_distinct_seeds_and_the_noise_root_is_os_entropy_unless_given():
    world = World.from_config(config_of(clients=4))
    values = [world.data, world.server, *world.secrets.values()]
    assert len(set(values)) == len(values) and 0 not in values
    assert world.noise == seeds.OS_ENTROPY and world.secrets == seeds.client_secrets(world.noise_root, 4)
    other = World.from_config(config_of(clients=4))  # another run: the same public seeds, other secrets
    assert (other.data, other.server) == (world.data, world.server) and other.noise_root != world.noise_root
    assert not set(other.secrets.values()) & set(world.secrets.values())
    replay = World.from_config(config_of(clients=4), world.noise_root)  # the root given back: the same world
    assert (replay.data, replay.server, replay.secrets) == (world.data, world.server, world.secrets)
    assert replay.noise == seeds.USER_CHOSEN
    fresh = World.from_config(config_of(clients=4, **{"fresh-noise": True}))
    assert (
        fresh.secrets is None and fresh.noise_root is None and (fresh.data, fresh.server) == (world.data, world.server)
    )
    assert fresh.secret(0) != fresh.secret(0)
    with pytest.raises(LDPValueError, match="exclude each other"):
        World.from_config(config_of(clients=4, **{"fresh-noise": True}), 5)


def test_cohorts_partition_the_users_and_client_noise_follows_the_secret():
    from ldpfed.protocols.mean import cohort

    config = config_of(users=103, clients=4)
    rows = np.concatenate([cohort(103, 4, pid) for pid in range(4)])
    np.testing.assert_array_equal(rows, np.arange(103))
    world = World.from_config(config)
    client = client_half(config, 2, world.data, world.secret(2))
    first, again = client.reply(1, {})[0], client.reply(1, {})[0]
    other_round = client.reply(2, {})[0]
    other_secret = client_half(config, 2, world.data, world.secret(3)).reply(1, {})[0]
    np.testing.assert_array_equal(first.arrays["total"], again.arrays["total"])
    assert not np.array_equal(first.arrays["total"], other_round.arrays["total"])
    assert not np.array_equal(first.arrays["total"], other_secret.arrays["total"])


def test_client_sampling_follows_the_servers_seed_only():
    config = config_of(task="train", data="synthetic-fedprox", clients=10, fraction=0.3)
    world = World.from_config(config)
    server, twin = server_half(config, world.data, world.server), server_half(config, world.data, world.server)
    assert server.sample(3) == twin.sample(3)
    assert len(server.sample(3)) == 3 and len(set(server.sample(3))) == 3
    assert {tuple(server.sample(r)) for r in range(1, 6)} != {tuple(server.sample(1))}


# ---- what the server receives and what the outputs say -----------------------------------------
def test_a_train_reply_holds_only_the_privatized_update_and_the_sample_count():
    config = config_of(task="train", clients=3, **{"local-steps": 2})
    world = World.from_config(config)
    server = server_half(config, world.data, world.server)
    plan = server.configure_round(1)
    assert set(plan.broadcast) == {"global"}
    reply, diagnostics = client_half(config, 0, world.data, world.secret(0)).reply(1, plan.broadcast)
    assert set(reply.arrays) == {"update"} and set(reply.metrics) == {"num-examples"}
    assert not np.allclose(reply.arrays["update"], diagnostics["clean"])  # the clean update stays home


def test_a_diverging_client_sends_an_ordinary_privatized_update():
    """lr = 1e38 makes the local model non-finite (NaN loss); the client still replies (no
    data-dependent failure; the old code raised "update contains NaN") with a finite privatized
    update; the round counts it as replied."""
    summary, rows = run_collecting_rows(config_of(task="train", clients=3, rounds=1, lr=1e38, **{"local-steps": 5}))
    assert rows["clients_failed"].tolist() == [0] and rows["clients_replied"].tolist() == [3]
    config = config_of(task="train", clients=3, lr=1e38, **{"local-steps": 5})
    world = World.from_config(config)
    plan = server_half(config, world.data, world.server).configure_round(1)
    reply, diagnostics = client_half(config, 0, world.data, world.secret(0)).reply(1, plan.broadcast)
    assert not np.isfinite(diagnostics["loss"])
    assert np.all(np.isfinite(reply.arrays["update"]))


def test_private_run_reports_finite_epsilon_and_mechanism_none_reports_not_private(tmp_path):
    base = {"task": "train", "clients": 3, "rounds": 2, "local-steps": 2}
    summary, _ = run_collecting_rows(config_of(**base, out=str(tmp_path / "private")))
    assert summary["private"] is True and summary["privacy_reasons"] == []
    assert summary["epsilon"] == 2.0 and summary["epsilon_spent_max_per_client"] == 4.0
    assert summary["noise_measured_over_predicted"] > 0
    summary, rows = run_collecting_rows(config_of(**base, mechanism="none", out=str(tmp_path / "none")))
    assert summary["private"] is False and "mechanism none" in summary["privacy_reasons"][0]
    assert summary["epsilon"] is None and summary["epsilon_spent_max_per_client"] is None
    assert rows["epsilon_spent"].isna().all()
    privacy = json.loads((tmp_path / "none" / "privacy.json").read_text())
    assert privacy["private"] is False
    assert all(total["basic_epsilon"] is None for total in privacy["distinct_totals"])
    frame = pd.read_csv(tmp_path / "none" / "privacy.csv")
    assert (~frame["private"]).all() and frame["basic_epsilon"].isna().all()
    assert json.loads((tmp_path / "none" / "summary.json").read_text())["private"] is False
    text = (tmp_path / "none" / "config.toml").read_text()
    assert "epsilon" not in text


def test_mean_task_agrees_with_the_prediction_locally():
    """4 clients x 1,000 users, d = 40, Laplace eps = 4, 20 rounds: the mean of the measured MSE
    is within 5 standard errors (from the rounds) of the CLT prediction."""
    # a fixed noise root: a statistical check must be reproducible
    _, rows = run_collecting_rows(
        config_of(clients=4, users=4000, dims=40, epsilon=4.0, rounds=20, seed=3), noise_seed=3
    )
    measured, predicted = rows["mse"].to_numpy(), rows["predicted_mse"].to_numpy()
    assert np.allclose(predicted, predicted[0])
    assert abs(measured.mean() - predicted[0]) <= 5 * measured.std(ddof=1) / np.sqrt(measured.size)


def test_simulate_mean_with_one_client_is_compare():
    """One mean-estimation path: `compare`'s plain-mean MSE per repetition is
    `simulate --task mean --clients 1`'s plain-mean MSE per round for the same seed (as run seed and
    noise seed: `compare` draws its noise from the secret that seed spawns)."""
    from ldpfed.data import load_tuples
    from ldpfed.experiments.mean import run_mean_experiment

    config = config_of(clients=1, users=500, dims=6, rounds=3, seed=9, epsilon=1.5, mechanism="piecewise")
    _, rows = run_collecting_rows(config, noise_seed=9)
    table = load_tuples("gaussian", users=500, dims=6, rng=np.random.default_rng(seeds.data_seed(9)))
    result = run_mean_experiment(table, "piecewise", 1.5, aggregators=["mean"], repeats=3, seed=9)
    np.testing.assert_allclose(result.runs["mse"].to_numpy(), rows["mse_plain_mean"].to_numpy(), rtol=1e-12)


def test_noise_free_fedavg_reaches_the_stated_accuracy():
    """Logistic regression on FedProx Synthetic(1,1), 5 clients, 10 rounds of 10 local steps:
    stated target 85% test accuracy (and 20 points above always guessing the majority class)."""
    from ldpfed.protocols.train import federated_data

    config = config_of(
        task="train", data="synthetic-fedprox", clients=5, rounds=10, coordinate_clip=1.0, mechanism="none"
    )
    summary, rows = run_collecting_rows(config, noise_seed=1)  # the minibatch order: a fixed noise root
    test_labels = federated_data(config, World.from_config(config).data).test[1]
    majority = np.bincount(test_labels).max() / test_labels.size
    assert summary["final_accuracy"] >= max(0.85, majority + 0.20)
    assert rows["accuracy"].iloc[-1] > rows["accuracy"].iloc[0]
    assert (rows["predicted_noise"] == 0).all()


def test_ldp_training_is_reproducible_from_the_seed_and_noise_seed_and_its_noise_is_fresh_otherwise():
    options = dict(
        task="train", data="synthetic-fedprox", clients=5, rounds=3, mechanism="laplace", epsilon=8.0, fraction=0.6
    )
    runs = [
        run_collecting_rows(config_of(**options), noise_seed=2**100 + 1)[1].drop(columns=["seconds"]) for _ in range(2)
    ]
    pd.testing.assert_frame_equal(runs[0], runs[1])
    assert (runs[0]["clients_sampled"] == 3).all() and (runs[0]["predicted_noise"] > 0).all()
    assert runs[0]["epsilon_spent"].iloc[-1] <= 8.0 * 3 and runs[0]["epsilon_spent"].iloc[0] == 8.0
    for fresh_noise in (False, True):  # a noise root of OS entropy for the run, or per client
        summary, fresh = run_collecting_rows(config_of(**options, **{"fresh-noise": fresh_noise}))
        assert summary["noise_seed"] == (seeds.FRESH_PER_CLIENT if fresh_noise else seeds.OS_ENTROPY)
        assert fresh["clients_sampled"].tolist() == runs[0]["clients_sampled"].tolist()  # the server's seed
        assert not np.allclose(fresh["measured_squared_distance"], runs[0]["measured_squared_distance"])


# ---- Flower federations (Ray) ----------------------------------------------------------------
def _assert_ray_stopped():
    assert ray_released()  # the run shut Ray down (deferred to the session's end in the suite)


def test_mean_task_under_flower_binds_its_data_shape_survives_a_failing_client_and_writes_its_files(tmp_path):
    """One Flower federation, several checks. Called directly, without the CLI's preflight, the run
    binds dims 0 ("from the data") itself: unbound, every client failed re-validating the config and
    final_mse was NaN. A failing client is left out of every round, the others give the local
    engine's numbers for the same noise root, and the run's files are written."""
    out = tmp_path / "run"
    options = {"task": "mean", "clients": 4, "users": 4000, "epsilon": 4, "rounds": 3, "seed": 3, "fail-clients": "1"}
    config = (
        Config()
        .with_options({**options, "engine": "flower", "cpus": 2, "cpus-per-client": 1, "out": str(out)})
        .validated()
    )
    assert config.data.dims == 0  # "from the data": only the harness can bind it
    summary, _ = run_collecting_rows(config, noise_seed=3)
    _assert_ray_stopped()
    assert summary["dims"] == 10 and np.isfinite(summary["final_mse"])
    assert summary["clients_failed_total"] == 3, summary["failure_reasons"]  # the injected failure, once a round
    assert (summary["engine"], summary["task"], summary["clients"], summary["rounds"]) == ("flower", "mean", 4, 3)
    assert summary["private"] is True and summary["epsilon"] == 4.0
    metrics = pd.read_csv(out / "metrics.csv")
    assert (metrics["clients_replied"] == 3).all() and (metrics["clients_failed"] == 1).all()
    assert (metrics["failed_partitions"].astype(str) == "1").all()
    assert metrics["failure_reasons"].str.contains("injected failure").all()
    assert (metrics["users_reported"] == 3000).all()
    privacy = pd.read_csv(out / "privacy.csv")
    assert sorted(privacy["client_id"]) == [0, 2, 3] and np.allclose(privacy["basic_epsilon"], 12.0)
    assert metrics["epsilon_spent"].tolist() == [4.0, 8.0, 12.0]
    # the same noise root: the same noise
    _, local_rows = run_collecting_rows(config_of(**options, dims=10), noise_seed=3)
    np.testing.assert_allclose(metrics["mse"], local_rows["mse"], rtol=1e-12)
    assert json.loads((out / "summary.json").read_text())["final_mse"] == pytest.approx(summary["final_mse"])
    assert load_file(out / "config.toml").federation.fail_clients == "1"
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "diagnostics").exists()  # joined after each round and removed
    manifest = json.loads((out / ".ldpfed-run.json").read_text())
    assert {path.name for path in out.iterdir()} == {".ldpfed-run.json", *manifest["files"]}  # no empty flower.log


# SIGINT and SIGTERM to a real `ldpfed simulate` under Flower: tests/test_simulate_stop.py


# ---- `flwr run .` (Flower's own launcher; starts a background SuperLink) --------------------
@pytest.mark.slow  # a Ray federation (or flwr run) of its own: tens of seconds
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
                "flwr",
                "run",
                ".",
                "--stream",
                "--federation-config",
                "num-supernodes=2",
                "--run-config",
                f'federation.clients=2 run.rounds=2 data.users=2000 output.out="{out}"',
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        for pid in processes_with_env("FLWR_HOME", str(home)):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["engine"], summary["task"], summary["clients"], summary["rounds"]) == ("flower", "mean", 2, 2)
    assert summary["private"] is True
    metrics = pd.read_csv(out / "metrics.csv")
    assert len(metrics) == 2
    assert metrics["node_builds"].iloc[0] == 2  # each node built its clients in round 1 (the deployed app)


def test_every_client_failing_is_an_error_exit(tmp_path):
    result = ldpfed("simulate --engine local --clients 2 --users 100 --rounds 1 --fail-clients 0,1 --json")
    assert result.exit_code == 1
    assert "every client failed in every round (InjectedFailure: injected failure" in " ".join(result.output.split())


def test_ctrl_c_under_flower_leaves_no_diagnostics_of_the_unfinished_round(tmp_path, monkeypatch):
    """Ctrl-C while the nodes of a round have written their diagnostics (clean values) but the
    harness has not joined them: exit 130 and none of those files left in --out (they used to stay
    in OUT/diagnostics). Flower itself is replaced by a stand-in that writes what two nodes write
    (one file complete, one half-written) and is then interrupted."""
    import simulations.federation as federation
    import simulations.runner as runner_module
    from clients.client_app import write_diagnostics

    out = tmp_path / "run"
    mine = out / "diagnostics" / "notes.txt"

    def interrupted_federation(config, server_app, client_app, progress, verbose, **options):
        directory = out / "diagnostics"
        write_diagnostics(directory, 1, 0, {0: {"clean": np.ones(3)}})
        (directory / ".round-00001-node-1.npz").write_bytes(b"PK")  # a node's write cut short
        raise KeyboardInterrupt

    monkeypatch.setattr(runner_module, "run_simulation", interrupted_federation)
    monkeypatch.setattr(federation, "SERVER_STOP_SECONDS", 0.1)  # the stand-in has no ServerApp to wait for
    result = runner.invoke(
        app, ["simulate", "--engine", "flower", "--clients", "2", "--users", "100", "--rounds", "3", "--out", str(out)]
    )
    assert result.exit_code == 130, result.output
    assert "interrupted after 0 of 3 rounds" in result.output
    assert not (out / "diagnostics").exists(), sorted(p.name for p in (out / "diagnostics").iterdir())
    # a file of the user's own in OUT/diagnostics stays (only ldpfed's files are removed)
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    result = runner.invoke(
        app,
        [
            "simulate",
            "--engine",
            "flower",
            "--clients",
            "2",
            "--users",
            "100",
            "--rounds",
            "3",
            "--out",
            str(out),
            "--overwrite",
        ],
    )
    assert result.exit_code == 130, result.output
    assert sorted(p.name for p in mine.parent.iterdir()) == ["notes.txt"]


def test_ctrl_c_writes_the_finished_rounds_marked_interrupted_and_exits_130(tmp_path, monkeypatch):
    """A KeyboardInterrupt during round 3 (local engine): rounds 1-2 are on disk, the summary says
    interrupted, one line on stderr, exit code 130."""
    from ldpfed.protocols import nodes

    original = nodes.local_round

    def interrupting(server, client, server_round, on_diagnostics=None):
        if server_round == 3:
            raise KeyboardInterrupt
        return original(server, client, server_round, on_diagnostics)

    import simulations.federation as federation

    monkeypatch.setattr(federation, "local_round", interrupting)
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["simulate", "--engine", "local", "--clients", "2", "--users", "100", "--rounds", "5", "--out", str(out)]
    )
    assert result.exit_code == 130, result.output
    assert "interrupted after 2 of 5 rounds" in " ".join(result.output.split())
    assert len(pd.read_csv(out / "metrics.csv")) == 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["rounds_finished"] == 2
    assert (pd.read_csv(out / "privacy.csv")["rounds"] == 2).all()  # the totals of the finished rounds


@pytest.mark.parametrize("interval, rewrites", [(0.0, [2, 8]), (1e6, [8])])
def test_privacy_totals_rewritten_between_rounds_only_when_cheap_and_always_at_the_end(
    tmp_path, monkeypatch, interval, rewrites
):
    """Above PRIVACY_EVERY_ROUND clients (here lowered to 1) privacy.csv is rewritten after a round
    that ends PRIVACY_INTERVAL_S after the run's start and its last rewrite (0: after round 1; huge:
    never before the end), and at least 19x that rewrite's cost (here made to look huge: never
    again before the end); at the end it holds every round's totals."""
    from ldpfed.protocols import recorder

    monkeypatch.setattr(recorder, "PRIVACY_EVERY_ROUND", 1)
    monkeypatch.setattr(recorder, "PRIVACY_INTERVAL_S", interval)

    written = []
    original = recorder.privacy_table

    def counted(ledger, config):
        written.append(len(ledger))
        return original(ledger, config)

    monkeypatch.setattr(recorder, "privacy_table", counted)
    original_round = recorder.Recorder.add_round

    def slow_looking(self, row, ledger):
        original_round(self, row, ledger)
        self._privacy_cost = 1e6  # as if the rewrite had taken 11 days

    monkeypatch.setattr(recorder.Recorder, "add_round", slow_looking)
    out = tmp_path / "run"
    arguments = ["simulate", "--engine", "local", "--clients", "2", "--users", "100", "--rounds", "4"]
    result = runner.invoke(app, [*arguments, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert written == rewrites  # after round 1 (2 clients' entries) and at the end (4 rounds of 2)
    assert len(pd.read_csv(out / "metrics.csv")) == 4 and (pd.read_csv(out / "privacy.csv")["rounds"] == 4).all()

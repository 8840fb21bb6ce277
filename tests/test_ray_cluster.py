"""`ldpfed simulate --ray-address`: a federation on an existing Ray cluster (docs/deployment.md,
Ray cluster).

The slow test starts a two-node Ray cluster on this machine (a head on a free loopback port and a
second node joining it, each with its own temp dir and one CPU, so that Flower fits one node actor
on each), runs a train federation on it with a chosen noise seed, and checks that its rounds equal
the single-machine run of the same seeds (the per-client streams make them exact), that a node
actor ran on each of the cluster's two Ray nodes (Ray's actor table), and that every process it
started, found by an environment marker, is stopped by PID. The fast tests check the option's
validation and how the backend joins a cluster instead of sizing a local Ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import PRISTINE_ENVIRONMENT, processes_with_env
from helpers import StartedProcesses
from test_deployment import free_ports, poll, port_open, signal_all

from ldpfed.config import Config
from ldpfed.tasks import validated
from ldpfed.validation import LDPValueError
from simulations.runner import backend_config, cluster_address

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
START_SECONDS = 120
RUN_SECONDS = 300
STOP_GRACE_SECONDS = 3


def test_a_cluster_address_joins_the_cluster_instead_of_sizing_a_local_ray(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "head.example:6380")  # a plain ray.init() would join it
    local = backend_config(validated(Config().with_options({"task": "train", "clients": 4, "nodes": 2})), nodes=2)
    assert local["init_args"]["num_cpus"] == 2 and local["init_args"]["address"] == "local"  # a Ray of its own
    joined = validated(Config().with_options({"task": "train", "clients": 4, "ray-address": "10.0.0.5:6379"}))
    backend = backend_config(joined, nodes=2)
    assert backend["init_args"]["address"] == "10.0.0.5:6379"
    assert not {"num_cpus", "num_gpus", "include_dashboard"} & set(backend["init_args"])  # the cluster's own
    assert cluster_address(joined.with_options({"ray-address": "auto"})) == "head.example:6380"
    monkeypatch.delenv("RAY_ADDRESS")
    with pytest.raises(LDPValueError, match="RAY_ADDRESS"):
        cluster_address(joined.with_options({"ray-address": "auto"}))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ray-address": "not an address"}, "ray-address must be auto or HOST:PORT"),
        ({"ray-address": "ray://head:10001"}, "ray-address must be auto or HOST:PORT"),
        ({"ray-address": "head:6379", "cpus": 2}, "cpus sizes a local Ray"),
        ({"ray-timeout": 0.0}, "ray-timeout must be a finite number of seconds > 0"),
        ({"ray-timeout": float("inf")}, "ray-timeout must be a finite number of seconds > 0"),
    ],
)
def test_a_bad_ray_address_is_refused(options, message):
    with pytest.raises(LDPValueError, match=message):
        validated(Config().with_options(options))


class RayCluster(StartedProcesses):
    """A head and a second Ray node on this machine, each with its own temp dir and one CPU, marked
    by an environment variable so that every process they start can be found and stopped."""

    def __init__(self) -> None:
        # short: Ray's unix sockets live under the temp dir, and their paths may not exceed 107 bytes
        self.directory = Path(tempfile.mkdtemp(prefix="ldpfed-ray-"))
        self.marker = ("LDPFED_RAY_CLUSTER_TEST", uuid.uuid4().hex)
        self.env = {
            **PRISTINE_ENVIRONMENT,
            self.marker[0]: self.marker[1],
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": os.pathsep.join([str(ROOT), PRISTINE_ENVIRONMENT.get("PYTHONPATH", "")]),
        }
        self.port, self.head_manager, self.worker_manager = free_ports(3)
        self.address = f"127.0.0.1:{self.port}"

    def ray(self, *args: str) -> None:
        done = subprocess.run(
            [str(BIN / "ray"), *args], env=self.env, capture_output=True, text=True, timeout=START_SECONDS
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def launch(self) -> None:
        """Start the head, then the second node, and wait until both are alive."""
        common = ["--num-cpus", "1", "--num-gpus", "0", "--disable-usage-stats"]
        self.ray(
            "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(self.port),
            "--node-manager-port", str(self.head_manager), "--include-dashboard", "false",
            "--temp-dir", str(self.directory / "head"), *common,
        )  # fmt: skip
        poll(lambda: port_open(self.port), START_SECONDS, "Ray head listening")
        self.ray(
            "start", "--address", self.address, "--node-ip-address", "127.0.0.1",
            "--node-manager-port", str(self.worker_manager), "--temp-dir", str(self.directory / "worker"),
            *common,
        )  # fmt: skip
        poll(lambda: len(self.alive_nodes()) == 2, START_SECONDS, "two Ray nodes alive", 1.0)

    def query(self, code: str) -> object:
        """Run `code` (it prints JSON) in a driver process connected to the cluster."""
        script = f"import json, ray\nray.init(address={self.address!r}, logging_level='ERROR')\n{code}\n"
        done = subprocess.run(
            [sys.executable, "-c", script], env=self.env, capture_output=True, text=True, timeout=START_SECONDS
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def alive_nodes(self) -> list[str]:
        return self.query("print(json.dumps([n['NodeID'] for n in ray.nodes() if n['Alive']]))")

    def actor_nodes(self, class_name: str) -> list[str]:
        """The Ray node of every actor of `class_name` the cluster has run (alive or dead)."""
        return self.query(
            "from ray._private import state\n"
            f"print(json.dumps([a['Address']['NodeID'] for a in state.actors().values() "
            f"if a['ActorClassName'] == {class_name!r}]))"
        )

    def stop(self) -> None:
        """SIGTERM to every process of the cluster (marked, or a descendant of one), by PID; SIGKILL
        to what is left after STOP_GRACE_SECONDS: the workers, raylets and agents exit at once,
        but the head's GCS server and autoscaler monitor ignore SIGTERM for 20 s and more."""
        started = processes_with_env(*self.marker)
        signal_all(started, signal.SIGTERM)
        with contextlib.suppress(AssertionError):
            poll(lambda: not processes_with_env(*self.marker), STOP_GRACE_SECONDS, "the cluster's exit")
        signal_all(set(started) | set(processes_with_env(*self.marker)), signal.SIGKILL)
        poll(lambda: not processes_with_env(*self.marker), START_SECONDS, "the cluster's processes killed")
        shutil.rmtree(self.directory, ignore_errors=True)


def simulate(env: dict, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", "from ldpfed.cli.main import app; app()", "simulate", *options]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_SECONDS)


@pytest.mark.slow  # a two-node Ray cluster and a federation on it: about a minute
def test_a_federation_on_a_two_node_ray_cluster_equals_the_single_machine_run(tmp_path):
    options = ["--task", "train", "--clients", "4", "--nodes", "2", "--rounds", "2", "--local-steps", "3"]
    options += ["--noise-seed", "77", "--seed", "3"]
    with RayCluster() as cluster:
        env = {**cluster.env, "RAY_ADDRESS": cluster.address}  # `auto` reads it
        done = simulate(env, *options, "--ray-address", "auto", "--out", str(tmp_path / "cluster"))
        assert done.returncode == 0, done.stderr[-3000:]
        nodes = cluster.actor_nodes("ClientAppActor")
        assert len(set(nodes)) == 2, nodes  # one node actor on each Ray node
        assert set(nodes) <= set(cluster.alive_nodes())
    assert not processes_with_env(*cluster.marker)
    local = simulate(
        {**PRISTINE_ENVIRONMENT, "PYTHONPATH": cluster.env["PYTHONPATH"]},
        *options,
        "--engine",
        "local",
        "--out",
        str(tmp_path / "local"),
    )
    assert local.returncode == 0, local.stderr[-3000:]
    on_cluster = pd.read_csv(tmp_path / "cluster" / "metrics.csv")
    alone = pd.read_csv(tmp_path / "local" / "metrics.csv")
    columns = ["loss", "accuracy", "train_loss", "measured_squared_distance"]
    np.testing.assert_array_equal(on_cluster[columns].to_numpy(float), alone[columns].to_numpy(float))
    summary = json.loads((tmp_path / "cluster" / "summary.json").read_text())
    assert summary["engine"] == "flower" and summary["rounds_finished"] == 2

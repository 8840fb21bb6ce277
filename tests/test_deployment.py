"""The same apps as a Flower deployment ("bigger than one machine"; spec: scale.md,
federated.md "Who knows the noise").

One SuperLink and two SuperNodes run as separate local processes over loopback (TLS with a CA and
certificates made by simulations.deploy_certs, SuperNode authentication with the nodes' registered
keys, free ports, a temporary FLWR_HOME), and `flwr run . <connection>` submits the pyproject's apps to them,
as a user would with the nodes on other machines (README, "Running on several machines"). Each
node gets its partition and its own noise seed from its node config, never from the server; the
deployed rounds must equal the local engine run with those same node secrets, which they can only
do if each node used its own seed (a node drawing OS entropy, or noise derived from the server's
seed, fails the comparison). A third SuperNode whose key the SuperLink was not given, claiming node
0's partition, is refused: it never comes online and the rounds count the two known nodes' clients
only. Every process started here is stopped by PID, even on failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import processes_with_env

from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.session import Session, World, server_half
from simulations.deploy_certs import make_certificates

ROOT = Path(__file__).resolve().parents[1]
CONNECTION = "ldpfed-test"
NODE_SEEDS = (1234, 98765)  # the nodes' own secrets (node config `noise-seed`)
START_SECONDS = 180  # a SuperLink or SuperNode starting on a loaded 2-core machine
RUN_SECONDS = 600  # one `flwr run`: a ClientApp process per message, tens of seconds per round
STOP_SECONDS = 30


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports free now (the OS picks them; all held until all are chosen)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def signal_all(pids, signum) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def poll(condition, seconds: float, what: str, interval: float = 0.2) -> None:
    """Wait until `condition()` holds, at most `seconds`; no fixed sleep that may be too short."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds:.0f} s")
        time.sleep(interval)


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Deployment:
    """A SuperLink and one SuperNode per node config, each a process of its own, marked by an
    environment variable so that everything they start can be found and stopped."""

    def __init__(self, directory: Path, node_configs: list[str], extra_keys: int = 0) -> None:
        from conftest import PRISTINE_ENVIRONMENT

        self.directory = directory
        self.home = directory / "flwr-home"
        self.home.mkdir(parents=True)
        self.marker = ("LDPFED_DEPLOYMENT_TEST", uuid.uuid4().hex)
        self.env = {
            **PRISTINE_ENVIRONMENT,
            self.marker[0]: self.marker[1],
            "FLWR_HOME": str(self.home),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), PRISTINE_ENVIRONMENT.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join([str(ROOT), PRISTINE_ENVIRONMENT.get("PYTHONPATH", "")]),
        }
        self.node_configs = node_configs
        self.port, *self.node_ports = free_ports(1 + len(node_configs) + extra_keys)
        self.processes: list[subprocess.Popen] = []
        self.may_exit: list[subprocess.Popen] = []  # processes whose exit is no failure of the deployment
        # TLS for the SuperLink on loopback; a key pair per node (registered) and `extra_keys` never registered
        self.certs = make_certificates(directory / "certs", ["127.0.0.1", "localhost"], len(node_configs) + extra_keys)
        # The Flower configuration file: a named SuperLink connection, as on a user's laptop.
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n'
            f'[superlink.{CONNECTION}]\naddress = "127.0.0.1:{self.port}"\n'
            f'root-certificates = "{self.certs["root.crt"]}"\n'
        )

    def start(self, name: str, command: list[str]) -> subprocess.Popen:
        log = open(self.directory / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(command, cwd=self.directory, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.processes.append(process)
        return process

    def __enter__(self) -> Deployment:
        try:
            link = self.start(
                "superlink",
                [
                    "flower-superlink",
                    "--ssl-ca-certfile",
                    str(self.certs["ca.crt"]),
                    "--ssl-certfile",
                    str(self.certs["superlink.crt"]),
                    "--ssl-keyfile",
                    str(self.certs["superlink.key"]),
                    "--enable-supernode-auth",
                    "--port",
                    str(self.port),
                    "--database",
                    str(self.directory / "state.db"),
                    "--disable-runtime-dependency-installation",
                ],
            )
            poll(lambda: port_open(self.port) or link.poll() is not None, START_SECONDS, "SuperLink listening")
            assert link.poll() is None, self.logs()
            for index, node_config in enumerate(self.node_configs):
                registered = self.flwr("supernode", "register", str(self.certs[f"node-{index}.pub"]), CONNECTION,
                                       timeout=START_SECONDS)  # fmt: skip
                assert registered.returncode == 0, registered.stdout + registered.stderr
                self.start_node(index, node_config, self.node_ports[index])
            # each `flwr supernode list` is a process start (about 1.5 s of CPU the starting nodes need)
            poll(lambda: self.nodes_online() >= len(self.node_configs), START_SECONDS, "SuperNodes registered", 2.0)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start_node(self, key: int, node_config: str, port: int) -> subprocess.Popen:
        """A SuperNode over TLS signing with key pair `key` (registered or not)."""
        return self.start(
            f"supernode-{key}",
            [
                "flower-supernode",
                "--root-certificates",
                str(self.certs["root.crt"]),
                "--auth-supernode-private-key",
                str(self.certs[f"node-{key}.key"]),
                "--superlink",
                f"127.0.0.1:{self.port}",
                "--port",
                str(port),
                "--node-config",
                node_config,
            ],
        )

    def flwr(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(["flwr", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)

    def nodes_online(self) -> int:
        if any(process.poll() is not None for process in self.processes if process not in self.may_exit):
            raise AssertionError(f"a Flower process exited early:\n{self.logs()}")
        listed = self.flwr("supernode", "list", CONNECTION, "--format", "json", timeout=START_SECONDS)
        if listed.returncode != 0:
            return 0
        nodes = json.loads(listed.stdout).get("nodes", [])
        return sum(node.get("status") == "online" for node in nodes)

    def run(self, run_config: str) -> subprocess.CompletedProcess:
        """`flwr run . <connection> --stream`: returns when the run has ended (its log streamed)."""
        return self.flwr("run", ".", CONNECTION, "--stream", "--run-config", run_config, timeout=RUN_SECONDS)

    def stop(self) -> None:
        """SIGTERM to the processes started here (by PID), then to every process carrying the marker
        (Flower's own children); whatever is left after STOP_SECONDS gets SIGKILL."""
        signal_all([process.pid for process in self.processes], signal.SIGTERM)
        signal_all(processes_with_env(*self.marker), signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while processes_with_env(*self.marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        signal_all(processes_with_env(*self.marker), signal.SIGKILL)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_SECONDS)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text()[-3000:]}" for path in sorted(self.directory.glob("*.log"))
        )


def local_rounds(config: Config, node_secrets: dict[int, int], out: Path) -> pd.DataFrame:
    """The local engine on the same options with the nodes' secrets in place of the harness's."""
    from server.strategy import flower_fedavg
    from simulations.federation import run_local
    from simulations.stopping import StopRequest

    config = config.with_options({"engine": "local", "out": str(out)}).validated()
    run_seed = config.run.seed
    world = World(seeds.data_seed(run_seed), seeds.server_seed(run_seed), node_secrets)
    half = server_half(config, world.data, world.server, flower_fedavg)
    session = Session(config, half, world.data, engine="local")
    run_local(config, world, half, session, None, False, StopRequest())
    session.finish()
    return pd.read_csv(out / "metrics.csv")


def node_configs() -> list[str]:
    return [f"partition-id={pid} num-partitions=2 noise-seed={seed}" for pid, seed in enumerate(NODE_SEEDS)]


@pytest.mark.slow  # a SuperLink, two SuperNodes and two `flwr run`: a few minutes
def test_a_two_node_deployment_runs_the_mean_and_train_tasks_with_the_nodes_own_noise(tmp_path):
    runs = {
        "mean": {
            "run.task": "mean",
            "run.rounds": 2,
            "run.seed": 5,
            "data.users": 2000,
            "data.dims": 8,
            "privacy.epsilon": 2.0,
        },
        "train": {
            "run.task": "train",
            "run.rounds": 2,
            "run.seed": 5,
            "data.name": "digits",
            "training.model": "logreg",
            "training.local-steps": 3,
            "privacy.mechanism": "piecewise",
            "privacy.epsilon": 4.0,
        },
    }
    with Deployment(tmp_path / "deployment", node_configs(), extra_keys=1) as deployment:
        # a node whose key the SuperLink was not given, claiming node 0's partition: refused
        intruder = deployment.start_node(2, "partition-id=0 num-partitions=2 noise-seed=1", deployment.node_ports[2])
        deployment.may_exit.append(intruder)  # refused, it may retry or give up
        for task, options in runs.items():
            out = tmp_path / f"{task}-deployed"
            overrides = {**options, "federation.clients": 2, "output.out": str(out)}
            completed = deployment.run(" ".join(f"{key}={json.dumps(value)}" for key, value in overrides.items()))
            detail = completed.stdout[-3000:] + completed.stderr[-3000:] + deployment.logs()
            assert completed.returncode == 0, detail
            assert (out / "summary.json").exists(), detail  # `flwr run` exits 0 even when the ServerApp fails
            summary = json.loads((out / "summary.json").read_text())
            assert (summary["engine"], summary["task"], summary["clients"]) == ("flower", task, 2)
            assert summary["rounds_finished"] == 2 and summary["clients_replied_total"] == 4
            assert summary["private"] is True and np.isfinite(summary["epsilon"])
            deployed = pd.read_csv(out / "metrics.csv")
            assert (out / "privacy.csv").exists() and (out / "config.toml").exists()

            config = Config().with_options({**options, "federation.clients": 2})
            local = local_rounds(config, dict(enumerate(NODE_SEEDS)), tmp_path / f"{task}-local")
            columns = ["mse", "mse_plain_mean"] if task == "mean" else ["loss", "accuracy"]
            np.testing.assert_allclose(
                deployed[columns].to_numpy(float), local[columns].to_numpy(float), rtol=1e-12, atol=0
            )
            # the harness's secrets (what the server could derive from the run seed) give other numbers
            harness = local_rounds(config, seeds.client_secrets(5, 2), tmp_path / f"{task}-harness")
            assert not np.allclose(deployed[columns].to_numpy(float), harness[columns].to_numpy(float), rtol=1e-9)
        assert deployment.nodes_online() == 2  # the intruder never came online
        listed = deployment.flwr("ls", CONNECTION, "--format", "json", timeout=START_SECONDS)
        assert [run["status"] for run in json.loads(listed.stdout)["runs"]] == ["finished:completed"] * 2, listed.stdout
    assert not processes_with_env(*deployment.marker)

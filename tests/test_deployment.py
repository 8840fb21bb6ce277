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
only. A SuperNode killed mid-round (SIGKILL) fails its client for that round, and once restarted
takes part in the next. The SuperLink and SuperNodes start as docs/deployment.md starts them,
through simulations.flower_patience, and the train federation runs beside two CPU-bound processes
(`busy_machine`; beside them the fault case took 286 s, not 74 s, so it runs on the machine as it is).
Every process started here is stopped by PID, even on failure.

One SuperLink serves every case of this module (`superlink`, module-scoped), and one pair of
SuperNodes every federation (`deployment`): the fast cases (the TLS handshake, the unknown key
refused) need the SuperLink only; the federations are slow (each `flwr run` message starts a
ClientApp process on its node, seconds of imports on a 2-core machine; a killed node is noticed
after two missed heartbeats: 20 s with the 10 s interval the SuperNodes here announce, see
`SUPERNODE`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import processes_with_env
from helpers import StartedProcesses

import ldpfed.tasks as tasks
from ldpfed.accounting import read_entries
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.session import Session, World
from ldpfed.tasks import server_half, validated
from simulations.deploy_certs import make_certificates

ROOT = Path(__file__).resolve().parents[1]
CONNECTION = "ldpfed-test"
NODE_SEEDS = (1234, 98765)  # the nodes' own secrets (node config `noise-seed`)
START_SECONDS = 180  # a SuperLink or SuperNode starting on a loaded 2-core machine
RUN_SECONDS = 600  # one `flwr run`: a ClientApp process per message, tens of seconds per round
STOP_SECONDS = 30
REFUSED = "No SuperNode found with the given public key"  # the SuperLink's answer to an unknown key
LOST_SECONDS = 150  # a killed SuperNode is offline for the SuperLink after two missed heartbeats
# The SuperLink and SuperNodes as docs/deployment.md starts them, through simulations.flower_patience
# (a task's process may take minutes to start on a loaded machine); each SuperNode announcing Flower's
# shortest accepted heartbeat interval (HEARTBEAT_MIN_INTERVAL, 10 s) instead of its default 30 s: the
# SuperLink then takes a killed node for offline after 20 s instead of 60 s. Flower 1.42 has no
# option for it; its modules read the constant by name.
SUPERLINK = [sys.executable, "-m", "simulations.flower_patience", "flower-superlink"]
SUPERNODE = """
import sys
import flwr.common.constant as constant
import flwr.supercore.heartbeat as heartbeat
import flwr.supernode.fleet_http_connection as connection
from simulations import flower_patience
heartbeat.HEARTBEAT_DEFAULT_INTERVAL = connection.HEARTBEAT_DEFAULT_INTERVAL = constant.HEARTBEAT_MIN_INTERVAL
flower_patience.main(["flower-supernode", *sys.argv[1:]])
"""


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


def children(pid: int) -> list[int]:
    """PIDs of the processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                found.append(int(entry.name))
    return found


def rounds_written(out: Path) -> int:
    """Rounds in `out`/metrics.csv so far (the ServerApp rewrites it atomically after each round)."""
    path = out / "metrics.csv"
    return len(pd.read_csv(path)) if path.exists() else 0


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Deployment(StartedProcesses):
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
        self.database = directory / "state.db"
        self.nodes: list[subprocess.Popen] = []  # the registered SuperNodes, once started
        self.registered = False
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

    def launch(self) -> None:
        """Start the SuperLink and wait until it listens."""
        link = self.start(
            "superlink",
            [
                *SUPERLINK,
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
                str(self.database),
                "--disable-runtime-dependency-installation",
            ],
        )
        poll(lambda: port_open(self.port) or link.poll() is not None, START_SECONDS, "SuperLink listening")
        assert link.poll() is None, self.logs()

    def start_nodes(self) -> None:
        """Register the nodes' keys and start one SuperNode per node config; wait until all are online."""
        for index in range(len(self.node_configs)):
            registered = self.flwr("supernode", "register", str(self.certs[f"node-{index}.pub"]), CONNECTION,
                                   timeout=START_SECONDS)  # fmt: skip
            assert registered.returncode == 0, registered.stdout + registered.stderr
        self.registered = True
        self.nodes = [
            self.start_node(index, config, self.node_ports[index]) for index, config in enumerate(self.node_configs)
        ]
        poll(lambda: self.online() >= len(self.node_configs), START_SECONDS, "SuperNodes online")

    def online(self) -> int:
        """SuperNodes online now, read from the SuperLink's state database (milliseconds, where `flwr
        supernode list` is a process start of 1.5 s CPU); a Flower process that exited early fails."""
        if any(process.poll() is not None for process in self.processes if process not in self.may_exit):
            raise AssertionError(f"a Flower process exited early:\n{self.logs()}")
        if not self.database.exists():
            return 0
        with contextlib.closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=5)) as db:
            (count,) = db.execute(
                "SELECT COUNT(*) FROM node WHERE status = 'online' AND online_until > ?", (time.time(),)
            ).fetchone()
        return count

    def start_node(self, key: int, node_config: str, port: int) -> subprocess.Popen:
        """A SuperNode over TLS signing with key pair `key` (registered or not)."""
        return self.start(
            f"supernode-{key}",
            [
                sys.executable,
                "-c",
                SUPERNODE,
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

    def listed(self) -> list[dict]:
        """The SuperNodes as `flwr supernode list` shows them to a user."""
        listed = self.flwr("supernode", "list", CONNECTION, "--format", "json", timeout=START_SECONDS)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        return json.loads(listed.stdout).get("nodes", [])

    def run(self, run_config: str) -> subprocess.CompletedProcess:
        """`flwr run . <connection> --stream`: returns when the run has ended (its log streamed)."""
        return self.flwr("run", ".", CONNECTION, "--stream", "--run-config", run_config, timeout=RUN_SECONDS)

    def kill_node(self, index: int) -> None:
        """SIGKILL to SuperNode `index` and the ClientApp processes it started (a machine lost)."""
        node = self.nodes[index]
        self.may_exit.append(node)
        signal_all([node.pid, *children(node.pid)], signal.SIGKILL)
        node.wait(timeout=STOP_SECONDS)

    def restart_node(self, index: int) -> None:
        self.nodes[index] = self.start_node(index, self.node_configs[index], self.node_ports[index])

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

    config = validated(config.with_options({"engine": "local", "out": str(out)}))
    run_seed = config.run.seed
    world = World(seeds.data_seed(run_seed), seeds.server_seed(run_seed), node_secrets)
    half = server_half(config, world.data, world.server, flower_fedavg)
    session = Session(tasks.of(config), config, half, world.data, engine="local")
    run_local(config, world, half, session, None, False, StopRequest())
    session.finish()
    return pd.read_csv(out / "metrics.csv")


def node_configs() -> list[str]:
    return [f"partition-id={pid} num-partitions=2 noise-seed={seed}" for pid, seed in enumerate(NODE_SEEDS)]


@pytest.fixture(scope="module")
def superlink(tmp_path_factory):
    """One SuperLink (TLS, SuperNode authentication) for the module; keys for two nodes and one
    more that is never registered."""
    with Deployment(tmp_path_factory.mktemp("deployment"), node_configs(), extra_keys=1) as deployment:
        yield deployment
    assert not processes_with_env(*deployment.marker)


@pytest.fixture(scope="module")
def deployment(superlink):
    """The SuperLink with its two registered SuperNodes online (started once, for every federation)."""
    if not superlink.nodes:
        superlink.start_nodes()
    return superlink


def run_overrides(options: dict, out: Path) -> str:
    return " ".join(f"{key}={json.dumps(value)}" for key, value in {**options, "output.out": str(out)}.items())


def test_the_superlink_serves_tls_with_the_helpers_certificate(superlink, tmp_path):
    """A client trusting the helper's root bundle completes the TLS handshake, for a name the
    certificate was made for; one trusting another CA refuses the SuperLink's certificate."""
    context = ssl.create_default_context(cafile=str(superlink.certs["root.crt"]))
    with socket.create_connection(("127.0.0.1", superlink.port), timeout=30) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            names = {value for _, value in tls.getpeercert()["subjectAltName"]}
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
    assert {"localhost", "127.0.0.1"} <= names
    other = make_certificates(tmp_path / "other", ["localhost"])
    stranger = ssl.create_default_context(cafile=str(other["root.crt"]))
    with socket.create_connection(("127.0.0.1", superlink.port), timeout=30) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            stranger.wrap_socket(raw, server_hostname="localhost")


def test_a_supernode_with_an_unregistered_key_is_refused(superlink):
    """A SuperNode signing with a key the SuperLink was not given (claiming node 0's partition) asks
    to join and is refused: the SuperLink has no node for it, nothing goes online. It keeps
    retrying for the rest of the module, so the federations below run beside it."""
    intruder = superlink.start_node(2, "partition-id=0 num-partitions=2 noise-seed=1", superlink.node_ports[2])
    superlink.may_exit.append(intruder)  # refused, it may retry or give up
    log = superlink.directory / "superlink.log"
    poll(lambda: REFUSED in log.read_text(), START_SECONDS, "the intruder's refusal", 0.2)
    assert superlink.online() == len(superlink.nodes)  # the registered nodes, if started; never the intruder
    with contextlib.closing(sqlite3.connect(f"file:{superlink.database}?mode=ro", uri=True)) as db:
        (known,) = db.execute("SELECT COUNT(*) FROM node").fetchone()
    assert known == len(superlink.node_configs) * bool(superlink.registered)


@pytest.mark.slow  # two `flwr run`: a ClientApp process per node and message, seconds of imports each
def test_a_two_node_deployment_trains_with_the_nodes_own_noise(deployment, tmp_path, busy_machine):
    """The train task over two rounds (the second starts from the model the server broadcast); the
    mean task's round is checked the same way in the fault case below. On a loaded machine
    (`busy_machine`), where each ClientApp process takes longer to start than Flower's own deadline
    allows at high load (simulations.flower_patience)."""
    runs = {
        "train": {"run.task": "train", "run.rounds": 2, "run.seed": 5, "data.name": "digits",
                  "training.model": "logreg", "training.local-steps": 3, "privacy.mechanism": "piecewise",
                  "privacy.epsilon": 4.0},
    }  # fmt: skip
    for task, options in runs.items():
        out = tmp_path / f"{task}-deployed"
        completed = deployment.run(run_overrides({**options, "federation.clients": 2}, out))
        detail = completed.stdout[-3000:] + completed.stderr[-3000:] + deployment.logs()
        assert completed.returncode == 0, detail
        assert (out / "summary.json").exists(), detail  # `flwr run` exits 0 even when the ServerApp fails
        summary = json.loads((out / "summary.json").read_text())
        rounds = options["run.rounds"]
        assert (summary["engine"], summary["task"], summary["clients"]) == ("flower", task, 2)
        # the two registered nodes' clients only: nothing of the refused intruder's
        assert summary["rounds_finished"] == rounds and summary["clients_replied_total"] == 2 * rounds
        assert summary["private"] is True and np.isfinite(summary["epsilon"])
        deployed = pd.read_csv(out / "metrics.csv")
        assert (out / "privacy.csv").exists() and (out / "config.toml").exists()

        config = Config().with_options({**options, "federation.clients": 2})
        local = local_rounds(config, dict(enumerate(NODE_SEEDS)), tmp_path / f"{task}-local")
        columns = ["loss", "accuracy"]
        np.testing.assert_allclose(
            deployed[columns].to_numpy(float), local[columns].to_numpy(float), rtol=1e-12, atol=0
        )
        # the harness's secrets (what the server could derive from the run seed) give other numbers
        harness = local_rounds(config, seeds.client_secrets(5, 2), tmp_path / f"{task}-harness")
        assert not np.allclose(deployed[columns].to_numpy(float), harness[columns].to_numpy(float), rtol=1e-9)
    assert [node["status"] for node in deployment.listed()].count("online") == 2  # the intruder never joined
    listed = deployment.flwr("ls", CONNECTION, "--format", "json", timeout=START_SECONDS)
    assert {run["status"] for run in json.loads(listed.stdout)["runs"]} == {"finished:completed"}, listed.stdout


@pytest.mark.slow  # the SuperLink notices a killed node after two missed heartbeats (20 s here)
def test_a_supernode_killed_mid_round_fails_its_client_for_that_round_and_rejoins_the_next(deployment, tmp_path):
    out = tmp_path / "fault"
    options = {"run.task": "mean", "run.rounds": 3, "run.seed": 5, "data.users": 2000, "data.dims": 8,
               "federation.clients": 2, "federation.node-wait": 120.0}  # fmt: skip
    log = open(tmp_path / "flwr-run.log", "w")  # noqa: SIM115 - closed below
    run = subprocess.Popen(
        ["flwr", "run", ".", CONNECTION, "--stream", "--run-config", run_overrides(options, out)],
        cwd=ROOT, env=deployment.env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    log.close()
    deployment.processes.append(run)
    deployment.may_exit.append(run)
    poll(lambda: rounds_written(out) >= 1 or run.poll() is not None, RUN_SECONDS, "round 1", 0.1)
    assert rounds_written(out) == 1, (tmp_path / "flwr-run.log").read_text() + deployment.logs()
    # mid-round: once node 1 has started the ClientApp process for round 2's message (or after 20 s)
    with contextlib.suppress(AssertionError):
        poll(lambda: children(deployment.nodes[1].pid), 20, "node 1 working on round 2", 0.05)
    deployment.kill_node(1)
    poll(lambda: rounds_written(out) >= 2 or run.poll() is not None, LOST_SECONDS, "round 2 without node 1")
    deployment.restart_node(1)  # the same key: the SuperLink gives it its node id back
    run.wait(timeout=RUN_SECONDS)
    detail = (tmp_path / "flwr-run.log").read_text()[-3000:] + deployment.logs()

    text = {"failed_partitions": str, "failure_reasons": str}
    rounds = pd.read_csv(out / "metrics.csv", dtype=text, keep_default_na=False)
    assert rounds["clients_replied"].tolist() == [2, 1, 2], detail
    assert rounds["failed_partitions"].tolist() == ["", "1", ""], detail
    assert "unavailable" in rounds["failure_reasons"].iloc[1].lower(), detail
    # round 1, before the fault, is the local engine's with the nodes' own secrets (not the harness's)
    config = Config().with_options({key: value for key, value in options.items() if key != "federation.node-wait"})
    config = config.with_options({"run.rounds": 1})
    local = local_rounds(config, dict(enumerate(NODE_SEEDS)), tmp_path / "local")
    harness = local_rounds(config, seeds.client_secrets(5, 2), tmp_path / "harness")
    columns = ["mse", "mse_plain_mean"]
    np.testing.assert_allclose(rounds[columns].to_numpy(float)[:1], local[columns].to_numpy(float), rtol=1e-12, atol=0)
    assert not np.allclose(rounds[columns].to_numpy(float)[:1], harness[columns].to_numpy(float), rtol=1e-9)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rounds_finished"], summary["clients_replied_total"], summary["clients_failed_total"]) == (3, 5, 1)
    # the ledger: client 1 charged for rounds 1 and 3 only, each client once per round it replied in
    privacy = pd.read_csv(out / "privacy.csv").set_index("client_id")
    assert privacy["rounds"].to_dict() == {0: 3, 1: 2}
    assert privacy.loc[1, "basic_epsilon"] == pytest.approx(2 * privacy.loc[0, "basic_epsilon"] / 3, rel=1e-12)
    # the ledger's inputs, read back as one row per client and round replied in
    entries = read_entries(out / "privacy_entries.csv").to_dict("records")
    assert sorted((entry["client_id"], entry["round"]) for entry in entries) == [
        ("0", 1),
        ("0", 2),
        ("0", 3),
        ("1", 1),
        ("1", 3),
    ]
    poll(lambda: deployment.online() == 2, START_SECONDS, "node 1 online again")

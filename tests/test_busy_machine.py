"""`ldpfed simulate` on a machine where other things run: a Ray cluster started with `ray start`
(docs/deployment.md, Ray cluster), a `--ray-address` where no cluster answers, a stop before the
first round has ended.

- Beside a cluster: a run without `--ray-address` starts a Ray of its own, although the cluster is
  registered where a plain `ray.init()` looks (its `ray_current_cluster` file, and RAY_ADDRESS),
  and leaves the cluster running. The cluster is started as the docs start it (`ray start --head
  --block`), in a Ray temp dir of the test's own (RAY_TMPDIR), so that no other Ray on the machine
  sees it, and stopped as the docs stop it: SIGTERM to that `ray start` process, by PID.
- An unreachable `--ray-address` fails in one line naming it, exit 2, within `--ray-timeout`, and
  leaves `--out` as it was: at once where nothing listens (a TCP probe), after the timeout where a
  socket accepts connections but never answers (ray.init retries that for ever).
- A SIGINT or SIGTERM while the run connects stops it at once (exit 130 / 143): the directory then
  holds a finished, interrupted run with no rounds (summary.json), which a rerun replaces only
  with --overwrite, as any finished run's results.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from conftest import PRISTINE_ENVIRONMENT, processes_with_env
from helpers import StartedProcesses
from test_deployment import free_ports, poll, port_open, signal_all
from test_simulate_stop import ROOT, Simulate, assert_stopped

from ldpfed.outputs import OutputDir, Secret

BIN = Path(sys.executable).parent
START_SECONDS = 180  # a Ray head's start took 28 s on the loaded 2-core machine
RUN_SECONDS = 600  # hang guard: a default `simulate --rounds 1` took 46 s there, Ray's start included
FAIL_SECONDS = 120  # hang guard for a run that fails before Ray: imports and data took 9 s there
RAY_TIMEOUT = 5
STOP_GRACE_SECONDS = 30


class DocsCluster(StartedProcesses):
    """A Ray head started as docs/deployment.md starts one (`ray start --head --block`), on a free
    loopback port, with a Ray temp dir of its own (RAY_TMPDIR, where `ray start` writes the
    `ray_current_cluster` file that a plain `ray.init()` reads); its processes carry a marker."""

    def __init__(self, log: Path) -> None:
        # short: Ray's unix sockets live under the temp dir, and their paths may not exceed 107 bytes
        self.directory = Path(tempfile.mkdtemp(prefix="ldpfed-rt-"))
        self.marker = ("LDPFED_BUSY_MACHINE_CLUSTER", uuid.uuid4().hex)
        self.env = {
            **user_env(),
            "RAY_TMPDIR": str(self.directory),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self.port, self.client_port = free_ports(2)
        self.log = log
        self.head: subprocess.Popen | None = None

    @property
    def registered(self) -> Path:
        return self.directory / "ray" / "ray_current_cluster"

    def launch(self) -> None:
        command = [str(BIN / "ray"), "start", "--head", "--block", f"--port={self.port}", "--num-cpus=1"]
        command += ["--node-ip-address=127.0.0.1", "--disable-usage-stats", "--include-dashboard=false"]
        command += [f"--ray-client-server-port={self.client_port}"]
        with open(self.log, "w") as log:
            self.head = subprocess.Popen(
                command,
                env={**self.env, self.marker[0]: self.marker[1]},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        poll(lambda: self.registered.exists() or self.head.poll() is not None, START_SECONDS, "ray_current_cluster")
        assert self.head.poll() is None, self.log.read_text()[-3000:]
        poll(lambda: port_open(self.port), START_SECONDS, "the Ray head listening")

    def processes(self) -> set[int]:
        return set(processes_with_env(*self.marker))

    def stop(self) -> None:
        """SIGTERM to `ray start --block` (it ends the processes it started), as the docs say; SIGKILL
        to anything of the cluster left after STOP_GRACE_SECONDS."""
        if self.head is not None and self.head.poll() is None:
            self.head.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.head.wait(timeout=STOP_GRACE_SECONDS)
        with contextlib.suppress(AssertionError):
            poll(lambda: not self.processes(), STOP_GRACE_SECONDS, "the cluster's exit")
        signal_all(self.processes(), signal.SIGKILL)
        if self.head is not None:
            self.head.wait(timeout=STOP_GRACE_SECONDS)
        poll(lambda: not self.processes(), START_SECONDS, "the cluster's processes killed")
        shutil.rmtree(self.directory, ignore_errors=True)


def simulate(env: dict, *options: str, timeout: float) -> subprocess.CompletedProcess:
    command = [str(BIN / "ldpfed"), "simulate", *options]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def user_env() -> dict:
    """The environment of a user's shell (the session's, this checkout first on the import path)."""
    return {
        **PRISTINE_ENVIRONMENT,
        "PYTHONPATH": os.pathsep.join([str(ROOT), PRISTINE_ENVIRONMENT.get("PYTHONPATH", "")]),
    }


@contextlib.contextmanager
def silent_listener():
    """A loopback port that accepts TCP connections (the kernel completes them) but never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def an_earlier_directory(tmp_path: Path) -> Path:
    """An existing --out holding a file that is no ldpfed result (which a run may write beside)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    return out


def assert_one_error_naming(done: subprocess.CompletedProcess, address: str) -> None:
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and address in errors[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


@pytest.mark.slow  # a Ray head and a run with its own Ray: 48 s on the loaded 2-core machine
def test_a_plain_flower_run_beside_a_ray_cluster_starts_its_own_ray_and_leaves_the_cluster_up(tmp_path):
    """A plain ray.init() joins the cluster (its ray_current_cluster file, or RAY_ADDRESS) and refuses
    the local CPU count (a Ray traceback, exit 1, config.toml and noise_secret left): the run asks
    for a Ray of its own."""
    with DocsCluster(tmp_path / "head.log") as cluster:
        cluster_processes = cluster.processes()
        assert cluster.registered.read_text().strip().endswith(f":{cluster.port}")
        run_marker = ("LDPFED_BUSY_MACHINE_RUN", uuid.uuid4().hex)
        env = {**cluster.env, "RAY_ADDRESS": cluster.registered.read_text().strip(), run_marker[0]: run_marker[1]}
        out = tmp_path / "run"
        done = simulate(env, "--rounds", "1", "--out", str(out), timeout=RUN_SECONDS)
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads((out / "summary.json").read_text())
        assert summary["engine"] == "flower" and summary["rounds_finished"] == 1
        poll(lambda: not processes_with_env(*run_marker), STOP_GRACE_SECONDS, "the run's own Ray stopped")
        assert cluster.head.poll() is None and port_open(cluster.port)  # the cluster still runs
        assert cluster_processes <= cluster.processes()  # every process of it
    assert not cluster.processes()


def test_a_closed_ray_address_fails_at_once_in_one_line_naming_it(tmp_path):
    """Nothing listens there: the TCP probe refuses it before the run writes anything (ray.init
    alone retries it for ever, and the run waited on it deaf to SIGTERM and to a second SIGINT)."""
    (port,) = free_ports(1)
    address = f"127.0.0.1:{port}"
    out = an_earlier_directory(tmp_path)
    options = ["--rounds", "1", "--ray-address", address, "--ray-timeout", str(RAY_TIMEOUT), "--out", str(out)]
    done = simulate(user_env(), *options, timeout=FAIL_SECONDS + RAY_TIMEOUT)
    assert_one_error_naming(done, address)
    assert sorted(os.listdir(out)) == ["notes.txt"]


def test_a_cluster_that_never_answers_fails_after_ray_timeout_and_leaves_out_as_it_was(tmp_path):
    """The port accepts connections, so the probe passes and ray.init waits for an answer that never
    comes: the run gives it up after --ray-timeout, and removes the files it had written meanwhile
    (config.toml, noise_secret, flower.log, the manifest)."""
    out = an_earlier_directory(tmp_path)
    with silent_listener() as address:
        options = ["--rounds", "1", "--ray-address", address, "--ray-timeout", str(RAY_TIMEOUT), "--out", str(out)]
        done = simulate(user_env(), *options, timeout=FAIL_SECONDS + RAY_TIMEOUT)
    assert_one_error_naming(done, address)
    assert "did not answer" in done.stderr
    assert sorted(os.listdir(out)) == ["notes.txt"]


def stopped_while_connecting(tmp_path: Path, signum: int) -> Path:
    """The --out of a run stopped by `signum` while it connects to a cluster that never answers:
    at once, exit 128 + signum, one line, a finished, interrupted run of zero rounds on disk."""
    with silent_listener() as address:
        run = Simulate(["--rounds", "3", "--ray-address", address, "--ray-timeout", "600"], tmp_path / "run")
        try:
            run.wait_for(lambda: run.printed("flower mean: 10 clients: starting Ray..."), "the start line")
            summary = assert_stopped(run, signum, run.stop(signum), rounds_at_least=0)
        finally:
            run.kill()
    assert summary["rounds_finished"] == 0 and summary["engine"] == "flower"
    return run.out


def test_sigterm_while_connecting_stops_the_run_with_a_summary_of_no_rounds(tmp_path):
    """The run no longer waits on ray.init's endless retries: the signal ends the wait."""
    stopped_while_connecting(tmp_path, signal.SIGTERM)


def test_sigint_while_connecting_leaves_a_run_of_no_rounds_that_only_overwrite_replaces(tmp_path):
    """The stopped run's directory holds a finished run's results: refused without --overwrite (the
    rule for every finished run), replaced with it."""
    out = stopped_while_connecting(tmp_path, signal.SIGINT)
    rerun = ["--engine", "local", "--rounds", "1", "--out", str(out)]
    refused = simulate(user_env(), *rerun, timeout=FAIL_SECONDS)
    assert refused.returncode == 2 and "holds results of another run" in refused.stderr, refused.stderr[-3000:]
    done = simulate(user_env(), *rerun, "--overwrite", timeout=FAIL_SECONDS)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds_finished"] == 1 and summary["interrupted"] is False and summary["engine"] == "local"


def test_discard_removes_what_the_writes_put_there_and_the_directories_they_made(tmp_path):
    """What a run whose Ray did not come up does with its --out (`OutputDir.discard`)."""
    (tmp_path / "notes.txt").write_text("mine\n")
    output = OutputDir.prepare(tmp_path / "new" / "out", command="simulate")
    output.write({"config.toml": "[run]\n"})
    output.write({"noise_secret": Secret("7\n")})
    output.discard()
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
    beside = OutputDir.prepare(tmp_path, command="simulate")
    beside.write({"config.toml": "[run]\n"})
    beside.discard()
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]

"""Start a Flower simulation in this process, on the Ray backend (what `ldpfed simulate` does).

`flwr.simulation.run_simulation` is the in-process entry point Flower 1.41 still ships (marked
deprecated in favour of `flwr run`, which needs a background SuperLink; both work with the same
apps here). The ServerApp runs in a thread of this process, so its per-round callback can drive
the progress display; ClientApps run in Ray actors with `cpus-per-client` CPUs each, on at most
`cpus` CPUs (0 = all).

Quiet by default: Flower's logger is raised to CRITICAL and everything written to the process'
stderr file descriptor (Flower's tracebacks of failing clients, Ray's start-up lines and its
workers' output, which Ray forwards) goes to a log file (`DIR/flower.log` with `--out`, else a
temporary file whose tail is shown if the run crashes). The progress display writes to a
duplicate of the original stderr. `verbose=True` leaves all of it on the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from pathlib import Path

from simulations.config import SimulationConfig

QUIET_ENVIRONMENT = {
    "RAY_DEDUP_LOGS": "1",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "RAY_DISABLE_IMPORT_WARNING": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "FLWR_TELEMETRY_ENABLED": "0",
    "PYTHONWARNINGS": "ignore::DeprecationWarning,ignore::FutureWarning",
    "TQDM_DISABLE": "1",
}


def backend_config(config: SimulationConfig, verbose: bool = False) -> dict:
    """Ray backend options: resources per client and the CPUs Ray may use."""
    init_args = {
        "num_cpus": config.cpus or os.cpu_count() or 1,
        "num_gpus": 0,
        "include_dashboard": False,
        "logging_level": "INFO" if verbose else "ERROR",
        "log_to_driver": verbose,
    }
    return {
        "client_resources": {"num_cpus": config.cpus_per_client, "num_gpus": 0.0},
        "init_args": init_args,
    }


@contextlib.contextmanager
def _stderr_to(log_path: Path):
    """Point file descriptor 2 at `log_path` (children inherit it); yield a stream to the old stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    terminal = os.fdopen(os.dup(saved), "w", buffering=1)
    with open(log_path, "a") as log_file:
        os.dup2(log_file.fileno(), 2)
        try:
            yield terminal
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            terminal.close()


def run(config: SimulationConfig, progress=None, *, verbose: bool = False) -> dict:
    """Run the federation described by (validated) `config`; return its summary.

    `progress` (optional, e.g. `simulations.progress.RoundProgress`): `start(stream)` is called
    with the stream to write to (the terminal's stderr) before the simulation starts,
    `update(row)` after every round, `stop()` at the end. With `engine = "local"` the same rounds
    run in this process without Flower (`simulations.federation.run_local`).
    """
    if config.engine == "local":
        return _run_local(config, progress)
    from flwr.simulation import run_simulation

    from clients.client_app import app as client_app
    from server.server_app import make_server_app

    result: dict = {}
    server_app = make_server_app(config, progress.update if progress else None, result)
    if verbose:
        with _showing(progress, sys.stderr):
            run_simulation(server_app, client_app, config.clients, "ray", backend_config(config, True))
    else:
        os.environ.update(QUIET_ENVIRONMENT)
        flower_logger = logging.getLogger("flwr")
        previous_level = flower_logger.level
        flower_logger.setLevel(logging.CRITICAL)
        if config.out:
            Path(config.out).mkdir(parents=True, exist_ok=True)
            log_path = Path(config.out) / "flower.log"
        else:
            handle, name = tempfile.mkstemp(prefix="ldpfed-flower-", suffix=".log")
            os.close(handle)  # reopened by name in _stderr_to
            log_path = Path(name)
        try:
            with _stderr_to(log_path) as terminal, _showing(progress, terminal):
                run_simulation(server_app, client_app, config.clients, "ray", backend_config(config))
        except BaseException:
            tail = log_path.read_text(errors="replace").splitlines()[-30:]
            sys.stderr.write("\n".join(["--- Flower/Ray log (tail) ---", *tail, ""]))
            raise
        finally:
            flower_logger.setLevel(previous_level)
            if not config.out:
                log_path.unlink(missing_ok=True)
    if "summary" not in result:
        raise RuntimeError("the Flower simulation ended without a result (see the log; rerun with --verbose)")
    return result["summary"]


def _run_local(config: SimulationConfig, progress=None) -> dict:
    from simulations.federation import run_local

    with _showing(progress, sys.stderr):
        return run_local(config, progress.update if progress else None)


@contextlib.contextmanager
def _showing(progress, stream):
    """`progress.start(stream)` ... `progress.stop()` around a run (nothing without a progress)."""
    if progress is None:
        yield
        return
    progress.start(stream)
    try:
        yield
    finally:
        progress.stop()

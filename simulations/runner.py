"""Start a Flower simulation in this process, on the Ray backend (what `ldpfed simulate` does).

`flwr.simulation.run_simulation` is the in-process entry point Flower 1.41 still ships (marked
deprecated in favour of `flwr run`, which needs a background SuperLink; both work with the same
apps here). The ServerApp runs in a thread of this process, so its per-round callback can drive
the progress display; ClientApps (one per Flower node, each hosting a cohort of clients) run in Ray
actors with `cpus-per-client` CPUs and `gpus-per-node` GPUs each, on at most `cpus` CPUs (0 = all).

Quiet by default: Flower's logger is raised to CRITICAL and everything written to the process'
stderr file descriptor (Flower's tracebacks of failing clients, Ray's start-up lines and its
workers' output, which Ray forwards) goes to a log file (`DIR/flower.log` with `--out`, else a
temporary file whose tail is shown if the run crashes). The progress display writes to a
duplicate of the original stderr. `verbose=True` leaves all of it on the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import tempfile
from pathlib import Path

from ldpfed.config import Config

QUIET_ENVIRONMENT = {
    "RAY_DEDUP_LOGS": "1",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "RAY_DISABLE_IMPORT_WARNING": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "FLWR_TELEMETRY_ENABLED": "0",
    "PYTHONWARNINGS": "ignore::DeprecationWarning,ignore::FutureWarning",
    "TQDM_DISABLE": "1",
}


def backend_config(config: Config, verbose: bool = False, nodes: int | None = None) -> dict:
    """Ray backend options: resources per node (`cpus-per-client` CPUs, `gpus-per-node` GPUs, a
    fraction letting several nodes share one GPU) and the CPUs and GPUs Ray may use. Flower starts
    as many actors as those CPUs hold (CPUs / cpus-per-client), each a Python process of a few
    hundred MiB, so with `nodes` Ray gets no more CPUs than the nodes use: one actor per node at
    most, none idle."""
    gpus = config.federation.gpus_per_node
    cpus = config.federation.cpus or os.cpu_count() or 1
    if nodes:
        cpus = min(cpus, max(1, math.ceil(nodes * config.federation.cpus_per_client)))
    init_args = {
        "num_cpus": cpus,
        "num_gpus": _visible_gpus() if gpus > 0 else 0,
        "include_dashboard": False,
        "logging_level": "INFO" if verbose else "ERROR",
        "log_to_driver": verbose,
    }
    return {
        "client_resources": {"num_cpus": config.federation.cpus_per_client, "num_gpus": float(gpus)},
        "init_args": init_args,
    }


def _visible_gpus() -> int:
    import torch

    return torch.cuda.device_count()


@contextlib.contextmanager
def _stderr_to(log_path: Path):
    """Point file descriptor 2 at `log_path` (children inherit it); yield a stream to the old stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    terminal = os.fdopen(os.dup(saved), "w", buffering=1)
    with open(log_path, "w") as log_file:  # this run's log only
        os.dup2(log_file.fileno(), 2)
        try:
            yield terminal
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            terminal.close()


def run_simulation(
    config: Config, server_app, client_app, progress=None, verbose: bool = False, nodes: int | None = None
) -> None:
    """Run `server_app` and `client_app` under Flower's simulation runtime (Ray) with `nodes`
    Flower nodes (default: one per client) and one actor per node at most (`backend_config`),
    quietly unless `verbose`. `progress` (optional, e.g. `simulations.progress.RoundProgress`):
    `start(stream)` with the terminal's stderr before the simulation starts, `stop()` at the end."""
    from flwr.simulation import run_simulation as flower_run_simulation

    clients = nodes or config.federation.clients
    if verbose:
        with showing(progress, sys.stderr):
            flower_run_simulation(server_app, client_app, clients, "ray", backend_config(config, True, clients))
        return
    os.environ.update(QUIET_ENVIRONMENT)
    flower_logger = logging.getLogger("flwr")
    previous_level = flower_logger.level
    flower_logger.setLevel(logging.CRITICAL)
    out = config.output.out
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        log_path = Path(out) / "flower.log"
    else:
        handle, name = tempfile.mkstemp(prefix="ldpfed-flower-", suffix=".log")
        os.close(handle)  # reopened by name in _stderr_to
        log_path = Path(name)
    try:
        with _stderr_to(log_path) as terminal, showing(progress, terminal):
            flower_run_simulation(server_app, client_app, clients, "ray", backend_config(config, nodes=clients))
    except Exception:
        tail = log_path.read_text(errors="replace").splitlines()[-30:]
        sys.stderr.write("\n".join(["--- Flower/Ray log (tail) ---", *tail, ""]))
        raise
    finally:
        flower_logger.setLevel(previous_level)
        if not out:
            log_path.unlink(missing_ok=True)


@contextlib.contextmanager
def showing(progress, stream):
    """`progress.start(stream)` ... `progress.stop()` around a run (nothing without a progress)."""
    if progress is None:
        yield
        return
    progress.start(stream or sys.stderr)
    try:
        yield
    finally:
        progress.stop()

"""Flower ServerApp: `LDPStrategy` (server/strategy.py) around an ldpfed server half.

`ldpfed simulate` builds its own ServerApp with `make_server_app` around a server half that the
harness made with the server's seed and the data seed only (never the run seed or a client's
secret), plus the harness's per-round callback. Under `flwr run .` the options come from
`[tool.flwr.app.config]` and `--run-config` (`context.run_config`, read once); the server derives
its seed and the data seed from `run.seed`, while the nodes draw their own noise (client_app.py).
A bad run config fails the ServerApp with one line (`RunFailed`; see below for what Flower shows).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from ldpfed.config import Config
from ldpfed.planning.run import flower_run_config
from ldpfed.protocols import seeds
from ldpfed.protocols.session import Session, preflight, server_half
from ldpfed.validation import LDPValueError
from server.strategy import LDPStrategy, RunStopped, StoppableGrid, flower_fedavg


def make_server_app(
    half,
    clients: int,
    rounds: int,
    on_round: Callable[[int, dict], None],
    stop: threading.Event | None = None,
    done: threading.Event | None = None,
    on_stop: Callable[[], None] | None = None,
) -> ServerApp:
    """A ServerApp running `half` for `rounds` rounds over `clients` partitions. `stop` (set by the
    harness on SIGINT or SIGTERM) ends it between pulls (`StoppableGrid`): it calls `on_stop()` (the
    harness ends the round's client tasks) and returns normally, so that Flower's runtime ends in
    order; it sets `done` when it returns. Its thread blocks SIGINT and SIGTERM (as do the threads
    it starts, e.g. torch's): the main thread handles them."""
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            LDPStrategy(half, clients, on_round).run(grid if stop is None else StoppableGrid(grid, stop), rounds)
        except RunStopped:
            if on_stop is not None:
                on_stop()
        finally:
            if done is not None:
                done.set()

    return server_app


# ---- `flwr run .`: options from the run config -----------------------------------------------
# `flwr run` (Flower 1.41) exits 0 whatever becomes of the run: it starts the run, streams its log
# and returns (flwr/cli/run/run.py). What an app can do is fail its ServerApp, which Flower records
# as the run's status `finished:failed` with the exception's message as its details (`flwr ls
# --run-id N`), after one `ldpfed: error: ...` line in the streamed log.
app = ServerApp()
logger = logging.getLogger("flwr")  # Flower's logger: its records reach the run's log stream


class RunFailed(RuntimeError):
    """The ServerApp of `flwr run` fails with one line: a bad run config or data, or no client
    replied in any round."""

    def __init__(self, message: str) -> None:
        message = " ".join(str(message).split())
        logger.error("ldpfed: error: %s", message)
        super().__init__(message)


def run_config(context: Context) -> Config:
    """The run config (`[tool.flwr.app.config]` + `--run-config`), validated and with its total
    budget planned as the clients plan it (`flower_run_config`); else `RunFailed`."""
    try:
        return flower_run_config(dict(context.run_config))
    except LDPValueError as error:
        raise RunFailed(f"invalid run config: {error}") from None


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = run_config(context)
    data_seed = seeds.data_seed(config.run.seed)
    try:
        config, _ = preflight(config)
        half = server_half(config, data_seed, seeds.server_seed(config.run.seed), flower_fedavg)
        session = Session(config, half, data_seed, engine="flower", noise=seeds.NODES)
    except LDPValueError as error:
        raise RunFailed(str(error)) from None

    def on_round(server_round: int, metrics: dict) -> None:
        session.after_round(server_round, metrics, {})

    LDPStrategy(half, config.federation.clients, on_round, config.federation.node_wait).run(grid, config.run.rounds)
    summary = session.finish()
    print(f"ldpfed: {summary}")
    if summary["clients_replied_total"] == 0:
        raise RunFailed(f"every client failed in every round ({summary['failure_reasons']})")

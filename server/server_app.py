"""Flower ServerApp: `LDPStrategy` (server/strategy.py) around an ldpfed server half.

`ldpfed simulate` builds its own ServerApp with `make_server_app` around a server half that the
harness made with the server's seed and the data seed only (never the run seed or a client's
secret), plus the harness's per-round callback. Under `flwr run .` the options come from
`[tool.flwr.app.config]` and `--run-config` (`context.run_config`, read once); the server derives
its seed and the data seed from `run.seed`, while the nodes draw their own noise (client_app.py).
A bad run config fails the ServerApp with one line (`RunFailed`; see below for what Flower shows).

The deployed ServerApp runs the local trust model only, and refuses (`RunFailed`, before any
message goes out) a run config it cannot host soundly: another trust model (shuffle, central and
secagg run under `ldpfed simulate`, whose harnesses build their own ServerApp and ClientApp; the
deployed ClientApp answers the local model's rounds only, so a secagg run would have no client
taking part in SecAgg+, and running the local model instead would state a guarantee nobody asked
for), and canaries (their inclusion coins live with the simulation harness, not on a deployment).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

import ldpfed.tasks as tasks
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.session import Session
from ldpfed.tasks import flower_run_config, preflight, server_half
from ldpfed.validation import LDPValueError
from server.strategy import LDPStrategy, Replies, RunStopped, StoppableGrid, flower_fedavg


def make_server_app(
    half,
    clients: int,
    rounds: int,
    on_round: Callable[[int, dict], None],
    stop: threading.Event | None = None,
    done: threading.Event | None = None,
    on_stop: Callable[[], None] | None = None,
    watch: Callable[[Replies], None] | None = None,
) -> ServerApp:
    """A ServerApp running `half` for `rounds` rounds over `clients` partitions. `stop` (set by the
    harness on SIGINT or SIGTERM) ends it between pulls (`StoppableGrid`): it calls `on_stop()` (the
    harness ends the round's client tasks) and returns normally, so that Flower's runtime ends in
    order; it sets `done` when it returns. `watch(replies)` after each pull of replies (the
    harness's start-up progress). Its thread blocks SIGINT and SIGTERM (as do the threads it
    starts, e.g. torch's): the main thread handles them."""
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            LDPStrategy(half, clients, on_round).run(StoppableGrid(grid, stop, watch), rounds)
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
LATE_SECONDS = 60.0  # replies missing this long: a warning in the run's log, then again every LATE_SECONDS
PULL_SECONDS = 1.0  # how often the deployed ServerApp asks the SuperLink for replies (Flower's own grid: 3 s)


class RunFailed(RuntimeError):
    """The ServerApp of `flwr run` fails with one line: a bad run config or data, or no client
    replied in any round."""

    def __init__(self, message: str) -> None:
        message = " ".join(str(message).split())
        logger.error("ldpfed: error: %s", message)
        super().__init__(message)


class LateNodes:
    """The deployed ServerApp's `watch` (`StoppableGrid`): a warning in the run's log, which `flwr
    run --stream` shows, when replies are still missing LATE_SECONDS after their messages went out,
    and every LATE_SECONDS after that. Flower itself says nothing there of a node that never
    replies: a SuperNode whose ClientApp processes cannot start (each one must reach the SuperNode
    within Flower's task-start deadline, 30 s in Flower 1.42, or is refused with "Runtime
    task-token authentication failed" and started again) leaves the run waiting, `flwr ls` saying
    it runs (docs/deployment.md, "A loaded machine")."""

    def __init__(self, every: float = LATE_SECONDS) -> None:
        self.every, self.batch, self.warned = every, None, 0

    def __call__(self, replies: Replies) -> None:
        if replies.pushed_at != self.batch:
            self.batch, self.warned = replies.pushed_at, 0
        if not replies.waiting or replies.seconds < (self.warned + 1) * self.every:
            return
        self.warned += 1
        what = f"round {replies.server_round}" if replies.server_round else f"the {replies.kind} before round 1"
        shown = ", ".join(map(str, replies.waiting[:10])) + (", ..." if len(replies.waiting) > 10 else "")
        logger.warning(
            "ldpfed: %s: %d of %d nodes have not replied in %.0f s (node ids %s). A node whose ClientApp "
            "processes cannot start never replies; 'Runtime task-token authentication failed' in its SuperNode's "
            "log means they missed Flower's start deadline (a loaded machine): start the SuperLink and SuperNodes "
            "with `python -m simulations.flower_patience` (docs/deployment.md, 'A loaded machine').",
            what, len(replies.waiting), replies.sent, replies.seconds, shown,
        )  # fmt: skip


def run_config(context: Context) -> Config:
    """The run config (`[tool.flwr.app.config]` + `--run-config`), validated and with its total
    budget planned as the clients plan it (`flower_run_config`); else `RunFailed`."""
    try:
        return flower_run_config(dict(context.run_config))
    except LDPValueError as error:
        raise RunFailed(f"invalid run config: {error}") from None


def check_deployable(config: Config) -> None:
    """`RunFailed` for what the deployed ServerApp cannot host (module docstring): a trust model
    other than local, canaries."""
    trust = config.privacy.trust
    if trust != "local":
        raise RunFailed(
            f"trust = {trust!r} is not available under flwr run: the deployed ServerApp and ClientApp run the local "
            f"trust model only, and would not run {trust} (nor state its guarantee); run it with `ldpfed simulate "
            f'--trust {trust}`, or set trust = "local"'
        )
    if config.training.canaries > 0:
        raise RunFailed(
            f"canaries = {config.training.canaries} is not available under flwr run: the canaries' inclusion coins "
            "live with the simulation harness, not on a deployment; run the audit with `ldpfed simulate --canaries`, "
            "or set canaries = 0"
        )


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = run_config(context)
    check_deployable(config)
    data_seed = seeds.data_seed(config.run.seed)
    try:
        config, _ = preflight(config)
        half = server_half(config, data_seed, seeds.server_seed(config.run.seed), flower_fedavg)
        session = Session(tasks.of(config), config, half, data_seed, engine="flower", noise=seeds.NODES)
    except LDPValueError as error:
        raise RunFailed(str(error)) from None

    def on_round(server_round: int, metrics: dict) -> None:
        session.after_round(server_round, metrics, {})

    strategy = LDPStrategy(half, config.federation.clients, on_round, config.federation.node_wait)
    strategy.run(StoppableGrid(grid, watch=LateNodes(), interval=PULL_SECONDS), config.run.rounds)
    summary = session.finish()
    print(f"ldpfed: {summary}")
    if summary["clients_replied_total"] == 0:
        raise RunFailed(f"every client failed in every round ({summary['failure_reasons']})")

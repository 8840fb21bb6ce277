"""The harness of `ldpfed simulate`: it plays the world, not the server (spec: federated.md,
"Who knows the noise").

From the run seed it spawns the data seed and the server's seed, and from the noise root (128
bits of OS entropy, or `--noise-seed`) one secret per client (`World`); the server half gets its
seed and the data seed, each client half its secret (OS entropy per client with `--fresh-noise`).
The noise root goes to `noise_secret` in the results directory only, to replay the run. Two
engines run the same halves in the same order:
- `flower`: the ServerApp (an `LDPStrategy` around the server half) and the ClientApps on Ray
  workers (simulations.runner), K = `federation.nodes` Flower nodes each hosting a contiguous
  block of the clients (ldpfed.protocols.nodes); each node writes its clients' diagnostics (clean
  clipped update, loss) to the run's local output (`DIR/diagnostics`, or a temporary directory),
  and after each round the harness joins them with the server's aggregate and removes them;
- `local`: the same node halves called in this process (`ldpfed.protocols.base.local_round`), the
  diagnostics handed over in memory. Same seed and noise root, same numbers as `flower`.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import threading
from pathlib import Path

from ldpfed.config import Config
from ldpfed.outputs import OutputDir, Secret
from ldpfed.protocols import seeds
from ldpfed.protocols.base import local_round
from ldpfed.protocols.nodes import NodeSet
from ldpfed.protocols.recorder import output_dir
from ldpfed.protocols.session import Session, World, bind_data, layout, node_half, server_half, without_seed
from server.strategy import flower_fedavg

SERVER_STOP_SECONDS = 10.0
NOISE_SECRET = "noise_secret"  # the run's noise root, in its results directory (owner-only)


class Interrupted(Exception):
    """Ctrl-C: the summary of the rounds that finished (written, marked interrupted)."""

    def __init__(self, summary: dict) -> None:
        super().__init__(f"interrupted after {summary['rounds_finished']} of {summary['rounds']} rounds")
        self.summary = summary


def run(
    config: Config,
    progress=None,
    *,
    output: OutputDir | None = None,
    verbose: bool = False,
    noise_seed: int | None = None,
) -> dict:
    """Run the federation described by (validated) `config`; return its summary. `output`: the
    results directory, checked before any work (default: checked here). `noise_seed`: the root of
    the clients' secrets (default: 128 bits of OS entropy), written to `noise_secret` in the
    results directory, never given to the server half. On Ctrl-C the finished rounds' files are
    written (summary marked interrupted), Ray is shut down and `Interrupted` is raised; a further
    Ctrl-C during that cleanup is ignored."""
    world = World.from_config(config, noise_seed)
    output = output_dir(config) if output is None else output
    # users/dims 0 mean "from the data": bind them here as the CLI's preflight does, since the halves
    # get the config without its seed and could not bind it themselves (bind_data re-validates)
    config = bind_data(config, world.data)
    half = server_half(config, world.data, world.server, flower_fedavg)
    session = Session(config, half, world.data, engine=config.run.engine, output=output, noise=world.noise)
    if world.noise_root is not None:  # before the first round: an interrupted run can be replayed too
        output.write({NOISE_SECRET: Secret(seeds.format_noise_seed(world.noise_root) + "\n")})
    runner = run_local if config.run.engine == "local" else run_flower
    try:
        runner(config, world, half, session, progress, verbose)
    except KeyboardInterrupt:
        with _sigint_ignored():
            summary = session.finish(interrupted=True)
            _shutdown_ray()
        raise Interrupted(summary) from None
    return session.finish()


@contextlib.contextmanager
def _sigint_ignored():
    """The cleanup after a Ctrl-C runs to its end: a further Ctrl-C meanwhile is ignored (it takes
    seconds and leaves complete files); the previous handler is restored after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _shutdown_ray() -> None:
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _stop_flower(stop: threading.Event, done: threading.Event) -> None:
    """After Ctrl-C (issue 11, item 12): Flower's runtime has stopped its workers, but its ServerApp
    thread would wait up to an hour for replies that never come (the process then outlived the
    Ctrl-C by minutes). Tell it to stop (`StoppableGrid`), wait until it has returned (so no round
    is recorded after the summary), shut Ray down."""
    stop.set()
    done.wait(SERVER_STOP_SECONDS)
    _shutdown_ray()


def remove_diagnostics(directory: Path, ours: bool) -> None:
    """After the run, however it ended (Ctrl-C, an error): the nodes' diagnostics files of a round
    the harness did not join (clean values, complete or half-written) are deleted, then the
    directory. `ours`: a temporary directory of the harness, removed whole; `OUT/diagnostics` loses
    only ldpfed's files (and itself when that leaves it empty)."""
    if ours:
        shutil.rmtree(directory, ignore_errors=True)
        return
    for path in [*directory.glob("round-*-node-*.npz"), *directory.glob(".round-*-node-*.npz*")]:
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        directory.rmdir()


def run_local(config: Config, world: World, half, session: Session, progress, verbose: bool) -> None:
    from simulations.runner import showing

    nodes = NodeSet(
        layout(config), lambda partitions: node_half(config, partitions, world.data, world.secrets_of(partitions))
    )
    with showing(progress, None):
        for server_round in range(1, config.run.rounds + 1):
            diagnostics: dict[int, dict] = {}
            metrics = local_round(
                half,
                nodes,
                server_round,
                lambda r, pid, values: diagnostics.__setitem__(pid, values),  # noqa: B023
            )
            row = session.after_round(server_round, metrics, diagnostics if config.output.diagnostics else {})
            if progress is not None:
                progress.update(row)


def run_flower(config: Config, world: World, half, session: Session, progress, verbose: bool) -> None:
    from clients.client_app import make_client_app, read_diagnostics
    from server.server_app import make_server_app
    from simulations.runner import run_simulation

    keep = bool(config.output.out)
    directory = (
        Path(config.output.out) / "diagnostics" if keep else Path(tempfile.mkdtemp(prefix="ldpfed-diagnostics-"))
    )
    directory.mkdir(parents=True, exist_ok=True)

    def on_round(server_round: int, metrics: dict) -> None:
        diagnostics = {}
        for path in sorted(directory.glob(f"round-{server_round:05d}-node-*.npz")):
            diagnostics.update(read_diagnostics(path))
            path.unlink()
        row = session.after_round(server_round, metrics, diagnostics)
        if progress is not None:
            progress.update(row)

    client_app = make_client_app(
        without_seed(config), world.data, world.secrets, str(directory) if config.output.diagnostics else None
    )
    stop, done = threading.Event(), threading.Event()
    server_app = make_server_app(half, config.federation.clients, config.run.rounds, on_round, stop, done)
    try:
        run_simulation(config, server_app, client_app, progress, verbose, nodes=layout(config).nodes)
    except KeyboardInterrupt:
        with _sigint_ignored():
            _stop_flower(stop, done)
        raise
    finally:
        remove_diagnostics(directory, ours=not keep)
    if len(session.recorder.rows) < config.run.rounds:
        raise RuntimeError("the Flower simulation ended before its last round (see the log; rerun with --verbose)")

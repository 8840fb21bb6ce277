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
- `local`: the same node halves called in this process (`ldpfed.protocols.nodes.local_round`), the
  diagnostics handed over in memory. Same seed and noise root, same numbers as `flower`.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import signal
import tempfile
import threading
from pathlib import Path

import ldpfed.tasks as tasks
from ldpfed.accounting.accountants import accounted_without_library
from ldpfed.config import Config
from ldpfed.outputs import OutputDir, Secret
from ldpfed.protocols import canaries, seeds
from ldpfed.protocols.nodes import NodeSet, local_round
from ldpfed.protocols.recorder import output_dir
from ldpfed.protocols.session import Session, World
from ldpfed.samplers.words import compiled
from ldpfed.tasks import bind_data, layout, node_half, server_half, without_seed
from server.strategy import flower_fedavg
from simulations import runner as flower_runner
from simulations.runner import RayStart, kill_client_actors, showing
from simulations.stopping import Stopped, StopRequest

SERVER_STOP_SECONDS = 10.0
NOISE_SECRET = "noise_secret"  # the run's noise root, in its results directory (owner-only)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: the summary of the rounds that finished (written, marked interrupted);
    `exit_code` is 130 for SIGINT, 143 for SIGTERM."""

    def __init__(self, summary: dict, stop: StopRequest) -> None:
        by = "" if stop.signum == signal.SIGINT else f" by {signal.Signals(stop.signum).name}"
        super().__init__(f"interrupted{by} after {summary['rounds_finished']} of {summary['rounds']} rounds")
        self.summary, self.exit_code = summary, stop.exit_code


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
    results directory, never given to the server half. On SIGINT or SIGTERM (simulations.stopping)
    the finished rounds' files are written (summary marked interrupted, also with no round
    finished), Ray is shut down and `Interrupted` is raised; a further signal during that cleanup is
    ignored. When Ray does not come up (`RayStart.failed`), the files this run wrote are removed."""
    stop = StopRequest()
    with stop.handling():
        output = output_dir(config) if output is None else output
        # users/dims 0 mean "from the data": bind them here as the CLI's preflight does, since the halves
        # get the config without its seed and could not bind it themselves (bind_data re-validates)
        config = bind_data(config, seeds.data_seed(config.run.seed))
        # with canaries the federation's clients are the real ones and the canaries (ldpfed.protocols.canaries)
        config = canaries.expanded(config)
        # Ray's start (seconds of process starts, and the nodes' imports in the workers it starts)
        # overlaps the clients' secrets', the server half's and the records' making
        ray = RayStart.begin_for(config, layout(config).nodes, verbose) if config.run.engine == "flower" else None
        try:
            # the set-up is not unwound by a signal: one that arrives while it runs (Ray's workers
            # may be up already) stops the run before its first round, with a summary of none
            with stop.deferred():
                world = World.from_config(config, noise_seed)
                half = server_half(config, world.data, world.server, flower_fedavg)
                audit = None if world.canaries is None else canaries.LocalAudit(world.canaries, half.weights.size)
                session = Session(
                    tasks.of(config),
                    config,
                    half,
                    world.data,
                    engine=config.run.engine,
                    output=output,
                    noise=world.noise,
                    audit=audit,
                )
                save_noise_root(output, world)  # before the first round: an interrupted run can be replayed too
            try:
                if not stop.requested and config.run.engine == "local":
                    run_local(config, world, half, session, progress, verbose, stop)
                elif not stop.requested:
                    if ray is not None:
                        ready_while_ray_starts(half)
                    run_flower(config, world, half, session, progress, verbose, stop, ray)
                if not stop.requested:
                    return session.finish()
            except KeyboardInterrupt as error:
                stop.record(error.signum if isinstance(error, Stopped) else signal.SIGINT)
        except Exception:
            if ray is not None and ray.failed:  # Ray never came up: the run leaves --out as it found it
                output.discard()
            raise
        finally:
            if ray is not None:
                ray.close()  # a no-op once Flower's runtime has shut Ray down
        summary = session.finish(interrupted=True)
    raise Interrupted(summary, stop)


def ready_while_ray_starts(half) -> None:
    """What this process would otherwise load after round 1's replies arrive, loaded while its Ray
    starts (Ray's processes on the other core; the nodes cannot reply before Ray is up): numba
    and the compiled kernels' dispatchers, what the server half's first aggregation loads (its
    `ready_to_aggregate`, where it has one: a tuple task's compiled addition of the replies) and,
    unless the clients' rounds (its `round_event`) are accounted without it, dp-accounting's
    package (the first privacy.csv's rdp and pld columns, ~1 s of imports). Nothing of the run is
    computed; the same modules load either way."""
    compiled()
    if hasattr(half, "ready_to_aggregate"):
        half.ready_to_aggregate()
    round_event = getattr(half, "round_event", None)
    if round_event is None or not accounted_without_library(round_event):
        importlib.import_module("dp_accounting")


def save_noise_root(output: OutputDir, world: World) -> None:
    """The run's noise root to `noise_secret` (owner-only) in the results directory, if it has one."""
    if world.noise_root is not None:
        output.write({NOISE_SECRET: Secret(seeds.format_noise_seed(world.noise_root) + "\n")})


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


def run_local(config: Config, world: World, half, session: Session, progress, verbose: bool, stop: StopRequest) -> None:
    nodes = NodeSet(
        layout(config), lambda partitions: node_half(config, partitions, world.data, world.secrets_of(partitions))
    )
    # a signal ends the run between two rounds: a round interrupted inside the server's aggregation or
    # its record would leave the ledger, the rows and metrics.csv disagreeing on what finished
    with showing(progress, None), stop.deferred():
        for server_round in range(1, config.run.rounds + 1):
            if stop.requested:
                return
            diagnostics: dict[int, dict] = {}
            metrics = local_round(
                half, nodes, server_round, lambda r, pid, values, into=diagnostics: into.__setitem__(pid, values)
            )
            row = session.after_round(server_round, metrics, diagnostics if config.output.diagnostics else {})
            if progress is not None:
                progress.update(row)


def run_flower(
    config: Config,
    world: World,
    half,
    session: Session,
    progress,
    verbose: bool,
    stop: StopRequest,
    ray: RayStart | None = None,
) -> None:
    from clients.client_app import make_client_app, read_diagnostics
    from server.server_app import make_server_app

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
    done = threading.Event()
    server_app = make_server_app(
        half,
        config.federation.clients,
        config.run.rounds,
        on_round,
        stop.event,
        done,
        on_stop=kill_client_actors,
        watch=None if progress is None else progress.replies,
    )
    try:
        with stop.deferred():
            flower_runner.run_simulation(
                config,
                server_app,
                client_app,
                progress,
                verbose,
                nodes=layout(config).nodes,
                stop=stop,
                log=lambda text: session.recorder.output.write({"flower.log": text}),
                ray=ray,
            )
    finally:
        started = ray is None or not ray.failed  # else Ray never came up, nor did the ServerApp
        if started and not done.is_set() and not stop.requested:  # Flower's runtime failed under its ServerApp
            stop.event.set()  # stop it (on a stop request the ServerApp has returned, or never started)
            done.wait(SERVER_STOP_SECONDS)
        remove_diagnostics(directory, ours=not keep)
    if not stop.requested and len(session.recorder.rows) < config.run.rounds:
        raise RuntimeError("the Flower simulation ended before its last round (see the log; rerun with --verbose)")

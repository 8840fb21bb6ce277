"""Start a Flower simulation in this process, on the Ray backend (what `ldpfed simulate` does).

`flwr.simulation.run_simulation` is the in-process entry point Flower 1.41 still ships (marked
deprecated in favour of `flwr run`, which needs a background SuperLink; both work with the same
apps here). The ServerApp runs in a thread of this process, so its per-round callback can drive
the progress display; ClientApps (one per Flower node, each hosting a cohort of clients) run in Ray
actors with `cpus-per-client` CPUs and `gpus-per-node` GPUs each, on at most `cpus` CPUs (0 = all).

Ray is started before Flower's runtime (which then finds it running), as Flower's `RayBackend` would
start it, in a thread that blocks SIGINT (`RayStart`): the harness's stop request
(simulations.stopping) takes both signals. `ldpfed simulate` begins that start as soon as its
preflight has passed (`RayStart.ahead`), before it imports Flower's runtime and makes the clients'
secrets and the server half, and the run takes it over (`RayStart.begin_for`), so they overlap.
Without `ray-address` the run starts a Ray of its own (`address="local"`), whatever else runs on the
machine: a cluster that `ray start` registered (its `ray_current_cluster` file) or that RAY_ADDRESS
names is left alone. With `ray-address` the run joins an existing Ray cluster instead
(`cluster_address`), after a TCP probe of its address, and fails in one line when no cluster answers
within `ray-timeout` seconds (ray.init itself retries for ever); Flower then places one actor per
`cpus-per-client` CPUs (and `gpus-per-node` GPUs) of each of the cluster's nodes. Ray is shut down
(a cluster: this process disconnected) by Flower's runtime when it returns, once its threads have
stopped waiting on Ray.

Quiet by default: Flower's logger is raised to CRITICAL and everything written to the process'
stderr file descriptor (Flower's tracebacks of failing clients, Ray's start-up lines and its
workers' output, which Ray forwards) goes to a temporary log file, whose tail is shown if the run
crashes; `log` receives its text when it is not empty (`simulate --out`: `DIR/flower.log`). The
progress display writes to a duplicate of the original stderr. `verbose=True` leaves all of it on
the terminal.

Flower's runtime hands pushed messages to few nodes every few milliseconds instead of every 0.1 s
(simulations.flower_pickup), where its loop is the audited one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from ldpfed.config import Config
from ldpfed.validation import LDPValueError
from simulations.flower_pickup import prompt_pickup
from simulations.stopping import StopRequest

QUIET_ENVIRONMENT = {
    "RAY_DEDUP_LOGS": "1",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "RAY_DISABLE_IMPORT_WARNING": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "FLWR_TELEMETRY_ENABLED": "0",
    "PYTHONWARNINGS": "ignore::DeprecationWarning,ignore::FutureWarning",
    "TQDM_DISABLE": "1",
}
LOCAL_RAY = "local"  # ray.init's address for a Ray of the run's own (never one RAY_ADDRESS or `ray start` names)
# Ray renices its workers, the nodes' actors included, by 15 (its `worker_niceness`), below every
# other process of the machine: beside two CPU-bound processes on 2 cores an actor got a few % of a
# core, and the default job's first round took 160-230 s instead of 25 s. A local Ray's workers keep
# the driver's priority.
LOCAL_SYSTEM_CONFIG = {"worker_niceness": 0}
# What a node's actor imports before it answers a message, imported by a local Ray's workers as the
# raylet starts them (Ray's `preload_python_modules`), while the driver still builds its server half
# and imports Flower: the actor class (Flower's, without its simulation package's entry points:
# simulations.node_preload), the ClientApp with ldpfed's node halves, numba (the samplers' compiled
# kernels, on their first call) and, by task and data, what the node half loads lazily. Without it
# those imports (about 9 s of CPU for a training node at load 6, a quarter of it torch; 4-5 s for a
# mean node) began only once Flower asked for the actors, after Ray's start; building the node and
# its data takes 0.05 s of that. A training node needs no sympy (ldpfed.training.cohort's
# cross-entropy) and the digits no scikit-learn (ldpfed.data.federated).
NODE_MODULES = ("simulations.node_preload", "clients.client_app", "numba")
TASK_MODULES = {
    "mean": ("ldpfed.protocols.mean",),
    "frequency": ("ldpfed.protocols.frequency",),
    "train": ("torch", "torch.func", "ldpfed.protocols.train"),
}
DATA_MODULES: dict[str, tuple[str, ...]] = {}  # by data set, what its loader imports: none at present
POLL_SECONDS = 0.2  # how often a wait for a cluster looks at the run's stop request and its deadline
# A local Ray begun ahead of the run that takes it over (`RayStart.ahead`, `RayStart.begin_for`).
_AHEAD: list[RayStart] = []


class RayUnreachable(LDPValueError):
    """No Ray cluster answers at `ray-address` (within `ray-timeout`): one line, exit 2."""


def backend_config(config: Config, verbose: bool = False, nodes: int | None = None) -> dict:
    """Ray backend options: resources per node (`cpus-per-client` CPUs, `gpus-per-node` GPUs, a
    fraction letting several nodes share one GPU) and the CPUs and GPUs Ray may use. Flower starts
    as many actors as those CPUs hold (CPUs / cpus-per-client), each a Python process of a few
    hundred MiB, so with `nodes` Ray gets no more CPUs than the nodes use: one actor per node at
    most, none idle. On an existing cluster (`ray-address`) the cluster's nodes give the CPUs and
    GPUs (Flower fits its actors node by node), and Ray is joined, not started. A local Ray is asked
    for by name (`LOCAL_RAY`): without an address, ray.init would join the cluster that RAY_ADDRESS
    or the machine's last `ray start` names, and refuse the CPU counts a cluster sets itself. A local
    Ray's workers run at the driver's priority (`LOCAL_SYSTEM_CONFIG`), not below it."""
    gpus = config.federation.gpus_per_node
    init_args: dict = {"logging_level": "INFO" if verbose else "ERROR", "log_to_driver": verbose}
    address = cluster_address(config)
    init_args["address"] = address or LOCAL_RAY
    if not address:
        cpus = config.federation.cpus or os.cpu_count() or 1
        if nodes:
            cpus = min(cpus, max(1, math.ceil(nodes * config.federation.cpus_per_client)))
        init_args.update(num_cpus=cpus, num_gpus=_visible_gpus() if gpus > 0 else 0, include_dashboard=False)
        init_args["_system_config"] = {**LOCAL_SYSTEM_CONFIG, "preload_python_modules": node_modules(config)}
    return {
        "client_resources": {"num_cpus": config.federation.cpus_per_client, "num_gpus": float(gpus)},
        "init_args": init_args,
    }


def node_modules(config: Config) -> list[str]:
    """The modules a local Ray's workers import as they start (`NODE_MODULES`, `TASK_MODULES`,
    `DATA_MODULES`): those a node of this run imports before its first reply."""
    return [*NODE_MODULES, *TASK_MODULES.get(config.run.task, ()), *DATA_MODULES.get(config.data_name, ())]


def cluster_address(config: Config) -> str | None:
    """The Ray cluster to join: `federation.ray-address`, `auto` read from RAY_ADDRESS (an error
    when unset: Ray's own `auto` would fall back on whatever cluster this machine started last);
    None for a local Ray."""
    address = config.federation.ray_address
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "").strip()
        if not address:
            raise LDPValueError("ray-address auto reads RAY_ADDRESS, which is not set")
    return address or None


def init_ray(backend: dict) -> None:
    """`ray.init` with `backend`'s init args; the workers get this process' import path in
    PYTHONPATH. A local Ray's processes inherit it from this process' environment; a cluster's
    nodes get it in the job's runtime environment, as Flower's `RayBackend` passes it. Not for a
    local Ray: a job runtime environment makes Ray start the actors' workers through its runtime-env
    agent instead of handing them the workers it started with the node (two actors ready in 3.1-3.6
    s against 0.45-0.65 s, measured on the shared 2-core machine)."""
    import ray

    pythonpath = os.pathsep.join([*sys.path, *filter(None, [os.environ.get("PYTHONPATH")])])
    os.environ["PYTHONPATH"] = pythonpath
    init_args = dict(backend["init_args"])
    if init_args["address"] != LOCAL_RAY:
        init_args["runtime_env"] = {"env_vars": {"PYTHONPATH": pythonpath}}
        ray.init(**init_args)
        return
    with lean_head(forward_logs=init_args.get("log_to_driver", True), env=worker_threads(backend)):
        ray.init(**init_args)


def worker_threads(backend: dict) -> dict[str, str]:
    """OMP_NUM_THREADS for a local Ray's workers (through the raylet's environment): what Ray sets
    in an actor's process when it starts its task, floor(cpus-per-client) >= 1, unless this process'
    environment sets it. A worker that imports torch as it starts (`node_modules`) would otherwise
    size OpenMP's pool from the machine's cores before Ray sets it: two nodes on 2 cores ran 4
    threads, and the training run's steady round took 0.64-0.69 s instead of 0.44 s (load 6-10)."""
    if "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, math.floor(backend["client_resources"]["num_cpus"])))}


@contextlib.contextmanager
def lean_head(forward_logs: bool, env: dict[str, str] | None = None):
    """A local Ray's head without the services a simulation never uses, for the `ray.init` inside
    the block. Of the seven processes a local `ray.init` starts (GCS, raylet, the raylet's dashboard
    and runtime-env agents, the autoscaler's monitor, the log monitor and the dashboard's head),
    three serve nothing here: the monitor scales a cluster (a local Ray has one fixed node), the log
    monitor forwards workers' output to the driver (off unless `forward_logs`: `log_to_driver`), and
    the dashboard's head (started even with `include_dashboard=False`, for usage statistics, which
    the run turns off) serves the dashboard and job APIs, which nothing calls. On 2 cores their
    start-up (Python processes importing Ray: 3.3-3.6 s of CPU against 0.4-0.6 s without them,
    measured beside a loaded machine's other work) competed with the raylet, the nodes' actors and
    the server half for the CPUs. `ray.init` takes no option for them: `ray start` does
    (`--no-monitor`, `--include-log-monitor`), through the parameters the block sets on the head
    `ray.init` builds; the dashboard's head is skipped as Ray does when it fails to start it (no URL,
    no process). `env`: variables for the raylet's environment, which its workers inherit. Ray
    versions whose internals differ get the full head, unchanged."""
    import ray._private.parameter as parameter
    import ray._private.services as services

    plain_params, plain_api_server = getattr(parameter, "RayParams", None), getattr(services, "start_api_server", None)
    if plain_params is None or plain_api_server is None:
        yield
        return

    class LeanParams(plain_params):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("no_monitor", True)
            if not forward_logs:
                kwargs.setdefault("include_log_monitor", False)
            if env:
                kwargs["env_vars"] = {**env, **(kwargs.get("env_vars") or {})}
            super().__init__(*args, **kwargs)

    parameter.RayParams, services.start_api_server = LeanParams, _no_api_server
    try:
        yield
    finally:
        parameter.RayParams, services.start_api_server = plain_params, plain_api_server


def _no_api_server(*args, **kwargs) -> tuple[None, None]:
    """What Ray's `start_api_server` returns when the dashboard's head did not start."""
    return None, None


def probe_cluster(address: str, timeout: float) -> None:
    """A TCP connection to the cluster's GCS port within `timeout` seconds, or `RayUnreachable`: an
    address where nothing listens fails at once, in one line (ray.init retries it for ever)."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        reason = f"no answer in {timeout:g} s" if isinstance(error, TimeoutError) else error.strerror or str(error)
        raise RayUnreachable(f"ray-address {address}: no Ray cluster there ({reason}); is its head started?") from None


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
    config: Config,
    server_app,
    client_app,
    progress=None,
    verbose: bool = False,
    nodes: int | None = None,
    stop: StopRequest | None = None,
    log=None,
    ray: RayStart | None = None,
) -> None:
    """Run `server_app` and `client_app` under Flower's simulation runtime (Ray) with `nodes`
    Flower nodes (default: one per client), quietly unless `verbose`. `progress` (optional, e.g.
    `simulations.progress.RoundProgress`): `start(stream)` with the terminal's stderr before Ray
    starts, `ray_up(nodes)` once it is up, `stop()` at the end. `stop`: the run's stop request;
    requested while Ray starts, the federation does not start. Ray gets no more CPUs than the nodes
    use: one actor per node at most (`backend_config`). `log(text)`: the Flower/Ray log, when not
    empty. `ray`: Ray's start begun earlier (`RayStart.begin_for`), else Ray is started here."""
    clients = nodes or config.federation.clients
    if verbose:
        with showing(progress, sys.stderr):
            _run_on_ray(config, server_app, client_app, clients, stop, True, ray, progress)
        return
    os.environ.update(QUIET_ENVIRONMENT)
    flower_logger = logging.getLogger("flwr")
    previous_level = flower_logger.level
    flower_logger.setLevel(logging.CRITICAL)
    handle, name = tempfile.mkstemp(prefix="ldpfed-flower-", suffix=".log")
    os.close(handle)  # reopened by name in _stderr_to
    log_path = Path(name)
    try:
        with _stderr_to(log_path) as terminal, showing(progress, terminal):
            _run_on_ray(config, server_app, client_app, clients, stop, False, ray, progress)
    except RayUnreachable:
        raise  # one line of its own: Ray's retries in the log say no more
    except Exception:
        tail = log_path.read_text(errors="replace").splitlines()[-30:]
        sys.stderr.write("\n".join(["--- Flower/Ray log (tail) ---", *tail, ""]))
        raise
    finally:
        flower_logger.setLevel(previous_level)
        text = log_path.read_text(errors="replace")
        log_path.unlink(missing_ok=True)
        if text and log is not None:
            log(text)


def _run_on_ray(
    config: Config,
    server_app,
    client_app,
    clients: int,
    stop: StopRequest | None,
    verbose: bool,
    ray: RayStart | None,
    progress=None,
) -> None:
    """Start Ray (or wait for `ray`, begun earlier), then Flower's runtime on it unless a stop was
    requested meanwhile; `progress.ray_up(clients)` in between."""
    from flwr.simulation import run_simulation as flower_run_simulation

    backend = backend_config(config, verbose, nodes=clients)
    launch = ray or RayStart(backend, verbose, config.federation.ray_timeout)
    with _ray_started(launch, stop):  # Flower's runtime then finds Ray up
        if stop is not None and stop.installed:
            stop.install()  # over any handler Ray's native code installed (if Ray was imported before)
        if stop is None or not stop.requested:
            if progress is not None:
                progress.ray_up(clients)
            with prompt_pickup(clients):
                flower_run_simulation(server_app, client_app, clients, "ray", backend)


class RayStart:
    """Ray started (`ray.init`, or joined on a cluster) by a keeper thread of its own, which blocks
    SIGINT and lives until Ray is shut down.

    `begin()` starts it and returns at once, so that a run can start Ray while it builds its server
    half and records (Ray's start is seconds of process starts, most of a first round's wait);
    `_ray_started` waits for it. In the main thread `ray.init` replaces the SIGTERM handler with one
    that raises SystemExit wherever the main thread is (a SIGTERM during the init aborted the
    process); from another thread it leaves the handlers alone (and says so in a warning, silenced
    here). Ray's native threads, started by that thread, inherit its mask, and so do Ray's processes
    (raylet, GCS, monitors): SIGINT blocked, as Ray itself starts them, so a terminal's Ctrl-C goes
    to the harness only. SIGTERM is left unblocked: Ray's shutdown ends its processes with SIGTERM
    and waits a second for each one that ignores it (with SIGTERM blocked too, every run's exit
    took 5.3 s of such waits instead of 1.1 s). A SIGTERM that lands on one of Ray's threads in this
    process is still the run's stop request: the interpreter's C-level handler records it for the
    main thread, and inside Flower's runtime the stop watcher takes it (simulations.stopping). The
    thread must outlive Ray: Ray starts its processes with PR_SET_PDEATHSIG, which kills them when
    the thread that started them ends. So the thread is let go only once Ray is down (`close`): a Ray
    that outlives the block (one whose shutdown its owner defers, such as a test session sharing it)
    keeps its keeper.

    Joining a cluster (`address`), `begin` first probes its address (`probe_cluster`) and the wait
    ends `timeout` seconds after `begin`, or at the run's stop request: ray.init retries an address
    that accepts connections but never answers for ever, so that attempt is let go (`abandoned`;
    its thread, a daemon, ends with the process). A local Ray's start ends by itself and is waited
    for."""

    def __init__(self, backend: dict, verbose: bool = False, timeout: float = math.inf) -> None:
        self.backend, self.verbose, self.timeout = backend, verbose, timeout
        self.started, self.release = threading.Event(), threading.Event()
        self.failures: list[BaseException] = []
        self.thread: threading.Thread | None = None
        self.deadline = math.inf
        self.abandoned = False

    @classmethod
    def begin_for(cls, config: Config, nodes: int, verbose: bool = False) -> RayStart | None:
        """Ray for a run of `nodes` Flower nodes: the start begun ahead for the same backend
        (`ahead`), else one begun now (a cluster's address probed first); None when Ray already runs
        in this process (used as it is). A start begun ahead for another backend is closed first."""
        backend = backend_config(config, verbose, nodes=nodes)
        while _AHEAD:
            launch = _AHEAD.pop()
            if launch.backend == backend and launch.verbose == verbose:
                return launch
            launch.close()
        if ray_running():
            return None
        launch = cls(backend, verbose, config.federation.ray_timeout)
        launch.begin()
        return launch

    @classmethod
    @contextlib.contextmanager
    def ahead(cls, config: Config, nodes: int, verbose: bool = False):
        """A local Ray begun now for the run inside the block, whose `begin_for` takes it over: its
        start (seconds of process starts, and the nodes' imports in the workers it starts) then
        overlaps what the run does before it asks for Ray (importing Flower's runtime, reading the
        data, making the clients' secrets). Only for a run under Flower on a Ray of its own; a start
        the run did not take over (it failed before, or asked for another backend) is closed at the
        block's end."""
        own = config.run.engine == "flower" and not config.federation.ray_address and not ray_running()
        if own:
            _AHEAD.append(cls.begin_for(config, nodes, verbose))
        try:
            yield
        finally:
            while _AHEAD:
                _AHEAD.pop().close()

    @property
    def address(self) -> str | None:
        """The cluster joined; None for a local Ray."""
        address = self.backend["init_args"]["address"]
        return None if address == LOCAL_RAY else address

    @property
    def failed(self) -> bool:
        """Ray did not come up: its start raised, or no cluster answered in time."""
        return bool(self.failures)

    def begin(self) -> None:
        if self.thread is not None:
            return
        self.deadline = time.monotonic() + self.timeout
        if self.address:
            try:
                probe_cluster(self.address, self.timeout)
            except RayUnreachable as error:
                self.failures.append(error)
                raise
        if not self.verbose:
            os.environ.update(QUIET_ENVIRONMENT)
        if self.address and not self.verbose:
            # the C++ core's warnings on retrying a cluster that does not answer go to the terminal
            # once the run has given up on it; joining spawns no process that would inherit this
            os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
        # Ray's C++ core installs a crash handler (absl's) for SIGTERM too, in this process and its
        # workers, which aborts the process (exit 134): read when Ray is imported, so set before
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        self.thread = threading.Thread(target=self._keep, name="ray-keeper", daemon=True)
        self.thread.start()

    def _keep(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        ray_worker_logger = logging.getLogger("ray._private.worker")
        previous_level = ray_worker_logger.level
        ray_worker_logger.setLevel(logging.ERROR)  # "SIGTERM handler is not set ...": what is wanted
        try:
            init_ray(self.backend)
        except BaseException as error:  # raised again in the main thread
            self.failures.append(error)
        finally:
            ray_worker_logger.setLevel(previous_level)
            self.started.set()
        self.release.wait()

    def wait(self, stop: StopRequest | None = None) -> bool:
        """Until Ray is up (True); its start's error, if any, raised here. Joining a cluster: until
        `stop` is requested (False: the attempt is let go) or the deadline (`RayUnreachable`)."""
        self.begin()
        while not self.started.wait(POLL_SECONDS):
            if self.address is None:
                continue
            if stop is not None and stop.requested:
                self.abandoned = True
                return False
            if time.monotonic() >= self.deadline:
                self.abandoned = True
                self.failures.append(
                    RayUnreachable(f"ray-address {self.address}: the Ray cluster did not answer in {self.timeout:g} s")
                )
                break
        if self.failures:
            raise self.failures[0]
        return True

    def close(self) -> None:
        """Ray shut down (this process' connection to a cluster: the cluster stays) and the keeper
        let go, unless Ray outlives this (its owner shuts it down); an abandoned attempt is left."""
        if self.thread is None or self.abandoned:
            return
        self.started.wait()
        shutdown_ray()
        if not ray_running():
            self.release.set()
            self.thread.join()


@contextlib.contextmanager
def _ray_started(launch: RayStart, stop: StopRequest | None = None):
    """Ray up for the block (started by `launch`, or already running in this process and used as
    it is), shut down at its end (Flower's runtime, when it ran, has done so already). A cluster
    that `stop` gave up on is not joined: the block runs with `stop` requested."""
    if launch.thread is None and ray_running():
        try:
            yield
        finally:
            shutdown_ray()
        return
    try:
        launch.wait(stop)
        yield
    finally:
        launch.close()


def kill_client_actors() -> None:
    """Kill the Ray actors that run the ClientApps, in the ServerApp's thread once it has stopped
    (before Flower's runtime shuts Ray down). Flower's threads wait in `ray.get` for the round's
    client tasks, which an actor cannot interrupt (`ray.cancel` only flags a running actor task):
    killed, those tasks fail at once and the threads see the runtime's stop, instead of after the
    round (minutes for a large one). The actors are Flower's (`ClientAppActor`); this process holds
    no other actor handles, and Flower's pool keeps them private, so they are found among the live
    objects."""
    import gc

    import ray

    if not ray.is_initialized():
        return
    # type(), not isinstance(): the latter reads `__class__`, which some module proxies (torch's) warn on
    for handle in [item for item in gc.get_objects() if issubclass(type(item), ray.actor.ActorHandle)]:
        with contextlib.suppress(Exception):  # best effort: an actor not killed only ends its task first
            ray.kill(handle, no_restart=True)


def ray_running() -> bool:
    """Whether Ray is initialized in this process (without importing it)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def shutdown_ray() -> None:
    """`ray.shutdown()` if Ray is running in this process (it is idempotent; Flower's runtime has
    usually shut it down already)."""
    if ray_running():
        sys.modules["ray"].shutdown()


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

"""Suite-wide pytest settings: the fast tests run first, the `slow` ones last.

`python -m pytest -n 2` (the README's and CI's command) runs everything on two workers, one of
them starting with the tests that start Ray (below) and the other taking the rest, fast set first,
so a broken capability shows up within the first minutes; `python -m pytest -n 2 -m "not slow"` is
the quick loop (every capability keeps a fast test there), `-m slow` the long federations alone.
Without `-n` the suite runs in one process, in the same order.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from simulations.busy import busy

# The environment as the test session started, before any in-process run changed it (an in-process
# `simulate` sets Flower's and Ray's quiet variables for the rest of the process): tests that start
# a command in a subprocess give it this one, as a user's shell would.
PRISTINE_ENVIRONMENT = dict(os.environ)


def pytest_configure(config):
    """SIGINT gets Python's own handler, as in a suite started from an interactive shell, also when
    the suite runs as a background job (`cmd &` without job control: SIGINT inherited ignored, which
    Python keeps, and a run then says so and cannot be stopped by Ctrl-C); the tests of the ignored
    case set it themselves. LDPFED_TORCH_THREADS=n runs torch on n intra-op threads
    (.ci/portability.py reruns the `float_portable` tests at 1 and 2); unset, torch keeps its default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    threads = os.environ.get("LDPFED_TORCH_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))


def pytest_collection_modifyitems(config, items):
    """Stable reorder: every test without the `slow` marker before every test with it."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)


# ---- two workers, one Ray at a time ------------------------------------------------------------
# The README's command runs the suite on two pytest-xdist workers (`-n 2`, whose `load` distribution
# the scheduler below replaces, as it does `--dist loadgroup`). Every test that starts Ray (a Flower
# federation in this process, or `ldpfed simulate`, `flwr run` in a subprocess) is in one work unit
# that a single worker runs in collection order (the deployment tests are another), so two Ray
# clusters never compete for the two cores and the session's one Ray start (above) stays one; xdist
# hands out the largest unit first, so one worker starts with it and the other takes every other
# test meanwhile. The unit is known from the test id alone (xdist's controller sees nothing else):
# every test of RAY_FILES, and every test named after Flower (`flower` or `flwr` in its name:
# test_simulate_stop.py's Flower cases are, its local ones not). It is made by the scheduler below,
# not by `xdist_group` marks: xdist 3.8 writes a mark's group into `item._nodeid`, which pytest 9.2
# no longer reads, so the marks are silently ignored. A test outside the unit that starts a
# federation in this process fails (RayOutsideItsGroup), in every run, with or without xdist.
RAY_GROUP = "ray"
RAY_FILES = frozenset({"test_ray_cluster.py"})  # a Ray cluster of two nodes
RAY_NAMES = ("flower", "flwr")
# The deployment tests share one SuperLink and its SuperNodes (a module fixture), so they are one unit
# too; their processes run ClientApps in subprocesses, not on Ray, so the unit runs beside the Ray unit
# (much of its time is waiting for Flower's heartbeats and process starts).
DEPLOYMENT_GROUP = "deployment"
DEPLOYMENT_FILES = frozenset({"test_deployment.py"})


def work_unit(nodeid: str) -> str | None:
    """RAY_GROUP for a test that starts Ray, DEPLOYMENT_GROUP for the deployment tests, else None
    (the test is a unit of its own)."""
    path, _, name = nodeid.partition("::")
    name = name.lower()
    if Path(path).name in DEPLOYMENT_FILES:
        return DEPLOYMENT_GROUP
    return RAY_GROUP if Path(path).name in RAY_FILES or any(word in name for word in RAY_NAMES) else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With `-n N` (xdist's `load` distribution) or `--dist loadgroup`: xdist's group scheduling, the
    units made by `work_unit`; any other distribution is xdist's own."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadGroupScheduling

    class RayGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid) or super()._split_scope(nodeid)

    return RayGroupScheduling(config, log)


_running: list = [None]  # the test being set up, run or torn down


class RayOutsideItsGroup(AssertionError):
    """A test outside the Ray unit started a federation on Ray."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _running[0] = item


# ---- one Ray start per session -------------------------------------------------------------------
# Flower's Ray backend starts Ray when it is not running and shuts it down after every simulation;
# each start costs seconds of CPU (GCS, raylet, agents) on a 2-core machine. In the suite the first
# in-process federation starts Ray and the later ones find it running (Flower then skips its start):
# from then on a `ray.shutdown()` of the product is recorded, not done, and the real one runs at the
# session's end. Every simulation still terminates its own actors, so no client state is shared;
# `ray_released()` tells a test that its run asked for the shutdown (what `not ray.is_initialized()`
# checked). Commands run in a subprocess (`ldpfed`, `flwr run`) start and stop their own Ray.
def pytest_sessionstart(session):
    import simulations.runner as runner

    original = runner.run_simulation

    def run_simulation_on_the_session_ray(*args, **kwargs):
        item = _running[0]
        if item is not None and work_unit(item.nodeid) is None:
            raise RayOutsideItsGroup(f"{item.nodeid} starts Ray: name it after Flower (tests/conftest.py)")
        _defer_ray_shutdown().calls = 0
        return original(*args, **kwargs)

    runner.run_simulation = run_simulation_on_the_session_ray


def _defer_ray_shutdown():
    import ray

    if getattr(ray.shutdown, "deferred", False):
        return ray.shutdown

    def deferred_shutdown(*args, **kwargs):
        deferred_shutdown.calls += 1

    deferred_shutdown.deferred, deferred_shutdown.calls, deferred_shutdown.real = True, 0, ray.shutdown
    ray.shutdown = deferred_shutdown
    return deferred_shutdown


def ray_released() -> bool:
    """Whether the last in-process federation left Ray stopped, as a run outside the suite does: it
    called `ray.shutdown()` (deferred here, see above)."""
    import ray

    if not getattr(ray.shutdown, "deferred", False):
        return not ray.is_initialized()
    return ray.shutdown.calls > 0


def pytest_sessionfinish(session, exitstatus):
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray.shutdown, "deferred", False):
        ray.shutdown = ray.shutdown.real
        if ray.is_initialized():
            ray.shutdown()


@pytest.fixture
def busy_machine():
    """Two CPU-bound processes beside the test (simulations.busy), stopped by PID after it: the
    2-core machine as loaded as a shared one is, where start-up deadlines are missed."""
    with busy() as pids:
        yield pids


def processes_with_env(key: str, value: str) -> list[int]:
    """PIDs of processes whose environment has key=value, and of their descendants: what a test
    started, including the processes Flower and Ray start in sessions of their own (found by an
    environment marker). Descendants count because a process that retitles itself (Ray's agents,
    `ray::DashboardAgent`) overwrites the memory /proc/PID/environ shows, marker included; found
    through their parent while it lives, they are stopped with it instead of outliving it."""
    needle = f"{key}={value}".encode()
    marked, children = [], {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                state, parent = (entry / "stat").read_text().rpartition(")")[2].split()[:2]
                if state == "Z":  # exited, waiting for its parent to reap it
                    continue
                children.setdefault(int(parent), []).append(int(entry.name))
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    marked.append(int(entry.name))
            except (OSError, ValueError):
                continue
    found, stack = set(marked), list(marked)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return sorted(found)


def run_collecting_rows(config, noise_seed: int | None = None):
    """(summary, one DataFrame row per round) of `simulations.federation.run(config)` in this process;
    `noise_seed`: the clients' noise root (default OS entropy: give one to compare two runs' noise)."""
    import pandas as pd

    from simulations.federation import run
    from simulations.progress import RowCollector

    rows = RowCollector()
    return run(config, rows, noise_seed=noise_seed), pd.DataFrame(rows.rows)

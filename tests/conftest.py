"""Suite-wide pytest settings: the fast tests run first, the `slow` ones last.

`python -m pytest` (the README's and CI's command) runs everything, fast set first, so a broken
capability shows up within the first minutes; `python -m pytest -m "not slow"` is the quick loop
(every capability keeps a fast test there), `-m slow` the long federations alone.
"""

from __future__ import annotations

import os
from pathlib import Path

# The environment as the test session started, before any in-process run changed it (an in-process
# `simulate` sets Flower's and Ray's quiet variables for the rest of the process): tests that start
# a command in a subprocess give it this one, as a user's shell would.
PRISTINE_ENVIRONMENT = dict(os.environ)


def pytest_configure(config):
    """LDPFED_TORCH_THREADS=n runs torch on n intra-op threads (.ci/portability.py reruns the
    `float_portable` tests at 1 and 2); unset, torch keeps its default."""
    threads = os.environ.get("LDPFED_TORCH_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))


def pytest_collection_modifyitems(config, items):
    """Stable reorder: every test without the `slow` marker before every test with it."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)


def processes_with_env(key: str, value: str) -> list[int]:
    """PIDs of processes whose environment has key=value: what a test started, including the
    processes Flower and Ray start in sessions of their own (found by an environment marker)."""
    needle = f"{key}={value}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def run_collecting_rows(config, noise_seed: int | None = None):
    """(summary, one DataFrame row per round) of `simulations.federation.run(config)` in this process;
    `noise_seed`: the clients' noise root (default OS entropy: give one to compare two runs' noise)."""
    import pandas as pd

    from simulations.federation import run

    rows = []

    class Collect:
        def start(self, stream):
            pass

        def update(self, row):
            rows.append(row)

        def stop(self):
            pass

    return run(config, Collect(), noise_seed=noise_seed), pd.DataFrame(rows)

"""Flower's Ray backend starts one actor per `cpus-per-client` CPUs it is given: the runner gives it
no more CPUs than the run's nodes use, so no actor (a Python process of a few hundred MiB) idles;
a light tuple task does not ask for a node per CPU; and a node loads only what its task needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.tasks import bind_data, layout, validated
from simulations.runner import backend_config

ROOT = Path(__file__).resolve().parents[1]


def actors(options: dict, nodes: int) -> int:
    """The actor pool Flower builds from these resources (flwr's `pool_size_from_resources`)."""
    config = validated(Config().with_options({"task": "mean", **options}))
    backend = backend_config(config, nodes=nodes)
    return int(backend["init_args"]["num_cpus"] / backend["client_resources"]["num_cpus"])


@pytest.mark.parametrize(
    ("options", "nodes", "expected"),
    [
        ({"cpus": 2, "cpus-per-client": 1}, 1, 1),
        ({"cpus": 2, "cpus-per-client": 1}, 2, 2),
        ({"cpus": 2, "cpus-per-client": 1}, 1000, 2),
        ({"cpus": 16, "cpus-per-client": 2}, 3, 3),
        ({"cpus": 16, "cpus-per-client": 4}, 8, 4),
    ],
)
def test_no_more_actors_than_nodes_nor_than_the_cpus_hold(options, nodes, expected):
    assert actors(options, nodes) == expected


def layout_of(options: dict):
    config = validated(Config().with_options(options))
    return layout(bind_data(config, seeds.data_seed(config.run.seed)))


def test_a_light_tuple_task_runs_on_one_node_and_a_heavy_one_on_every_cpu():
    """The default job (mean, 10 clients, 10^5 values a round) needs one node; 1,000 clients or
    10^7 values fill every CPU; train keeps one node per CPU; --nodes is taken as given."""
    assert layout_of({"task": "mean", "clients": 10, "cpus": 2}).nodes == 1
    assert layout_of({"task": "mean", "clients": 1000, "cpus": 2}).nodes == 2
    assert layout_of({"task": "mean", "clients": 1000, "cpus": 16}).nodes == 4
    assert layout_of({"task": "mean", "clients": 10, "users": 100_000, "dims": 100, "cpus": 16}).nodes == 3
    assert layout_of({"task": "frequency", "clients": 10, "cpus": 2}).nodes == 1
    assert layout_of({"task": "train", "clients": 10, "cpus": 2}).nodes == 2
    assert layout_of({"task": "mean", "clients": 10, "nodes": 5, "cpus": 2}).nodes == 5


def test_a_flower_node_imports_no_table_plotting_training_or_composition_library():
    """What a mean-task node process loads with the ClientApp (numba comes with the first kernel;
    dp_accounting's package, PLD and RDP, with whatever composes or plans a budget)."""
    libraries = ("pandas", "pyarrow", "matplotlib", "torch", "numba", "dp_accounting")
    code = f"import sys, clients.client_app; print(sorted(m for m in {libraries} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert loaded.stdout.strip() == "[]"

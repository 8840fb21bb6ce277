"""Flower's Ray backend starts one actor per `cpus-per-client` CPUs it is given: the runner gives it
no more CPUs than the run's nodes use, so no actor (a Python process of a few hundred MiB) idles."""

from __future__ import annotations

import pytest

from ldpfed.config import Config
from simulations.runner import backend_config


def actors(options: dict, nodes: int) -> int:
    """The actor pool Flower builds from these resources (flwr's `pool_size_from_resources`)."""
    config = Config().with_options({"task": "mean", **options}).validated()
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

"""A local Ray's workers import what a Flower node needs as the raylet starts them
(simulations.runner.node_modules, Ray's `preload_python_modules`), so a node's imports overlap the
driver's start-up instead of following it; and that list covers what a node then loads: building a
node half and answering a round after those imports loads no further heavy library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ldpfed.config import Config
from simulations.runner import NODE_MODULES, backend_config, node_modules

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sklearn", "numba", "llvmlite", "scipy", "sympy", "flwr", "ray", "pandas", "dp_accounting")

# Builds the server half (its imports are not the node's), imports the node's modules, then builds
# a node half and runs a round on the local engine: the top-level packages that round loaded anew.
PROBE = """
import importlib, json, sys
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.nodes import NodeSet, local_round
from ldpfed.tasks import bind_data, layout, node_half, server_half, validated, without_seed
from simulations.runner import node_modules

config = validated(Config().with_options(json.loads(sys.argv[1])))
data = seeds.data_seed(config.run.seed)
config = bind_data(config, data)
half = server_half(config, data, seeds.server_seed(config.run.seed))
for name in node_modules(config):
    importlib.import_module(name)
before = {name.partition(".")[0] for name in sys.modules}
nodes = NodeSet(layout(config), lambda pids: node_half(without_seed(config), pids, data, {p: 7 + p for p in pids}))
local_round(half, nodes, 1, lambda *args: None)
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules} - before)))
"""


def loaded_by_a_node(options: dict) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(options)], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_node_modules_name_the_actor_class_the_client_app_and_the_task_s_libraries():
    mean = node_modules(Config().validated())
    train = node_modules(Config().with_options({"task": "train"}).validated())
    assert mean[: len(NODE_MODULES)] == list(NODE_MODULES) == train[: len(NODE_MODULES)]
    assert "torch" in train and not any(name.startswith("sklearn") for name in train)  # digits: read without sklearn
    assert "torch" not in mean and not any(name.startswith("sklearn") for name in mean)
    synthetic = node_modules(Config().with_options({"task": "train", "data": "synthetic-fedprox"}).validated())
    assert "torch" in synthetic and not any(name.startswith("sklearn") for name in synthetic)


def test_a_local_ray_preloads_the_node_modules_and_a_cluster_is_left_as_it_is():
    config = Config().with_options({"task": "train", "cpus": 2}).validated()
    local = backend_config(config, nodes=2)["init_args"]["_system_config"]
    assert local["preload_python_modules"] == node_modules(config) and local["worker_niceness"] == 0
    joined = backend_config(config.with_options({"ray-address": "127.0.0.1:6379"}), nodes=2)["init_args"]
    assert "_system_config" not in joined  # a cluster's workers are its own: system config is the head's


@pytest.mark.parametrize(
    "options",
    [
        {"task": "mean", "clients": 4, "users": 400, "dims": 3},
        pytest.param({"task": "frequency", "clients": 4, "users": 400, "dims": 2}, marks=pytest.mark.slow),
        pytest.param({"task": "train", "clients": 4, "nodes": 1, "local-steps": 1}, marks=pytest.mark.slow),
    ],
    ids=["mean", "frequency", "train"],
)
def test_after_the_preload_a_node_s_first_round_loads_no_heavy_library(options):
    assert not set(loaded_by_a_node(options)) & set(HEAVY)


SCRIPT = """
import json, os, sys, ray

os.environ.pop("OMP_NUM_THREADS", None)
from ldpfed.config import Config
from simulations.runner import QUIET_ENVIRONMENT, backend_config, init_ray

NAMES = ("clients.client_app", "flwr.simulation.ray_transport.ray_actor")
os.environ.update(QUIET_ENVIRONMENT)
init_ray(backend_config(Config().with_options({"cpus": 1}).validated(), nodes=1))

@ray.remote
class Probe:  # defined here (pickled by value): it imports nothing of ldpfed or Flower itself
    def modules(self):
        with open("/proc/self/environ", "rb") as start:  # as the process started (before Ray's own setting)
            items = start.read().split(b"\\0")
        threads = [item[16:].decode() for item in items if item.startswith(b"OMP_NUM_THREADS=")]
        return [name for name in NAMES if name in sys.modules], threads

print(json.dumps(ray.get(Probe.remote().modules.remote())))
ray.shutdown()
"""


def test_a_flower_node_s_worker_has_imported_the_client_app_before_its_actor_starts():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    preloaded, threads = json.loads(done.stdout.strip().splitlines()[-1])
    assert preloaded == ["clients.client_app", "flwr.simulation.ray_transport.ray_actor"]
    assert threads == ["1"]  # cpus-per-client 1, in the worker's environment from its start, before the preload

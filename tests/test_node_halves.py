"""A node's half comes from the node registry (ldpfed.protocols.node_halves), which the task
entries use: one node entry per task, and a Flower node's process imports the tasks' protocols but
not the task entries and what only they need (the plan's calibration, the diagnostics' predictors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from ldpfed.config import Config
from ldpfed.protocols import node_halves, seeds
from ldpfed.tasks import available, bind_data, client_half, get, node_half, validated, without_seed

ROOT = Path(__file__).resolve().parents[1]
# ldpfed packages above the protocols that a node never needs (tests/test_layering.py's FLOORS)
ABOVE_NODES = ("ldpfed.tasks", "ldpfed.planning", "ldpfed.analysis", "ldpfed.experiments", "ldpfed.cli")


def test_every_task_has_one_node_entry_and_binds_through_it():
    assert node_halves._NODES.available() == available()
    config = validated(Config().with_options({"data.users": 40, "federation.clients": 4}))
    for name in ("mean", "frequency"):
        task_config = validated(config.with_options({"run.task": name}))
        bound = get(name).bind(task_config, seeds.data_seed(0))
        assert bound == node_halves.entry(name).bind(task_config, seeds.data_seed(0))
        assert bound.data.dims > 0  # 0 ("from the data") was bound to the data's shape
    assert node_halves.entry("train").bind(config, 3) is config


def test_a_tuple_node_answers_as_its_clients_alone():
    """The node entry wires each task's client: a node's (batched) reports are those of the task
    entry's client halves (`client_half`), each answering alone with its secret."""
    for name in ("mean", "frequency"):
        config = validated(Config().with_options({"run.task": name, "data.users": 40, "federation.clients": 4}))
        data_seed, pids, secrets = seeds.data_seed(0), [1, 2], {1: 11, 2: 12}
        config = bind_data(config, data_seed)
        node = node_half(without_seed(config), pids, data_seed, secrets).reply(1, {}, pids)
        assert sorted(node.replies) == pids and not node.failures
        for pid in pids:
            alone, _ = client_half(config, pid, data_seed, secrets[pid]).reply(1, {})
            assert node.replies[pid].arrays.keys() == alone.arrays.keys()
            for key, value in alone.arrays.items():
                np.testing.assert_array_equal(node.replies[pid].arrays[key], value)


def test_client_app_imports_no_task_entries():
    probe = "import json, sys, clients.client_app; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True, capture_output=True).stdout)
    assert "ldpfed.protocols.node_halves" in loaded
    assert not [name for name in loaded if name.startswith(ABOVE_NODES)]

"""A Flower node builds its clients once per run, whatever copy of the ClientApp a round brings.

Flower's Ray backend hands each message a cloudpickle copy of the ClientApp. The first tests replay
that: one copy per round, in one process (an actor), counting how often a node half is built; the
last runs a small federation under Flower and reads the count the nodes report (`node_builds`).
"""

from __future__ import annotations

import numpy as np
import pytest
import ray.cloudpickle as cloudpickle
from conftest import run_collecting_rows
from flwr.app import Context, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity

import clients.client_app as client_app
from ldpfed.config import Config
from ldpfed.protocols.mean import cohort
from ldpfed.tasks import validated
from wire.records import node_round_record


def train_message(server_round: int, pids: list[int]) -> Message:
    return Message(content=node_round_record(server_round, {}, pids), dst_node_id=1, message_type="train")


def node_context(node: int, nodes: int, run_id: int = 1) -> Context:
    config = {"partition-id": node, "num-partitions": nodes}
    return Context(run_id=run_id, node_id=node + 1, node_config=config, state=RecordDict(), run_config={})


BUILDS: list[tuple[int, ...]] = []  # module level: copies of the app find it by reference


class CountedHalf:
    """A node half that records its build and stops a round before any reply."""

    def __init__(self, config, pids, data_seed, secrets):
        BUILDS.append(tuple(pids))

    def reply(self, server_round, broadcast, pids):
        raise StopIteration  # the reply itself is not under test


@pytest.fixture
def counted_builds(monkeypatch):
    """Each node half built in this process, as its hosted partition ids."""
    BUILDS.clear()
    monkeypatch.setattr(client_app, "node_half", CountedHalf)
    monkeypatch.setattr(client_app, "_built", {})
    for name in ("_task_id", "_run_id", "_node_id"):  # a Message is made inside a Flower task
        monkeypatch.setattr(TaskIdentity, name, 1)
    return BUILDS


def run_rounds(app, rounds: int, contexts: list[Context]) -> None:
    for server_round in range(1, rounds + 1):
        copy = cloudpickle.loads(cloudpickle.dumps(app))  # what each round's message brings
        train = copy._registered_funcs["train.default"]
        for context in contexts:
            with pytest.raises(StopIteration):
                train(train_message(server_round, [0]), context)


def test_a_node_is_built_once_over_many_rounds_of_app_copies(counted_builds):
    config = Config()
    app = client_app.make_client_app(config, data_seed=1, secrets=dict.fromkeys(range(10), 7))
    run_rounds(app, rounds=4, contexts=[node_context(0, 2), node_context(1, 2)])
    assert counted_builds == [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9)]


def test_a_new_run_in_the_same_process_builds_its_nodes_anew(counted_builds):
    config = Config()
    first = client_app.make_client_app(config, data_seed=1, secrets=dict.fromkeys(range(10), 7))
    second = client_app.make_client_app(config, data_seed=2, secrets=dict.fromkeys(range(10), 8))
    run_rounds(first, rounds=2, contexts=[node_context(0, 1)])
    run_rounds(second, rounds=2, contexts=[node_context(0, 1)])
    assert len(counted_builds) == 2
    assert len(client_app._built) == 1  # the first run's node is dropped


@pytest.mark.parametrize("users", [1, 9, 10, 11, 1000, 1003])
@pytest.mark.parametrize("clients", [1, 3, 10])
def test_a_clients_rows_are_its_block_of_array_split(users, clients):
    blocks = np.array_split(np.arange(users), clients)
    for pid in range(clients):
        np.testing.assert_array_equal(cohort(users, clients, pid), blocks[pid])


def test_under_flower_a_node_is_built_once_per_actor_not_per_round():
    """A real federation (Ray actors, one app copy per message): each round's `node_builds` counts
    the nodes that built their clients to answer it. Flower's actor pool hands a node's message to
    whichever actor is idle, so a node may be built once in each actor: K x A builds at most over
    the run (here 2 x 2), against K per round (8 in 4 rounds) when every message rebuilds."""
    options = {"task": "mean", "clients": 4, "nodes": 2, "users": 400, "dims": 3, "rounds": 4, "seed": 5}
    flower = validated(Config().with_options({**options, "engine": "flower", "cpus": 2, "cpus-per-client": 1}))
    local = validated(Config().with_options({**options, "engine": "local"}))
    (summary, rows), (_, local_rows) = (run_collecting_rows(config, noise_seed=5) for config in (flower, local))
    assert summary["clients_failed_total"] == 0, summary["failure_reasons"]
    assert local_rows["node_builds"].tolist() == [2, 0, 0, 0]
    assert rows["node_builds"].iloc[0] == 2 and rows["node_builds"].sum() <= 2 * 2
    np.testing.assert_allclose(rows["mse"], local_rows["mse"], rtol=1e-12)

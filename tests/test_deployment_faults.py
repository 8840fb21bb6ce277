"""A node lost mid-round and restarted, on a stand-in for the SuperLink (fast; the real processes:
tests/test_deployment.py, slow); a node whose ClientApp processes cannot start, and the start
deadline a SuperNode gives them (simulations.flower_patience), on Flower's own state.

`FlakyLink` is a Grid as a ServerApp sees it under `flwr run`: it answers the real node halves'
messages, and for a node that is offline it answers what Flower's SuperLink answers (its own
node-unavailable error reply, made by Flower's function). Node 1 dies when its round-2 message
arrives and comes back, after a few of the server's polls, under the same node id (SuperNode
authentication maps a key to its id) or a new one (without authentication). The run must record
node 1's clients as failed in round 2 only, finish every round with the others, charge no client
twice or for a round it did not reply in, and take node 1's clients again in round 3.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

import flwr.supercore.corestate.in_memory_corestate as in_memory_state
import flwr.supercore.corestate.sql_corestate as sql_state
import pandas as pd
import pytest
from flwr.app import Message
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.server.superlink.linkstate.utils import create_message_error_unavailable_res_message
from flwr.supercore.constant import TaskType
from flwr.supercore.object_store import ObjectStoreFactory
from flwr.supercore.task_identity import TaskIdentity
from flwr.supernode.nodestate.in_memory_nodestate import InMemoryNodeState

import ldpfed.tasks as tasks
from clients.client_app import partition_record
from ldpfed.accounting import read_entries
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.nodes import hosted
from ldpfed.protocols.session import Session
from ldpfed.tasks import node_half, server_half
from server import strategy
from server.server_app import LateNodes
from server.strategy import LDPStrategy, Replies, flower_fedavg
from simulations.flower_patience import allow_task_start
from wire.records import node_reply_record, read_node_round

CLIENTS, NODES, ROUNDS = 4, 2, 3


@pytest.fixture(autouse=True)
def serverapp_identity(monkeypatch):
    """Messages are made in a ServerApp's process, whose identity Flower's runtime sets."""
    for name, value in {"_task_id": 1, "_run_id": 1, "_node_id": SUPERLINK_NODE_ID}.items():
        monkeypatch.setattr(TaskIdentity, name, value)


class FlakyLink:
    """Node `i` (node id `ids[i]`) hosts block i of the clients; `dies` = (node, round): that node
    dies when that round's message reaches it, and comes back online `down_polls` calls of
    `get_node_ids` later as node id `back_as`."""

    def __init__(self, config: Config, dies: tuple[int, int], back_as: int, down_polls: int = 3) -> None:
        data_seed = seeds.data_seed(config.run.seed)
        secrets = seeds.client_secrets(77, CLIENTS)
        self.halves = {
            node: node_half(config, hosted(node, NODES, CLIENTS), data_seed, secrets) for node in range(NODES)
        }
        self.ids = {node: 100 + node for node in range(NODES)}  # node id -> node, as the SuperLink assigns
        self.dies, self.back_as, self.down_polls = dies, back_as, down_polls
        self.offline: dict[int, int] = {}  # node -> polls left until it is back

    def online(self) -> dict[int, int]:
        return {node_id: node for node, node_id in self.ids.items() if node not in self.offline}

    def get_node_ids(self) -> list[int]:
        for node in list(self.offline):
            self.offline[node] -= 1
            if self.offline[node] <= 0:
                del self.offline[node]
                self.ids[node] = self.back_as
        return list(self.online())

    def send_and_receive(self, messages, *, timeout: float | None = None) -> list[Message]:
        replies = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = uuid.uuid4().hex  # as a grid's push does
            node = self.online().get(message.metadata.dst_node_id)
            if node is not None and message.metadata.message_type == "train":
                server_round, broadcast, pids = read_node_round(message.content)
                if (node, server_round) == self.dies:
                    self.offline[node] = self.down_polls
                    node = None
                else:
                    answer = self.halves[node].reply(server_round, broadcast, pids)
                    replies.append(Message(node_reply_record(answer, False), reply_to=message))
            elif node is not None:
                replies.append(Message(partition_record(hosted(node, NODES, CLIENTS)), reply_to=message))
            if node is None:  # what Flower's SuperLink answers for a node that is offline or gone
                replies.append(create_message_error_unavailable_res_message(message.metadata, "node_unavail"))
        return replies


@pytest.mark.parametrize("back_as", [101, 105], ids=["same-node-id", "new-node-id"])
def test_a_node_lost_mid_round_fails_that_round_only_and_rejoins_the_next(tmp_path, monkeypatch, back_as):
    monkeypatch.setattr(strategy, "NODE_POLL_SECONDS", 0.0)
    config = (
        Config()
        .with_options(
            {
                "run.task": "mean",
                "run.rounds": ROUNDS,
                "federation.clients": CLIENTS,
                "data.users": 400,
                "data.dims": 3,
                "output.out": str(tmp_path / "out"),
            }  # fmt: skip
        )
        .validated()
    )
    data_seed = seeds.data_seed(config.run.seed)
    half = server_half(config, data_seed, seeds.server_seed(config.run.seed), flower_fedavg)
    session = Session(tasks.of(config), config, half, data_seed, engine="flower", noise=seeds.NODES)
    link = FlakyLink(config, dies=(1, 2), back_as=back_as)

    def on_round(server_round, metrics):
        session.after_round(server_round, metrics, {})

    LDPStrategy(half, CLIENTS, on_round, node_wait=5.0).run(link, ROUNDS)
    summary = session.finish()

    text = {"failed_partitions": str, "failure_reasons": str}
    rounds = pd.read_csv(tmp_path / "out" / "metrics.csv", dtype=text, keep_default_na=False)
    assert rounds["clients_replied"].tolist() == [4, 2, 4]
    assert rounds["failed_partitions"].tolist() == ["", "2,3", ""]
    assert "unavailable" in rounds["failure_reasons"].iloc[1].lower()
    assert (summary["rounds_finished"], summary["clients_replied_total"], summary["clients_failed_total"]) == (3, 10, 2)
    # the ledger: each client charged once per round it replied in, node 1's clients not for round 2
    privacy = pd.read_csv(tmp_path / "out" / "privacy.csv").set_index("client_id")
    assert privacy["rounds"].to_dict() == {0: 3, 1: 3, 2: 2, 3: 2}
    # the ledger's inputs, read back as one row per client and round replied in
    entries = read_entries(tmp_path / "out" / "privacy_entries.csv").to_dict("records")
    assert sorted((entry["client_id"], entry["round"]) for entry in entries) == [
        ("0", 1),
        ("0", 2),
        ("0", 3),
        ("1", 1),
        ("1", 2),
        ("1", 3),
        ("2", 1),
        ("2", 3),
        ("3", 1),
        ("3", 3),
    ]

    basic = privacy["basic_epsilon"]
    assert basic[2] == pytest.approx(2 * basic[0] / 3, rel=1e-12)


def test_a_node_that_stays_down_fails_its_clients_after_the_wait(monkeypatch):
    """No endless wait: node 1 never comes back within `node_wait`; every later round goes on
    without it (its message answered by the link's unavailable error)."""
    monkeypatch.setattr(strategy, "NODE_POLL_SECONDS", 0.001)
    config = (
        Config()
        .with_options(
            {"run.task": "mean", "run.rounds": ROUNDS, "federation.clients": CLIENTS, "data.users": 400, "data.dims": 3}
        )
        .validated()
    )
    data_seed = seeds.data_seed(config.run.seed)
    half = server_half(config, data_seed, seeds.server_seed(config.run.seed), flower_fedavg)
    link = FlakyLink(config, dies=(1, 2), back_as=101, down_polls=10**9)
    rows = []
    LDPStrategy(half, CLIENTS, lambda r, m: rows.append(m), node_wait=0.05).run(link, ROUNDS)
    assert [row["clients_replied"] for row in rows] == [4, 2, 2]


def test_a_round_still_waiting_for_nodes_says_so_in_the_run_log_every_interval(caplog):
    """The deployed ServerApp's warning (Flower's logger, which `flwr run --stream` shows): at each
    multiple of the interval that a batch's replies are still missing, naming the silent nodes;
    a new batch counts from its own start, and a batch all replied says nothing."""
    late = LateNodes(every=60.0)
    with caplog.at_level(logging.WARNING, logger="flwr"):
        for seconds in (1.0, 59.0, 61.0, 62.0, 119.0, 121.0):
            late(Replies("train", 1, 2, (7,), seconds, pushed_at=5.0))
        late(Replies("query", 0, 2, (7, 8), 61.0, pushed_at=9.0))
        late(Replies("train", 2, 2, (), 200.0, pushed_at=12.0))
    warnings = [record.getMessage() for record in caplog.records if record.name == "flwr"]
    assert [warning.split(" (")[0] for warning in warnings] == [
        "ldpfed: round 1: 1 of 2 nodes have not replied in 61 s",
        "ldpfed: round 1: 1 of 2 nodes have not replied in 121 s",
        "ldpfed: the query before round 1: 2 of 2 nodes have not replied in 61 s",
    ]
    assert all("Runtime task-token authentication failed" in warning for warning in warnings)
    assert "node ids 7, 8)" in warnings[2]


@pytest.fixture
def state_clock(monkeypatch):
    """Flower's in-memory task state (a SuperNode's) on a clock the test moves; the state modules'
    deadlines restored after the test."""
    for state in (in_memory_state, sql_state):
        for name in ("HEARTBEAT_DEFAULT_INTERVAL", "HEARTBEAT_PATIENCE"):
            monkeypatch.setattr(state, name, getattr(state, name))
    clock = [in_memory_state.now()]
    monkeypatch.setattr(in_memory_state, "now", lambda: clock[0])
    return clock


def task_alive_after(clock: list, seconds: float, running: bool = False) -> bool:
    """Whether a ClientApp task claimed by a SuperExec (and activated by its process if `running`)
    still has its token `seconds` later: the token its process calls back with."""
    state = InMemoryNodeState(ObjectStoreFactory().store())
    task = state.create_task(task_type=TaskType.CLIENT_APP, run_id=1)
    token = state.claim_task(task)
    if running:
        assert state.activate_task(task)
    clock[0] += timedelta(seconds=seconds)
    return state.get_task_by_token(token) is not None


def test_a_task_s_process_may_start_as_long_as_flower_patience_allows(state_clock):
    """Flower gives a claimed task's process 30 s to call back: a process later than that (its
    imports on a loaded machine) is refused, the "Runtime task-token authentication failed" of a
    deployment that never finishes round 1. With `allow_task_start(300)` it has 300 s, and a task
    once running keeps Flower's 60 s between heartbeats."""
    assert task_alive_after(state_clock, 29) and not task_alive_after(state_clock, 31)
    allow_task_start(300.0)
    assert task_alive_after(state_clock, 299) and not task_alive_after(state_clock, 301)
    assert task_alive_after(state_clock, 59, running=True) and not task_alive_after(state_clock, 61, running=True)
    assert sql_state.HEARTBEAT_DEFAULT_INTERVAL == 300.0  # a SuperLink's database state alike
    assert sql_state.HEARTBEAT_PATIENCE * sql_state.HEARTBEAT_DEFAULT_INTERVAL == pytest.approx(60.0)

"""`LDPStrategy`: a Flower Strategy around one of ldpfed's server halves (ldpfed.protocols).

The half does the work (configure a round, aggregate, evaluate); this adapter addresses clients
by Flower *partition id* (asked once with a `query` message, never Flower's random node ids, so
sampling follows the server's seed), converts records, and treats an error reply or a missing
reply as that client's failure (the round aggregates what arrived). `Strategy.start` runs the
rounds; its `evaluate_fn` is where the half evaluates and the run's record is written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from ldpfed.protocols import seeds
from ldpfed.protocols.base import short_reason
from ldpfed.protocols.nodes import NodeReply, collect_sum, joined
from wire.records import (
    QUERY,
    TRAIN,
    node_round_record,
    read_node_builds,
    read_node_reply,
    read_node_sum,
    read_partitions,
)

NODE_WAIT_SECONDS = 120.0
NODE_POLL_SECONDS = 0.5  # a round waiting for an offline node asks the SuperLink this often
logger = logging.getLogger("ldpfed.strategy")


def addressees(messages: Iterable[Message]) -> dict[str, int]:
    """{message id: destination node id} of messages the grid has pushed (pushing sets their ids).
    A reply is matched to its node by the message it answers, never by its sender: the error reply
    that Flower's SuperLink makes for a node that went offline comes from the SuperLink's own id."""
    return {message.metadata.message_id: message.metadata.dst_node_id for message in messages}


def ask_partitions(grid: Grid, node_ids: Iterable[int]) -> tuple[dict[int, int], dict[int, str]]:
    """({partition id: node id} of the partitions the nodes `node_ids` host, {node id: why it did
    not say}): one `query` message each. A partition claimed twice raises."""
    queries = [Message(RecordDict(), dst_node_id=node, message_type=QUERY) for node in node_ids]
    replies = grid.send_and_receive(queries)
    senders = addressees(queries)
    mapping: dict[int, int] = {}
    silent: dict[int, str] = {}
    for reply in replies:
        if reply.has_error():
            silent[senders[reply.metadata.reply_to_message_id]] = reply.error.reason
            continue
        for pid in read_partitions(reply.content):
            if int(pid) in mapping:
                raise RuntimeError(f"partition {pid} is hosted by two nodes")
            mapping[int(pid)] = reply.metadata.src_node_id
    return mapping, silent


def discover_partitions(grid: Grid, expected: int, timeout: float = NODE_WAIT_SECONDS) -> dict[int, int]:
    """{partition id: node id} for all `expected` clients: asks each connected node which
    partition ids it hosts (a cohort node hosts several), until every client is hosted."""
    deadline = time.monotonic() + timeout
    mapping: dict[int, int] = {}
    asked: set[int] = set()
    while len(mapping) < expected:
        new = [node for node in grid.get_node_ids() if node not in asked]
        if not new:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"only {len(mapping)} of {expected} clients were hosted by the "
                    f"{len(asked)} Flower nodes connected within {timeout:.0f}s"
                )
            time.sleep(0.05)
            continue
        asked.update(new)
        found, silent = ask_partitions(grid, new)
        if silent:
            node, reason = next(iter(silent.items()))
            raise RuntimeError(f"node {node} did not report its partition ids: {reason}")
        if set(found) & set(mapping):
            raise RuntimeError(f"partition {min(set(found) & set(mapping))} is hosted by two nodes")
        mapping.update(found)
    if sorted(mapping) != list(range(expected)):
        raise RuntimeError(f"expected partition ids 0..{expected - 1}, got {sorted(mapping)}")
    return mapping


def await_nodes(grid: Grid, nodes: dict[int, int], partitions: Iterable[int], wait: float) -> dict[int, int]:
    """The partition map for a round whose sampled clients are `partitions`: waits up to `wait`
    seconds for the nodes hosting them to be online (a SuperNode restarting after a crash; under
    `ldpfed simulate` every node is always online and nothing waits). A node that comes back under
    a new node id (a deployment without SuperNode authentication gives a restarted node a new one)
    is asked which partitions it hosts, and takes over those whose node is offline, never an online
    node's. A node still offline when the wait ends is sent its message anyway: Flower's SuperLink
    answers it with an error reply (node unavailable), its clients' failure for the round."""
    deadline = time.monotonic() + wait
    nodes, asked = dict(nodes), set(nodes.values())
    while True:
        online = set(grid.get_node_ids())
        if {nodes[pid] for pid in partitions} <= online:
            return nodes
        if online - asked:
            found, _ = ask_partitions(grid, online - asked)
            asked |= online
            nodes.update({pid: node for pid, node in found.items() if nodes.get(pid) not in online})
            continue
        if time.monotonic() >= deadline:
            missing = sorted({nodes[pid] for pid in partitions} - online)
            logger.warning("nodes %s are offline: their clients fail this round", missing)
            return nodes
        time.sleep(NODE_POLL_SECONDS)


class RunStopped(RuntimeError):
    """The harness asked the ServerApp to stop (Ctrl-C): no further round is started."""


@dataclass(frozen=True)
class Replies:
    """Where the replies to one batch of messages stand after a pull (`StoppableGrid`'s `watch`):
    the messages' `kind` ("query", "train") and `server_round` (their group; 0 for a query), how
    many were `sent`, the node ids still `waiting` for, the `seconds` since they were pushed, and
    `pushed_at` (`time.monotonic()` then: one value per batch)."""

    kind: str
    server_round: int
    sent: int
    waiting: tuple[int, ...]
    seconds: float
    pushed_at: float

    @property
    def arrived(self) -> int:
        return self.sent - len(self.waiting)


class StoppableGrid:
    """A Grid that pushes a batch of messages and pulls their replies itself, every `interval`
    seconds, so that the wait can be watched and stopped: `watch(replies)` after every pull (a
    `Replies`: the harness's start-up progress, a deployment's warning about nodes that do not
    answer), and `stop` (the harness's Ctrl-C) ends the wait, raising `RunStopped`. Flower's
    `send_and_receive` waits for the replies up to its timeout (an hour by default), says nothing
    meanwhile and cannot be interrupted, so a ServerApp thread waiting for replies that the stopped
    simulation runtime will never deliver keeps the process alive. Everything else goes to the
    wrapped grid.
    """

    # In a simulation a pull is a look-up in Flower's in-memory SuperLink (microseconds): every 10 ms
    # a reply waits 5 ms on average to be seen, where at 50 ms it waited 25 ms of a round whose
    # floor is Flower's 0.1 s (its simulation engine picks up pushed messages every 0.1 s).
    PULL_INTERVAL = 0.01

    def __init__(
        self,
        grid: Grid,
        stop: threading.Event | None = None,
        watch: Callable[[Replies], None] | None = None,
        interval: float = PULL_INTERVAL,
    ) -> None:
        self.grid, self.stop, self.watch, self.interval = grid, stop, watch, interval

    def __getattr__(self, name: str):
        return getattr(self.grid, name)

    def _check(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise RunStopped("stopped by the harness")

    def get_node_ids(self) -> Iterable[int]:
        self._check()
        return self.grid.get_node_ids()

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        self._check()
        messages = list(messages)
        pending = set(self.grid.push_messages(messages))
        pushed_at = time.monotonic()
        nodes = addressees(messages)
        kind = messages[0].metadata.message_type if messages else ""
        group = messages[0].metadata.group_id if messages else ""
        server_round = int(group) if group.isdigit() else 0
        deadline = None if timeout is None else pushed_at + timeout
        replies: list[Message] = []
        while pending and (deadline is None or time.monotonic() < deadline):
            arrived = list(self.grid.pull_messages(pending))
            replies.extend(arrived)
            pending.difference_update(reply.metadata.reply_to_message_id for reply in arrived)
            if self.watch is not None:
                waiting = tuple(sorted(nodes[message_id] for message_id in pending))
                seconds = time.monotonic() - pushed_at
                self.watch(Replies(kind, server_round, len(messages), waiting, seconds, pushed_at))
            if pending:
                self._pause()
        return replies

    def _pause(self) -> None:
        if self.stop is None:
            time.sleep(self.interval)
        elif self.stop.wait(self.interval):
            self._check()


def numeric(metrics: dict) -> MetricRecord:
    return MetricRecord({k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and np.isfinite(v)})


class TrainOnlyStrategy(Strategy):
    """A Strategy whose clients only train: none is asked to evaluate (the server evaluates, where it
    does, in the `evaluate_fn` of `Strategy.start`), and there is no summary to log."""

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return []

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return None

    def summary(self) -> None:
        return None


class LDPStrategy(TrainOnlyStrategy):
    """Flower Strategy whose logic is an ldpfed server half; `on_round(round, metrics)` after each
    round's evaluation (the run's record). `node_wait`: seconds a round waits for an offline node
    hosting sampled clients (`await_nodes`; deployments)."""

    def __init__(
        self, half, clients: int, on_round: Callable[[int, dict], None] | None = None, node_wait: float = 0.0
    ) -> None:
        self.half, self.clients, self.on_round, self.node_wait = half, clients, on_round, node_wait
        self.nodes: dict[int, int] | None = None
        self.metrics: dict = {}

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """One message per node hosting sampled clients, listing them (ldpfed.protocols.nodes)."""
        if self.nodes is None:
            self.nodes = discover_partitions(grid, self.clients)
        plan = self.half.configure_round(server_round)
        if not self._hosts(plan.partitions) <= set(grid.get_node_ids()):  # a node offline: wait for it
            self.nodes = await_nodes(grid, self.nodes, plan.partitions, self.node_wait)
        self._planned = self._grouped(plan.partitions)
        self._sent = [
            Message(
                node_round_record(server_round, plan.broadcast, pids),
                dst_node_id=node,
                message_type=TRAIN,
                group_id=str(server_round),
            )
            for node, pids in self._planned.items()
        ]
        return self._sent

    def _owners(self) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct node ids, each partition's index among them), rebuilt when `nodes` changes."""
        cached = getattr(self, "_owner_cache", None)
        if cached is None or cached[0] is not self.nodes:
            hosts = np.array(sorted(set(self.nodes.values())), dtype=object)
            index = {node: i for i, node in enumerate(hosts)}
            owner = np.array([index[self.nodes[pid]] for pid in range(self.clients)], dtype=np.int64)
            self._owner_cache = cached = (self.nodes, hosts, owner)
        return cached[1], cached[2]

    def _hosts(self, partitions) -> set[int]:
        """The node ids hosting `partitions` (array work: no loop over clients)."""
        hosts, owner = self._owners()
        used = np.bincount(owner[seeds.id_array(partitions)], minlength=len(hosts))
        return {int(node) for node in hosts[np.flatnonzero(used)]}

    def _grouped(self, partitions) -> dict[int, np.ndarray]:
        """{node id: its partitions among `partitions`, in their order} by a stable sort of their
        nodes' indices (the order a loop over `partitions` appends them in)."""
        hosts, owner = self._owners()
        pids = seeds.id_array(partitions)
        which = owner[pids]
        counts = np.bincount(which, minlength=len(hosts))
        order = np.argsort(which, kind="stable") if len(hosts) > 1 else slice(None)
        blocks = np.split(pids[order], np.cumsum(counts)[:-1])
        return {int(hosts[i]): blocks[i] for i in np.flatnonzero(counts)}

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Each node's reply unpacked into its clients' replies and failures; an error reply is the
        failure of every client the node was asked for (a missing one too: `participation`). A
        summed reply (`node-reply sum`) goes to the half with the other nodes' sums. `node_builds`:
        how many nodes built their clients to answer this round."""
        parts, failures, sums, builds = [], {}, {}, 0
        nodes = addressees(self._sent)
        for reply in replies:
            pids = self._planned[nodes[reply.metadata.reply_to_message_id]]
            if reply.has_error():
                failures.update(dict.fromkeys(pids.tolist(), short_reason(reply.error.reason)))
                continue
            builds += read_node_builds(reply.content)
            node_replies, node_failures = read_node_reply(reply.content)
            parts.append(node_replies)
            failures.update(node_failures)
            collect_sum(sums, NodeReply(node_replies, summed=read_node_sum(reply.content)))
        received = joined(parts) if parts else {}  # the nodes' columns, as the local engine joins them
        metrics = self.half.aggregate(server_round, received, failures, **({"sums": sums} if sums else {}))
        self.metrics = {**metrics, "node_builds": builds}
        return None, numeric(self.metrics)

    def evaluate(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """`evaluate_fn` of `Strategy.start`: the half's evaluation, then the round's record."""
        if server_round == 0:
            return None
        metrics = {**self.metrics, **self.half.evaluate(server_round)}
        if self.on_round is not None:
            self.on_round(server_round, metrics)
        return numeric(metrics)

    def summary(self) -> None:
        logger.info("LDPStrategy around %s", type(self.half).__name__)

    def run(self, grid: Grid, rounds: int) -> None:
        self.start(grid, ArrayRecord(), num_rounds=rounds, evaluate_fn=self.evaluate)


def flower_fedavg(updates: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Flower's own FedAvg (`aggregate_arrayrecords`) of the privatized updates, weighted by the
    sample counts: the `fedavg` aggregator's baseline."""
    from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

    records = [
        RecordDict({"update": ArrayRecord([row]), "metrics": MetricRecord({"num-examples": float(n)})})
        for row, n in zip(updates, sizes)
    ]
    return aggregate_arrayrecords(records, "num-examples").to_numpy_ndarrays()[0]

"""Cohort nodes: K Flower nodes host the N simulated clients (spec: scale.md, Design).

Placement (docs/decisions.md, Scale, "Cohort nodes, contiguous blocks"): node i hosts the contiguous block
`np.array_split(range(N), K)[i]` of partition ids, as the mean task's clients hold contiguous
blocks of users. K = N is one client per node. The default K is min(N, CPUs): one node per core;
for the tuple tasks (mean, frequency), whose rounds are light, no more nodes than their work fills
(`default_tuple_nodes`): each node is a Ray actor of a few hundred MiB that a small task leaves idle.

A node half answers `reply(round, broadcast, partitions)` for the sampled clients it hosts with a
`NodeReply`: each client's reply, each failing client's reason (a failure of that client only:
the node still replies for the others) and each client's diagnostics (never sent). Every client
keeps its own secret and streams (ldpfed.protocols.seeds), so which node runs it changes nothing.

With `node-reply sum` (spec: scale.md, Design) a node sends, instead of its clients' arrays, the
sum the server would form of them (`NodeReply.summed`: a train node's count-weighted sum of
updates, a tuple node's summed report counts) and each client's metrics (counts) only; the server
adds the nodes' sums (`ServerHalf.aggregate(..., sums=...)`), keyed by each node's first replying
client so the order of the additions does not depend on the order the replies arrive in.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ldpfed.protocols.base import ClientHalf, ClientReply, ServerHalf, short_reason


def default_nodes(clients: int, cpus: int = 0) -> int:
    """min(N, CPUs) (`cpus` 0 = this machine's)."""
    return max(1, min(clients, cpus or os.cpu_count() or 1))


# A tuple task's node round costs about 0.2-0.4 ms per client (its streams, one batched draw, the
# reply) plus a few ns per perturbed value: a node per 250 clients or per 2^22 values a round is
# about 0.1 s of work, the order of a Flower round's own overhead.
TUPLE_CLIENTS_PER_NODE = 250
TUPLE_VALUES_PER_NODE = 2**22


def default_tuple_nodes(clients: int, values: int, cpus: int = 0) -> int:
    """The mean and frequency tasks' default K: one node per TUPLE_CLIENTS_PER_NODE clients or per
    TUPLE_VALUES_PER_NODE values perturbed a round (users x dims), whichever asks for more, at
    most min(N, CPUs); the default job (10 clients, 10^5 values) runs on one node."""
    work = max(math.ceil(clients / TUPLE_CLIENTS_PER_NODE), math.ceil(values / TUPLE_VALUES_PER_NODE))
    return max(1, min(work, default_nodes(clients, cpus)))


def hosted(node: int, nodes: int, clients: int) -> list[int]:
    """The partition ids node `node` of `nodes` hosts (a contiguous block)."""
    return [int(pid) for pid in np.array_split(np.arange(clients), nodes)[node]]


@dataclass(frozen=True)
class Layout:
    """Which node hosts which client: `nodes` contiguous blocks of `clients` partition ids."""

    clients: int
    nodes: int

    def hosted(self, node: int) -> list[int]:
        return hosted(node, self.nodes, self.clients)

    def group(self, partitions: list[int]) -> dict[int, list[int]]:
        """{node: its partitions among `partitions`} (nodes with none left out)."""
        ends = np.cumsum([len(block) for block in np.array_split(np.arange(self.clients), self.nodes)])
        partitions = np.asarray(partitions, dtype=np.int64)
        owners = np.searchsorted(ends, partitions, side="right")
        return {int(node): partitions[owners == node].tolist() for node in np.unique(owners)}


@dataclass(frozen=True)
class NodeReply:
    """A node's answer for its sampled clients: replies, failures (reasons), diagnostics."""

    replies: dict[int, ClientReply] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)
    diagnostics: dict[int, dict] = field(default_factory=dict)
    # node-reply sum: {name: the replying clients' arrays summed (train: weighted by their counts)};
    # the replies then carry the clients' metrics only
    summed: dict[str, np.ndarray] = field(default_factory=dict)


def collect_sum(sums: dict[int, dict], answer: NodeReply) -> None:
    """Add a node's summed reply to `sums`, keyed by its first replying client (a stable order)."""
    if answer.summed and answer.replies:
        sums[min(answer.replies)] = answer.summed


class NodeHalf(Protocol):
    def reply(self, server_round: int, broadcast: dict[str, np.ndarray], partitions: list[int]) -> NodeReply: ...


class ClientsNode:
    """A node whose clients answer one after another (each client's work is vectorized inside
    it, e.g. the mean task's cohort of users); an exception is that client's failure. `summing`
    (node-reply sum, for additive replies such as the tuple tasks' report sums): the node sends
    the sum of its clients' arrays, added in client order, and their metrics only."""

    def __init__(self, client: Callable[[int], ClientHalf], summing: bool = False) -> None:
        self.client, self.summing = client, summing

    def reply(self, server_round: int, broadcast: dict, partitions: list[int]) -> NodeReply:
        answer = NodeReply()
        for pid in partitions:
            try:
                reply, diagnostics = self.client(pid).reply(server_round, broadcast)
            except Exception as error:  # noqa: BLE001 - a failing client must not fail the node
                answer.failures[pid] = short_reason(f"{type(error).__name__}: {error}")
                continue
            answer.replies[pid] = reply
            answer.diagnostics[pid] = diagnostics
        if self.summing and answer.replies:
            pids = sorted(answer.replies)
            for name in answer.replies[pids[0]].arrays:
                answer.summed[name] = np.stack([answer.replies[pid].arrays[name] for pid in pids]).sum(axis=0)
            answer.replies.update({pid: ClientReply({}, answer.replies[pid].metrics) for pid in pids})
        return answer


class NodeSet:
    """The nodes of a run in this process (engine `local`): `layout` and `node(i)`, built on
    first use by `build(partitions)`; `builds` counts the nodes built so far."""

    def __init__(self, layout: Layout, build: Callable[[list[int]], NodeHalf]) -> None:
        self.layout, self.build = layout, build
        self._nodes: dict[int, NodeHalf] = {}
        self.builds = 0

    def node(self, index: int) -> NodeHalf:
        if index not in self._nodes:
            self._nodes[index] = self.build(self.layout.hosted(index))
            self.builds += 1
        return self._nodes[index]


class ClientNodes:
    """Each client its own node, from a function `client(pid)` returning its client half (what
    `local_round` took before nodes existed; kept for callers that hold client halves, which
    build them: `builds` stays 0)."""

    builds = 0

    def __init__(self, client: Callable[[int], ClientHalf]) -> None:
        self.layout, self.client = self, client

    def group(self, partitions: list[int]) -> dict[int, list[int]]:
        return {int(pid): [int(pid)] for pid in partitions}

    def node(self, index: int) -> ClientsNode:
        return ClientsNode(self.client)


def local_round(
    server: ServerHalf,
    nodes,
    server_round: int,
    on_diagnostics: Callable[[int, int, dict], None] | None = None,
) -> dict:
    """One round in this process (engine `local`), in the order a Flower Strategy runs it:
    configure, each node's reply for its sampled clients (`nodes`: a `NodeSet`, see
    ldpfed.protocols.nodes; a failing client is that client's failure, an exception of a whole node
    the failure of its clients), aggregate, evaluate. Returns the round's metrics, with
    `node_builds`: the nodes built to answer this round (as the Flower strategy counts them). A
    function `client(pid)` in place of `nodes` makes each client its own node (`ClientNodes`)."""
    if not hasattr(nodes, "layout"):
        nodes = ClientNodes(nodes)
    plan = server.configure_round(server_round)
    replies, failures, sums, builds_before = {}, {}, {}, nodes.builds
    for node, partitions in nodes.layout.group(plan.partitions).items():
        try:
            answer = nodes.node(node).reply(server_round, plan.broadcast, partitions)
        except Exception as error:  # noqa: BLE001 - a failing node must not abort the round
            failures.update(dict.fromkeys(partitions, short_reason(f"{type(error).__name__}: {error}")))
            continue
        replies.update(answer.replies)
        failures.update(answer.failures)
        collect_sum(sums, answer)
        if on_diagnostics is not None:
            for pid, values in answer.diagnostics.items():
                on_diagnostics(server_round, pid, values)
    metrics = server.aggregate(server_round, replies, failures, **({"sums": sums} if sums else {}))
    return {**metrics, "node_builds": nodes.builds - builds_before, **server.evaluate(server_round)}

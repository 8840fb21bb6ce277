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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ldpfed.protocols.base import ClientHalf, ClientReply, ServerHalf, short_reason
from ldpfed.samplers.words import compiled, kernel


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
    """The partition ids node `node` of `nodes` hosts (a contiguous block, `hosted_range`)."""
    return list(hosted_range(node, nodes, clients))


def hosted_range(node: int, nodes: int, clients: int) -> range:
    """Block `node` of `np.array_split(np.arange(clients), nodes)` (the first clients % nodes
    blocks hold one more), by arithmetic."""
    size, larger = divmod(clients, nodes)
    start = node * size + min(node, larger)
    return range(start, start + size + (node < larger))


@dataclass(frozen=True)
class Layout:
    """Which node hosts which client: `nodes` contiguous blocks of `clients` partition ids."""

    clients: int
    nodes: int

    def hosted(self, node: int) -> list[int]:
        return hosted(node, self.nodes, self.clients)

    def group(self, partitions: list[int]) -> dict[int, list[int]]:
        """{node: its partitions among `partitions`} (nodes with none left out); every client
        (`range(clients)`, as a server without a budget plans a round): each node its block, as a range."""
        if isinstance(partitions, range) and partitions == range(self.clients):
            return {node: hosted_range(node, self.nodes, self.clients) for node in range(self.nodes) if self.clients}
        ends = np.cumsum([len(block) for block in np.array_split(np.arange(self.clients), self.nodes)])
        partitions = np.asarray(partitions, dtype=np.int64)
        owners = np.searchsorted(ends, partitions, side="right")
        present = np.flatnonzero(np.bincount(owners, minlength=1)) if owners.size else []
        return {int(node): partitions[owners == node].tolist() for node in present}


class Replies(Mapping):
    """Many clients' replies as columns: ascending partition ids, each metric a column and each
    array a (clients, ...) block; `replies[pid]` makes that client's `ClientReply` on access. A node
    that answers its clients in one batched call (the tuple tasks) replies with one, so that a
    round's replies cost array work, not an object per client. `squares`: {name: source} for a
    column that is, for every client, the square of column `source` (clients of one user: their
    `total_sq` is their `total` squared), which a node's reply need not send (wire/records.py)."""

    def __init__(
        self,
        pids,
        metrics: dict[str, np.ndarray],
        arrays: dict[str, np.ndarray] | None = None,
        squares: dict[str, str] | None = None,
    ) -> None:
        self.pids = np.asarray(pids, dtype=np.int64)
        self.metrics, self._arrays, self._blocks = metrics, arrays or {}, None
        self.squares = squares or {}

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """{name: (clients, ...) block}; several nodes' blocks are joined on first access only."""
        if self._blocks is not None:
            self._arrays = {name: np.concatenate(blocks) for name, blocks in self._blocks.items()}
            self._blocks = None
        return self._arrays

    def total(self, name: str, width: int) -> np.ndarray:
        """The clients' arrays `name` added up client after client, from zeros(width) (each
        client's array flattened to `width` entries): the additions the server makes of the
        replies one by one (`ClientsNode.one_by_one`'s order), one compiled pass over each node's
        block, none joined."""
        blocks = self._blocks[name] if self._blocks is not None else [self._arrays[name]]
        total = np.zeros(width)
        compiled()
        for block in blocks:  # (a broadcast column, e.g. equal counts, is added as it is: no copy)
            _add_rows(np.asarray(block, dtype=np.float64).reshape(-1, width), total)
        return total

    def __len__(self) -> int:
        return self.pids.size

    def __iter__(self):
        return iter(self.pids.tolist())

    def _position(self, pid) -> int:
        position = int(np.searchsorted(self.pids, pid))
        if position == self.pids.size or self.pids[position] != pid:
            raise KeyError(pid)
        return position

    def __contains__(self, pid) -> bool:
        try:
            self._position(pid)
        except (KeyError, TypeError):
            return False
        return True

    def __getitem__(self, pid) -> ClientReply:
        row = self._position(pid)
        return ClientReply(
            {name: block[row] for name, block in self.arrays.items()},
            {name: column[row].item() for name, column in self.metrics.items()},
        )

    def metric(self, name: str) -> np.ndarray:
        return self.metrics[name]

    @classmethod
    def joined(cls, parts: list[Replies]) -> Replies:
        """The replies of several nodes (their partition ids disjoint) as one, ids ascending; when
        the nodes' ids follow each other (contiguous blocks, in whatever order the nodes replied)
        their arrays stay per node until `arrays` is read (`total` adds them up without joining them)."""
        parts = [part for part in parts if len(part)] or parts[:1]  # a node whose clients all failed has no columns
        parts = sorted(parts, key=lambda part: int(part.pids[0]) if len(part) else 0)  # nodes reply in any order
        pids = np.concatenate([part.pids for part in parts])
        first = parts[0]
        if pids.size < 2 or bool(np.all(pids[1:] > pids[:-1])):
            joined = cls(pids, {name: np.concatenate([part.metrics[name] for part in parts]) for name in first.metrics})
            if len(parts) == 1:
                joined._arrays = first.arrays
            elif first.arrays:
                joined._blocks = {name: [part.arrays[name] for part in parts] for name in first.arrays}
            return joined
        order = np.argsort(pids, kind="stable")

        def joined_column(blocks):
            return np.concatenate(blocks)[order]

        return cls(
            pids[order],
            {name: joined_column([part.metrics[name] for part in parts]) for name in first.metrics},
            {name: joined_column([part.arrays[name] for part in parts]) for name in first.arrays},
        )


@kernel
def _add_rows(block, total) -> None:
    """total[j] += block[i, j] for i = 0, 1, ... in turn (a sum in client order)."""
    for i in range(block.shape[0]):
        for j in range(block.shape[1]):
            total[j] += block[i, j]


def ready_to_add() -> None:
    """Load the compiled addition of the replies (`Replies.total`) for the blocks it is given (a
    reply's own array, and a broadcast column: read-only, strided), by a call on a small block of
    each: the first call in a process costs ~0.8 s (numba types it and reads its cache), which a
    server half that waits anyway (for Ray's start) pays then, not in round 1."""
    compiled()
    _add_rows(np.zeros((1, 1)), np.zeros(1))
    _add_rows(np.broadcast_to(np.zeros((1, 1)), (2, 1)), np.zeros(1))


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

    def __init__(self, client: Callable[[int], ClientHalf], summing: bool = False, batch=None) -> None:
        """`batch`: the clients already held as one batch (e.g. built from the task's columns,
        `ldpfed.protocols.node_halves.tuple_node`), else built from their halves on first use (`batched`)."""
        self.client, self.summing = client, summing
        self._batch = batch  # clients that answer together (`batched`)
        self._unbatched = False  # building the batch failed: one by one from then on

    def reply(self, server_round: int, broadcast: dict, partitions: list[int]) -> NodeReply:
        try:
            batch = None if self._unbatched else self.batched(partitions)
        except Exception:  # noqa: BLE001 - clients that cannot be batched answer one by one
            batch, self._unbatched = None, True
        if batch is not None:
            try:
                return batch.reply(server_round, broadcast, partitions, self.summing)
            except Exception:  # noqa: BLE001 - each client alone below: a failing client fails alone
                pass
        return self.one_by_one(server_round, broadcast, partitions)

    def batched(self, partitions: list[int]):
        """The node's clients as one batch when their class can answer together (a `batch`
        class method, e.g. the tuple tasks' clients: one kernel call for all of them, each
        client's noise from its own stream), covering `partitions` (extended when a round asks
        for clients not in it); None otherwise."""
        if not partitions:
            return None
        if self._batch is not None and self._batch.covers(partitions):
            return self._batch
        known = [] if self._batch is None else self._batch.partitions()
        pids = sorted(set(known) | {int(pid) for pid in partitions})
        halves = [self.client(pid) for pid in pids]
        kind = type(halves[0])
        batch = getattr(kind, "batch", None)
        self._batch = None if any(type(half) is not kind for half in halves) or batch is None else batch(halves, pids)
        self._unbatched = self._batch is None  # not asked again each round
        return self._batch

    def one_by_one(self, server_round: int, broadcast: dict, partitions: list[int]) -> NodeReply:
        """Each client's reply in turn (an exception is that client's failure)."""
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
    parts, failures, sums, builds_before = [], {}, {}, nodes.builds
    for node, partitions in nodes.layout.group(plan.partitions).items():
        try:
            answer = nodes.node(node).reply(server_round, plan.broadcast, partitions)
        except Exception as error:  # noqa: BLE001 - a failing node must not abort the round
            failures.update(dict.fromkeys(partitions, short_reason(f"{type(error).__name__}: {error}")))
            continue
        parts.append(answer.replies)
        failures.update(answer.failures)
        collect_sum(sums, answer)
        if on_diagnostics is not None:
            for pid, values in answer.diagnostics.items():
                on_diagnostics(server_round, pid, values)
    metrics = server.aggregate(server_round, joined(parts), failures, **({"sums": sums} if sums else {}))
    return {**metrics, "node_builds": nodes.builds - builds_before, **server.evaluate(server_round)}


def joined(parts: list) -> Mapping:
    """The nodes' replies of a round as one mapping: columns (`Replies.joined`) when every node
    replied with columns, else a dict."""
    if parts and all(isinstance(part, Replies) for part in parts):
        return Replies.joined(parts)
    replies: dict = {}
    for part in parts:
        replies.update(part)
    return replies

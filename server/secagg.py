"""The secure-aggregation trust model's server: SecAgg+ rounds (ldpfed.protocols.secagg;
clients/secagg_app.py has the client side) over Flower's message API, from Flower's primitives
(Shamir reconstruction `combine_shares`, key agreement `generate_shared_key`).

Threat model: a semi-honest (honest-but-curious) server and no collusion between it and the
clients; each client that takes part is one party (client granularity). The server routes the
clients' encrypted shares without the keys to read them, and receives each client's encoding
only masked by PRG(b_u) and pairwise masks: it learns the modular sum of the surviving clients'
encodings and nothing else (`SecAggRound.view` is everything it received). Not covered: a
malicious server that lies about who dropped (SecAgg+'s consistency checks and signatures are
not implemented), and collusion of the server with more than t - 1 of a client's neighbours.

Dropouts: a client whose masked vector does not arrive (its node failed, or it raised) is
unmasked out of the sum from t shares of its mask key held by its surviving neighbours; the round
completes while every client that shared keeps at least t surviving neighbours, and aborts
otherwise (`SecAggAborted`: nothing is released). The sum then holds the shares of the surviving
clients only: the round is accounted at that count (the harness, simulations/secagg.py).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from flwr.app import Message
from flwr.common.secure_aggregation.crypto.shamir import combine_shares
from flwr.serverapp import Grid, ServerApp
from flwr.supercore.primitives.asymmetric import bytes_to_public_key

from ldpfed.protocols.secagg import SecAggPlan, mask, pair_sign, threshold
from server.strategy import RunStopped, StoppableGrid, discover_partitions
from wire.records import (
    CIPHER_KEYS,
    CIPHERTEXTS,
    DESTINATIONS,
    IDS,
    MASK_KEY,
    MASK_KEYS,
    MODEL,
    OWNERS,
    SECAGG_KEYS,
    SECAGG_MASK,
    SECAGG_SHARES,
    SECAGG_UNMASK,
    SECRET_KINDS,
    SHARED,
    SHARES,
    SOURCES,
    SURVIVORS,
    pair_seed,
    read_secagg_reply,
    scalar_key,
    secagg_request,
)

STAGES = (SECAGG_KEYS, SECAGG_SHARES, SECAGG_MASK, SECAGG_UNMASK)


class SecAggAborted(RuntimeError):
    """Too few surviving neighbours to unmask a client: the round releases nothing."""


@dataclass
class SecAggResult:
    """What a completed round reveals to the server: the modular sum of the survivors' encodings."""

    modular_sum: np.ndarray
    survivors: list[int]
    dropped: list[int]  # shared their masks' shares, then their masked vector did not arrive
    failures: dict[int, str] = field(default_factory=dict)  # every client missing from the sum, why


class SecAggRound:
    """The server's side of one round (module docstring): `request(stage, pids)` builds a node's
    request, `take(stage, pids, record)` reads its reply (None: the node failed), `result()`
    unmasks the sum. `view`: every masked row it received (what a server-view test inspects)."""

    def __init__(self, plan: SecAggPlan, server_round: int, participants: list[int], model=None) -> None:
        self.plan, self.round, self.model = plan, server_round, model
        self.sampled = sorted(participants)
        self.cipher_keys: dict[int, bytes] = {}
        self.mask_keys: dict[int, bytes] = {}
        self.ciphertexts: list[tuple[int, int, bytes]] = []
        self.shared: set[int] = set()
        self.total = np.zeros(plan.ddg.padded_dims, dtype=np.int64)
        self.survivors: set[int] = set()
        self.shares: dict[tuple[int, int], list[bytes]] = {}
        self.failures: dict[int, str] = {}
        self.view: list[np.ndarray] = []
        self.graph: dict[int, list[int]] = {}

    @property
    def participants(self) -> list[int]:
        """Who takes part from the shares stage on: the clients whose keys arrived."""
        return sorted(self.cipher_keys) if self.cipher_keys else self.sampled

    def addressed(self, stage: str, pids: list[int]) -> list[int]:
        """The node's clients still in the protocol at `stage`."""
        if stage == SECAGG_KEYS:
            return list(pids)
        alive = {SECAGG_SHARES: self.cipher_keys, SECAGG_MASK: self.shared, SECAGG_UNMASK: self.survivors}[stage]
        return [pid for pid in pids if pid in alive]

    def request(self, stage: str, pids: list[int]):
        plan, payload = self.plan, {}
        if stage == SECAGG_SHARES:
            ids = self.participants
            self.graph = plan.round_graph(self.round, ids)
            payload = {
                IDS: ids,
                CIPHER_KEYS: [self.cipher_keys[pid] for pid in ids],
                MASK_KEYS: [self.mask_keys[pid] for pid in ids],
            }
        elif stage == SECAGG_MASK:
            wanted = set(pids)
            routed = [item for item in self.ciphertexts if item[1] in wanted and item[0] in self.shared]
            payload = {
                SHARED: sorted(self.shared),
                SOURCES: [item[0] for item in routed],
                DESTINATIONS: [item[1] for item in routed],
                CIPHERTEXTS: [item[2] for item in routed],
                **({MODEL: self.model} if self.model is not None else {}),
            }
        elif stage == SECAGG_UNMASK:
            payload = {SURVIVORS: sorted(self.survivors)}
        return secagg_request(
            self.round, pids, self.participants, plan.rotation_seed(self.round), plan.graph_seed(self.round), **payload
        )

    def fail(self, pids, reason: str) -> None:
        for pid in pids:
            self.failures.setdefault(int(pid), reason)

    def take(self, stage: str, pids: list[int], record) -> None:
        if record is None:
            self.fail(pids, f"node failed at {stage}")
            return
        fields, masked, failures = read_secagg_reply(record)
        self.failures.update(failures)
        if stage == SECAGG_KEYS:
            self.cipher_keys.update(zip(fields[IDS], fields[CIPHER_KEYS]))
            self.mask_keys.update(zip(fields[IDS], fields[MASK_KEYS]))
        elif stage == SECAGG_SHARES:
            self.ciphertexts += list(zip(fields[SOURCES], fields[DESTINATIONS], fields[CIPHERTEXTS]))
            self.shared.update(pid for pid in pids if pid not in failures)
        elif stage == SECAGG_MASK:
            self.view.append(masked)
            self.total = self.plan.ddg.aggregate(np.vstack([self.total[None, :], masked]))
            self.survivors.update(fields[IDS])
        else:
            for owner, kind, share in zip(fields[OWNERS], fields[SECRET_KINDS], fields[SHARES]):
                self.shares.setdefault((owner, kind), []).append(share)

    def _reconstruct(self, owner: int, kind: int) -> bytes:
        got, needed = self.shares.get((owner, kind), []), threshold(len(self.graph[owner]))
        if len(got) < needed:
            what = "self mask" if kind != MASK_KEY else "mask key"
            raise SecAggAborted(
                f"round {self.round}: client {owner}'s {what} has {len(got)} surviving shares, fewer than the "
                f"threshold {needed} of its {len(self.graph[owner])} neighbours: the sum cannot be unmasked"
            )
        return combine_shares(got[:needed])

    def result(self) -> SecAggResult:
        """The unmasked modular sum of the survivors' encodings (SecAggAborted if it cannot be)."""
        ddg = self.plan.ddg
        dims, bits = ddg.padded_dims, ddg.bits
        if len(self.survivors) < 1:
            raise SecAggAborted(f"round {self.round}: no client's masked vector arrived")
        total = self.total
        for owner in sorted(self.survivors):
            total = ddg.wrap(total - mask(self._reconstruct(owner, 0), dims, bits))
        dropped = sorted(self.shared - self.survivors)
        for owner in dropped:
            secret = scalar_key(self._reconstruct(owner, MASK_KEY))
            for other in self.graph[owner]:
                if other in self.survivors:
                    seed = pair_seed(secret, bytes_to_public_key(self.mask_keys[other]))
                    total = ddg.wrap(total - pair_sign(other, owner) * mask(seed, dims, bits))
        self.fail(set(self.sampled) - self.survivors, "left the protocol")
        return SecAggResult(total, sorted(self.survivors), dropped, dict(self.failures))


def run_round(secagg: SecAggRound, hosts: dict[int, list[int]], exchange: Callable) -> SecAggResult:
    """The four stages of `secagg` with the nodes `hosts` ({node: its sampled clients});
    `exchange(stage, {node: request})` returns {node: reply record or None (failed)}."""
    for stage in STAGES:
        requests = {}
        for node, pids in hosts.items():
            addressed = secagg.addressed(stage, pids)
            if addressed:
                requests[node] = (addressed, secagg.request(stage, addressed))
        replies = exchange(stage, {node: request for node, (_, request) in requests.items()})
        for node, (addressed, _) in requests.items():
            secagg.take(stage, addressed, replies.get(node))
    return secagg.result()


def flower_exchange(grid: Grid, server_round: int) -> Callable:
    """`run_round`'s exchange over Flower: one message per node; an error reply is a failed node."""

    def exchange(stage: str, requests: dict) -> dict:
        messages = [
            Message(content, dst_node_id=node, message_type=stage, group_id=str(server_round))
            for node, content in requests.items()
        ]
        replies = {}
        for reply in grid.send_and_receive(messages):
            replies[reply.metadata.src_node_id] = None if reply.has_error() else reply.content
        return replies

    return exchange


def make_secagg_server_app(
    plan: SecAggPlan,
    clients: int,
    rounds: int,
    next_round: Callable[[int], tuple[list[int], object]],
    on_result: Callable[[int, SecAggResult | None, str | None, SecAggRound], None],
    stop: threading.Event | None = None,
    on_stop: Callable[[], None] | None = None,
) -> ServerApp:
    """The ServerApp: for each round, `next_round(r)` gives (participants, model or None), the
    four stages run, and `on_result(r, result, abort reason, round)` hands the sum on."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        grid = grid if stop is None else StoppableGrid(grid, stop)
        try:
            nodes = discover_partitions(grid, clients)
            for server_round in range(1, rounds + 1):
                participants, model = next_round(server_round)
                hosts: dict[int, list[int]] = {}
                for pid in participants:
                    hosts.setdefault(nodes[pid], []).append(pid)
                secagg = SecAggRound(plan, server_round, participants, model)
                try:
                    result = run_round(secagg, hosts, flower_exchange(grid, server_round))
                    on_result(server_round, result, None, secagg)
                except SecAggAborted as error:
                    on_result(server_round, None, str(error), secagg)
        except RunStopped:
            if on_stop is not None:
                on_stop()

    return app

"""The shuffle trust model under Flower (ldpfed.protocols.shuffle): `ShuffleStrategy` is the
shuffler's side of the ServerApp, the server half (`ShuffledMeanServer`) sits behind it.

Flower's message API delivers every reply with its sender (`metadata.src_node_id`) and a reply to
the message the ServerApp addressed to that node, so whatever code receives Flower's replies knows
who sent which report: that code is the shuffler. `ShuffleStrategy` sends each node hosting
admitted clients one `train` message (the round and the clients' partition ids), pools the replies'
reports, permutes them with the shuffler's OS entropy (`Shuffler.pool`) and hands the server half a
`ShuffledBatch` alone: no node or client ids, no order, no per-client counts. The admission of
clients under a budget and the per-client ledgers are the shuffler's (`ShuffleRound`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid, ServerApp

from ldpfed.protocols.shuffle import Shuffler, ShuffleRound
from server.strategy import RunStopped, StoppableGrid, TrainOnlyStrategy, discover_partitions
from wire.records import TRAIN, read_reports, shuffle_request


class ShuffleStrategy(TrainOnlyStrategy):
    """The shuffler: admits, collects, pools and permutes; `on_batch(round, batch, admitted,
    stopped, failed)` hands the batch on (the harness gives it to the server half)."""

    def __init__(self, accounting: ShuffleRound, shuffler: Shuffler, clients: int, on_batch: Callable) -> None:
        self.accounting, self.shuffler, self.clients, self.on_batch = accounting, shuffler, clients, on_batch
        self.nodes: dict[int, int] | None = None
        self.planned: dict[int, list[int]] = {}
        self.stopped: list[int] = []

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        if self.nodes is None:
            self.nodes = discover_partitions(grid, self.clients)
        admitted, self.stopped = self.accounting.admit(list(range(self.clients)))
        self.planned = {}
        for pid in admitted:
            self.planned.setdefault(self.nodes[pid], []).append(pid)
        return [
            Message(
                shuffle_request(server_round, pids), dst_node_id=node, message_type=TRAIN, group_id=str(server_round)
            )
            for node, pids in self.planned.items()
        ]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        blocks, reported, failed = [], [], []
        answered = set()
        for reply in replies:
            pids = self.planned[reply.metadata.src_node_id]
            answered.add(reply.metadata.src_node_id)
            if reply.has_error():
                failed.extend(pids)
                continue
            blocks.append(read_reports(reply.content))
            reported.extend(pids)
        failed.extend(pid for node, pids in self.planned.items() if node not in answered for pid in pids)
        batch = self.shuffler.pool(blocks) if blocks else None
        self.on_batch(server_round, batch, sorted(reported), self.stopped, sorted(failed))
        return None, MetricRecord({"clients_replied": len(reported)})


def make_shuffle_server_app(
    accounting: ShuffleRound,
    clients: int,
    rounds: int,
    on_batch: Callable,
    stop: threading.Event | None = None,
    on_stop: Callable[[], None] | None = None,
    holder: dict | None = None,
) -> ServerApp:
    """The ServerApp: `ShuffleStrategy` for `rounds` rounds; `stop` ends it between pulls (Ctrl-C)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        strategy = ShuffleStrategy(accounting, Shuffler(), clients, on_batch)
        if holder is not None:
            holder["strategy"] = strategy
        try:
            strategy.start(grid if stop is None else StoppableGrid(grid, stop), ArrayRecord(), num_rounds=rounds)
        except RunStopped:
            if on_stop is not None:
                on_stop()

    return app

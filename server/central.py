"""The central trust model's server: `CentralStrategy` (ldpfed's, message-based) inside one of
Flower's own DP strategy wrappers (spec: trust-models.md; ldpfed.protocols.central).

`CentralStrategy` sends each Poisson-sampled client one `train` message with the global model and
its partition id, and aggregates the (clipped) local models as current + sum of updates / (q N).
`central_strategy` wraps it in Flower's `DifferentialPrivacyServerSideFixedClipping`,
`DifferentialPrivacyClientSideFixedClipping` (clients run Flower's `fixedclipping_mod`) or
`DifferentialPrivacyServerSideAdaptiveClipping`, with num_sampled_clients = q N: Flower clips
and adds N(0, (z C / (q N))^2) to every coordinate of the aggregate. The round is accounted with
the multiplier the wrapper actually uses (`ldpfed.protocols.central.accounted_multiplier`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    Strategy,
)

from ldpfed.accounting.central import flower_adaptive_multiplier
from ldpfed.protocols.central import CentralPlan, CentralServer, accounted_multiplier
from server.strategy import RunStopped, StoppableGrid, TrainOnlyStrategy, discover_partitions

ARRAYS, CONFIG, PARTITION, ROUND, EXAMPLES = "arrays", "config", "partition-id", "server-round", "num-examples"
WRAPPERS = {
    ("fixed", "server"): DifferentialPrivacyServerSideFixedClipping,
    ("fixed", "client"): DifferentialPrivacyClientSideFixedClipping,
    ("adaptive", "server"): DifferentialPrivacyServerSideAdaptiveClipping,
}


class CentralStrategy(TrainOnlyStrategy):
    """One message per sampled client; aggregate = fixed-denominator mean of the replies' models."""

    def __init__(self, server: CentralServer) -> None:
        self.server = server
        self.nodes: dict[int, int] | None = None
        self.current: ArrayRecord = ArrayRecord()
        self.sampled: list[int] = []

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        if self.nodes is None:
            self.nodes = discover_partitions(grid, self.server.config.federation.clients)
        self.current = arrays
        self.sampled = self.server.sample(server_round)
        messages = []
        for pid in self.sampled:
            record = ConfigRecord({**dict(config), PARTITION: pid, ROUND: server_round})
            content = RecordDict({ARRAYS: arrays, CONFIG: record})
            messages.append(Message(content, dst_node_id=self.nodes[pid], message_type="train"))
        return messages

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        models = [
            next(iter(reply.content.array_records.values())).to_numpy_ndarrays()
            for reply in replies
            if not reply.has_error()
        ]
        mean = self.server.mean(self.current.to_numpy_ndarrays(), models)
        return ArrayRecord(mean), MetricRecord({"clients_sampled": len(self.sampled), "clients_replied": len(models)})


def central_strategy(server: CentralServer, plan: CentralPlan) -> tuple[Strategy, float]:
    """Flower's DP wrapper around `CentralStrategy`, and the multiplier each round is accounted with."""
    inner = CentralStrategy(server)
    wrapper = WRAPPERS[(plan.clipping, plan.side)]
    if plan.clipping == "adaptive":
        count_stddev = plan.expected_clients / 20.0  # Flower's default clipped_count_stddev
        strategy = wrapper(
            inner,
            flower_adaptive_multiplier(plan.noise_multiplier, count_stddev),
            plan.expected_clients,
            initial_clipping_norm=plan.clip,
            clipped_count_stddev=count_stddev,
        )
        return strategy, accounted_multiplier(strategy.noise_multiplier, strategy.clipped_count_stddev)
    strategy = wrapper(inner, plan.noise_multiplier, plan.clip, plan.expected_clients)
    return strategy, accounted_multiplier(strategy.noise_multiplier, None)


def run_central(strategy: Strategy, server: CentralServer, grid: Grid, rounds: int, accounted: float, on_round):
    """Flower's `Strategy.start` with the wrapper; after each round the ledger and `on_round(r, metrics)`."""

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        metrics = server.evaluate(arrays.to_numpy_ndarrays())
        if server_round > 0:
            server.record_round(server_round, accounted)
            on_round(server_round, metrics)
        return MetricRecord(metrics)

    return strategy.start(grid, ArrayRecord(server.weights), num_rounds=rounds, evaluate_fn=evaluate)


def make_central_server_app(
    server: CentralServer,
    plan: CentralPlan,
    on_round: Callable,
    holder: dict | None = None,
    stop: threading.Event | None = None,
    on_stop: Callable[[], None] | None = None,
) -> ServerApp:
    """The ServerApp: Flower's wrapper for `plan.rounds` rounds; `stop` (the harness's Ctrl-C) ends
    it between two pulls (`StoppableGrid`), then `on_stop()`; its thread leaves the signals to the
    main thread."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        strategy, accounted = central_strategy(server, plan)
        if holder is not None:
            holder.update(strategy=strategy, accounted=accounted)
        try:
            grid = grid if stop is None else StoppableGrid(grid, stop)
            run_central(strategy, server, grid, plan.rounds, accounted, on_round)
        except RunStopped:
            if on_stop is not None:
                on_stop()

    return app

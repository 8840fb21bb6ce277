"""The central trust model's server: `CentralStrategy` (ldpfed's, message-based) inside Flower's
DP strategy wrappers as ldpfed corrects them (spec: trust-models.md; ldpfed.protocols.central).

`CentralStrategy` sends each Poisson-sampled client one `train` message with the global model and
its partition id. The wrapper keeps Flower 1.42's structure (its constructor's checks and
parameters, `configure_train`, which hands the clip to `fixedclipping_mod` under client-side
clipping, and the adaptive clip's geometric update), and replaces its `aggregate_train` with
`SafeRelease.aggregate_train`, which departs from Flower in three places (docs/decisions.md,
Trust models, "Central noise: where ldpfed departs from Flower's wrappers"):

1. The noise. Flower adds `np.random.normal` noise (numpy's global generator: not floating-point
   safe, not reproducible, not from a secret the run owns). ldpfed adds its safe discrete Gaussian
   on a grid (`CentralNoise.release_sum`) from the server's noise secret.
2. The adaptive clip's order. Flower clips at C_t, updates the clip to C_{t+1}, then scales the
   round's noise with C_{t+1}: the noise no longer matches the sensitivity C_t (it is smaller
   whenever the clip shrinks). ldpfed noises the round at the C_t that clipped it, then updates.
3. The adaptive clip's bit. Flower counts the updates that WERE clipped (`scaling_factor < 1`) and
   moves the clip by exp(-eta (b - gamma)), so the clip shrinks whenever most updates are clipped.
   Andrew et al. (Algorithm 1) count the updates that were NOT clipped; ldpfed does, and releases
   the count centred (sensitivity 1/2) with discrete Gaussian noise, so that the effective
   multiplier is Flower's own split (`compute_adaptive_noise_params`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    Strategy,
)

from ldpfed.protocols.central import CLIP_LEARNING_RATE, TARGET_UNCLIPPED_QUANTILE, CentralServer
from server.strategy import RunStopped, StoppableGrid, TrainOnlyStrategy, discover_partitions
from wire.records import TRAIN, central_request


class CentralStrategy(TrainOnlyStrategy):
    """One message per sampled client; the wrapper aggregates (`SafeRelease`)."""

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
            content = central_request(arrays, config, pid, server_round)
            messages.append(Message(content, dst_node_id=self.nodes[pid], message_type=TRAIN))
        return messages

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        """Never unwrapped: only the DP wrapper (`SafeRelease`) knows the round's clip and adds the noise."""
        raise TypeError("CentralStrategy aggregates only inside ldpfed's DP wrapper (central_strategy)")


class SafeRelease:
    """ldpfed's `aggregate_train` for Flower's DP wrappers (module docstring): clip every reply's
    update at the clip of this round, release the noisy sum at that clip, and (adaptive) only then
    move the clip by the noisy fraction of unclipped updates."""

    strategy: CentralStrategy
    clipping_norm: float

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        inner, replies = self.strategy, list(replies)
        models = [
            next(iter(reply.content.array_records.values())).to_numpy_ndarrays()
            for reply in replies
            if not reply.has_error()
        ]
        clip = float(self.clipping_norm)  # C_t: the clip that clips this round
        weights, record = inner.server.aggregate(server_round, inner.current.to_numpy_ndarrays(), models, clip)
        if "unclipped_fraction" in record:
            self._geometric_update(record["unclipped_fraction"])  # C_{t+1}, after the release
        counts = {
            "clients_sampled": len(inner.sampled),
            "clients_replied": len(models),
            "clients_failed": len(replies) - len(models),
        }
        inner.server.record_round(server_round, {**counts, **record})
        return ArrayRecord(weights), MetricRecord(counts)


class CentralServerSideFixedClipping(SafeRelease, DifferentialPrivacyServerSideFixedClipping):
    pass


class CentralClientSideFixedClipping(SafeRelease, DifferentialPrivacyClientSideFixedClipping):
    """Clients clip with Flower's `fixedclipping_mod`; the server clips again (a no-op up to float
    rounding), so the sensitivity holds on the floats it sums."""


class CentralServerSideAdaptiveClipping(SafeRelease, DifferentialPrivacyServerSideAdaptiveClipping):
    pass


WRAPPERS = {
    ("fixed", "server"): CentralServerSideFixedClipping,
    ("fixed", "client"): CentralClientSideFixedClipping,
    ("adaptive", "server"): CentralServerSideAdaptiveClipping,
}


def central_strategy(server: CentralServer) -> Strategy:
    """The corrected Flower wrapper around `CentralStrategy`, with the run plan's parameters."""
    plan = server.plan
    inner = CentralStrategy(server)
    wrapper = WRAPPERS[(plan.clipping, plan.side)]
    if plan.clipping == "adaptive":
        return wrapper(
            inner,
            plan.noise_multiplier,
            plan.expected_clients,
            initial_clipping_norm=plan.clip,
            target_clipped_quantile=TARGET_UNCLIPPED_QUANTILE,  # ldpfed's bit: the quantile of unclipped updates
            clip_norm_lr=CLIP_LEARNING_RATE,
            clipped_count_stddev=plan.count_stddev,
        )
    return wrapper(inner, plan.noise_multiplier, plan.clip, plan.expected_clients)


def run_central(strategy: Strategy, server: CentralServer, grid: Grid, rounds: int, on_round):
    """Flower's `Strategy.start` with the wrapper; after each round `on_round(r, metrics)`, the
    metrics with the round's clip and noise."""

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        metrics = server.evaluate(arrays.to_numpy_ndarrays())
        if server_round > 0:
            on_round(server_round, {**metrics, **server.rounds[-1]})
        return MetricRecord(metrics)

    return strategy.start(grid, ArrayRecord(server.weights), num_rounds=rounds, evaluate_fn=evaluate)


def make_central_server_app(
    server: CentralServer,
    on_round: Callable,
    holder: dict | None = None,
    stop: threading.Event | None = None,
    on_stop: Callable[[], None] | None = None,
) -> ServerApp:
    """The ServerApp: the wrapper for the plan's rounds; `stop` (the harness's Ctrl-C) ends it
    between two pulls (`StoppableGrid`), then `on_stop()`; its thread leaves the signals to the
    main thread."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        strategy = central_strategy(server)
        if holder is not None:
            holder.update(strategy=strategy)
        try:
            grid = grid if stop is None else StoppableGrid(grid, stop)
            run_central(strategy, server, grid, server.plan.rounds, on_round)
        except RunStopped:
            if on_stop is not None:
                on_stop()

    return app

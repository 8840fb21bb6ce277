"""The server's round loop over a Flower Grid (spec: federated.md).

Our own loop on `grid.send_and_receive` rather than a stock Strategy, because the protocol needs
three things the stock strategies do not give: (1) clients addressed by Flower *partition id*
(discovered once with a `query` message), never by Flower's random node ids, so that sampling is
reproducible from the seed; (2) a round that keeps going when a client raises: error replies are
recorded as failures and the round aggregates what arrived; (3) per-round records (metrics,
predicted noise, privacy spent) written to disk after every round.

Two engines run the very same loop (`run_federation`) and the very same client code
(`simulations.client.train_reply`, what the ClientApp calls):
- `flower` (`run_rounds`, called by the ServerApp): messages go over Flower's Grid to ClientApps on
  Ray workers;
- `local` (`run_local`): the replies are made by calling `train_reply` in this process, one
  client after the other, with a client's exception recorded as that client's failure. No Flower,
  no Ray, so no start-up cost (~10 s per federation under Flower on this machine): for sweeps of
  many small federations (`ldpfed compare --task train`). Message contents are the same RecordDicts.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Callable

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from ldpfed.accounting import PrivacyLedger
from simulations.config import SimulationConfig
from simulations.recorder import Recorder

logger = logging.getLogger("ldpfed.simulate")

QUERY_PARTITION = "query"
NODE_WAIT_SECONDS = 120.0


def make_task(config: SimulationConfig):
    """The server-side task object for `config.task`."""
    if config.task == "mean":
        from simulations.mean_task import MeanServer

        return MeanServer(config)
    from simulations.train_task import TrainServer

    return TrainServer(config)


def discover_partitions(grid: Grid, expected: int, timeout: float = NODE_WAIT_SECONDS) -> dict[int, int]:
    """{partition id: node id} for all `expected` nodes (asks each node its partition id)."""
    deadline = time.monotonic() + timeout
    node_ids = list(grid.get_node_ids())
    while len(node_ids) < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(node_ids)} of {expected} Flower nodes connected within {timeout:.0f}s")
        time.sleep(0.05)
        node_ids = list(grid.get_node_ids())
    queries = [Message(RecordDict(), dst_node_id=node, message_type=QUERY_PARTITION) for node in node_ids]
    mapping = {}
    for reply in grid.send_and_receive(queries):
        if reply.has_error():
            raise RuntimeError(f"node {reply.metadata.src_node_id} did not report its partition id: {reply.error.reason}")
        mapping[int(reply.content["partition"]["partition-id"])] = reply.metadata.src_node_id
    if sorted(mapping) != list(range(expected)):
        raise RuntimeError(f"expected partition ids 0..{expected - 1}, got {sorted(mapping)}")
    return mapping


def exchange(
    grid: Grid, nodes: dict[int, int], partitions: list[int], content: Callable[[int], RecordDict], server_round: int
) -> tuple[dict[int, RecordDict], dict[int, str]]:
    """Send one train message per sampled partition; ({pid: reply content}, {pid: failure reason})."""
    partition_of = {nodes[pid]: pid for pid in partitions}
    messages = [
        Message(content(pid), dst_node_id=nodes[pid], message_type="train", group_id=str(server_round))
        for pid in partitions
    ]
    replies, failures = {}, {}
    for reply in grid.send_and_receive(messages):
        pid = partition_of[reply.metadata.src_node_id]
        if reply.has_error():
            failures[pid] = _short_reason(reply.error.reason)
        else:
            replies[pid] = reply.content
    for pid in partitions:  # no reply at all (e.g. timeout) is a failure too
        if pid not in replies and pid not in failures:
            failures[pid] = "no reply"
    return replies, failures


def _short_reason(reason: str) -> str:
    """The last line of a (Ray) traceback: 'Message: injected failure'."""
    lines = [line.strip() for line in str(reason).strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "error"


Exchange = Callable[[list[int], Callable[[int], RecordDict], int], tuple[dict[int, RecordDict], dict[int, str]]]


def local_exchange(
    partitions: list[int], content: Callable[[int], RecordDict], server_round: int
) -> tuple[dict[int, RecordDict], dict[int, str]]:
    """Engine `local`: each sampled client's reply from the ClientApp's own function, in this
    process, in partition order; an exception is that client's failure (as under Flower)."""
    from simulations.client import train_reply

    replies, failures = {}, {}
    for pid in partitions:
        try:
            replies[pid] = train_reply(content(pid), pid)
        except Exception as error:  # noqa: BLE001 - a failing client must not abort the round
            failures[pid] = _short_reason(f"{type(error).__name__}: {error}")
    return replies, failures


def run_rounds(grid: Grid, config: SimulationConfig, on_round: Callable[[dict], None] | None = None) -> dict:
    """Engine `flower`: the rounds over Flower's Grid (what the ServerApp runs)."""
    nodes = discover_partitions(grid, config.clients)

    def flower_exchange(partitions, content, server_round):
        return exchange(grid, nodes, partitions, content, server_round)

    return run_federation(flower_exchange, config, on_round, engine="flower")


def run_local(config: SimulationConfig, on_round: Callable[[dict], None] | None = None) -> dict:
    """Engine `local`: the same rounds without Flower (module docstring)."""
    return run_federation(local_exchange, config, on_round, engine="local")


def run_federation(
    exchange_replies: Exchange, config: SimulationConfig, on_round: Callable[[dict], None] | None = None,
    engine: str = "flower",
) -> dict:
    """Run `config.rounds` rounds of `config.task`; write records under `config.out`; return the summary."""
    started = time.perf_counter()
    recorder = Recorder(config)
    task = make_task(config)
    ledger = PrivacyLedger()
    flat = config.to_flat()
    for server_round in range(1, config.rounds + 1):
        round_started = time.perf_counter()
        partitions = task.sample(server_round)
        payload = task.round_payload(server_round)

        def content(pid: int) -> RecordDict:
            record = RecordDict({"config": ConfigRecord({**flat, "round": server_round})})
            for key, value in payload.items():
                record[key] = value
            return record

        replies, failures = exchange_replies(partitions, content, server_round)
        metrics = task.aggregate(server_round, replies, ledger)
        epsilon_spent, delta_spent = privacy_spent(ledger)
        row = {
            "round": server_round,
            **metrics,
            "clients_sampled": len(partitions),
            "clients_replied": len(replies),
            "clients_failed": len(failures),
            "failed_partitions": ",".join(str(pid) for pid in sorted(failures)),
            "failure_reasons": " | ".join(sorted(set(failures.values()))),
            "epsilon_spent": epsilon_spent,
            "delta_spent": delta_spent,
            "seconds": time.perf_counter() - round_started,
        }
        recorder.add_round(row, ledger)
        if on_round is not None:
            on_round(row)
    rows = recorder.rows
    summary = {
        "engine": engine,
        "task": config.task,
        "clients": config.clients,
        "rounds": config.rounds,
        "mechanism": config.mechanism,
        "epsilon": config.epsilon if config.private else None,
        "aggregator": config.aggregator,
        "seed": config.seed,
        **task.summary(rows),
        "clients_failed_total": int(sum(row["clients_failed"] for row in rows)),
        "epsilon_spent_max_per_client": rows[-1]["epsilon_spent"],
        "delta_spent_max_per_client": rows[-1]["delta_spent"],
        "seconds": time.perf_counter() - started,
        "seconds_per_round": float(sum(row["seconds"] for row in rows) / len(rows)),
    }
    recorder.finish(summary, ledger)
    return summary


def privacy_spent(ledger: PrivacyLedger) -> tuple[float, float]:
    """The largest total (eps, delta) any client has spent so far, by basic composition over the
    rounds it took part in (the ledger's headline figure; tighter figures are in privacy.csv).
    A run with a not-private release (mechanism none) spends eps = inf (JSON null)."""
    spent = ledger.max_spent("basic")
    return (spent.epsilon, spent.delta) if spent.private else (math.inf, math.inf)

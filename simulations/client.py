"""What a Flower client does with a message: one function per message type, dispatched by task."""

from __future__ import annotations

from flwr.app import MetricRecord, RecordDict

from simulations.config import SimulationConfig, from_mapping


class InjectedFailure(RuntimeError):
    """Raised by clients listed in `fail-clients` (fault injection for tests and demos)."""


def config_from(content: RecordDict) -> tuple[SimulationConfig, int]:
    """The run's options and the round number, as the server sent them."""
    options = dict(content["config"])
    server_round = int(options.pop("round"))
    return from_mapping(options, source="server message"), server_round


def partition_reply(partition_id: int) -> RecordDict:
    return RecordDict({"partition": MetricRecord({"partition-id": int(partition_id)})})


def train_reply(content: RecordDict, partition_id: int) -> RecordDict:
    """Run the client's part of one round of the configured task."""
    config, server_round = config_from(content)
    if partition_id in config.failing_partitions:
        raise InjectedFailure(f"injected failure of client {partition_id} in round {server_round}")
    if config.task == "mean":
        from simulations.mean_task import client_reply

        return client_reply(config, partition_id, server_round)
    from simulations.train_task import client_reply

    return client_reply(config, partition_id, server_round, content)

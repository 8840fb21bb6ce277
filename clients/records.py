"""ldpfed's protocol values <-> Flower records: the wire format of both adapters.

A broadcast or a reply is a RecordDict with one ArrayRecord per named array and, for a reply, a
MetricRecord "metrics"; the round number travels in the ConfigRecord "config". Nothing else.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from ldpfed.protocols.base import ClientReply

ROUND, CONFIG, METRICS = "round", "config", "metrics"


def round_record(server_round: int, broadcast: dict[str, np.ndarray]) -> RecordDict:
    record = RecordDict({CONFIG: ConfigRecord({ROUND: int(server_round)})})
    for name, array in broadcast.items():
        record[name] = ArrayRecord([np.asarray(array)])
    return record


def read_round(record: RecordDict) -> tuple[int, dict[str, np.ndarray]]:
    arrays = {name: value.to_numpy_ndarrays()[0] for name, value in record.array_records.items()}
    return int(record[CONFIG][ROUND]), arrays


def reply_record(reply: ClientReply) -> RecordDict:
    record = RecordDict({METRICS: MetricRecord(dict(reply.metrics))})
    for name, array in reply.arrays.items():
        record[name] = ArrayRecord([np.asarray(array)])
    return record


def read_reply(record: RecordDict) -> ClientReply:
    arrays = {name: value.to_numpy_ndarrays()[0] for name, value in record.array_records.items()}
    return ClientReply(arrays, dict(record[METRICS]))

"""ldpfed's protocol values <-> Flower records: every message kind, record key and codec that the
Flower client halves (clients/) and server halves (server/) exchange, defined once.

Partitions: a `query` message asks a node which partition ids it hosts (`partition_record`).

Local trust model (LDPStrategy and the ClientApp of `ldpfed simulate`): a broadcast is a RecordDict
with one ArrayRecord per named array; the round number and the sampled partition ids of the node
travel in the ConfigRecord "config". A node's reply stacks its clients' arrays (one ArrayRecord of
shape (clients, ...) per name), with their ids ("client-ids"), their metrics as lists (MetricRecord
"metrics"), each failed client's reason (ConfigRecord "failures") and whether the node built its
clients for this message (MetricRecord "node"; the run's `node_builds` per round). With `node-reply
sum` the clients' rows are replaced by their count-weighted sum (one ArrayRecord "summed" of
d-vectors by name; ldpfed.protocols.nodes). Nothing else.

Reply size (docs/decisions.md, Scale, "Reply size"): Flower sends a message as separate
objects, one gRPC call each, and splits every array into chunks of at most
FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE bytes (5 MiB), so a node's (clients, d) reply does not meet
gRPC's message limit (GRPC_MAX_MESSAGE_LENGTH, 2 GiB) however large it is; a config or metric
record is one object. `node_reply_record` checks that no object exceeds the limit (a Flower that
stopped chunking, a chunk size set beyond it, or a node's metric lists beyond 2 GiB) and fails
with one line naming the fixes.
"""

from __future__ import annotations

import base64

import flwr.app.message.array as flower_array
import numpy as np
from cryptography.hazmat.primitives.asymmetric import ec
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.common.secure_aggregation.crypto.symmetric_encryption import generate_shared_key
from flwr.supercore.grpc import GRPC_MAX_MESSAGE_LENGTH

from ldpfed.protocols.nodes import NodeReply, Replies

QUERY, TRAIN = "query", "train"  # message kinds
ROUND, CONFIG, METRICS = "round", "config", "metrics"
NODE, BUILDS = "node", "builds"  # a node's own metric: 1 when it built its clients for this message


# ---- partitions: which node hosts which clients --------------------------------------------
PARTITION, PARTITION_IDS = "partition", "partition-ids"


def partition_record(pids: list[int]) -> RecordDict:
    """A node's answer to `query`: the partition ids it hosts."""
    return RecordDict({PARTITION: MetricRecord({PARTITION_IDS: [int(pid) for pid in pids]})})


def read_partitions(record: RecordDict) -> list[int]:
    return [int(pid) for pid in record[PARTITION][PARTITION_IDS]]


# ---- local trust model: one message per node, per-client rows -------------------------------
def round_record(server_round: int, broadcast: dict[str, np.ndarray]) -> RecordDict:
    record = RecordDict({CONFIG: ConfigRecord({ROUND: int(server_round)})})
    for name, array in broadcast.items():
        record[name] = ArrayRecord([np.asarray(array)])
    return record


def read_round(record: RecordDict) -> tuple[int, dict[str, np.ndarray]]:
    arrays = {name: value.to_numpy_ndarrays()[0] for name, value in record.array_records.items()}
    return int(record[CONFIG][ROUND]), arrays


PARTITIONS, CLIENT_IDS, FAILURES, SUMMED = "partitions", "client-ids", "failures", "summed"


def node_round_record(server_round: int, broadcast: dict[str, np.ndarray], partitions: list[int]) -> RecordDict:
    """The round's broadcast to a node, with the partition ids of its clients sampled this round."""
    record = round_record(server_round, broadcast)
    record[CONFIG][PARTITIONS] = [int(pid) for pid in partitions]
    return record


def read_node_round(record: RecordDict) -> tuple[int, dict[str, np.ndarray], list[int]]:
    server_round, arrays = read_round(record)
    return server_round, arrays, [int(pid) for pid in record[CONFIG][PARTITIONS]]


def node_reply_record(answer: NodeReply, built: bool = False) -> RecordDict:
    """A node's reply: per array name one ArrayRecord of the clients' rows stacked (clients, ...),
    the clients' ids, their metrics as columns, each failed client's reason, and whether the node
    built its clients (data, halves) to answer this message (`built`)."""
    columns = answer.replies if isinstance(answer.replies, Replies) else None
    pids = columns.pids if columns is not None else np.asarray(sorted(answer.replies), dtype=np.int64)
    record = RecordDict(
        {
            CLIENT_IDS: ArrayRecord([pids]),
            FAILURES: ConfigRecord({str(pid): str(reason) for pid, reason in answer.failures.items()}),
            NODE: MetricRecord({BUILDS: int(built)}),
        }
    )
    if columns is not None and pids.size:  # a batched node's columns as they are: no object per client
        record[METRICS] = _metric_columns(columns.metrics)
        for name, block in columns.arrays.items():
            record[name] = ArrayRecord([np.ascontiguousarray(block)])
    elif pids.size:
        first = answer.replies[int(pids[0])]
        record[METRICS] = _metric_columns(
            {name: [answer.replies[int(pid)].metrics[name] for pid in pids] for name in first.metrics}
        )
        for name in first.arrays:
            record[name] = ArrayRecord([np.stack([np.asarray(answer.replies[int(pid)].arrays[name]) for pid in pids])])
    if answer.summed:
        record[SUMMED] = ArrayRecord({name: Array(np.asarray(array)) for name, array in answer.summed.items()})
    check_reply_size(record)
    return record


def _metric_columns(metrics: dict) -> ArrayRecord:
    """The clients' metrics, one array per name (ints stay ints): one buffer each, where a
    MetricRecord of lists would encode every client's value as its own protobuf field."""
    return ArrayRecord({name: Array(np.asarray(column)) for name, column in metrics.items()})


MESSAGE_LIMIT = GRPC_MAX_MESSAGE_LENGTH  # bytes of one gRPC message (Flower's default on both ends)


class ReplyTooLarge(RuntimeError):
    """A node's reply holds an object that one gRPC message cannot carry."""


def largest_object_bytes(record: RecordDict) -> int:
    """Bytes of the largest object Flower sends for `record` (one gRPC call each): an array's
    chunk (at most Flower's chunk size) or a whole config or metric record."""
    chunk = flower_array.FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE
    sizes = [0]
    for value in record.values():
        if isinstance(value, ArrayRecord):
            sizes += [min(len(array.data), chunk) for array in value.values()]
        else:
            sizes.append(len(value.deflate()))
    return max(sizes)


def check_reply_size(record: RecordDict) -> None:
    largest = largest_object_bytes(record)
    if largest > MESSAGE_LIMIT:
        raise ReplyTooLarge(
            f"a node's reply holds an object of {largest:,} bytes, beyond the gRPC message limit of "
            f"{MESSAGE_LIMIT:,} bytes: use more nodes (--nodes), so that each hosts fewer clients, "
            "or --node-reply sum (one d-vector per node)"
        )


def read_node_reply(record: RecordDict) -> tuple[Replies, dict[int, str]]:
    """(the clients' replies as columns, {partition id: failure reason}) of a node's reply: its
    stacked arrays and metric lists as they came, a client's `ClientReply` made only on access."""
    pids = record[CLIENT_IDS].to_numpy_ndarrays()[0].astype(np.int64)
    stacked = {
        name: value.to_numpy_ndarrays()[0]
        for name, value in record.array_records.items()
        if name not in (CLIENT_IDS, SUMMED, METRICS)
    }
    metrics = {name: array.numpy() for name, array in record[METRICS].items()} if pids.size else {}
    order = np.argsort(pids, kind="stable")  # ascending, as Replies holds them (a node sends them so)
    if pids.size > 1 and not np.all(order == np.arange(pids.size)):
        pids, metrics = pids[order], {name: column[order] for name, column in metrics.items()}
        stacked = {name: rows[order] for name, rows in stacked.items()}
    failures = {int(pid): str(reason) for pid, reason in record[FAILURES].items()}
    return Replies(pids, metrics, stacked), failures


def read_node_builds(record: RecordDict) -> int:
    """1 when the replying node built its clients for this message, else 0."""
    return int(record[NODE][BUILDS]) if NODE in record.metric_records else 0


def read_node_sum(record: RecordDict) -> dict[str, np.ndarray]:
    """The count-weighted sums of a node's `node-reply sum` reply ({} for a per-client reply)."""
    if SUMMED not in record.array_records:
        return {}
    return {name: array.numpy() for name, array in record[SUMMED].items()}


# ---- shuffle trust model: a node's clients' reports go to the shuffler ------------------------
REPORTS, SHUFFLE_SETTINGS, SHUFFLE_PARTITIONS, SERVER_ROUND = "reports", "config", "partition-ids", "server-round"


def shuffle_request(server_round: int, pids: list[int]) -> RecordDict:
    """The shuffler's request to a node: the round and the admitted clients it hosts."""
    return RecordDict(
        {SHUFFLE_SETTINGS: ConfigRecord({SERVER_ROUND: int(server_round), SHUFFLE_PARTITIONS: [int(p) for p in pids]})}
    )


def read_shuffle_request(record: RecordDict) -> tuple[int, list[int]]:
    settings = record[SHUFFLE_SETTINGS]
    return int(settings[SERVER_ROUND]), [int(pid) for pid in settings[SHUFFLE_PARTITIONS]]


def reports_record(reports: np.ndarray) -> RecordDict:
    """A node's clients' reports, stacked, for the shuffler (never the server half)."""
    return RecordDict({REPORTS: ArrayRecord([reports])})


def read_reports(record: RecordDict) -> np.ndarray:
    return record[REPORTS].to_numpy_ndarrays()[0]


# ---- central trust model: Flower's message-API strategies, one message per client -------------
ARRAYS, CENTRAL_CONFIG, PARTITION_ID, NUM_EXAMPLES = "arrays", "config", "partition-id", "num-examples"


def central_request(arrays: ArrayRecord, config: ConfigRecord, pid: int, server_round: int) -> RecordDict:
    """The model and the strategy's config, with the one client (partition id) and the round."""
    record = ConfigRecord({**dict(config), PARTITION_ID: int(pid), SERVER_ROUND: int(server_round)})
    return RecordDict({ARRAYS: arrays, CENTRAL_CONFIG: record})


def read_central_request(record: RecordDict) -> tuple[list[np.ndarray], int, int]:
    """(the model's arrays, the partition id, the round)."""
    settings = record[CENTRAL_CONFIG]
    return record[ARRAYS].to_numpy_ndarrays(), int(settings[PARTITION_ID]), int(settings[SERVER_ROUND])


def central_reply(model: list[np.ndarray], examples: int) -> RecordDict:
    """A client's local model and its number of examples (the keys Flower's strategies read)."""
    return RecordDict({ARRAYS: ArrayRecord(model), METRICS: MetricRecord({NUM_EXAMPLES: examples})})


# ---- secure aggregation (--trust secagg): four stages per round, one message per node ------------
# A request names the round, the node's participating clients ("partition-ids"), every participant
# of the round and the round's public seeds; its stage's payload travels in the same ConfigRecord.
# Replies carry per client: public keys (keys), encrypted Shamir shares addressed to neighbours
# (shares: the server only routes the ciphertexts), masked encodings (mask: an int64 ArrayRecord,
# never an unmasked one) and the shares the server asks for to unmask (unmask).
SECAGG_KEYS, SECAGG_SHARES, SECAGG_MASK, SECAGG_UNMASK = (
    "train.secagg_keys",
    "train.secagg_shares",
    "train.secagg_mask",
    "train.secagg_unmask",
)
SECAGG = "secagg"
PARTICIPANTS, ROTATION_SEED, GRAPH_SEED = "participants", "rotation-seed", "graph-seed"
IDS, CIPHER_KEYS, MASK_KEYS = "ids", "cipher-keys", "mask-keys"
SOURCES, DESTINATIONS, CIPHERTEXTS = "sources", "destinations", "ciphertexts"
SHARED, SURVIVORS = "shared", "survivors"
OWNERS, SECRET_KINDS, SHARES = "owners", "secret-kinds", "shares"
MASKED, MODEL = "masked", "model"
SELF_MASK, MASK_KEY = 0, 1  # what an unmask share reconstructs: a survivor's b_u or a dropped client's key


def secagg_request(
    server_round: int, pids: list[int], participants: list[int], rotation_seed: int, graph_seed: int, **payload
) -> RecordDict:
    """A stage's request to a node: the round's public setting and the stage's `payload`
    (lists of ints or bytes); `model` (train) travels as an ArrayRecord."""
    model = payload.pop(MODEL, None)
    settings = {
        SERVER_ROUND: int(server_round),
        PARTITION_IDS: [int(pid) for pid in pids],
        PARTICIPANTS: [int(pid) for pid in participants],
        ROTATION_SEED: int(rotation_seed),
        GRAPH_SEED: int(graph_seed),
        **payload,
    }
    record = RecordDict({SECAGG: ConfigRecord(settings)})
    if model is not None:
        record[MODEL] = ArrayRecord([np.asarray(array) for array in model])
    return record


def read_secagg(record: RecordDict) -> dict:
    """The request's (or a reply's) fields as a dict; `model`: the arrays when sent."""
    fields = dict(record[SECAGG]) if SECAGG in record.config_records else {}
    if MODEL in record.array_records:
        fields[MODEL] = record[MODEL].to_numpy_ndarrays()
    return fields


def secagg_reply(fields: dict, masked: np.ndarray | None = None, failures: dict[int, str] | None = None) -> RecordDict:
    """A node's reply: its stage's `fields`, the masked encodings (rows in `fields[IDS]` order) and
    each failed client's reason."""
    record = RecordDict(
        {
            SECAGG: ConfigRecord(fields),
            FAILURES: ConfigRecord({str(pid): str(reason) for pid, reason in (failures or {}).items()}),
        }
    )
    if masked is not None:
        record[MASKED] = ArrayRecord([np.asarray(masked, dtype=np.int64)])
    return record


def read_secagg_reply(record: RecordDict) -> tuple[dict, np.ndarray | None, dict[int, str]]:
    """(fields, masked rows or None, {partition id: failure reason})."""
    masked = record[MASKED].to_numpy_ndarrays()[0] if MASKED in record.array_records else None
    failures = {int(pid): str(reason) for pid, reason in record[FAILURES].items()}
    return dict(record[SECAGG]), masked, failures


def pair_seed(own_secret, other_public) -> bytes:
    """Two clients' pairwise mask seed, which both halves must derive alike: Flower's key agreement
    (`generate_shared_key`: ECDH, then HKDF-SHA256 to 32 bytes), url-safe base64 decoded."""
    return base64.urlsafe_b64decode(generate_shared_key(own_secret, other_public))


KEY_BYTES = 48  # a P-384 secret scalar, as Shamir-shared (big-endian)


def scalar_bytes(secret) -> bytes:
    return secret.private_numbers().private_value.to_bytes(KEY_BYTES, "big")


def scalar_key(blob: bytes):
    """The P-384 secret key of a reconstructed scalar (`scalar_bytes`)."""
    return ec.derive_private_key(int.from_bytes(blob, "big"), ec.SECP384R1())

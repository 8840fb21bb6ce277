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

Compact columns (`packed`, `unpacked`): a reply's columns travel in the smallest form that gives
them back bit for bit, and never through numpy's `np.save`/`np.load` (two copies each way): one
value when every entry has the same bits (counts that every client shares: "fill"), the first id
of consecutive ids ("range"), exact integers (held as floats, or wider ints) in the smallest
integer dtype that holds them ("ints"), else the array's own bytes. Every array is a valid .npy
of its stored form (Flower's `Array.numpy()` reads it), written with one copy and read back with
none; the Array's dtype and shape are the column's, and the ConfigRecord "forms" names the form of
each array not sent as it is ("record/key"). A column that is the square of another for
every client (a client of one user: its `total_sq` is its `total` squared, `Replies.squares`) is
not sent: the reader squares the other, as the client did. The server receives what it received
before, in fewer bytes: every dropped entry is a function of what is sent.

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
import io

import flwr.app.message.array as flower_array
import numpy as np
from cryptography.hazmat.primitives.asymmetric import ec
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.common.constant import SType
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
PARTITION_RANGE = "partition-range"  # [first, stop): the sampled partitions when they are consecutive


def node_round_record(server_round: int, broadcast: dict[str, np.ndarray], partitions) -> RecordDict:
    """The round's broadcast to a node, with the partition ids of its clients sampled this round:
    ascending consecutive ids (a node's whole block, every round without a budget) as their range,
    two ints, else their list."""
    record = round_record(server_round, broadcast)
    ids = np.asarray(partitions, dtype=np.int64)
    if ids.size > 1 and _consecutive(ids):
        record[CONFIG][PARTITION_RANGE] = [int(ids[0]), int(ids[-1]) + 1]
    else:
        record[CONFIG][PARTITIONS] = ids.tolist()
    return record


def read_node_round(record: RecordDict) -> tuple[int, dict[str, np.ndarray], list[int] | range]:
    """(round, broadcast, the node's sampled partition ids: a list, or a range when consecutive)."""
    server_round, arrays = read_round(record)
    config = record[CONFIG]
    if PARTITION_RANGE in config:
        first, stop = config[PARTITION_RANGE]
        return server_round, arrays, range(int(first), int(stop))
    return server_round, arrays, [int(pid) for pid in config[PARTITIONS]]


SQUARES = "squares"  # ConfigRecord {column: the column it is the square of}, for columns not sent


def node_reply_record(answer: NodeReply, built: bool = False) -> RecordDict:
    """A node's reply: per array name one ArrayRecord of the clients' rows stacked (clients, ...),
    the clients' ids, their metrics as columns, each failed client's reason, and whether the node
    built its clients (data, halves) to answer this message (`built`); every column `packed`, and a
    column that squares another (`Replies.squares`) named in "squares" instead of sent."""
    columns = answer.replies if isinstance(answer.replies, Replies) else None
    pids = columns.pids if columns is not None else np.asarray(sorted(answer.replies), dtype=np.int64)
    record = RecordDict(
        {
            FAILURES: ConfigRecord({str(pid): str(reason) for pid, reason in answer.failures.items()}),
            NODE: MetricRecord({BUILDS: int(built)}),
        }
    )
    forms: dict[str, str] = {}
    _put(record, CLIENT_IDS, {"0": pids}, forms)
    if columns is not None and pids.size:  # a batched node's columns as they are: no object per client
        _put(record, METRICS, columns.metrics, forms)
        squares = {name: source for name, source in columns.squares.items() if source in columns.arrays}
        for name, block in columns.arrays.items():
            if name not in squares:
                _put(record, name, {"0": block}, forms)
        if squares:
            record[SQUARES] = ConfigRecord(squares)
    elif pids.size:
        first = answer.replies[int(pids[0])]
        metrics = {name: [answer.replies[int(pid)].metrics[name] for pid in pids] for name in first.metrics}
        _put(record, METRICS, metrics, forms)
        for name in first.arrays:
            rows = np.stack([np.asarray(answer.replies[int(pid)].arrays[name]) for pid in pids])
            _put(record, name, {"0": rows}, forms)
    if forms:
        record[FORMS] = ConfigRecord(forms)
    if answer.summed:
        record[SUMMED] = ArrayRecord({name: Array(np.asarray(array)) for name, array in answer.summed.items()})
    check_reply_size(record)
    return record


def _put(record: RecordDict, name: str, arrays: dict, forms: dict[str, str]) -> None:
    """record[name]: an ArrayRecord of `arrays` ({key: array}) `packed`, their forms into `forms`.
    (The clients' metrics so: one buffer each, ints staying ints, where a MetricRecord of lists
    would encode every client's value as its own protobuf field.)"""
    record[name] = ArrayRecord({})
    for key, array in arrays.items():
        record[name][key], form = packed(np.asarray(array))
        if form:
            forms[f"{name}/{key}"] = form


def _get(record: RecordDict, name: str, forms) -> dict[str, np.ndarray]:
    """{key: array} of record[name], `unpacked` by the forms `_put` gave them."""
    return {key: unpacked(array, str(forms.get(f"{name}/{key}", ""))) for key, array in record[name].items()}


# ---- compact columns ------------------------------------------------------------------------------
FORMS = "forms"
FILL, RANGE, INTS = "fill", "range", "ints"  # the compact forms ("": the array as it is)
_PROBE = 64  # entries looked at before a whole column is tested for one form (a cheap refusal)


def packed(array: np.ndarray) -> tuple[Array, str]:
    """(`array` as a Flower Array in its smallest exact form, that form; module docstring): the
    Array's dtype and shape are `array`'s, its data the .npy bytes of the stored form."""
    array = np.asarray(array)
    stored, form = _compact(array)
    shape = tuple(int(n) for n in array.shape)
    return Array(dtype=array.dtype.str, shape=shape, stype=SType.NUMPY, data=_npy(stored)), form


def _compact(array: np.ndarray) -> tuple[np.ndarray, str]:
    """(the stored form, its name) of `array`."""
    flat = array.reshape(-1) if array.flags.c_contiguous else None
    if array.size and (all(step == 0 for step in array.strides) or (flat is not None and _constant(flat))):
        return np.array(array[(0,) * array.ndim]), FILL  # a broadcast value (strides 0): no pass at all
    if flat is None or array.dtype.kind not in "iuf" or array.size < 2:
        return array, ""
    if array.dtype.kind in "iu" and array.ndim == 1 and _consecutive(flat):
        return flat[:1], RANGE
    codes = _integer_codes(flat)
    return (array, "") if codes is None else (codes.reshape(array.shape), INTS)


def _constant(flat: np.ndarray) -> bool:
    """Every entry has the bits of the first (-0.0 is not 0.0, each NaN its own payload)."""
    bits = flat.view(np.dtype(f"u{flat.dtype.itemsize}")) if flat.dtype.kind in "iuf" else None
    if bits is None:
        return False
    return bool(np.all(bits[:_PROBE] == bits[0])) and bool(np.all(bits == bits[0]))


def _consecutive(flat: np.ndarray) -> bool:
    return bool(flat[-1] - flat[0] == flat.size - 1) and bool(np.all(np.diff(flat) == 1))


def _integer_codes(flat: np.ndarray) -> np.ndarray | None:
    """`flat` in the smallest integer dtype that holds it exactly (None: no smaller one does): ints
    narrowed, floats that are integers and give back their own bits (no -0.0) as integers."""
    if flat.dtype.kind == "f":
        probe = flat[:_PROBE]
        if not (np.all(np.isfinite(probe)) and np.all(probe == np.round(probe))):
            return None
        with np.errstate(invalid="ignore"):
            ints = flat.astype(np.int64)
        same = ints.astype(flat.dtype).view(np.dtype(f"u{flat.dtype.itemsize}"))
        if not np.array_equal(same, flat.view(same.dtype)):
            return None
    else:
        ints = flat
    narrow = np.result_type(np.min_scalar_type(ints.min()), np.min_scalar_type(ints.max()))
    if narrow.itemsize >= flat.dtype.itemsize:
        return None
    return ints.astype(narrow)


def _npy(array: np.ndarray) -> bytes:
    """`array` in numpy's .npy layout (what `np.save` writes, so Flower's `Array.numpy()` reads it),
    joined with one copy of its data."""
    array = array if array.flags.c_contiguous else array.copy()  # (ascontiguousarray makes 0-d 1-d)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    return b"".join([header.getvalue(), memoryview(array).cast("B")])


def unpacked(array: Array, form: str = "") -> np.ndarray:
    """The array `packed` sent in `form` (read-only, no copy where it was sent as it is); an Array
    that Flower's `np.save` made reads as Flower reads it."""
    stored = _from_npy(array.data)
    if not form:
        return stored
    dtype, shape = np.dtype(array.dtype), tuple(array.shape)
    if form == FILL:
        return np.broadcast_to(stored.astype(dtype, copy=False), shape)
    if form == RANGE:
        return np.arange(int(stored[0]), int(stored[0]) + int(np.prod(shape)), dtype=dtype)
    if form == INTS:
        return stored.astype(dtype).reshape(shape)
    raise ValueError(f"unknown array form {form!r}")


def _from_npy(data: bytes) -> np.ndarray:
    """The array of .npy bytes, a read-only view of them (no copy)."""
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    if version not in ((1, 0), (2, 0)):  # version 3 (utf-8 field names): numpy's own reading
        return np.load(io.BytesIO(data), allow_pickle=False)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(stream)
    flat = np.frombuffer(data, dtype=dtype, count=int(np.prod(shape)), offset=stream.tell())
    return flat.reshape(shape, order="F" if fortran else "C")


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
    forms = record[FORMS] if FORMS in record.config_records else {}
    pids = np.asarray(_get(record, CLIENT_IDS, forms)["0"], dtype=np.int64)
    stacked = {
        name: _get(record, name, forms)["0"]
        for name in record.array_records
        if name not in (CLIENT_IDS, SUMMED, METRICS)
    }
    if SQUARES in record.config_records:  # columns that square another: squared here, as the clients did
        stacked.update({name: np.square(stacked[str(source)]) for name, source in record[SQUARES].items()})
    metrics = _get(record, METRICS, forms) if pids.size else {}
    if pids.size > 1 and not bool(np.all(pids[1:] > pids[:-1])):  # ascending, as Replies holds them
        order = np.argsort(pids, kind="stable")
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

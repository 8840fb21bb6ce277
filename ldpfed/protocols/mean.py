"""Tuple collection (mean estimation), client half and server half (spec: federated.md, Tuple
collection; recalibration.md). `ldpfed simulate --task mean` and `ldpfed compare` both run these.

A client holds a cohort of users (the rows of the data set cut into `clients` contiguous,
near-equal blocks by partition id). In round r every user of the cohort randomizes her own tuple
(m of d dimensions, eps/m each) with the client's secret stream (secret, NOISE, r), chunk by chunk
(`collect_sums`), and the client sends only the per-dimension `ReportSums`
(post-processing of the reports). The server adds the sums of the clients that replied, forms
theta_hat and re-calibrates it with each aggregator. The truth and the CLT prediction are the
harness's business (ldpfed.protocols.diagnostics), not the server's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

import ldpfed.aggregation as aggregation
from ldpfed.aggregation.base import Recalibrated
from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.config import HEADERS, Config
from ldpfed.data import DEFAULT_DIMS, DEFAULT_USERS, Tuples, available_synthetic, read_tuples, scale_note
from ldpfed.mechanisms.base import Mechanism
from ldpfed.mechanisms.multidim import (
    ReportSums,
    _mask_of_smallest,
    mean_estimate,
    per_value_mechanism,
    perturb_tuples,
    summarize,
)
from ldpfed.protocols import seeds
from ldpfed.protocols.base import BudgetedServer, ClientReply, InjectedFailure, RoundPlan, short_reason
from ldpfed.protocols.nodes import NodeReply, Replies, ready_to_add
from ldpfed.protocols.privacy import round_event
from ldpfed.samplers.streams import StreamKeys
from ldpfed.validation import LDPValueError, check_values, out_of_domain_policy, parse_domain

CHUNK_VALUES = 2**20  # values (users x dims) perturbed per chunk: ~8 MB per float64 array


def default_chunk_users(dims: int) -> int:
    """Users per chunk so that a chunk holds about CHUNK_VALUES values."""
    return max(1, CHUNK_VALUES // dims)


def collect_sums(
    data: np.ndarray,
    mechanism: Mechanism,
    report_dims: int,
    stream: np.random.SeedSequence,
    *,
    chunk_users: int | None = None,
) -> ReportSums:
    """Users perturb chunk by chunk; returns the collector's summed reports.

    Chunk k (users k*chunk_users ...) draws from `stream.spawn(n_chunks)[k]`. Memory is bounded by
    one chunk's (mask, reports) and the mechanism's temporaries.
    """
    users, dims = data.shape
    chunk_users = default_chunk_users(dims) if chunk_users is None else chunk_users
    starts = range(0, users, chunk_users)
    children = np.random.SeedSequence(stream.entropy, spawn_key=stream.spawn_key).spawn(len(starts))
    total = ReportSums.zeros(dims)
    for start, child in zip(starts, children):
        rng = np.random.default_rng(child)
        mask, reports = perturb_tuples(data[start : start + chunk_users], mechanism, report_dims, rng)
        total = total + summarize(mask, reports)
    return total


def estimate_once(
    sums: ReportSums,
    mechanism: Mechanism,
    aggregators: Sequence[aggregation.Aggregator],
    *,
    deviation: str | DeviationModel = "plug-in",
    halfwidth: float = 1.0,
) -> tuple[np.ndarray, DeviationModel, dict[str, Recalibrated]]:
    """The collector's side: (theta_hat, deviation model, {aggregator name: re-calibrated result}).

    `deviation` is "plug-in" (built from `sums`) or a ready DeviationModel (e.g. the predictor's,
    `Prediction.deviation_model()`).
    """
    theta_hat = mean_estimate(sums)
    if isinstance(deviation, DeviationModel):
        model = deviation
    elif deviation == "plug-in":
        model = aggregation.plugin_deviation(sums, mechanism, halfwidth)
    else:
        raise LDPValueError(
            f"deviation must be 'plug-in' or a DeviationModel here, got {deviation!r} "
            "(build the 'model' one with ldpfed.analysis.predict(...).deviation_model())"
        )
    results = {agg.name: agg(theta_hat, model, halfwidth) for agg in aggregators}
    return theta_hat, model, results


SUMS = ("count", "total", "total_sq")


# ---- world: the data and who holds it --------------------------------------------------------
def report_dims(config: Config) -> int:
    """m: `report-dims`, or all d dimensions when 0."""
    return config.privacy.report_dims or config.data.dims


@functools.lru_cache(maxsize=4)
def _read(name: str, users: int, dims: int, data_seed: int, domain: str, header: str, out_of_domain: str) -> Tuples:
    if name in available_synthetic():
        users, dims = users or DEFAULT_USERS, dims or DEFAULT_DIMS
    return read_tuples(
        name,
        users=users or None,
        dims=dims or None,
        rng=np.random.default_rng(data_seed),
        domain=parse_domain(domain),
        header=HEADERS[header],
        out_of_domain=out_of_domain_policy(out_of_domain),
    )


def read(config: Config, data_seed: int) -> Tuples:
    """All users' tuples in [-1, 1] and what was read: a synthetic set drawn from the data seed, or a
    file with the config's domain, header and out-of-domain policy (`ldpfed.data.read_tuples`, as
    `predict` and `compare` read it); users/dims 0 take the data's shape."""
    data = config.data
    return _read(config.data_name, data.users, data.dims, data_seed, data.domain, data.header, data.out_of_domain)


def tuples(config: Config, data_seed: int) -> np.ndarray:
    """All users' tuples (users, dims) in [-1, 1] (`read`)."""
    return read(config, data_seed).values


def bound(config: Config, data_seed: int) -> Config:
    """`config` with `data.users` and `data.dims` set to the shape of the data read (they may be 0,
    'from the data'), validated again (users >= clients, report-dims <= dims)."""
    users, dims = read(config, data_seed).values.shape
    if (config.data.users, config.data.dims) == (users, dims):
        return config
    return replace(config, data=replace(config.data, users=users, dims=dims)).validated()


def scale(config: Config) -> dict | None:
    """The scale note of a file whose declared domain is not [-1, 1]: the MSE is on the normalised
    [-1, 1] scale (`ldpfed.data.scale_note`); None otherwise."""
    domain = parse_domain(config.data.domain)
    if config.data_name in available_synthetic() or domain == (-1.0, 1.0):
        return None
    return scale_note(domain)


def cohort(users: int, clients: int, partition_id: int) -> np.ndarray:
    """Row indices of the users held by client `partition_id`: block `partition_id` of
    `np.array_split(np.arange(users), clients)` (the first users % clients blocks hold one more),
    computed in O(block) rather than by splitting every client's rows."""
    size, larger = divmod(users, clients)
    start = partition_id * size + min(partition_id, larger)
    return np.arange(start, start + size + (partition_id < larger))


def cohort_sizes(users: int, clients: int, partition_ids) -> np.ndarray:
    """The number of users of each client in `partition_ids` (`cohort`'s block sizes), as an array."""
    size, larger = divmod(users, clients)
    return size + (np.asarray(partition_ids, dtype=np.int64) < larger)


def cohort_rows(users: int, clients: int, partition_ids) -> np.ndarray:
    """The rows of all clients in `partition_ids`, block after block (`cohort` of each, joined),
    by array work: what `np.concatenate([cohort(...) for pid in partition_ids])` gives."""
    pids = np.asarray(partition_ids, dtype=np.int64)
    size, larger = divmod(users, clients)
    lengths = cohort_sizes(users, clients, pids)
    starts = pids * size + np.minimum(pids, larger)
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - offsets, lengths)


@dataclass(frozen=True)
class Cohorts:
    """The users' split over the clients (`cohort`: client pid holds block pid of
    `np.array_split(np.arange(users), clients)`), by arithmetic: nothing per client is built."""

    users: int
    clients: int

    def __len__(self) -> int:
        return self.clients

    def __getitem__(self, partition_id: int) -> np.ndarray:
        return cohort(self.users, self.clients, int(partition_id))

    def everyone(self, partitions) -> bool:
        """Whether `partitions` are all the clients in ascending order (their rows: every user, in order)."""
        if len(partitions) != self.clients:
            return False
        pids = np.asarray(partitions, dtype=np.int64)
        return bool(pids[0] == 0 and np.all(np.diff(pids) == 1)) if pids.size else True

    def rows(self, partitions) -> np.ndarray:
        """The rows of the users of `partitions`, client after client (`cohort_rows`)."""
        return cohort_rows(self.users, self.clients, partitions)


@functools.lru_cache(maxsize=4)
def _mechanism(name: str, epsilon: float, m: int, delta: float | None) -> Mechanism:
    return per_value_mechanism(name, epsilon, m, delta)


def mechanism(config: Config) -> Mechanism:
    """The per-value mechanism every user applies (eps/m, delta/m); built once per config."""
    return _mechanism(config.privacy.mechanism, config.privacy.epsilon, report_dims(config), config.delta_or_none)


# ---- client half -----------------------------------------------------------------------------
class MeanClient:
    """A cohort's users randomize locally; the reply is their report sums."""

    def __init__(
        self,
        values: np.ndarray,
        mechanism: Mechanism,
        report_dims: int,
        secret: int,
        chunk_users: int | None = None,
        fail: bool = False,
    ) -> None:
        self.values, self.mechanism, self.report_dims = values, mechanism, report_dims
        self.secret, self.chunk_users, self.fail = secret, chunk_users, fail

    def sums(self, server_round: int) -> ReportSums:
        noise = seeds.stream(self.secret, seeds.NOISE, server_round)
        return collect_sums(self.values, self.mechanism, self.report_dims, noise, chunk_users=self.chunk_users)

    def reply(self, server_round: int, broadcast: dict) -> tuple[ClientReply, dict]:
        if self.fail:
            raise InjectedFailure(f"injected failure in round {server_round}")
        sums = self.sums(server_round)
        arrays = {name: np.asarray(getattr(sums, name), dtype=np.float64) for name in SUMS}
        return ClientReply(arrays, {"users": int(sums.users)}), {}

    @classmethod
    def batch(cls, halves: list[MeanClient], partitions: list[int]) -> MeanClients | None:
        """The clients `halves` (partition ids `partitions`, ascending) answering together."""
        first = halves[0]
        same = all(
            half.mechanism is first.mechanism and half.report_dims == first.report_dims and half.chunk_users is None
            for half in halves
        )
        return MeanClients(halves, partitions) if same else None


class CohortBatch:
    """Clients of one node held as columns for batched rounds: their partition ids (ascending),
    users per client, their rows stacked, injected failures, and their secrets premixed
    (ldpfed.samplers.streams.StreamKeys: each client's noise stream (secret, NOISE, r), chunk 0,
    without a Generator per client). Clients with more users than one chunk (`large`) answer
    alone, each through its own `collect_sums` (not a bottleneck: each has >= 2^20 values)."""

    def __init__(self, halves: list, partitions: list[int], rows_of, chunk_users: int) -> None:
        sizes = np.array([rows_of(half).shape[0] for half in halves], dtype=np.int64)
        self._set(partitions, halves, sizes, np.array([bool(half.fail) for half in halves]), chunk_users)
        self.rows = np.concatenate([rows_of(half) for half in halves]) if halves else None
        self.keys = StreamKeys([half.secret for half in halves])

    def _set(self, partitions, halves, sizes: np.ndarray, fail: np.ndarray, chunk_users: int) -> None:
        self.pids = np.asarray(partitions, dtype=np.int64)
        self.halves = halves
        self.sizes, self.fail = sizes, fail
        self.large = self.sizes > chunk_users
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)

    @classmethod
    def of_columns(cls, partitions, sizes, fail, rows, secrets, client, chunk_users: int) -> CohortBatch:
        """The batch from columns: ascending `partitions`, their user counts `sizes`, injected
        failures `fail`, stacked `rows`, `secrets` ({pid: secret}; from their words where it holds
        them, `seeds.ClientSecrets`), and `client(pid)` making a client's half when one answers
        alone (a large client): no object per client."""
        batch = cls.__new__(cls)
        pids = np.asarray(partitions, dtype=np.int64)
        batch._set(pids, _Halves(client, pids), np.asarray(sizes, dtype=np.int64), np.asarray(fail, bool), chunk_users)
        batch.rows = rows
        words_of = getattr(secrets, "words_of", None)
        secrets_of = [secrets[pid] for pid in pids.tolist()] if words_of is None else None
        batch.keys = StreamKeys(secrets_of) if words_of is None else StreamKeys.from_words(words_of(pids))
        return batch

    def partitions(self) -> list[int]:
        return self.pids.tolist()

    def covers(self, partitions: list[int]) -> bool:
        return self.locate(partitions, keep=True) is not None

    def positions(self, partitions: list[int]) -> np.ndarray:
        located = self.locate(partitions)
        if located is None:
            raise KeyError("partitions not in this batch")
        return located

    def locate(self, partitions, keep: bool = False) -> np.ndarray | None:
        """Where `partitions` sit among the batch's clients (None if one is not there); `keep`: for
        the next call with the very same list only (`covers`, then `positions`, in one reply)."""
        last = getattr(self, "_located", None)
        if last is not None and last[0] is partitions:
            self._located = None
            return last[1]
        if isinstance(partitions, range) and partitions.step == 1 and len(partitions) and self._contiguous():
            first = partitions.start - int(self.pids[0])  # a block of the batch's contiguous ids
            return (
                np.arange(first, first + len(partitions))
                if first >= 0 and first + len(partitions) <= self.pids.size
                else None
            )
        asked = np.asarray(partitions, dtype=np.int64)
        position = np.searchsorted(self.pids, asked)
        found = self.pids[np.minimum(position, self.pids.size - 1)]
        located = position if np.all(position < self.pids.size) and np.all(found == asked) else None
        self._located = (partitions, located) if keep else None
        return located

    def _contiguous(self) -> bool:
        return bool(self.pids.size) and int(self.pids[-1] - self.pids[0]) == self.pids.size - 1

    def groups(self, positions: np.ndarray):
        """(size, positions of the small clients with `size` users) for each size among `positions`."""
        small = positions[~self.large[positions]]
        sizes = self.sizes[small]
        for size in np.flatnonzero(np.bincount(sizes)) if sizes.size else ():  # (np.unique sorts: slower)
            yield int(size), small[sizes == size]

    def block(self, positions: np.ndarray, size: int) -> np.ndarray:
        """The stacked rows of the clients at `positions` (each with `size` users): (clients, size, ...);
        every client of the batch, all of `size` users: a read-only view of the rows, not a copy."""
        if positions.size * size == self.rows.shape[0] and np.array_equal(positions, np.arange(positions.size)):
            view = self.rows.reshape(positions.size, size, *self.rows.shape[1:])
            view.flags.writeable = False
            return view
        index = self.starts[positions][:, None] + np.arange(size)
        return self.rows[index]

    def failures(self, positions: np.ndarray, server_round: int) -> dict[int, str]:
        """The injected failures among `positions` (InjectedFailure, as the client raises it)."""
        reason = short_reason(f"InjectedFailure: injected failure in round {server_round}")
        return dict.fromkeys(self.pids[positions[self.fail[positions]]].tolist(), reason)


class _Halves:
    """The client halves of a batch built from columns, made on access (`client(pid)`, cached by
    the node): `halves[position]`."""

    def __init__(self, client, pids: np.ndarray) -> None:
        self.client, self.pids = client, pids

    def __len__(self) -> int:
        return self.pids.size

    def __getitem__(self, position) -> object:
        return self.client(int(self.pids[position]))


def batched_reply(
    batch: CohortBatch, positions: np.ndarray, server_round: int, sums: ReportSums, summing: bool
) -> NodeReply:
    """A node's reply from its replying clients' per-client sums ((clients, width) columns, in
    `positions` order): their rows, or with `summing` their sum (added in client order, as
    `ClientsNode` adds them) and each client's user count. Clients of one user each: their
    `total_sq` is their `total` squared (`client_sums`), declared so (`Replies.squares`)."""
    pids = batch.pids[positions]
    sizes = batch.sizes[positions]
    users = {"users": sizes}
    arrays = {name: np.asarray(getattr(sums, name), dtype=np.float64) for name in SUMS}
    if summing and pids.size:
        return NodeReply(Replies(pids, users), {}, {}, {name: block.sum(axis=0) for name, block in arrays.items()})
    squares = {"total_sq": "total"} if pids.size and bool(np.all(sizes == 1)) else None
    return NodeReply(Replies(pids, users, arrays if pids.size else {}, squares), {}, {})


class BatchedClients:
    """A node's tuple clients answering a round together (spec: scale.md): all small clients of
    one cohort size (at most two: near-equal blocks) in one pass (`group_sums`), each client's
    draws from its own stream (secret, NOISE, r; chunk 0 of its `collect_sums`) in the order its
    own Generator draws them, so each client's sums are bit for bit those it computes alone
    (tests/test_batched_clients.py); per-client sums by array reductions. `batch`: a CohortBatch;
    `width`: the entries of a client's sums."""

    batch: CohortBatch
    width: int

    @property
    def _spent(self) -> dict:
        """{cohort size: the streams of the last round's group of that size} (`StreamKeys.streams`' `into`)."""
        if "_spent_streams" not in self.__dict__:
            self._spent_streams = {}
        return self._spent_streams

    def covers(self, partitions: list[int]) -> bool:
        return self.batch.covers(partitions)

    def partitions(self) -> list[int]:
        return self.batch.partitions()

    def reply(self, server_round: int, broadcast: dict, partitions: list[int], summing: bool) -> NodeReply:
        batch = self.batch
        positions = np.sort(batch.positions(partitions))
        failures = batch.failures(positions, server_round)
        replying = positions[~batch.fail[positions]]
        answer = batched_reply(batch, replying, server_round, self.sums(replying, server_round), summing)
        answer.failures.update(failures)
        return answer

    def sums(self, positions: np.ndarray, server_round: int) -> ReportSums:
        """Per-client sums (count, total, total_sq as (clients, width); users in all) of `positions`."""
        batch = self.batch
        count = total = total_sq = None  # zeros, unless one group of one cohort size is every position
        for size, group in batch.groups(positions):
            keys = batch.keys if group.size == len(batch.keys) else batch.keys.take(group)
            streams = keys.streams((seeds.NOISE, server_round, 0), into=self._spent.pop(size, None))  # chunk 0
            self._spent[size] = streams  # drawn from below, done with after this round: seeded again next round
            sums = self.group_sums(batch.block(group, size), streams)
            if group.size == positions.size:  # one cohort size: the group is every position
                count, total, total_sq = (np.asarray(column, dtype=float) for column in sums)
                continue
            if count is None:
                count, total, total_sq = (np.zeros((positions.size, self.width)) for _ in range(3))
            at = np.searchsorted(positions, group)  # both ascending
            count[at], total[at], total_sq[at] = sums
        if count is None:
            count, total, total_sq = (np.zeros((positions.size, self.width)) for _ in range(3))
        for index in np.flatnonzero(batch.large[positions]):  # clients of more than one chunk
            alone = self.alone(batch.halves[positions[index]], server_round)
            count[index], total[index], total_sq[index] = alone.count, alone.total, alone.total_sq
        total += 0.0  # -0.0 to 0.0, as a client's sums start from zeros (counts and squares are never -0.0)
        return ReportSums(count, total, total_sq, int(batch.sizes[positions].sum()))

    def group_sums(self, block: np.ndarray, streams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(count, total, total_sq), each (clients, width), of clients' (clients, users, ...) block."""
        raise NotImplementedError

    def alone(self, half, server_round: int) -> ReportSums:
        raise NotImplementedError


def client_sums(mask: np.ndarray | None, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`summarize` of each client's (users, width) mask and reports: (clients, width) each (one user
    each: the user's own row, and its square, which is what the sums of one term are); `mask`
    None: every value reported (each count is the users)."""
    clients, users, width = reports.shape
    count = np.broadcast_to(float(users), (clients, width)) if mask is None else None  # read-only, no memory
    if users == 1:
        row = reports[:, 0, :]
        return (mask[:, 0, :].astype(float) if count is None else count), row, row * row
    count = mask.sum(axis=1) if count is None else count
    return count, reports.sum(axis=1), np.einsum("gij,gij->gj", reports, reports)


class MeanClients(BatchedClients):
    """The mean task's clients together: `perturb_tuples` and `summarize` of every client's users."""

    def __init__(self, halves: list[MeanClient], partitions: list[int]) -> None:
        first = halves[0]
        self.mechanism, self.report_dims, self.width = first.mechanism, first.report_dims, first.values.shape[1]
        self.batch = CohortBatch(halves, partitions, lambda half: half.values, default_chunk_users(self.width))

    @classmethod
    def of_config(cls, config: Config, partitions, data_seed: int, secrets, client=None) -> MeanClients:
        """The clients `partitions` of the bound `config` (what `client_from_config` makes of each)
        from columns: their cohorts' rows of the data in one slice, their failures and secrets as
        arrays (`CohortBatch.of_columns`); `client(pid)`: a client's half, for one that answers
        alone (default `client_from_config` with its secret)."""
        clients = cls.__new__(cls)
        pids = seeds.ascending_ids(partitions)
        users, dims = config.data.users, config.data.dims
        clients.mechanism, clients.report_dims, clients.width = mechanism(config), report_dims(config), dims
        rows = tuples(config, data_seed)[cohort_rows(users, config.federation.clients, pids)]
        fail = np.isin(pids, np.fromiter(config.failing_partitions, dtype=np.int64))
        if client is None:

            def client(pid: int) -> MeanClient:
                return client_from_config(config, pid, data_seed, secrets[pid])

        sizes = cohort_sizes(users, config.federation.clients, pids)
        clients.batch = CohortBatch.of_columns(pids, sizes, fail, rows, secrets, client, default_chunk_users(dims))
        return clients

    def alone(self, half: MeanClient, server_round: int) -> ReportSums:
        return half.sums(server_round)

    def group_sums(self, block: np.ndarray, streams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`perturb_tuples` of each client's (users, d) block with its stream, all clients at once
        (mask uniforms, then the reported values' reports), then its sums."""
        clients, users, d = block.shape
        flat = block.reshape(clients * users, d)
        m = self.report_dims
        if m == d:  # perturb_streams checks the values
            reports = self.mechanism.perturb_streams(flat.reshape(clients, users * d), streams)
            return client_sums(None, reports.reshape(block.shape))
        check_values(flat)  # every value, as `perturb_tuples` checks them, not the reported ones only
        mask = _mask_of_smallest(streams.uniforms(users * d).reshape(clients * users, d), m)
        reports = np.zeros_like(flat)
        reports[mask] = self.mechanism.perturb_streams(flat[mask].reshape(clients, users * m), streams).ravel()
        return client_sums(mask.reshape(block.shape), reports.reshape(block.shape))


def sums_of(reply: ClientReply) -> ReportSums:
    return ReportSums(*(reply.arrays[name] for name in SUMS), int(reply.metrics["users"]))


def total_sums(replies: dict[int, ClientReply], sums: dict[int, dict] | None, dims: int) -> ReportSums:
    """The replying clients' report sums added up: from their replies, or (node-reply sum) from the
    nodes' pre-added sums, in the order of their keys, and the clients' user counts."""
    if isinstance(replies, Replies):  # columns: the same additions, in client order, as array work
        users = int(replies.metric("users").sum()) if len(replies) else 0
        if sums:
            return ReportSums(*_node_sums(sums, dims), users)
        if not len(replies):
            return ReportSums.zeros(dims)
        return ReportSums(*(replies.total(name, dims) for name in SUMS), users)
    pids = sorted(replies)
    if not sums:
        return sum((sums_of(replies[pid]) for pid in pids), ReportSums.zeros(dims))
    total = ReportSums.zeros(dims)
    for key in sorted(sums):
        total = total + ReportSums(*(sums[key][name] for name in SUMS), 0)
    return ReportSums(total.count, total.total, total.total_sq, sum(int(replies[pid].metrics["users"]) for pid in pids))


def _node_sums(sums: dict[int, dict], dims: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nodes' pre-added (count, total, total_sq), added in the order of their keys."""
    total = ReportSums.zeros(dims)
    for key in sorted(sums):
        total = total + ReportSums(*(sums[key][name] for name in SUMS), 0)
    return total.count, total.total, total.total_sq


def client_from_config(config: Config, partition_id: int, data_seed: int, secret: int) -> MeanClient:
    rows = cohort(config.data.users, config.federation.clients, partition_id)
    return MeanClient(
        tuples(config, data_seed)[rows],
        mechanism(config),
        report_dims(config),
        secret,
        fail=partition_id in config.failing_partitions,
    )


# ---- server half -----------------------------------------------------------------------------
@dataclass(frozen=True)
class MeanOutcome:
    """What the server holds after a round: who replied, the summed reports, the estimates."""

    partitions: list[int]
    sums: ReportSums
    theta_hat: np.ndarray
    results: dict[str, Recalibrated]  # per aggregator: the estimate and its record

    @property
    def estimates(self) -> dict[str, np.ndarray]:
        return {name: result.estimate for name, result in self.results.items()}


class TupleServer(BudgetedServer):
    """A tuple task's server half (mean, frequency), shaped like a Flower Strategy: every admitted
    client reports in every round (each round is one independent collection); aggregate = the sum
    of the clients' ReportSums (`width` entries), then the task's `estimate`.

    `aggregators`: names the `task` allows, built with `alpha`, `l2_reference` and the task's own
    `aggregator_options`; `deviation`: their deviation model (plug-in, model, or a DeviationModel);
    `round_event`, `budget`: the ledger's event per client and round and the per-client budget."""

    width: int
    mechanism_name: str | None

    def __init__(
        self,
        task: str,
        clients: int,
        aggregators: list[str],
        *,
        alpha: float = aggregation.DEFAULT_ALPHA,
        l2_reference: str = "bound",
        deviation: str | DeviationModel = "plug-in",
        round_event=None,
        budget=None,
        **aggregator_options,
    ) -> None:
        self.aggregators = aggregation.get_many(
            aggregation.check_names(aggregators, task), alpha=alpha, l2_reference=l2_reference, **aggregator_options
        )
        super().__init__(round_event, budget)
        self.clients, self.deviation = clients, deviation

    def configure_round(self, server_round: int) -> RoundPlan:
        """Every client, or (with a budget) those it admits; without a budget the plan is
        `range(clients)` (a node's block of it is a range: no list of ids per round)."""
        if self.budget is None:
            self._planned, self._stopped = range(self.clients), []
            if getattr(self, "_planned_ids", None) is None or self._planned_ids.size != self.clients:
                self._planned_ids = np.arange(self.clients)
            return RoundPlan(self._planned, {})
        planned = self.admit(range(self.clients))
        self._planned_ids = np.asarray(planned, dtype=np.int64)
        return RoundPlan(planned, {})

    def ready_to_aggregate(self) -> None:
        """Load what the first `aggregate` loads (the compiled addition of the replies, ~0.8 s in a
        process), for a caller that waits anyway (a driver while its Ray starts)."""
        ready_to_add()

    def aggregate(self, server_round: int, replies: dict, failures: dict[int, str], sums: dict | None = None) -> dict:
        """`sums`: the nodes' pre-added report sums (node-reply sum; `total_sums`). `replies`: a
        dict, or columns (`Replies`: the local engine's batched nodes)."""
        ids = replies.pids if isinstance(replies, Replies) else np.array(sorted(replies), dtype=np.int64)
        sums = total_sums(replies, sums, self.width)
        self.outcome = self.estimate(ids.tolist(), sums)
        self.charge(server_round, ids, self.mechanism_name)
        return {**self.round_record(replies, failures), "users_reported": int(sums.users)}

    def charge(self, server_round: int, partitions, mechanism: str) -> None:
        """One round's event for each partition that replied, recorded as one block."""
        if self.round_event is not None:
            self.ledger.record_round(np.asarray(partitions, dtype=np.int64), server_round, self.round_event, mechanism)

    def round_record(self, replies, failures: dict[int, str]) -> dict:
        """Participation (`ldpfed.protocols.base.participation`) by array work: a planned client
        without a reply or error failed ("no reply")."""
        replied = replies.pids if isinstance(replies, Replies) else np.array(sorted(replies), dtype=np.int64)
        planned = getattr(self, "_planned_ids", None)
        if planned is None or planned.size != len(self._planned):
            planned = np.asarray(self._planned, dtype=np.int64)
        missing = absent(planned, replied).tolist()
        failed = {**dict.fromkeys(missing, "no reply"), **failures}
        record = {
            "clients_sampled": len(self._planned),
            "clients_replied": len(replies),
            "clients_failed": len(failed),
            "failed_partitions": ",".join(str(pid) for pid in sorted(failed)),
            "failure_reasons": " | ".join(sorted(set(failed.values()))),
        }
        if self.budget is not None:
            record["clients_stopped_by_budget"] = len(self._stopped)
            record["stopped_partitions"] = ",".join(str(pid) for pid in sorted(self._stopped))
        return record

    def estimate(self, pids: list[int], sums: ReportSums):
        """The round's outcome from the summed reports of the clients `pids` (none: NaN estimates)."""
        raise NotImplementedError

    def evaluate(self, server_round: int) -> dict:
        return {}


def absent(planned: np.ndarray, replied: np.ndarray) -> np.ndarray:
    """The ids of `planned` not in `replied` (ascending): a binary search of the ascending replies
    (np.setdiff1d sorts both, several times slower at 10^5 clients)."""
    if replied.size == 0:
        return planned
    if planned.size == replied.size and np.array_equal(planned, replied):
        return planned[:0]
    position = np.minimum(np.searchsorted(replied, planned), replied.size - 1)
    return planned[replied[position] != planned]


class MeanServer(TupleServer):
    """The mean task's server half: theta_hat and its re-calibrations."""

    def __init__(
        self,
        mechanism: Mechanism,
        dims: int,
        clients: int,
        aggregators: list[str],
        *,
        mechanism_name: str | None = None,
        **options,
    ) -> None:
        """`options`: TupleServer's (alpha, l2_reference, deviation, round_event, budget)."""
        self.mechanism, self.dims, self.width = mechanism, dims, dims
        super().__init__("mean", clients, aggregators, **options)
        self.mechanism_name = mechanism_name
        self.outcome: MeanOutcome | None = None

    def estimate(self, pids: list[int], sums: ReportSums) -> MeanOutcome:
        if not pids:
            return MeanOutcome(pids, sums, np.full(self.dims, np.nan), {})
        theta_hat, _, results = estimate_once(sums, self.mechanism, self.aggregators, deviation=self.deviation)
        return MeanOutcome(pids, sums, theta_hat, results)


def server_from_config(config: Config) -> MeanServer:
    aggregators = list(dict.fromkeys([config.aggregation.aggregator, "mean"]))
    event = round_event(config, config.privacy.epsilon, config.delta_or_none)
    return MeanServer(
        mechanism(config),
        config.data.dims,
        config.federation.clients,
        aggregators,
        alpha=config.aggregation.alpha,
        round_event=event,
        mechanism_name=config.privacy.mechanism,
        budget=config.budget,
    )

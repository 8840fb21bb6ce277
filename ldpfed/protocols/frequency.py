"""Frequency estimation over categorical tuples, client half and server half (federated.md, Tuple
collection). `ldpfed compare --task frequency` and `ldpfed simulate --task frequency`
both run these, as the mean task runs `ldpfed.protocols.mean`.

A client holds a cohort of users. In round r every user samples m of her d attributes and reports
them through the attributes' frequency oracles (`ldpfed.frequency.categorical.AttributeOracles`, eps/m each)
with the client's secret stream (secret, NOISE, r), chunk by chunk; the client sends only the
per-entry `ReportSums` of the contributions (post-processing of the reports). The server adds the
sums, forms f_hat (the mean contribution per one-hot entry), and re-calibrates it with each
aggregator on the frequency scale (entries in [0, 1] inside the domain [-1, 1], halfwidth 1, so
shrinking goes towards frequency 0), plus "simplex": the plain estimate projected onto the
probability simplex per attribute (`ldpfed.aggregation.simplex`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

import ldpfed.aggregation as aggregation
from ldpfed.aggregation.base import Recalibrated
from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.config import HEADERS, Config
from ldpfed.data.categorical import CategoricalData, read_categorical, synthetic_shape
from ldpfed.frequency.categorical import AttributeOracles, channel_oracles, has_channel
from ldpfed.frequency.oracles import HistogramEncoding, OptimizedUnaryEncoding
from ldpfed.mechanisms.multidim import ReportSums, _mask_of_smallest, mean_estimate
from ldpfed.protocols import seeds
from ldpfed.protocols.base import ClientReply, InjectedFailure
from ldpfed.protocols.mean import (
    SUMS,
    BatchedClients,
    CohortBatch,
    TupleServer,
    client_sums,
    cohort,
    cohort_rows,
    cohort_sizes,
)
from ldpfed.protocols.privacy import round_event
from ldpfed.validation import LDPValueError

CHUNK_ENTRIES = 2**20  # users x one-hot entries perturbed per chunk
PERMANENT_ROUND = 0  # the round key of a client's permanent reports' stream (rounds count from 1)


def plugin_deviation(sums: ReportSums, oracles: AttributeOracles) -> DeviationModel:
    """N(0, sigma_e^2) from the reports alone: the contributions are unbiased, sigma_e^2 = sample
    variance / r_e (recalibration.md, plug-in); entries with r < 2 get the worst per-report
    variance max(V_in, V_out) / max(r, 1)."""
    count = np.asarray(sums.count, dtype=float)
    fallback = np.maximum(*oracles.entry_variances())
    per_report = np.where(count >= 2, sums.sample_variance(), fallback)
    return DeviationModel(np.zeros_like(count), np.sqrt(per_report / np.maximum(count, 1.0)), source="plug-in")


def estimate_frequencies(
    sums: ReportSums, oracles: AttributeOracles, aggregators, *, deviation: str | DeviationModel = "plug-in"
) -> tuple[np.ndarray, dict[str, Recalibrated]]:
    """(f_hat, {aggregator name: result}) from the summed contributions (module docstring)."""
    f_hat = mean_estimate(sums)
    if isinstance(deviation, DeviationModel):
        model = deviation
    elif deviation == "plug-in":
        model = plugin_deviation(sums, oracles)
    else:
        raise LDPValueError(f"deviation must be 'plug-in' or a DeviationModel, got {deviation!r}")
    results = {}
    for item in aggregators:
        results[item.name] = item(f_hat, model, 1.0)
    return f_hat, results


def collect_frequency_sums(
    codes: np.ndarray,
    oracles: AttributeOracles,
    stream: np.random.SeedSequence,
    *,
    chunk_users: int | None = None,
    permanent: np.random.SeedSequence | None = None,
) -> ReportSums:
    """Users report chunk by chunk; chunk k draws from child k of `stream` (as `collect_sums`), and
    for memoized oracles its permanent reports from child k of `permanent` (the same every round)."""
    users = codes.shape[0]
    chunk_users = max(1, CHUNK_ENTRIES // oracles.width) if chunk_users is None else chunk_users
    starts = range(0, users, chunk_users)
    children = _children(stream, len(starts))
    memos = _children(permanent, len(starts)) if oracles.memoized else [None] * len(starts)
    total = ReportSums.zeros(oracles.entries)
    for start, child, memo in zip(starts, children, memos):
        chunk, rng = codes[start : start + chunk_users], np.random.default_rng(child)
        if memo is None:
            total = total + oracles.report_sums(chunk, rng)
        else:
            total = total + oracles.memoized_report_sums(chunk, np.random.default_rng(memo), rng)
    return total


def _children(stream: np.random.SeedSequence | None, count: int) -> list[np.random.SeedSequence]:
    if stream is None:
        raise LDPValueError("a memoized collection needs the client's permanent stream")
    return np.random.SeedSequence(stream.entropy, spawn_key=stream.spawn_key).spawn(count)


def permanent_stream(secret: int) -> np.random.SeedSequence:
    """A client's stream of its users' permanent (memoized) reports: under its own secret, keyed
    (NOISE, PERMANENT_ROUND), which no round's stream uses (rounds count from 1); the same for every
    round, so each user's memo is drawn once whatever rebuilds the client, and the server, which
    never holds the secret, cannot redraw it."""
    return seeds.stream(secret, seeds.NOISE, PERMANENT_ROUND)


# ---- client half -----------------------------------------------------------------------------
class FrequencyClient:
    """A cohort's users randomize locally; the reply is their per-entry report sums."""

    def __init__(
        self,
        codes: np.ndarray,
        oracles: AttributeOracles,
        secret: int,
        chunk_users: int | None = None,
        fail: bool = False,
    ) -> None:
        self.codes, self.oracles, self.secret, self.chunk_users, self.fail = codes, oracles, secret, chunk_users, fail

    def reply(self, server_round: int, broadcast: dict) -> tuple[ClientReply, dict]:
        if self.fail:
            raise InjectedFailure(f"injected failure in round {server_round}")
        noise = seeds.stream(self.secret, seeds.NOISE, server_round)
        sums = collect_frequency_sums(
            self.codes, self.oracles, noise, chunk_users=self.chunk_users, permanent=permanent_stream(self.secret)
        )
        arrays = {name: np.asarray(getattr(sums, name), dtype=np.float64) for name in SUMS}
        return ClientReply(arrays, {"users": int(sums.users)}), {}

    @classmethod
    def batch(cls, halves: list[FrequencyClient], partitions: list[int]) -> FrequencyClients | None:
        """The clients `halves` (partition ids `partitions`, ascending) answering together; None
        for GRR (numpy's bounded integers draw 32-bit halves of words: no batched equivalent)."""
        first = halves[0]
        same = all(half.oracles is first.oracles and half.chunk_users is None for half in halves)
        supported = isinstance(first.oracles.oracles[0], (HistogramEncoding, OptimizedUnaryEncoding))
        return FrequencyClients(halves, partitions) if same and supported else None


class FrequencyClients(BatchedClients):
    """The frequency task's clients together: `AttributeOracles.report_sums` of every client's
    users (histogram encoding and OUE), each client's draws from its own stream."""

    def __init__(self, halves: list[FrequencyClient], partitions: list[int]) -> None:
        self.oracles = halves[0].oracles
        self.width = self.oracles.entries
        chunk = max(1, CHUNK_ENTRIES // self.oracles.entries)
        self.batch = CohortBatch(halves, partitions, lambda half: np.asarray(half.codes), chunk)

    @classmethod
    def of_config(cls, config: Config, partitions, data_seed: int, secrets, client) -> FrequencyClients | None:
        """The clients `partitions` of the bound `config` from columns (as `MeanClients.of_config`:
        their cohorts' rows in one slice, failures and secrets as arrays, no object per client);
        `client(pid)`: a client's half, for one that answers alone. None where `batch` has none."""
        oracles = oracles_from_config(config, data_seed)
        if not isinstance(oracles.oracles[0], (HistogramEncoding, OptimizedUnaryEncoding)):
            return None
        clients = cls.__new__(cls)
        clients.oracles, clients.width = oracles, oracles.entries
        pids = seeds.ascending_ids(partitions)
        users, total = config.data.users, config.federation.clients
        rows = read(config, data_seed).codes[cohort_rows(users, total, pids)]
        fail = np.isin(pids, np.fromiter(config.failing_partitions, dtype=np.int64))
        chunk = max(1, CHUNK_ENTRIES // oracles.entries)
        sizes = cohort_sizes(users, total, pids)
        clients.batch = CohortBatch.of_columns(pids, sizes, fail, rows, secrets, client, chunk)
        return clients

    def alone(self, half: FrequencyClient, server_round: int) -> ReportSums:
        noise = seeds.stream(half.secret, seeds.NOISE, server_round)
        return collect_frequency_sums(half.codes, half.oracles, noise)

    def group_sums(self, block: np.ndarray, streams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each client's m-of-d mask (uniforms), then its reported entries' draws (the histogram
        encoding's reports, or OUE's uniforms), as `report_sums` draws them."""
        oracles = self.oracles
        clients, users, d = block.shape
        codes = block.reshape(clients * users, d)
        first = oracles.oracles[0]
        if oracles.report_dims == d and isinstance(first, HistogramEncoding):  # every entry reported
            signs = np.where(oracles.one_hot(codes), 1.0, -1.0).reshape(clients, -1)
            reports = first.entry.perturb_streams(signs, streams)
            b0, b1 = first.entry.bias_coefficients
            return client_sums(None, (((reports - b0) / (1.0 + b1) + 1.0) / 2.0).reshape(clients, users, -1))
        if oracles.report_dims == d:
            reported = np.ones(codes.shape, dtype=bool)
        else:
            reported = _mask_of_smallest(streams.uniforms(users * d).reshape(codes.shape), oracles.report_dims)
        entry_mask = np.repeat(reported, oracles.categories, axis=1)
        bits = oracles.one_hot(codes)[entry_mask]
        lengths = entry_mask.reshape(clients, -1).sum(axis=1)
        out = np.zeros(entry_mask.shape)
        if isinstance(first, HistogramEncoding):
            reports = ragged_rows(np.where(bits, 1.0, -1.0), lengths, streams, first.entry.perturb_streams)
            b0, b1 = first.entry.bias_coefficients
            out[entry_mask] = ((reports - b0) / (1.0 + b1) + 1.0) / 2.0  # HistogramEncoding.contributions
        else:
            p, q = first.p, first.q
            uniforms = ragged_rows(np.zeros(bits.size), lengths, streams, lambda rows, s: s.uniforms(rows.shape[1]))
            out[entry_mask] = ((uniforms < np.where(bits, p, q)) - q) / (p - q)
        count = np.repeat(reported.reshape(clients, users, d).sum(axis=1), oracles.categories, axis=1)
        values = out.reshape(clients, users, -1)
        return count.astype(float), values.sum(axis=1), np.einsum("gij,gij->gj", values, values)


def ragged_rows(flat: np.ndarray, lengths: np.ndarray, streams, draw) -> np.ndarray:
    """`draw(rows, streams)` over clients whose rows (consecutive in `flat`) have different
    lengths: one call per distinct length (at most a few), each row with its client's stream."""
    out = np.empty(flat.shape)
    starts = np.cumsum(lengths) - lengths
    for length in np.flatnonzero(np.bincount(lengths)):
        clients = np.flatnonzero(lengths == length)
        index = starts[clients][:, None] + np.arange(length)
        own = streams if clients.size == len(streams) else streams.take(clients)
        out[index] = draw(flat[index], own)
    return out


# ---- server half -----------------------------------------------------------------------------
def check_channel(aggregators, mechanism: str) -> None:
    """An aggregator that inverts the oracles' channel (IBU) needs a frequency mechanism that has one."""
    needing = [name for name in aggregators if aggregation.get_class(name).needs_channel]
    if needing and not has_channel(mechanism):
        raise LDPValueError(
            f"aggregator {needing[0]} needs a support-counting oracle's channel (p, q); {mechanism} has none "
            f"(choose one of {', '.join(channel_oracles())})"
        )


@dataclass(frozen=True)
class FrequencyOutcome:
    """What the server holds after a round: who replied, the summed contributions, the estimates."""

    oracles: AttributeOracles
    partitions: list[int]
    sums: ReportSums
    f_hat: np.ndarray
    results: dict[str, Recalibrated]

    @property
    def estimates(self) -> dict[str, np.ndarray]:
        return {name: result.estimate for name, result in self.results.items()}


class FrequencyServer(TupleServer):
    """The frequency task's server half: f_hat and its re-calibrations."""

    def __init__(self, oracles: AttributeOracles, clients: int, aggregators: list[str], **options) -> None:
        """`options`: TupleServer's (alpha, l2_reference, deviation, round_event, budget). Aggregators
        that act per attribute get the layout (`categories`), IBU each attribute's channel (p, q)."""
        check_channel(aggregators, oracles.name)
        layout = {"categories": tuple(int(k) for k in oracles.categories), "channel": oracles.channels or ()}
        super().__init__("frequency", clients, aggregators, **layout, **options)
        self.oracles = oracles
        if oracles.memoized and self.round_event is not None:  # eps_inf charged once per client
            self.ledger.declare_memoized(self.round_event, oracles.epsilon_1, oracles.guarantee)
        self.width, self.mechanism_name = oracles.entries, oracles.name
        self.outcome: FrequencyOutcome | None = None

    def estimate(self, pids: list[int], sums: ReportSums) -> FrequencyOutcome:
        if not pids:
            return FrequencyOutcome(self.oracles, pids, sums, np.full(self.oracles.entries, np.nan), {})
        f_hat, results = estimate_frequencies(sums, self.oracles, self.aggregators, deviation=self.deviation)
        return FrequencyOutcome(self.oracles, pids, sums, f_hat, results)


# ---- from a federation's config (ldpfed simulate --task frequency) --------------------------
@functools.lru_cache(maxsize=4)
def _read(name: str, users: int, dims: int, categories: str, header: str, data_seed: int) -> CategoricalData:
    return read_categorical(
        name,
        users=users or None,
        attributes=dims or None,
        categories=categories or None,
        rng=np.random.default_rng(data_seed),
        header=HEADERS[header],
    )


def read(config: Config, data_seed: int) -> CategoricalData:
    """The users' categorical tuples: a synthetic set drawn from the data seed, fair, or a CSV
    (`ldpfed.data.categorical.read_categorical`, as `compare --task frequency` reads them)."""
    data = config.data
    return _read(config.data_name, data.users, data.dims, data.categories, data.header, data_seed)


def bound(config: Config, data_seed: int) -> Config:
    """`config` with `data.users` and `data.dims` (attributes) set to the data's shape, validated."""
    users, dims = read(config, data_seed).codes.shape
    if (config.data.users, config.data.dims) == (users, dims):
        return config
    return replace(config, data=replace(config.data, users=users, dims=dims)).validated()


@functools.lru_cache(maxsize=4)
def _oracles(
    name: str, epsilon: float, categories: tuple, m: int, delta: float | None, hash_seed: int | None = None
) -> AttributeOracles:
    return AttributeOracles.build(name, epsilon, list(categories), m, delta, hash_seed=hash_seed)


HASH_FUNCTIONS = 0x48415348  # the spawn key, under the data seed, of the sketches' public hash index


def public_hash_seed(data_seed: int) -> int:
    """A collection's public hash index (hcms, cms: the seed of their public hash functions), fresh
    per run: drawn from the run's data seed, which clients and server both hold, so both build the
    same hash functions; it is public, and the clients' noise derives from their secrets, never from
    it or the data seed, so knowing it lets the server redraw no client's noise."""
    words = np.random.SeedSequence(data_seed, spawn_key=(HASH_FUNCTIONS,)).generate_state(2, dtype=np.uint32)
    return int(words[0]) | int(words[1]) << 32


def oracles_from_config(config: Config, data_seed: int) -> AttributeOracles:
    """Every user's per-attribute oracles (eps/m each; `report-dims` 0 = all attributes), the
    sketches with the run's public hash index (`public_hash_seed`)."""
    data = read(config, data_seed)
    m = config.privacy.report_dims or data.attributes
    return _oracles(
        config.privacy.mechanism,
        config.privacy.epsilon,
        tuple(data.categories.tolist()),
        m,
        config.delta_or_none,
        public_hash_seed(data_seed),
    )


def check_mechanism(config: Config) -> None:
    """Build every user's oracles at eps from the data's shape where it is known before any data
    are drawn (a synthetic set: attributes from `data.dims`, counts from `data.categories`), so a
    bad budget fails first; fair or a file: once read (`oracles_from_config`)."""
    data = config.data
    shape = synthetic_shape(config.data_name, data.dims or None, data.categories or None)
    if shape is not None:
        attributes, counts = shape
        m = config.privacy.report_dims or attributes
        _oracles(config.privacy.mechanism, config.privacy.epsilon, tuple(counts.tolist()), m, config.delta_or_none)


def client_from_config(config: Config, partition_id: int, data_seed: int, secret: int) -> FrequencyClient:
    rows = cohort(config.data.users, config.federation.clients, partition_id)
    return FrequencyClient(
        read(config, data_seed).codes[rows],
        oracles_from_config(config, data_seed),
        secret,
        fail=partition_id in config.failing_partitions,
    )


def server_from_config(config: Config, data_seed: int) -> FrequencyServer:
    """The server half; it knows the data's layout (attributes and categories), not the data."""
    aggregators = list(dict.fromkeys([config.aggregation.aggregator, "mean"]))
    event = round_event(config, config.privacy.epsilon, config.delta_or_none)
    return FrequencyServer(
        oracles_from_config(config, data_seed),
        config.federation.clients,
        aggregators,
        alpha=config.aggregation.alpha,
        round_event=event,
        budget=config.budget,
    )

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
from ldpfed.mechanisms.multidim import ReportSums, mean_estimate, per_value_mechanism, perturb_tuples, summarize
from ldpfed.protocols import seeds
from ldpfed.protocols.base import BudgetedServer, ClientReply, InjectedFailure, RoundPlan
from ldpfed.protocols.privacy import round_event
from ldpfed.validation import LDPValueError, out_of_domain_policy, parse_domain

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


def sums_of(reply: ClientReply) -> ReportSums:
    return ReportSums(*(reply.arrays[name] for name in SUMS), int(reply.metrics["users"]))


def total_sums(replies: dict[int, ClientReply], sums: dict[int, dict] | None, dims: int) -> ReportSums:
    """The replying clients' report sums added up: from their replies, or (node-reply sum) from the
    nodes' pre-added sums, in the order of their keys, and the clients' user counts."""
    pids = sorted(replies)
    if not sums:
        return sum((sums_of(replies[pid]) for pid in pids), ReportSums.zeros(dims))
    total = ReportSums.zeros(dims)
    for key in sorted(sums):
        total = total + ReportSums(*(sums[key][name] for name in SUMS), 0)
    return ReportSums(total.count, total.total, total.total_sq, sum(int(replies[pid].metrics["users"]) for pid in pids))


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
        return RoundPlan(self.admit(range(self.clients)), {})

    def aggregate(self, server_round: int, replies: dict, failures: dict[int, str], sums: dict | None = None) -> dict:
        """`sums`: the nodes' pre-added report sums (node-reply sum; `total_sums`)."""
        pids = sorted(replies)
        sums = total_sums(replies, sums, self.width)
        self.outcome = self.estimate(pids, sums)
        self.charge(server_round, pids, self.mechanism_name)
        return {**self.round_record(replies, failures), "users_reported": int(sums.users)}

    def estimate(self, pids: list[int], sums: ReportSums):
        """The round's outcome from the summed reports of the clients `pids` (none: NaN estimates)."""
        raise NotImplementedError

    def evaluate(self, server_round: int) -> dict:
        return {}


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

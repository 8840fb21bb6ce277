"""Tuple collection under the shuffle trust model (spec: trust-models.md; ldpfed.accounting.trust).

Every user randomizes her tuple exactly as under the local model (ldpfed.protocols.mean: all d
dimensions, eps0 = eps per report). The clients hand their users' reports to the `Shuffler`, a
trusted party outside the server, which pools them and permutes them with its own OS entropy;
the server half receives a `ShuffledBatch`: the reports as a multiset, without client ids or order.
The server estimates the mean from the batch's column sums (post-processing of the multiset).
A round of n reports costs every client whose users reported the shuffled (eps, delta)
(ldpfed.accounting.shuffle) against the server, and eps0 against the shuffler.

With a per-client budget (`--max-epsilon`), the shuffler's side admits the clients of a round
(`ShuffleRound.admit`): the round's guarantee depends on the number of reports n, so the clients
that can afford the round at n are admitted, n is recounted over them and the check repeated until
it holds for every admitted client; a round whose admitted reports fall below the bound's minimum
n has no participants (its guarantee is undefined there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ldpfed.accounting import PrivacyLedger, pure_round
from ldpfed.accounting.shuffle import ShuffledGuarantee, minimum_reports, shuffled_epsilon
from ldpfed.accounting.trust import shuffle_round_delta
from ldpfed.config import Config
from ldpfed.mechanisms.multidim import ReportSums
from ldpfed.protocols import seeds
from ldpfed.protocols.mean import cohort, cohort_sizes, mechanism, tuples


@dataclass(frozen=True)
class ShuffledBatch:
    """What the server receives in a round: the reports, permuted, and nothing else."""

    reports: np.ndarray  # (n, d)


class Shuffler:
    """Pools the clients' reports and permutes them with its own randomness (OS entropy)."""

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()

    def shuffle(self, reports_by_client: dict[int, np.ndarray]) -> ShuffledBatch:
        return self.pool(reports_by_client[pid] for pid in sorted(reports_by_client))

    def pool(self, blocks: Iterable[np.ndarray]) -> ShuffledBatch:
        """One batch from blocks of reports (a client's, or a node's for several clients)."""
        pooled = np.concatenate(list(blocks))
        return ShuffledBatch(pooled[self.rng.permutation(len(pooled))])


def client_reports(config: Config, partition_id: int, data_seed: int, secret: int, server_round: int) -> np.ndarray:
    """The (users, d) reports of one client's users in one round, from its secret stream."""
    values = tuples(config, data_seed)[cohort(config.data.users, config.federation.clients, partition_id)]
    return mechanism(config).perturb(values, np.random.default_rng(seeds.stream(secret, seeds.NOISE, server_round)))


def cohort_size(config: Config, partition_id: int) -> int:
    return len(cohort(config.data.users, config.federation.clients, partition_id))


class ShuffleRound:
    """The per-client accounting of shuffled rounds, kept on the shuffler's side (it knows who
    reported): the ledgers against the server (the shuffled (eps, delta) per round) and against
    the shuffler (eps0 per round), and the run's budget."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.round_delta = shuffle_round_delta(config.delta_target, config.run.rounds)
        self.budget = config.budget
        self.ledger = PrivacyLedger()  # against the server: the shuffled (eps, delta) per round
        self.local_ledger = PrivacyLedger()  # against the shuffler: eps0 per round
        self.guarantees: list[dict] = []

    def guarantee(self, reports: int) -> ShuffledGuarantee:
        return shuffled_epsilon(self.config.privacy.epsilon, reports, self.round_delta)

    def admit(self, partitions: list[int]) -> tuple[list[int], list[int]]:
        """(clients taking part, clients stopped by the budget or by too few reports left)."""
        admitted = list(partitions)
        if self.budget is None:
            return admitted, []
        needed = minimum_reports(self.config.privacy.epsilon, self.round_delta)
        while admitted:
            reports = int(cohort_sizes(self.config.data.users, self.config.federation.clients, admitted).sum())
            if reports < needed:
                admitted = []
                break
            event = self.guarantee(reports).event()
            kept, _ = self.budget.admit(self.ledger, admitted, event)
            if kept == admitted:
                break
            admitted = kept
        taking_part = set(admitted)
        return admitted, [pid for pid in partitions if pid not in taking_part]

    def record(self, server_round: int, participants: list[int], reports: int) -> dict:
        guarantee = self.guarantee(reports)
        pids = np.asarray(participants, dtype=np.int64)
        self.ledger.record_round(pids, server_round, guarantee.event(), f"shuffled {self.config.privacy.mechanism}")
        self.local_ledger.record_round(pids, server_round, pure_round(self.config.privacy.epsilon))
        self.guarantees.append(guarantee.to_dict())
        return guarantee.to_dict()


class ShuffledMeanServer:
    """The server half: sees only shuffled batches, never who reported."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.mechanism = mechanism(config)

    def aggregate(self, server_round: int, batch: ShuffledBatch) -> np.ndarray:
        """theta_hat, the plain mean of the batch's reports (the reports are unbiased)."""
        reports = batch.reports
        sums = ReportSums(
            np.full(reports.shape[1], float(len(reports))), reports.sum(axis=0), (reports**2).sum(axis=0), len(reports)
        )
        return sums.total / np.maximum(sums.count, 1.0)

"""Tuple collection under the shuffle trust model (spec: trust-models.md; ldpfed.accounting.trust).

Every user randomizes her tuple exactly as under the local model (ldpfed.protocols.mean: all d
dimensions, eps0 = eps per report). The clients hand their users' reports to the `Shuffler`, a
trusted party outside the server, which pools them and permutes them with its own OS entropy;
the server half receives a `ShuffledBatch`: the reports as a multiset, without client ids or order.
The server estimates the mean from the batch's column sums (post-processing of the multiset).
A round of n reports costs every client whose users reported the shuffled (eps, delta)
(ldpfed.accounting.shuffle) against the server, and eps0 against the shuffler.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.accounting import PrivacyLedger, pure_round
from ldpfed.accounting.shuffle import shuffled_epsilon
from ldpfed.accounting.trust import shuffle_round_delta
from ldpfed.config import Config
from ldpfed.mechanisms.multidim import ReportSums
from ldpfed.protocols import seeds
from ldpfed.protocols.mean import cohort, mechanism, tuples


@dataclass(frozen=True)
class ShuffledBatch:
    """What the server receives in a round: the reports, permuted, and nothing else."""

    reports: np.ndarray  # (n, d)


class Shuffler:
    """Pools the clients' reports and permutes them with its own randomness (OS entropy)."""

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()

    def shuffle(self, reports_by_client: dict[int, np.ndarray]) -> ShuffledBatch:
        pooled = np.concatenate([reports_by_client[pid] for pid in sorted(reports_by_client)])
        return ShuffledBatch(pooled[self.rng.permutation(len(pooled))])


def client_reports(config: Config, partition_id: int, data_seed: int, secret: int, server_round: int) -> np.ndarray:
    """The (users, d) reports of one client's users in one round, from its secret stream."""
    values = tuples(config, data_seed)[cohort(config.data.users, config.federation.clients, partition_id)]
    return mechanism(config).perturb(values, np.random.default_rng(seeds.stream(secret, seeds.NOISE, server_round)))


class ShuffledMeanServer:
    """The server half: sees only shuffled batches; the ledgers are the harness's record."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.mechanism = mechanism(config)
        self.round_delta = shuffle_round_delta(config.delta_target, config.run.rounds)
        self.ledger = PrivacyLedger()  # against the server: the shuffled (eps, delta) per round
        self.local_ledger = PrivacyLedger()  # against the shuffler: eps0 per round
        self.guarantees: list[dict] = []

    def aggregate(self, server_round: int, batch: ShuffledBatch) -> np.ndarray:
        """theta_hat from the batch (bias-corrected by the mechanism where it is biased)."""
        reports = batch.reports
        sums = ReportSums(
            np.full(reports.shape[1], float(len(reports))), reports.sum(axis=0), (reports**2).sum(axis=0), len(reports)
        )
        return sums.total / np.maximum(sums.count, 1.0)

    def record(self, server_round: int, participants: list[int], reports: int) -> dict:
        guarantee = shuffled_epsilon(self.config.privacy.epsilon, reports, self.round_delta)
        for pid in participants:
            self.ledger.record_event(pid, server_round, guarantee.event(), f"shuffled {self.config.privacy.mechanism}")
            self.local_ledger.record_event(pid, server_round, pure_round(self.config.privacy.epsilon))
        self.guarantees.append(guarantee.to_dict())
        return guarantee.to_dict()

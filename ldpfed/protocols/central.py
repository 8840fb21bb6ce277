"""Federated training under the central trust model (spec: trust-models.md, Central DP in a
federation; ldpfed.accounting.trust). No local randomizer: a sampled client trains E local SGD steps from
the global model and returns its clean local model; the server (trusted) clips each update to
L2 norm C and adds Gaussian noise to the aggregate through Flower's DP strategy wrappers
(server/central.py), which ldpfed does not re-implement.

Clients are Poisson-sampled at rate q = `federation.fraction` from the server's seed, and the
aggregate is the sum of the clipped updates over the expected count q N (the fixed-denominator
estimator of DP-FedAvg), so that Flower's noise z C / (q N) on it is z times its sensitivity.
The noise multiplier z is calibrated so that T rounds meet the run's budget (`--max-epsilon`,
`--max-delta`) under dp-accounting's RDP accountant; every client's ledger records
PoissonSampled(q, Gaussian(z)) in every round, sampled or not (the sampling is the trusted server's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.accounting import PrivacyLedger
from ldpfed.accounting.central import (
    NEIGHBOURING,
    adaptive_effective_multiplier,
    calibrate_noise_multiplier,
    central_epsilon,
)
from ldpfed.accounting.events import GaussianDpEvent, PoissonSampledDpEvent
from ldpfed.accounting.trust import get
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.train import federated_data, new_model
from ldpfed.training.local import evaluate, single_thread, train_local
from ldpfed.training.parameters import get_weights, set_weights


@dataclass(frozen=True)
class CentralPlan:
    """The noise of a central run: calibrated multiplier z (the effective one with adaptive
    clipping), clip C, sampling rate q, expected clients per round q N, and the budget."""

    noise_multiplier: float
    clip: float
    sample_rate: float
    expected_clients: float
    rounds: int
    epsilon: float
    delta: float
    clipping: str
    side: str

    def event(self):
        return PoissonSampledDpEvent(self.sample_rate, GaussianDpEvent(self.noise_multiplier))

    def record(self, accounted_multiplier: float | None = None, applied_multiplier: float | None = None) -> dict:
        """`accounted_multiplier`: the round's multiplier as accounted (adaptive clipping: the
        effective one, count noise included); `applied_multiplier`: the one Flower's wrapper scales
        its update noise with (adaptive: larger than the effective one), default the accounted one.
        The sum's noise is N(0, (applied C)^2) per coordinate (Flower's `compute_stdv` times q N),
        at the initial clip C under adaptive clipping, which then moves."""
        z = self.noise_multiplier if accounted_multiplier is None else accounted_multiplier
        applied = z if applied_multiplier is None else applied_multiplier
        return {
            "noise_multiplier": z,
            "clip": self.clip,
            "noise_stddev_of_sum": applied * self.clip,
            "sample_rate": self.sample_rate,
            "expected_clients": self.expected_clients,
            "clipping": f"{self.clipping} ({self.side}-side)",
            "accountant": "rdp (dp-accounting RdpAccountant)",
            "neighbouring": NEIGHBOURING,
            "central_epsilon": central_epsilon(self.sample_rate, z, self.rounds, self.delta),
            "central_delta": self.delta,
            "budget_epsilon": self.epsilon,
        }


def central_plan(config: Config) -> CentralPlan:
    """z calibrated to (max-epsilon, max-delta or 1e-5) over the run's rounds at q = fraction."""
    get("central", config.run.task)
    q = config.federation.fraction
    z = calibrate_noise_multiplier(config.privacy.max_epsilon, config.delta_target, q, config.run.rounds)
    return CentralPlan(
        z,
        config.training.clip,
        q,
        q * config.federation.clients,
        config.run.rounds,
        config.privacy.max_epsilon,
        config.delta_target,
        config.privacy.clipping,
        config.privacy.clipping_side,
    )


class CentralClient:
    """One client: E local SGD steps from the broadcast model, minibatches from its secret."""

    def __init__(self, config: Config, partition_id: int, data_seed: int, secret: int) -> None:
        self.config, self.secret = config, secret
        self.x, self.y = federated_data(config, data_seed).client(partition_id)
        self.model = new_model(config, data_seed)

    def train(self, weights: list[np.ndarray], server_round: int) -> tuple[list[np.ndarray], int]:
        set_weights(self.model, weights)
        training = self.config.training
        with single_thread():
            train_local(
                self.model,
                self.x,
                self.y,
                steps=training.local_steps,
                lr=training.lr,
                batch_size=training.batch_size,
                seed=seeds.torch_seed(self.secret, seeds.MINIBATCHES, server_round),
            )
        return get_weights(self.model), int(len(self.y))


class CentralServer:
    """The server's own work: Poisson sampling, the fixed-denominator mean, evaluation, the ledger."""

    def __init__(self, config: Config, data_seed: int, server_seed: int, plan: CentralPlan) -> None:
        self.config, self.server_seed, self.plan = config, server_seed, plan
        self.data = federated_data(config, data_seed)
        self.model = new_model(config, data_seed, seeds.torch_seed(server_seed, seeds.MODEL_INIT))
        self.weights = get_weights(self.model)
        self.ledger = PrivacyLedger()

    def sample(self, server_round: int) -> list[int]:
        """Each client independently with probability q (Poisson sampling), from the server's seed."""
        clients = self.config.federation.clients
        if self.plan.sample_rate >= 1.0:
            return list(range(clients))
        chosen = seeds.rng(self.server_seed, seeds.SAMPLING, server_round).random(clients) < self.plan.sample_rate
        return [int(pid) for pid in np.flatnonzero(chosen)]

    def mean(self, current: list[np.ndarray], models: list[list[np.ndarray]]) -> list[np.ndarray]:
        """current + (sum of the clipped updates) / (q N)."""
        return [
            base + sum((model[i] - base for model in models), np.zeros_like(base)) / self.plan.expected_clients
            for i, base in enumerate(current)
        ]

    def record_round(self, server_round: int, accounted_multiplier: float) -> None:
        event = PoissonSampledDpEvent(self.plan.sample_rate, GaussianDpEvent(accounted_multiplier))
        for pid in range(self.config.federation.clients):
            self.ledger.record_event(pid, server_round, event, "central gaussian")

    def evaluate(self, weights: list[np.ndarray]) -> dict:
        self.weights = weights
        set_weights(self.model, weights)
        loss, accuracy = evaluate(self.model, *self.data.test)
        return {"loss": float(loss), "accuracy": float(accuracy)}


def accounted_multiplier(wrapper_multiplier: float, count_stddev: float | None) -> float:
    """The multiplier a round is accounted with: Flower's update multiplier, combined with the
    clipped-count noise under adaptive clipping."""
    if count_stddev is None:
        return wrapper_multiplier
    return adaptive_effective_multiplier(wrapper_multiplier, count_stddev)

"""Federated training under the central trust model (spec: trust-models.md, Central DP in a
federation; ldpfed.accounting.central). No local randomizer: a sampled client trains E local SGD
steps from the global model and returns its clean local model; the trusted server clips each
update to L2 norm C, sums them and adds noise to the sum (`CentralNoise`), inside Flower's DP
strategy wrappers as ldpfed corrects them (server/central.py).

Clients are Poisson-sampled at rate q = `federation.fraction` from the server's noise secret (a
sampling the analyst could re-draw from the public run seed would void the amplification), and the
aggregate is the noisy sum of the clipped updates over the expected count q N (the
fixed-denominator estimator of DP-FedAvg). The noise multiplier z is calibrated so that T rounds
meet the run's budget (`--max-epsilon`, `--max-delta`) under ldpfed's rdp accountant; every
client's ledger records the round's sampled event in every round, sampled or not (the sampling
is the trusted server's).

The noise is ldpfed's floating-point-safe Gaussian (ldpfed.gradient_noise.inid_gaussian, safe
sampler): the sum / C is rounded to a grid of J >= 2^10 sqrt(d) steps per unit and discrete
Gaussian noise is added, drawn from the server's noise secret (a child of the run's noise root:
OS entropy, or `--noise-seed`), never from a global generator. Its standard deviation on the sum
is z C (1 + 2^-40 + sqrt(d) / J): the grid's rounding inflates the sensitivity by that factor, so
the noise is inflated with it and the round is accounted at z.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ldpfed.accounting import PrivacyLedger
from ldpfed.accounting.central import (
    ACCOUNTANT,
    NEIGHBOURING,
    Z_LIMIT,
    adaptive_effective_multiplier,
    adaptive_update_multiplier,
    calibrate_noise_multiplier,
    central_epsilon,
)
from ldpfed.accounting.events import DiscreteGaussianVectorDpEvent
from ldpfed.accounting.trust import get
from ldpfed.config import Config
from ldpfed.gradient_noise.inid_gaussian import InidGaussian
from ldpfed.protocols import canaries, seeds
from ldpfed.protocols.train import federated_data, new_model
from ldpfed.samplers.safe_grid import gaussian_integers, gaussian_sampler_slack
from ldpfed.training.local import evaluate, single_thread, train_local
from ldpfed.training.parameters import get_weights, set_weights

COUNT_STDDEV_PER_CLIENT = 1.0 / 20.0  # sigma_b = expected clients / 20 (Andrew et al.; Flower's default)
TARGET_UNCLIPPED_QUANTILE = 0.5  # gamma: the clip moves toward the median update norm
CLIP_LEARNING_RATE = 0.2  # eta of C <- C exp(-eta (b - gamma)) (Andrew et al.; Flower's default)


class CentralNoise:
    """The trusted server's noise for one round, floating-point safe (module docstring).

    `release_sum(total, clip, rng)`: the sum of the clipped updates (norm <= clip each) with noise of
    standard deviation `stddev_of_sum(clip)` per coordinate. With `count_stddev` (adaptive
    clipping), `noisy_unclipped_fraction` releases the centred count of unclipped updates as the
    integer 2 sum b - n (sensitivity 1) plus N_Z(0, (2 sigma_b)^2). `event(q)`: one round of both,
    Poisson-sampled at q, with the samplers' float slack."""

    def __init__(self, update_multiplier: float, dims: int, count_stddev: float | None = None) -> None:
        self.dims, self.count_stddev = int(dims), count_stddev
        if count_stddev is not None:  # the integer count on a grid of J_b steps: N_Z(0, (2 sigma_b J_b)^2), >= 16 steps
            self.count_steps = 2 ** max(0, math.ceil(math.log2(16.0 / (2.0 * count_stddev))))
        # L2 sensitivity 1 (the sum / clip): a uniform profile D_i = 1 / sqrt(d), safe sampler
        self.update = InidGaussian(np.full(self.dims, 1.0 / math.sqrt(self.dims)), noise_multiplier=update_multiplier)

    @property
    def update_multiplier(self) -> float:
        return self.update.noise_multiplier

    @property
    def multiplier(self) -> float:
        """The round's effective noise multiplier (the one accounted)."""
        if self.count_stddev is None:
            return self.update_multiplier
        return adaptive_effective_multiplier(self.update_multiplier, self.count_stddev)

    @cached_property
    def slack(self):
        """The samplers' float slack over one round's draws (d coordinates, and the count)."""
        slack = self.update.sampler_slack
        if self.count_stddev is not None:
            steps = self.count_steps
            slack = slack + gaussian_sampler_slack(2.0 * self.count_stddev * steps, 1, float(steps))
        return slack

    def event(self, sample_rate: float) -> DiscreteGaussianVectorDpEvent:
        slack = self.slack
        return DiscreteGaussianVectorDpEvent(self.multiplier, slack.over, slack.under, slack.mass, sample_rate)

    def stddev_of_sum(self, clip: float) -> float:
        """Standard deviation of the noise on each coordinate of the sum at clip C."""
        return float(self.update.scales[0]) * clip

    def release_sum(self, total: np.ndarray, clip: float, rng: np.random.Generator) -> np.ndarray:
        return self.update.perturb(np.asarray(total, dtype=float) / clip, rng) * clip

    def noisy_unclipped_fraction(self, unclipped: int, replied: int, expected: float, rng) -> float:
        """b = (sum (b_i - 1/2) + noise) / (q N) + 1/2: the centred count 2 sum b_i - n (an integer,
        sensitivity 1) times J_b plus N_Z(0, (2 sigma_b J_b)^2), an integer, over 2 J_b."""
        steps = self.count_steps
        noise = gaussian_integers(2.0 * self.count_stddev * steps, (1, 1), rng)[0, 0]
        return float(((2 * unclipped - replied) * steps + noise) / (2.0 * steps) / expected + 0.5)


def clip_updates(updates: np.ndarray, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """Each row scaled to L2 norm at most `clip` (float64); and whether it was within the clip (not clipped)."""
    updates = np.asarray(updates, dtype=np.float64)
    norms = np.linalg.norm(updates, axis=1)
    within = norms <= clip
    factors = np.where(within, 1.0, clip / np.where(within, 1.0, norms))
    clipped = updates * factors[:, None]
    # the float product may land a few ulps above the clip: scale those rows down until it holds
    over = np.linalg.norm(clipped, axis=1) > clip
    while over.any():
        clipped[over] *= 1.0 - 2.0**-50
        over = np.linalg.norm(clipped, axis=1) > clip
    return clipped, within


@dataclass(frozen=True)
class CentralPlan:
    """The noise of a central run: calibrated effective multiplier z, its update part z_u and count
    noise sigma_b (adaptive clipping), initial clip C, sampling rate q, expected clients per round
    q N, the budget and the model's size d."""

    noise_multiplier: float
    update_multiplier: float
    count_stddev: float | None
    clip: float
    sample_rate: float
    expected_clients: float
    rounds: int
    epsilon: float
    delta: float
    clipping: str
    side: str
    dims: int
    noise: CentralNoise = field(repr=False, compare=False, default=None)

    def event(self):
        return self.noise.event(self.sample_rate)

    def record(self) -> dict:
        """The summary's central figures; the per-round clip and noise are metrics.csv's columns
        `clip` and `noise_stddev_of_sum`."""
        return {
            "noise_multiplier": self.noise_multiplier,
            "update_noise_multiplier": self.update_multiplier,
            "clipped_count_stddev": self.count_stddev,
            "initial_clip": self.clip,
            "noise_stddev_of_sum_per_unit_clip": self.noise.stddev_of_sum(1.0),
            "noise_sampler": self.noise.update.sampler_description,
            "sample_rate": self.sample_rate,
            "expected_clients": self.expected_clients,
            "clipping": f"{self.clipping} ({self.side}-side)",
            "accountant": f"{ACCOUNTANT} (dp-accounting's sampled Gaussian at integer orders, plus float slack)",
            "neighbouring": NEIGHBOURING,
            "central_epsilon": central_epsilon(self.event(), self.rounds, self.delta),
            "central_delta": self.delta,
            "budget_epsilon": self.epsilon,
        }


def central_plan(config: Config, dims: int) -> CentralPlan:
    """z calibrated to (max-epsilon, max-delta or 1e-5) over the run's rounds at q = fraction, for a
    model of `dims` parameters (the float slack grows with d)."""
    get("central", config.run.task)
    q = config.federation.fraction
    expected = q * config.federation.clients
    count_stddev = expected * COUNT_STDDEV_PER_CLIENT if config.privacy.clipping == "adaptive" else None

    def noise_for(z: float) -> CentralNoise:
        update = z if count_stddev is None else adaptive_update_multiplier(z, count_stddev)
        return CentralNoise(update, dims, count_stddev)

    limit = Z_LIMIT if count_stddev is None else 2.0 * count_stddev  # the count noise alone gives z < 2 sigma_b
    beyond = (
        ""
        if count_stddev is None
        else f" (adaptive clipping: the count noise, stddev {count_stddev:g}, caps the multiplier; sample more "
        "clients per round or use --clipping fixed)"
    )
    z = calibrate_noise_multiplier(
        config.privacy.max_epsilon,
        config.delta_target,
        config.run.rounds,
        lambda z: noise_for(z).event(q),
        limit,
        beyond,
    )
    noise = noise_for(z)
    return CentralPlan(
        noise.multiplier,
        noise.update_multiplier,
        count_stddev,
        config.training.clip,
        q,
        expected,
        config.run.rounds,
        config.privacy.max_epsilon,
        config.delta_target,
        config.privacy.clipping,
        config.privacy.clipping_side,
        dims,
        noise,
    )


class CentralClient:
    """One client: E local SGD steps from the broadcast model, minibatches from its secret. A canary
    (ldpfed.protocols.canaries) trains nothing: its model is the broadcast one plus its design's
    update (a zero update when its coin left it out: the release is then as without it)."""

    def __init__(self, config: Config, partition_id: int, data_seed: int, secret: int) -> None:
        self.config, self.secret, self.partition_id = config, secret, partition_id
        data = federated_data(config, data_seed)
        self.design = None
        if partition_id >= canaries.real_clients(config):
            self.design = canaries.CanaryDesign.of(config, secret.design)
            self.count = canaries.canary_count(secret, data.client_sizes)
            return
        self.x, self.y = data.client(partition_id)
        self.model = new_model(config, data_seed)

    def train(self, weights: list[np.ndarray], server_round: int) -> tuple[list[np.ndarray], int]:
        if self.design is not None:
            return self.canary_model(weights), self.count
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

    def canary_model(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        flat = np.concatenate([w.ravel() for w in weights]).astype(np.float64)
        flat = flat + self.design.updates([self.partition_id], flat.size, self.config.training.clip, 0.0)[0]
        splits = np.cumsum([w.size for w in weights])[:-1]
        return [part.reshape(w.shape).astype(w.dtype) for part, w in zip(np.split(flat, splits), weights)]


class CentralServer:
    """The trusted server's own work: Poisson sampling and the noisy sum of the clipped updates over
    q N, both from `noise_secret` (which the analyst never sees), evaluation (the model's
    initialisation from the public server seed) and the ledger."""

    def __init__(self, config: Config, data_seed: int, server_seed: int, noise_secret: int) -> None:
        self.config, self.server_seed, self.noise_secret = config, server_seed, noise_secret
        self.data = federated_data(config, data_seed)
        self.model = new_model(config, data_seed, seeds.torch_seed(server_seed, seeds.MODEL_INIT))
        self.weights = get_weights(self.model)
        self.plan = central_plan(config, int(sum(w.size for w in self.weights)))
        self.ledger = PrivacyLedger()
        self.rounds: list[dict] = []  # per round: the clip that clipped and the noise on the sum

    def sample(self, server_round: int) -> list[int]:
        """Each client independently with probability q (Poisson sampling), from the server's noise
        secret: the amplification by sampling holds only against a party that cannot re-draw who was
        sampled, and the run seed (public, enumerable) would let the analyst do just that."""
        clients = self.config.federation.clients
        if self.plan.sample_rate >= 1.0:
            return list(range(clients))
        chosen = seeds.rng(self.noise_secret, seeds.SAMPLING, server_round).random(clients) < self.plan.sample_rate
        return [int(pid) for pid in np.flatnonzero(chosen)]

    def noise_rng(self, server_round: int) -> np.random.Generator:
        return seeds.rng(self.noise_secret, seeds.NOISE, server_round)

    def aggregate(self, server_round: int, current: list[np.ndarray], models: list[list[np.ndarray]], clip: float):
        """current + noisy(sum of the updates clipped at `clip`) / (q N); and the round's record
        (`clip`, `noise_stddev_of_sum`, the clients' unclipped bits). An empty round (nobody sampled
        or replied) still releases the noise: whether anyone took part is not revealed."""
        flat = np.concatenate([w.ravel() for w in current]).astype(np.float64)
        updates = np.array([np.concatenate([m.ravel() for m in model]) for model in models], dtype=np.float64)
        updates = updates.reshape(-1, flat.size)
        clipped, within = clip_updates(updates - flat, clip)
        rng = self.noise_rng(server_round)
        noisy = self.plan.noise.release_sum(clipped.sum(axis=0), clip, rng)
        record = {"clip": clip, "noise_stddev_of_sum": self.plan.noise.stddev_of_sum(clip)}
        if self.plan.count_stddev is not None:
            record["unclipped_fraction"] = self.plan.noise.noisy_unclipped_fraction(
                int(within.sum()), len(models), self.plan.expected_clients, rng
            )
        model = flat + noisy / self.plan.expected_clients
        splits = np.cumsum([w.size for w in current])[:-1]
        return [part.reshape(w.shape).astype(w.dtype) for part, w in zip(np.split(model, splits), current)], record

    def record_round(self, server_round: int, record: dict) -> None:
        """The round's ledger entries (every client: the sampling is the server's) and its record."""
        self.rounds.append({"round": server_round, **record})
        event = self.plan.event()
        for pid in range(self.config.federation.clients):
            self.ledger.record_event(pid, server_round, event, "central gaussian")

    def evaluate(self, weights: list[np.ndarray]) -> dict:
        self.weights = weights
        set_weights(self.model, weights)
        loss, accuracy = evaluate(self.model, *self.data.test)
        return {"loss": float(loss), "accuracy": float(accuracy)}

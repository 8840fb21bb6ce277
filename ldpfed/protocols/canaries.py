"""Canary clients: the empirical privacy audit inside a federated training run (spec:
trust-models.md, Auditing a federated run; Andrew, Kairouz, Oh, Oprea, McMahan & Suriyakumar, ICLR
2024; Steinke, Nasr & Jagielski, NeurIPS 2023; ldpfed.audit.in_run).

`--canaries M` adds M clients to the N real ones: partition ids N .. N+M-1, clients of the
federation like any other (the server samples them through the same path, the ledger charges
them, `clients` in the halves' config counts them: `expanded`). A canary holds no data: its
update is CANARY_SCALE x C x sqrt(d) along its unit direction, far beyond any clip, so that the
clip sets its norm, and it goes through the run's own clip and noise, its noise from its own secret
stream as every client's. Its secret coin (probability 1/2) says whether it is inserted. A canary
whose coin is 0 still replies, through the same privatizer, so the server sees the same number and
shape of replies: under local trust with the opposite direction -c (LDP protects any two inputs,
and +c against -c is the pair at the clip's diameter 2C that the privatizer is calibrated for; a
zero update would test distance C only, and even a run whose noise is halved would then stay within
its accounting), under central trust with a zero update (in the released sum of clipped updates
over the fixed denominator q N the same as not taking part: add/remove neighbours, the central
accountant's). Directions and coins derive from the canary design secret, a child of the run's
noise root (`seeds.canary_secret`), never from anything the server holds; the world hands it to
the nodes that host canaries inside their secrets (`CanarySecret`), and the record (ids, coins,
directions' seed) goes only to the run's local output (`canaries.json`, owner-only).

After the run, `canary_audit`'s verdict against the accounted eps of the party the audit speaks to:
- local trust (the server): the server sees every reply, so a canary's score is the cosine between
  its direction and the sum of its own privatized replies (`LocalAudit`); eps is that of two
  Gaussians fitted to the +c and the -c canaries' scores (`replacement_estimate`), with a lower
  confidence limit for one common std (`replacement_lower_limit`);
- central trust (the released model): the cosine between each direction and the final model delta
  (`ldpfed.audit.in_run.canary_audit`, black box).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from functools import cached_property

import numpy as np

from ldpfed.audit.canaries import (
    CosineEstimate,
    canary_cosines,
    canary_directions,
    epsilon_two_gaussians,
    inclusion_coins,
)
from ldpfed.audit.in_run import CanaryRecord, canary_audit
from ldpfed.audit.one_run import one_run_audit
from ldpfed.audit.verdict import AuditVerdict, audit_verdict
from ldpfed.config import Config, FederationConfig
from ldpfed.protocols import seeds
from ldpfed.validation import LDPValueError

CANARY_SCALE = 10.0  # update = CANARY_SCALE * C * sqrt(d) * direction: beyond an L2 clip C and a per-coordinate one
AUDIT_DELTA = 1e-5  # the estimate's delta when the accounting is pure (eps, 0): it implies (eps, 1e-5)
CONFIDENCE = 0.95
REPLACEMENT = "each client's replies, +c against -c"  # the local audit's threat model (its estimate's label)
RECORD = "canaries.json"  # the canaries' ids, coins and directions' seed, in the run's local output


# ---- who is a canary: the federation's clients -----------------------------------------------
@dataclass(frozen=True)
class AuditedFederation(FederationConfig):
    """[federation] as the halves of a run with canaries get it: `clients` counts the canaries too,
    `real_clients` the clients with data (partition ids 0 .. real_clients-1)."""

    real_clients: int = 0


def expanded(config: Config) -> Config:
    """The federation's config: the canaries counted in `clients` (unchanged without canaries, or
    when already expanded)."""
    canaries = config.training.canaries
    if canaries == 0 or isinstance(config.federation, AuditedFederation):
        return config
    federation = config.federation
    values = {**asdict(federation), "clients": federation.clients + canaries}
    return replace(config, federation=AuditedFederation(**values, real_clients=federation.clients))


def user_config(config: Config) -> Config:
    """The config as the user gave it (`clients`: the real clients), e.g. for config.toml."""
    federation = config.federation
    if not isinstance(federation, AuditedFederation):
        return config
    values = {field.name: getattr(federation, field.name) for field in fields(FederationConfig)}
    return replace(config, federation=FederationConfig(**{**values, "clients": federation.real_clients}))


WORLD_ONLY = (
    "--canaries runs under `ldpfed simulate` only (either engine): its harness plays the world, which holds "
    "the canary design secret (the canaries' directions and secret coins) and hosts the canary clients. A "
    "deployment (`flwr run`) has no such party: its nodes draw their own secrets and its server must never "
    "hold the coins, so no node could host a canary and nothing could score one; set training.canaries = 0"
)


def check_world(config: Config) -> None:
    """A half of a run with canaries must come from a harness that played the world: its config is
    the federation's (`expanded`). A config with canaries that is not (a deployment's run config,
    read by the ServerApp and the ClientApps of `flwr run`) is refused with `WORLD_ONLY`."""
    if config.training.canaries and not isinstance(config.federation, AuditedFederation):
        raise LDPValueError(WORLD_ONLY)


def real_clients(config: Config) -> int:
    """The clients that hold data (the partition of the data is over these)."""
    federation = config.federation
    return federation.real_clients if isinstance(federation, AuditedFederation) else federation.clients


def canary_ids(config: Config) -> list[int]:
    first = real_clients(config)
    return list(range(first, first + config.training.canaries))


def counts(config: Config) -> dict:
    """The summary's count of the federation's clients."""
    return {"real_clients": real_clients(config), "canary_clients": config.training.canaries}


# ---- the design: directions and coins from the canary secret -----------------------------------
@dataclass(frozen=True)
class CanarySecret:
    """What the world hands the node hosting a canary: its own noise secret (as any client's) and
    the run's canary design secret (its direction and coin). Never sent, never the server's."""

    noise: int
    design: int


def noise_secret(secret) -> int:
    """A client's noise secret (a canary's `CanarySecret.noise`)."""
    return secret.noise if isinstance(secret, CanarySecret) else secret


@dataclass(frozen=True)
class CanaryDesign:
    """The run's M canaries (ids first .. first+M-1): directions and secret inclusion coins."""

    secret: int
    first: int
    count: int

    @classmethod
    def of(cls, config: Config, secret: int) -> CanaryDesign:
        return cls(secret, real_clients(config), config.training.canaries)

    @property
    def ids(self) -> list[int]:
        return list(range(self.first, self.first + self.count))

    @cached_property
    def coins(self) -> np.ndarray:
        return inclusion_coins(seeds.rng(self.secret, seeds.COINS), self.count)

    def root(self) -> np.random.SeedSequence:
        return seeds.stream(self.secret, seeds.DIRECTIONS)

    def record(self, dims: int) -> CanaryRecord:
        return CanaryRecord.create(self.root(), self.ids, self.coins, dims)

    def updates(self, pids, dims: int, clip: float, left_out: float) -> np.ndarray:
        """The canaries' updates (len(pids), d): CANARY_SCALE C sqrt(d) times the unit direction
        where the coin is 1, times `left_out` (0: no update; -1: the opposite direction) where it is 0."""
        pids = np.asarray(pids, dtype=np.int64)
        directions = canary_directions(self.root(), pids, dims)
        signs = np.where(self.coins[pids - self.first], 1.0, left_out)
        return directions * (CANARY_SCALE * clip * np.sqrt(dims) * signs)[:, None]


def canary_count(secret: CanarySecret, sizes) -> int:
    """A canary's public count n_k: a real client's, drawn from the canary's own stream, so that the
    counts the server sees are distributed as the real clients' are."""
    sizes = np.asarray(sizes)
    return int(sizes[seeds.rng(secret.noise, seeds.CANARY_COUNT).integers(sizes.size)])


def world_secrets(config: Config, secrets: dict[int, int], noise_root: int) -> dict:
    """The clients' secrets with each canary's wrapped in a `CanarySecret` (the design's secret from
    the noise root)."""
    design = seeds.canary_secret(noise_root)
    ids = set(canary_ids(config))
    return {pid: CanarySecret(secret, design) if pid in ids else secret for pid, secret in secrets.items()}


# ---- the verdict -----------------------------------------------------------------------------
def audit_delta(delta: float | None) -> float:
    return delta if delta else AUDIT_DELTA


def _pooled(cosines: np.ndarray, coins: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(+c scores, -c scores, their pooled std (ddof 2)): both sides carry the same noise."""
    seen, unseen = cosines[coins], cosines[~coins]
    squares = np.sum((seen - seen.mean()) ** 2) + np.sum((unseen - unseen.mean()) ** 2)
    return seen, unseen, math.sqrt(squares / (seen.size + unseen.size - 2))


def replacement_estimate(cosines: np.ndarray, coins: np.ndarray, dims: int, delta: float) -> CosineEstimate:
    """eps of two Gaussians of one (pooled) std fitted to the +direction canaries' cosines and to
    the -direction ones' (under local trust a left-out canary sends -c: the pair is a replacement,
    LDP's own; the same noise on both sides, so one std: two separately fitted stds would put the
    estimate's eps in the tails of their small difference)."""
    seen, unseen, std = _pooled(cosines, coins)
    mean1, mean0 = float(np.mean(seen)), float(np.mean(unseen))
    epsilon = math.inf if std == 0.0 else epsilon_two_gaussians(mean0, std, mean1, std, delta)
    return CosineEstimate(epsilon, delta, REPLACEMENT, mean1, std, mean0, std, int(seen.size), int(unseen.size), dims)


def replacement_lower_limit(cosines: np.ndarray, coins: np.ndarray, delta: float, confidence: float) -> float:
    """Lower confidence limit of `replacement_estimate`: the Gaussian mechanism's eps at mu = (lower
    t-limit of the mean gap) / (upper chi-square limit of the pooled std), the level split evenly
    between the two."""
    from scipy.stats import chi2, t  # here: a run without canaries does not load scipy.stats (~0.6 s)

    alpha = 1.0 - confidence
    seen, unseen, pooled = _pooled(cosines, coins)
    freedom = seen.size + unseen.size - 2
    if pooled == 0.0:
        return math.inf
    spread = pooled * math.sqrt(1.0 / seen.size + 1.0 / unseen.size)
    gap = float(seen.mean() - unseen.mean()) - t.ppf(1.0 - alpha / 2.0, freedom) * spread
    if gap <= 0.0:
        return 0.0
    std_high = pooled * math.sqrt(freedom / chi2.ppf(alpha / 2.0, freedom))
    return epsilon_two_gaussians(0.0, std_high, gap, std_high, delta)


def replacement_verdict(
    accounted: float,
    cosines: np.ndarray,
    coins: np.ndarray,
    dims: int,
    delta: float,
    confidence: float = CONFIDENCE,
    not_gaussian: str | None = None,
) -> AuditVerdict:
    """The verdict from each canary's own score: the one-run bound and the estimate's lower limit,
    each at half the level (as `canary_audit` splits it). `not_gaussian`: the name of a noise that
    is not Gaussian; the estimate's fit of two Gaussians then models neither its law nor its tails
    (a Laplace sum's privacy loss is bounded, a Gaussian's is not: the fit overstates its eps at a
    small delta), so the estimate is shown with that note and no lower limit, and only the one-run
    bound, valid for any noise, can fail the run."""
    coins = np.asarray(coins, dtype=bool)
    if coins.sum() < 2 or (~coins).sum() < 2:
        raise LDPValueError("the audit needs at least 2 inserted and 2 left-out canaries (give more canaries)")
    level = (1.0 - confidence) / 2.0
    estimate = replacement_estimate(cosines, coins, dims, delta)
    bound = one_run_audit(cosines, coins, delta=delta, confidence=1.0 - level)
    if not_gaussian:
        note = f"a fit of Gaussians to {not_gaussian} noise: no limit, no flag"
        return audit_verdict(accounted, bound, estimate, estimate_note=note)
    lower = replacement_lower_limit(cosines, coins, delta, 1.0 - level)
    return audit_verdict(accounted, bound, estimate, lower, 1.0 - level)


GAUSSIAN_NOISES = ("gaussian", "inid-gaussian")  # per coordinate, or on the L2-clipped update


def non_gaussian_noise(privatizer) -> str | None:
    """The name of the privatizer's noise when it is not Gaussian (LDPVec's directional noise
    included), None when it is."""
    name = getattr(privatizer, "mechanism", None)
    if name in GAUSSIAN_NOISES and getattr(privatizer, "ldpvec", None) is None:
        return None
    return f"ldpvec ({name})" if getattr(privatizer, "ldpvec", None) is not None else str(name)


class LocalAudit:
    """The audit against the server under local trust: each canary's privatized replies summed over
    the rounds (what the server holds of that client), from the server half's round outcome."""

    @property
    def speaks_to(self) -> str:
        if self.per_client:
            return "the server (each client's privatized replies)"
        return "the server (summed node replies: the model's steps only)"

    def __init__(self, design: CanaryDesign, dims: int) -> None:
        self.design, self.dims = design, dims
        self.sums = np.zeros((design.count, dims))
        self.start: np.ndarray | None = None
        self.model_delta = np.zeros(dims)
        self.per_client = False  # whether the server held each client's reply (not summed node replies)
        self.not_gaussian: str | None = None  # the replies' noise, when not Gaussian (`non_gaussian_noise`)

    def observe(self, server) -> None:
        """After a round: the canaries' replies (or, with summed node replies, the model's step)."""
        self.not_gaussian = non_gaussian_noise(server.privatizer)
        outcome = server.outcome
        if outcome is None:
            return
        self.model_delta += outcome.step
        if outcome.updates is None:
            return
        pids = np.asarray(outcome.partitions)
        rows = np.flatnonzero((pids >= self.design.first) & (pids < self.design.first + self.design.count))
        self.sums[pids[rows] - self.design.first] += outcome.updates[rows]
        self.per_client = True

    def verdict(self, accounted: float, delta: float | None) -> AuditVerdict:
        directions = self.design.record(self.dims).directions()
        if self.per_client:
            cosines = np.einsum("ij,ij->i", directions, self.sums)
            norms = np.linalg.norm(self.sums, axis=1)
            cosines = np.divide(cosines, norms, out=np.zeros_like(cosines), where=norms > 0)
        else:  # summed node replies: the server holds the model's steps only
            cosines = canary_cosines(directions, self.model_delta)
        coins, delta = self.design.coins, audit_delta(delta)
        return replacement_verdict(accounted, cosines, coins, self.dims, delta, not_gaussian=self.not_gaussian)


def central_verdict(design: CanaryDesign, final_delta: np.ndarray, accounted: float, delta: float) -> AuditVerdict:
    """The audit of the released model under central trust: cosines with the final model delta."""
    record = design.record(int(np.size(final_delta)))
    return canary_audit(accounted, record, delta=audit_delta(delta), final_delta=final_delta, confidence=CONFIDENCE)


def audit_record(design: CanaryDesign, dims: int, verdict: AuditVerdict | None, speaks_to: str) -> dict:
    """canaries.json: the record (with the coins: the run's local output only) and the verdict."""
    return {
        "record": design.record(dims).to_dict(),
        "audit_speaks_to": speaks_to,
        "verdict": None if verdict is None else verdict.to_dict(),
    }


def summary_entry(verdict: AuditVerdict | None, speaks_to: str, error: str | None = None) -> dict:
    """summary.json's and privacy.json's `canary_audit`: the verdict beside the accounted eps."""
    if verdict is None:
        return {"audit_speaks_to": speaks_to, "error": error}
    return {"audit_speaks_to": speaks_to, **verdict.to_dict()}

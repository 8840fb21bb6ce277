"""Trust models: who must be trusted, and against whom a run's privacy figures hold (spec:
trust-models.md). `simulate --trust NAME` picks one; the registry has the shape of
ldpfed.mechanisms' (available / get_class / get).

- local: the server sees each client's privatized report and who sent it; eps0 per round holds
  against everyone, the server included.
- shuffle: a shuffler removes identities and order. ldpfed's shuffler runs inside the ServerApp
  (engine flower: the strategy that receives Flower's replies with their senders) or the
  harness's process (engine local), so the party operating the server IS the shuffler: against
  it each report has its local eps0 only. The amplified (eps, delta) (ldpfed.accounting.shuffle)
  holds against an analyst who sees only the shuffled batches (the server half's view).
- central: a trusted server sees clipped clean updates and adds the noise; the client-level
  (eps, delta) (ldpfed.accounting.central) holds against whoever sees the released models,
  never against the server.
- secagg: each client adds a share of distributed discrete Gaussian noise to its encoding and
  SecAgg+ (ldpfed.protocols.secagg, built from Flower's primitives: Flower's own
  `SecAggPlusWorkflow` runs only in its legacy workflow) reveals only the modular sum; the
  (eps, delta) of the sum's noise (ldpfed.accounting.ddgauss) holds per client against the
  server, given a semi-honest server that does not collude with a client's neighbours.

Every run states, per party, which figure holds against it and whether it is per user (a tuple
task: each user of a client's cohort randomizes her own tuple) or per client (training: a
client's whole data set): `TrustModel.guarantees(summary, unit)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import ldpfed.mechanisms as mechanisms
from ldpfed.accounting.shuffle import check_conditions, shuffled_epsilon
from ldpfed.registry import Registry
from ldpfed.validation import LDPValueError, canonical_name

CLIPPINGS = ("fixed", "adaptive")
CLIPPING_SIDES = ("server", "client")


@dataclass(frozen=True)
class Guarantee:
    """Who (`party`) gets which figure: the summary's keys of its epsilon and delta (None: no
    guarantee against that party)."""

    party: str
    epsilon_key: str | None
    delta_key: str | None = None


@dataclass(frozen=True)
class TrustModel:
    name: str
    trusted: str  # what must be trusted, in words
    private_against: str  # whom the run's (eps, delta) holds against
    tasks: tuple[str, ...]
    parties: tuple[Guarantee, ...]
    private_against_server: bool  # whether any figure holds against the party operating the Flower server

    def record(self) -> dict:
        return {
            "trust": self.name,
            "must_be_trusted": self.trusted,
            "private_against": self.private_against,
            "private_against_server": self.private_against_server,
        }

    def guarantees(self, summary: dict, unit: str) -> list[dict]:
        """Per party: the (eps, delta) that holds against it in `summary` (None: none, or a run
        that is not private), and `unit`, whom it protects (the task's `Task.unit`: per user or
        per client)."""
        private = summary.get("private", True)
        return [
            {
                "party": party.party,
                "epsilon": summary.get(party.epsilon_key) if party.epsilon_key and private else None,
                "delta": summary.get(party.delta_key) if party.delta_key and private else None,
                "unit": unit,
            }
            for party in self.parties
        ]


SERVER = "the party operating the server (Flower's SuperLink and ServerApp; this process under --engine local)"
_MODELS = {
    "local": TrustModel(
        "local",
        "nothing beyond the client's own device: every report is randomized before it leaves",
        "everyone, the server included",
        ("mean", "train", "frequency"),
        (Guarantee(f"everyone, {SERVER} included", "epsilon_spent_max_per_client", "delta_spent_max_per_client"),),
        True,
    ),
    "shuffle": TrustModel(
        "shuffle",
        "the shuffler, to remove who sent which report and their order; it runs inside the ServerApp, so the "
        "party operating the Flower server is the shuffler and must not look at who sent what",
        "an analyst who sees only the shuffled batches (amplified eps, delta); the party operating the Flower "
        "server, which runs the shuffler, and anyone seeing one report (local eps0)",
        ("mean",),
        (
            Guarantee(f"{SERVER}, which runs the shuffler", "local_epsilon_total_basic"),
            Guarantee(
                "an analyst who sees only the shuffled batches",
                "shuffled_epsilon_total",
                "shuffled_delta_total",
            ),
        ),
        False,
    ),
    "central": TrustModel(
        "central",
        "the server, which sees every sampled client's clean clipped update and must add the noise honestly",
        "whoever sees the released models, not the server",
        ("train",),
        (
            Guarantee(f"{SERVER} (trusted: sees the clean clipped updates)", None),
            Guarantee("whoever sees the released models", "epsilon_spent_max_per_client", "delta_spent_max_per_client"),
        ),
        False,
    ),
}
_MODELS["secagg"] = TrustModel(
    "secagg",
    "that the server follows SecAgg+ (semi-honest) and does not collude with t - 1 or more of a client's "
    "neighbours; every client adds its noise share honestly and none reveals its share to the server (a "
    "revealed share leaves the sum's noise: the eps is then that of the remaining shares)",
    "everyone, the server included (it sees masked vectors and the modular sum only), given those assumptions",
    ("mean", "train"),
    (
        Guarantee(
            f"{SERVER} (sees only the modular sum)", "epsilon_spent_max_per_client", "delta_spent_max_per_client"
        ),
        Guarantee("whoever sees the released estimates", "epsilon_spent_max_per_client", "delta_spent_max_per_client"),
    ),
    True,
)
UNAVAILABLE: dict[str, str] = {}


_REGISTRY: Registry[TrustModel] = Registry("trust model", _MODELS)
available = _REGISTRY.available


def get_class(name: str) -> TrustModel:
    """The trust model `name`; one that Flower's API cannot run here fails with the reason."""
    if canonical_name(name) in UNAVAILABLE:
        raise LDPValueError(
            f"trust {name!r} is not available: {UNAVAILABLE[canonical_name(name)]}; known: {', '.join(available())}"
        )
    return _REGISTRY.get_class(name)


def get(name: str, task: str | None = None) -> TrustModel:
    """The trust model `name`, checked to apply to `task` when given."""
    model = get_class(name)
    if task is not None and task not in model.tasks:
        raise LDPValueError(f"--trust {name} applies to --task {', '.join(model.tasks)}; got --task {task}")
    return model


# options that mean something only under some trust models: (option, field path, models)
_MODEL_OPTIONS = (
    ("clipping", ("privacy", "clipping"), ("central",)),
    ("clipping-side", ("privacy", "clipping_side"), ("central",)),
    ("bits", ("privacy", "bits"), ("secagg",)),
)
# local-randomizer options with no meaning under central (the noise is Flower's Gaussian)
_LOCAL_ONLY = (
    ("mechanism", ("privacy", "mechanism")),
    ("epsilon", ("privacy", "epsilon")),
    ("delta", ("privacy", "delta")),
    ("report-dims", ("privacy", "report_dims")),
    ("perturbation", ("training", "perturbation")),
    ("coordinate-clip", ("training", "coordinate_clip")),
    ("aggregator", ("aggregation", "aggregator")),
    ("node-reply", ("federation", "node_reply")),
)


def _value(config, path: tuple[str, str]):
    return getattr(getattr(config, path[0]), path[1])


def _default(config, path: tuple[str, str]):
    return getattr(type(getattr(config, path[0]))(), path[1])


def shuffle_round_delta(delta_target: float, rounds: int) -> float:
    """The delta of one shuffled round: half the run's delta spread over its rounds, so that the
    composed delta stays within the target under every accountant (docs/decisions.md, Trust models)."""
    return delta_target / (2.0 * rounds)


def _check_calibrated(config, trust: str, noise: str) -> None:
    """central and secagg: no local randomizer's option, and a per-client budget that `noise` (who
    adds what) is calibrated to."""
    for option, path in _LOCAL_ONLY:
        if _value(config, path) != _default(config, path):
            raise LDPValueError(
                f"--{option} has no meaning under --trust {trust}: {noise} calibrated to --max-epsilon/--max-delta"
            )
    if config.privacy.max_epsilon == 0.0:
        raise LDPValueError(f"--trust {trust} needs the run's per-client budget: give --max-epsilon (and --max-delta)")


def _check_secagg(config) -> None:
    """--trust secagg: every client each round, a budget to calibrate the shares to, no local randomizer."""
    _check_calibrated(config, "secagg", "the clients add distributed discrete Gaussian shares")
    if config.federation.fraction != 1.0:
        raise LDPValueError(
            "--trust secagg takes every client in every round (--fraction 1): the server runs the protocol, so a "
            "sampling it chose would give no amplification against it"
        )
    if config.federation.clients < 2:
        raise LDPValueError("--trust secagg needs at least 2 clients")


def check_config(config) -> None:
    """The trust model's options, checked against the task and the other options (LDPValueError)."""
    model = get(config.privacy.trust, config.run.task)
    for option, path, models in _MODEL_OPTIONS:
        if model.name not in models and _value(config, path) != _default(config, path):
            raise LDPValueError(f"--{option} applies to --trust {', '.join(models)}, not --trust {model.name}")
    if config.privacy.clipping not in CLIPPINGS:
        raise LDPValueError(f"clipping must be one of {', '.join(CLIPPINGS)}; got {config.privacy.clipping!r}")
    if config.privacy.clipping_side not in CLIPPING_SIDES:
        raise LDPValueError(
            f"clipping-side must be one of {', '.join(CLIPPING_SIDES)}; got {config.privacy.clipping_side!r}"
        )
    if model.name == "secagg":
        _check_secagg(config)
    if model.name == "central":
        _check_calibrated(config, "central", "the server adds Flower's Gaussian noise,")
        if config.privacy.clipping == "adaptive" and config.privacy.clipping_side == "client":
            raise LDPValueError("--clipping adaptive is server-side only here: use --clipping-side server")
    if model.name == "shuffle":
        if config.privacy.delta != 0.0 or mechanisms.get_class(config.privacy.mechanism).approximate:
            raise LDPValueError(
                "--trust shuffle needs a pure eps0-LDP mechanism (the amplification bound is for eps0-LDP "
                f"randomizers); got {config.privacy.mechanism!r} with delta {config.privacy.delta!r}"
            )
        if config.privacy.report_dims and config.privacy.report_dims != config.data.dims:
            raise LDPValueError("--trust shuffle: every user reports all dimensions (report-dims 0)")
        round_delta = shuffle_round_delta(config.delta_target, config.run.rounds)
        if config.data.users:
            check_conditions(config.privacy.epsilon, config.data.users, round_delta)
            if config.budget is not None:  # the first round, every client taking part, must fit the budget
                config.budget.check(shuffled_epsilon(config.privacy.epsilon, config.data.users, round_delta).event())

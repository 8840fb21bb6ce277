"""A plan for federated training: from a client's total budget over T rounds, each candidate
mechanism's per-round setting and the noise to expect in the aggregated update
(`ldpfed plan --task train`; analysis.md, Federated rounds; docs/decisions.md, Privacy accounting:
"Planning a training run").

Per-round setting. A train run records the event its privatizer gives (`client_round_event`): a
scalar randomizer's generic eps-DP round (the Gaussian: m discrete Gaussians calibrated to
(eps, delta)), the i.n.i.d. Gaussian's discrete Gaussian vector. `calibration.calibrate_round`
finds the largest per-round eps whose composition over the rounds a client takes part in stays
within the total, on that very event, under the accountant asked for; where that accountant cannot
account the round (pld and the i.n.i.d. Gaussian's vector event, rdp and a generic eps-DP round) the
row says so and uses rdp or pld, whichever can. PLRV-O is calibrated by its own accountant: the
(k, theta) whose joint-accountant eps after k release steps is the total (`gradient_noise.calibrate`
with steps = k), checked by ldpfed's rdp accountant composing its `PlrvoDpEvent` k times.

Predicted noise. At the largest update the clipping lets through (every coordinate at the
per-coordinate bound for the scalar randomizers, norm C spread evenly for the gradient noises), the
aggregate noise of the mean of K = q N clients' updates (`round_noise.predicted_aggregate_noise`,
exact noise moments): E||noise||^2 = sum_z var_z / K + sum_z mean_z^2, against the update's norm:
signal_to_noise = ||u|| / sqrt(E||noise||^2), an upper bound over updates (smaller updates carry
less signal; the noise barely changes). Rows are ranked by it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import numpy as np

import ldpfed.gradient_noise as gradient_noise
import ldpfed.mechanisms as mechanisms
from ldpfed.accounting import create_accountant
from ldpfed.analysis.round_noise import predicted_aggregate_noise
from ldpfed.config import Config
from ldpfed.gradient_noise.calibrate import calibrate
from ldpfed.planning.calibration import (
    RoundBudget,
    TotalBudget,
    calibrate_round,
    round_delta,
    round_kind,
    rounds_taken,
    spent_by_accountant,
)
from ldpfed.planning.plan import RankedPlan, participation_rate
from ldpfed.protocols.seeds import data_seed
from ldpfed.protocols.train import client_round_event, privatizer, update_size
from ldpfed.validation import LDPValueError, check_positive_int

PLRVO = "plrvo"
GRADIENT_NOISES = ("inid-gaussian", PLRVO)  # the sound gradient noises a plan offers
OWN_ACCOUNTANT = "plrvo is calibrated by its own joint moments accountant, checked by rdp"


def default_train_mechanisms(total: TotalBudget) -> list[str]:
    scalar = [name for name in mechanisms.available() if total.delta > 0 or not mechanisms.get_class(name).approximate]
    return scalar + (list(GRADIENT_NOISES) if total.delta > 0 else [])


def update_dims(config: Config) -> int:
    """d, the coordinates of the model's update (the model's parameter count, from the data's shapes)."""
    return update_size(config, data_seed(config.run.seed))


def with_round(config: Config, epsilon: float, delta: float | None) -> Config:
    return replace(config, privacy=replace(config.privacy, epsilon=float(epsilon), delta=float(delta or 0.0)))


def train_event_of(config: Config, dims: int):
    """`event_of(eps, delta)`: the ledger event a train run with `config` records for one round."""

    def event_of(epsilon: float, delta: float | None):
        round_config = with_round(config, epsilon, delta)
        return client_round_event(round_config, privatizer(round_config), dims)

    return event_of


def round_accountant(event, accountant: str) -> tuple[str, str | None]:
    """The accountant that accounts `event`: the one asked for, else rdp or pld (and why)."""
    reason = create_accountant(accountant).unsupported(event)
    if reason is None:
        return create_accountant(accountant).name, None
    for other in ("rdp", "pld"):
        if create_accountant(other).unsupported(event) is None:
            return other, f"accounted by {other}: {reason}"
    raise LDPValueError(reason)


def calibrate_train_round(config: Config, total: TotalBudget, rounds: int, dims: int, cap=None) -> RoundBudget:
    """The per-round budget of `config`'s mechanism (module docstring); PLRV-O by its own accountant."""
    name, approximate = round_kind(config.privacy.mechanism)
    accountant = config.privacy.accountant
    if name == PLRVO:
        return _plrvo_round(config, total, rounds, dims, cap)
    event_of = train_event_of(config, dims)
    taken = rounds_taken(rounds, cap)
    probe_delta = round_delta(total, taken, accountant) if approximate and total.delta > 0 else None
    chosen, note = round_accountant(event_of(total.epsilon, probe_delta), accountant)
    budget = calibrate_round(name, total, rounds, chosen, cap, event_of=event_of)
    return replace(budget, method=budget.method + (f" ({note})" if note else ""), accountant_note=note or "")


def _plrvo_round(config: Config, total: TotalBudget, rounds: int, dims: int, cap) -> RoundBudget:
    if total.delta <= 0:
        raise LDPValueError("plrvo is (eps, delta)-DP: give the total budget's delta (--budget EPS,DELTA)")
    taken = rounds_taken(rounds, cap)
    clip = 2.0 * config.training.clip  # local DP: any two clipped updates (ldpfed.training.noise_privatizer)
    noise = plrvo_noise(total.epsilon, total.delta, dims, clip, taken)
    event = noise.event()
    spent = spent_by_accountant(event, taken, total.delta)
    if spent["rdp"] is None or spent["rdp"].epsilon > total.epsilon * (1 + 1e-9):
        raise LDPValueError(f"plrvo: no (k, theta) holds {taken} rounds within ({total.text()})")
    one = spent_by_accountant(event, 1, total.delta)["rdp"].epsilon
    method = (
        f"PLRV-O's joint accountant over {taken} steps (gradient_noise.calibrate: k = {noise.k:.6g}, "
        f"theta = {noise.theta:.6g}); per-round eps is one step's rdp figure"
    )
    note = "" if create_accountant(config.privacy.accountant).name == "rdp" else "accounted by rdp: " + OWN_ACCOUNTANT
    return RoundBudget(PLRVO, total, int(rounds), taken, "rdp", one, None, spent, method, "the search's grid", note)


@functools.lru_cache(maxsize=16)
def plrvo_noise(epsilon: float, delta: float, dims: int, clip: float, steps: int):
    """PLRV-O searched for (k, theta) whose joint eps after `steps` releases is `epsilon` (seconds: cached)."""
    return calibrate(PLRVO, epsilon=epsilon, delta=delta, dims=dims, clip=clip, steps=steps)


@dataclass(frozen=True)
class TrainRow:
    budget: RoundBudget
    report_dims: int | None
    clip: float
    clipping: str
    noise_multiplier: float | None
    update_norm: float
    aggregate_noise: float  # E||noise of the mean update||^2
    clients_per_round: int

    @property
    def signal_to_noise(self) -> float:
        return self.update_norm / math.sqrt(self.aggregate_noise) if self.aggregate_noise > 0 else math.inf

    def to_dict(self) -> dict:
        b = self.budget
        record = {
            "mechanism": b.mechanism,
            "report_dims": self.report_dims,
            "epsilon_per_round": b.epsilon,
            "delta_per_round": b.delta,
            "rounds": b.rounds,
            "rounds_taken_per_client": b.taken,
            "accountant": b.accountant,
        }
        for name, spent in b.spent.items():
            record[f"total_epsilon_{name}"] = None if spent is None else spent.epsilon
        record.update(
            {
                "clip": self.clip,
                "clipping": self.clipping,
                "noise_multiplier": self.noise_multiplier,
                "clients_per_round": self.clients_per_round,
                "clipped_update_norm": self.update_norm,
                "aggregate_noise_sq": self.aggregate_noise,
                "signal_to_noise": self.signal_to_noise,
                "method": b.method,
            }
        )
        return record


def noise_row(config: Config, budget: RoundBudget, dims: int, clients: int) -> TrainRow:
    """The predicted aggregate noise of one round at the plan's per-round setting (module docstring)."""

    if budget.mechanism == PLRVO:
        noise = plrvo_noise(budget.total.epsilon, budget.total.delta, dims, 2.0 * config.training.clip, budget.taken)
        update = np.full(dims, config.training.clip / math.sqrt(dims))
        variance = float(np.sum(noise.release_variance(update[None, :])))
        return TrainRow(
            budget, None, config.training.clip, "L2", None, config.training.clip, variance / clients, clients
        )
    round_config = with_round(config, budget.epsilon, budget.delta)
    update_privatizer = privatizer(round_config)
    clip = round_config.update_clip
    l2 = round_config.l2_clipped
    update = np.full(dims, clip / math.sqrt(dims) if l2 else clip)
    mean, variance = predicted_aggregate_noise(update[None, :], [1.0], update_privatizer)
    aggregate = float(np.sum(variance)) / clients + float(np.sum(mean**2))
    if l2:
        multiplier = getattr(update_privatizer.noise(dims), "noise_multiplier", None)
        m = None
    else:
        multiplier = update_privatizer.noise_multiplier(dims)
        m = update_privatizer.dims_reported(dims)
    norm = float(np.linalg.norm(update))
    return TrainRow(budget, m, clip, "L2" if l2 else "per coordinate", multiplier, norm, aggregate, clients)


@dataclass(frozen=True)
class TrainPlan(RankedPlan):
    total: TotalBudget
    rounds: int
    accountant: str
    participation: float
    cap: int | None
    clients: int
    dims: int
    data: str
    model: str
    rows: list[TrainRow]
    excluded: list[dict] = field(default_factory=list)

    def guarantee(self) -> str:
        return (
            f"({self.total.epsilon:g}, {self.total.delta:g})-LDP per client under replace-one (any two clipped "
            f"updates), by each row's accountant, for {self.coverage()}; client sampling gives no "
            "amplification under local DP"
        )

    def accountant_notes(self) -> dict[str, list[str]]:
        """Why rows use another accountant than the one asked for: each reason and its mechanisms."""
        notes: dict[str, list[str]] = {}
        for row in self.rows:
            if row.budget.accountant_note:
                notes.setdefault(row.budget.accountant_note, []).append(row.budget.mechanism)
        return notes

    def summary(self) -> dict:
        return {
            "task": "train",
            "budget": {"epsilon": self.total.epsilon, "delta": self.total.delta},
            "rounds": self.rounds,
            "accountant": self.accountant,
            "participation": self.participation,
            "rounds_cap": self.cap,
            "clients": self.clients,
            "dims": self.dims,
            "data": self.data,
            "model": self.model,
            "guarantee": self.guarantee(),
            "signal_to_noise": "||u|| / sqrt(E||aggregate noise||^2) of one round's mean update, at the largest "
            "update the clipping lets through (an upper bound over updates); rows ranked by it",
            "recommended": self.best.to_dict(),
            "rows": [row.to_dict() for row in self.rows],
            "excluded": self.excluded,
        }


def make_train_plan(
    config: Config,
    total: TotalBudget,
    rounds: int,
    *,
    mechanisms: list[str] | None = None,
    participation: float = 1.0,
    cap: int | None = None,
    dims: int | None = None,
) -> TrainPlan:
    """Every candidate mechanism's per-round setting and predicted aggregate noise, ranked by SNR."""
    rounds = check_positive_int(rounds, "--rounds")
    participation = participation_rate(participation)
    dims = update_dims(config) if dims is None else check_positive_int(dims, "--dims")
    names = default_train_mechanisms(total) if mechanisms is None else [round_kind(n)[0] for n in mechanisms]
    clients = max(1, round(participation * config.federation.clients))
    rows, excluded = [], []
    for name in names:
        candidate = replace(config, privacy=replace(config.privacy, mechanism=name))
        try:
            if name in gradient_noise.available() and name not in GRADIENT_NOISES:
                raise LDPValueError(f"{name}: its published guarantee does not hold (not private)")
            budget = calibrate_train_round(candidate, total, rounds, dims, cap)
            rows.append(noise_row(candidate, budget, dims, clients))
        except LDPValueError as error:
            excluded.append({"mechanism": name, "reason": str(error)})
    if not rows:
        reasons = "; ".join(f"{e['mechanism']}: {e['reason']}" for e in excluded[:3])
        raise LDPValueError(f"no mechanism can train within ({total.text()}) over {rounds} rounds: {reasons}")
    rows.sort(key=lambda row: -row.signal_to_noise)
    return TrainPlan(
        total,
        rounds,
        config.privacy.accountant,
        participation,
        cap,
        config.federation.clients,
        dims,
        config.data_name,
        config.training.model,
        rows,
        excluded,
    )

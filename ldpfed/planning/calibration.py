"""The per-round budget that a total budget allows (spec: federated.md, Accounting per client;
docs/decisions.md, Privacy accounting: "Planning from a total budget").

Given a client's total (eps, delta), the rounds it takes part in (k) and an accountant, find the
largest per-round eps whose k-fold composition stays within the total, as that accountant states
it for a run's budget (`Accountant.spent_within(delta)`: what `simulate --max-epsilon` checks), so
that a run with the plan's settings ends at or just below the total for every client.

A round's event is the one a run records in its ledger: for the mean and frequency tasks
`ldpfed.accounting.legacy_event` (a pure randomizer or frequency oracle is a generic eps-DP round,
the Gaussian a generic (eps, delta) round); for training, the event a train run builds from its
privatizer (`event_of`, ldpfed.planning.train). Delta per round = delta / k under basic composition
and delta / (2k) under advanced, rdp and pld (the other half is the composition's own delta).

- basic, pure rounds: eps / k exactly.
- otherwise: dp-accounting's `mechanism_calibration.calibrate_dp_mechanism` (Brent's method, then a
  check that the figure returned is within the total) on the per-round eps, with ldpfed's
  accountants behind a dp-accounting `PrivacyAccountant` adapter (`ledger_accountant`); the
  per-round eps is within `RELATIVE_TOLERANCE` (relative) below the largest one that fits. A round
  never gets more than the total: where k rounds of the whole eps fit (a tiny eps whose loss the
  delta covers), the total; where even basic's eps / k does not fit the accountant's figure, refused.

Participation: under local DP a report protects its client on its own and the server sees who
reported, so sampling clients gives no amplification: a client that takes part in k of T rounds
spends k rounds. A plan assumes the worst case over clients, every round (k = T), unless the
federation caps the rounds a client takes part in (k = min(T, cap)).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import ldpfed.gradient_noise as gradient_noise
import ldpfed.mechanisms as registry
from ldpfed.accounting import (
    ACCOUNTANTS,
    DEFAULT_DELTA_TARGET,
    SelfComposedDpEvent,
    Spent,
    create_accountant,
    legacy_event,
)
from ldpfed.frequency.categorical import COUNTING_ORACLES, is_longitudinal, oracle_kind
from ldpfed.validation import LDPValueError, canonical_name, check_positive_int

if TYPE_CHECKING:  # dp-accounting is imported where a calibration runs: a Flower node never needs it
    from dp_accounting import dp_event

RELATIVE_TOLERANCE = 1e-6  # of the per-round eps: the plan's figure is at most this far below the optimum
BASIC_DELTA_MARGIN = 1e-9  # k rounds of delta/k must not exceed delta by float rounding


@dataclass(frozen=True)
class TotalBudget:
    """A client's total (eps, delta) over the whole study (delta 0: pure)."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        eps, delta = _number(self.epsilon), _number(self.delta)
        if not (math.isfinite(eps) and eps > 0):
            raise LDPValueError(f"the total budget's epsilon must be a finite number > 0, got {self.epsilon!r}")
        if not 0.0 <= delta < 1.0:
            raise LDPValueError(f"the total budget's delta must be in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)

    @classmethod
    def parse(cls, text: str) -> TotalBudget:
        """'EPS' or 'EPS,DELTA' (the --budget option)."""
        parts = [part.strip() for part in str(text).split(",")]
        if len(parts) not in (1, 2) or not all(parts):
            raise LDPValueError(f"--budget must be EPS or EPS,DELTA, got {text!r}")
        return cls(*(_number(part, text) for part in parts))

    def text(self) -> str:
        return f"{self.epsilon:g}" + (f",{self.delta:g}" if self.delta else "")


def _number(value, shown=None) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise LDPValueError(f"--budget must be EPS or EPS,DELTA (numbers), got {shown or value!r}") from None


def rounds_taken(rounds: int, cap: int | None = None) -> int:
    """Rounds a client takes part in, in the worst case: every round, or the federation's cap."""
    rounds = check_positive_int(rounds, "--rounds")
    if cap is None:
        return rounds
    return min(rounds, check_positive_int(cap, "--rounds-cap"))


def round_delta(total: TotalBudget, taken: int, accountant: str) -> float:
    """The per-round delta of an approximate mechanism's round (module docstring)."""
    if create_accountant(accountant).name == "basic":
        return total.delta / taken * (1.0 - BASIC_DELTA_MARGIN)
    return total.delta / (2.0 * taken)


def round_kind(mechanism: str) -> tuple[str, bool]:
    """(canonical name, approximate?) of a scalar randomizer, a frequency oracle (grr, oue) or a
    gradient noise; an unknown name fails, listing the randomizers."""
    key = canonical_name(mechanism)
    if key in COUNTING_ORACLES:
        return oracle_kind(key), False
    if is_longitudinal(key):
        return key, False
    if key in gradient_noise.available():
        return gradient_noise.get_class(key).name, True
    cls = registry.get_class(key)
    return cls.name, cls.approximate


def round_cost(mechanism: str, epsilon: float, delta: float | None) -> dp_event.DpEvent:
    """The ledger event of one round of a mean or frequency run (`ldpfed.protocols.privacy.round_event`)."""
    return legacy_event(epsilon, delta, mechanism)


def ledger_accountant(accountant: str):
    """An ldpfed accountant seen as a dp-accounting `PrivacyAccountant` (the class is built on first
    use, so that importing the planning package loads no dp-accounting), so that dp-accounting's
    calibration drives it. `get_epsilon(delta)` is the figure a run's budget compares
    (`spent_within`), and +inf where the composed delta exceeds `delta` (basic's sum of deltas)."""
    return _ledger_accountant_class()(accountant)


@functools.cache
def _ledger_accountant_class():
    from dp_accounting import privacy_accountant

    class LedgerAccountant(privacy_accountant.PrivacyAccountant):
        def __init__(self, accountant: str) -> None:
            super().__init__(privacy_accountant.NeighboringRelation.REPLACE_ONE)  # LDP: any two inputs
            self._inner = create_accountant(accountant)

        def _maybe_compose(self, event, count, do_compose):
            reason = self._inner.unsupported(event)
            if reason is not None:
                return self.CompositionErrorDetails(event, reason)
            if do_compose:
                self._inner.compose(event, count)
            return None

        def get_epsilon(self, target_delta: float) -> float:
            spent = self._inner.spent_within(target_delta)
            if spent.epsilon is None or spent.delta > target_delta:
                return math.inf
            return spent.epsilon

        def spent(self, target_delta: float) -> Spent:
            return self._inner.spent_within(target_delta)

    return LedgerAccountant


@dataclass(frozen=True)
class RoundBudget:
    """What one round may cost so that `taken` rounds stay within `total` under `accountant`."""

    mechanism: str
    total: TotalBudget
    rounds: int  # T, the rounds of the study
    taken: int  # k, the rounds a client takes part in (worst case)
    accountant: str
    epsilon: float  # per round (a user's budget per round: eps/m per reported value)
    delta: float | None  # per round (None: pure)
    spent: dict = field(default_factory=dict)  # accountant -> Spent of the k rounds (None: cannot account)
    method: str = ""
    tolerance: str = ""
    accountant_note: str = ""  # why `accountant` is not the one asked for (a train plan's row), else ""

    @property
    def event(self) -> dp_event.DpEvent:
        return round_cost(self.mechanism, self.epsilon, self.delta)

    def to_dict(self) -> dict:
        return {
            "mechanism": self.mechanism,
            "total_epsilon": self.total.epsilon,
            "total_delta": self.total.delta,
            "rounds": self.rounds,
            "rounds_taken_per_client": self.taken,
            "accountant": self.accountant,
            "epsilon_per_round": self.epsilon,
            "delta_per_round": self.delta,
            "spent": {name: None if s is None else s.to_dict() for name, s in self.spent.items()},
            "method": self.method,
            "tolerance": self.tolerance,
        }


def spent_by_accountant(event: dp_event.DpEvent, taken: int, max_delta: float) -> dict:
    """Each accountant's total of `taken` rounds of `event` as a budget sees it (None where it cannot
    account the rounds)."""
    totals = {}
    for name in ACCOUNTANTS:
        accountant = create_accountant(name)
        if accountant.unsupported(event) is not None:
            totals[name] = None
            continue
        totals[name] = accountant.compose(event, taken).spent_within(max_delta)
    return totals


def check_round(mechanism: str, total: TotalBudget, taken: int, accountant: str, event_of=None) -> tuple:
    """What `calibrate_round` checks before it computes anything, so that a plan refuses a bad
    option before it reads data: the mechanism and accountant known, the total's delta for an
    (eps, delta) mechanism, rounds the accountant can account. Returns (name, approximate,
    accountant, per-round delta or None, event_of)."""
    name, approximate = round_kind(mechanism)  # unknown names fail here, listing the known ones
    accountant = create_accountant(accountant).name
    if event_of is None:

        def event_of(epsilon, delta):
            return round_cost(name, epsilon, delta)

    if approximate and not total.delta > 0:
        raise LDPValueError(f"{name} is (eps, delta)-LDP: give the total budget's delta (--budget EPS,DELTA)")
    delta = round_delta(total, taken, accountant) if approximate else None
    probe = create_accountant(accountant).unsupported(event_of(total.epsilon, delta))
    if probe is not None:
        raise LDPValueError(f"{probe} (--accountant {accountant}, mechanism {name})")
    return name, approximate, accountant, delta, event_of


def calibrate_round(
    mechanism: str,
    total: TotalBudget,
    rounds: int,
    accountant: str = "basic",
    cap: int | None = None,
    event_of=None,
) -> RoundBudget:
    """The largest per-round budget of `mechanism` whose composition over the rounds a client takes
    part in stays within `total` under `accountant` (module docstring). `event_of(eps, delta)`: the
    round's ledger event (default: a mean or frequency round, `round_cost`)."""
    taken = rounds_taken(rounds, cap)
    name, approximate, accountant, delta, event_of = check_round(mechanism, total, taken, accountant, event_of)
    # a pure budget's figures are read at the runs' default delta (basic composition's delta is 0 and
    # every other accountant's eps at a delta > 0 is at most basic's)
    max_delta = total.delta if total.delta > 0 else DEFAULT_DELTA_TARGET
    pure_round = not approximate and event_of(total.epsilon, None) == round_cost(name, total.epsilon, None)
    if is_longitudinal(name):  # the permanent report's eps_inf is charged once, whatever the rounds
        spent = spent_by_accountant(event_of(total.epsilon, None), 1, max_delta)
        method = "memoized: the permanent report's eps_inf charged once"
        return RoundBudget(name, total, int(rounds), taken, accountant, total.epsilon, None, spent, method, "exact")
    if accountant == "basic" and pure_round:
        epsilon, method, tolerance = total.epsilon / taken, "closed form: eps / k", "exact"
    elif taken == 1:
        epsilon, method, tolerance = total.epsilon, "one round: the total", "exact"
    else:
        epsilon = _calibrated(event_of, total, taken, accountant, delta, max_delta)
        method = "dp_accounting.mechanism_calibration.calibrate_dp_mechanism"
        tolerance = f"per-round eps within {RELATIVE_TOLERANCE:g} (relative) below the largest that fits"
    spent = spent_by_accountant(event_of(epsilon, delta), taken, max_delta)
    chosen = spent[accountant]
    if chosen is None or chosen.epsilon > total.epsilon * (1 + 1e-12) or chosen.delta > max_delta:
        raise LDPValueError(
            f"the {accountant} accountant cannot hold {taken} rounds of {name} within ({total.text()}); "
            "give a larger budget or delta, or another accountant"
        )
    return RoundBudget(name, total, int(rounds), taken, accountant, epsilon, delta, spent, method, tolerance)


def _calibrated(event_of, total, taken, accountant, delta, max_delta) -> float:
    lower = total.epsilon / taken  # basic composition's figure: within the total under every accountant
    target_delta = total.delta if total.delta > 0 else 0.0

    def rounds_of(epsilon: float) -> dp_event.DpEvent:
        return SelfComposedDpEvent(event_of(epsilon, delta), taken)

    def fresh():
        return ledger_accountant(accountant)

    if target_delta == 0.0:  # pure total: advanced/pld at delta 0 are basic composition
        return lower

    def fits(epsilon: float) -> bool:
        return fresh().compose(rounds_of(epsilon)).get_epsilon(max_delta) <= total.epsilon

    from dp_accounting.mechanism_calibration import ExplicitBracketInterval, calibrate_dp_mechanism

    try:
        return float(
            calibrate_dp_mechanism(
                fresh,
                rounds_of,
                total.epsilon,
                max_delta,
                ExplicitBracketInterval(lower, total.epsilon),
                tol=RELATIVE_TOLERANCE * lower,
            )
        )
    except ValueError:
        # Brent's method found no sign change on [eps/k, eps]. Either the delta covers k rounds of
        # the whole eps (a tiny eps: pld's figure is 0), and a round never gets more than the total;
        # or even basic's figure is beyond the accountant's resolution, which calibrate_round refuses.
        if fits(total.epsilon):
            return total.epsilon
        if not fits(lower):
            return lower
        raise

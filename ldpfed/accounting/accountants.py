"""Accountants: a client's composed events -> (epsilon, delta) (spec: gradient-noise.md,
Accounting across rounds).

Shaped like Opacus's accountants (`compose`, `get_epsilon`, `__len__`, `history`, `state_dict`)
and created by name (`get("pld")`, or Opacus's `create_accountant("pld")`) from the shared
registry (ldpfed.registry); every accountant reads the same events
(ldpfed.accounting.events):

- basic: eps and delta add up over the rounds (always valid).
- advanced: Dwork, Rothblum & Vadhan 2010 in the heterogeneous form of Kairouz, Oh & Viswanath
  2015 (Thm 3.5 without its tightening); for rounds (eps_i, delta_i) and slack delta' (the
  target delta): eps = sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1), delta =
  sum delta_i + delta'. Where that exceeds the basic eps, the basic (eps, delta) is reported.
- rdp: dp_accounting's RdpAccountant (Gaussian rounds, Poisson-subsampled or not); a generic
  (eps, delta) round has no RDP curve, so pure eps-rounds are not supported (use pld).
- pld: dp_accounting's privacy loss distributions (pessimistic discretization): a generic
  (eps, delta) round by `from_privacy_parameters`, Gaussian rounds by `from_gaussian_mechanism`
  with Poisson subsampling where it applies. The tightest of the four for composition. T identical
  generic rounds alone are composed in closed form (ldpfed.accounting.optimal_composition: the
  same optimal composition, in time and memory that do not grow like T).

Opacus's PRV accountant is not offered: it numerically composes the same privacy loss
distribution as pld (on Opacus's test vector they agree within PRV's own eps error, see
tests/test_accounting.py), and Opacus is not a dependency.

A NotPrivateDpEvent makes every accountant report `private: False`, its reasons and no epsilon.

rdp and pld account an event's IDEAL law (e.g. the exact discrete Gaussian); the float slack of
the sampler that draws it (an event's `float_slack()`) is composed into their result by the rule
of ldpfed.samplers.float_slack: eps_ideal(delta_i) + slack eps at the target delta, reported
separately in `Spent.float_slack_epsilon` / `float_slack_delta`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from ldpfed.accounting.events import (
    CalibratedDpEvent,
    EpsilonDeltaDpEvent,
    GaussianDpEvent,
    NotPrivateDpEvent,
    PoissonSampledDpEvent,
    describe_event,
    event_from_dict,
    event_to_dict,
)
from ldpfed.accounting.library import dp_event
from ldpfed.accounting.names import DEFAULT_DELTA_TARGET
from ldpfed.accounting.optimal_composition import composed_epsilon
from ldpfed.registry import Registry
from ldpfed.samplers.float_slack import NONE as NO_SLACK
from ldpfed.samplers.float_slack import FloatSlack, composed_slack
from ldpfed.validation import LDPValueError, check_fraction, check_memory, check_positive_int

PLD_DISCRETIZATION = 1e-4  # dp_accounting's default value_discretization_interval
PLD_TAIL_TRUNCATION = 1e-15  # dp_accounting's default: the truncated tail mass goes to delta (pessimistic)


@dataclass(frozen=True)
class Spent:
    """What an accountant reports: epsilon is None when the releases were not private."""

    accountant: str
    epsilon: float | None
    delta: float | None
    private: bool
    reasons: tuple[str, ...] = ()
    # the samplers' float slack composed into (epsilon, delta) by rdp/pld (ldpfed.samplers.float_slack):
    # eps added to the ideal curves' and the part of delta it takes; 0 where none (basic/advanced:
    # the calibrated per-round guarantees include it already); None when not private
    float_slack_epsilon: float | None = None
    float_slack_delta: float | None = None

    def to_dict(self) -> dict:
        return {**asdict(self), "reasons": list(self.reasons)}


def flatten(event: dp_event.DpEvent, count: int = 1) -> list[tuple[dp_event.DpEvent, int]]:
    """(leaf event, times) pairs of a composed/self-composed event."""
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return flatten(event.event, count * event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        return [pair for inner in event.events for pair in flatten(inner, count)]
    if isinstance(event, dp_event.NoOpDpEvent) or count == 0:
        return []
    return [(event, count)]


def not_private_reasons(events) -> tuple[str, ...]:
    """The reasons of the not-private events among `events` (sorted, without repeats)."""
    found = set()
    for event in events:
        for leaf, _ in flatten(event):
            if isinstance(leaf, NotPrivateDpEvent):
                found.add(leaf.reason)
            elif isinstance(leaf, dp_event.NonPrivateDpEvent):
                found.add("a release without accounted noise")
    return tuple(sorted(found))


class Accountant(ABC):
    """Composes events; reports (eps, delta) at a target delta."""

    name: ClassVar[str]
    description: ClassVar[str]

    def __init__(self) -> None:
        self.history: Counter = Counter()  # leaf event -> times composed

    def __len__(self) -> int:
        return int(sum(self.history.values()))

    def unsupported(self, event: dp_event.DpEvent) -> str | None:
        """Why this accountant cannot account `event`, or None if it can."""
        for leaf, _ in flatten(event):
            if isinstance(leaf, dp_event.NonPrivateDpEvent):
                continue
            reason = self._unsupported_leaf(leaf)
            if reason is not None:
                return reason
        return None

    def compose(self, event: dp_event.DpEvent, count: int = 1) -> Accountant:
        count = check_positive_int(count, "count", minimum=0)
        reason = self.unsupported(event)
        if reason is not None:
            raise LDPValueError(reason)
        for leaf, times in flatten(event, count):
            self.history[leaf] += times
        return self

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the composed releases are not private (empty when they are)."""
        return not_private_reasons(self.history)

    @property
    def private(self) -> bool:
        return not self.reasons

    def spent(self, target_delta: float = DEFAULT_DELTA_TARGET) -> Spent:
        target_delta = check_fraction(target_delta, "target_delta")
        if not self.private:
            return Spent(self.name, None, None, False, self.reasons)
        pairs = tuple(sorted(self.history.items(), key=lambda pair: repr(pair[0])))
        epsilon, delta = _cached_spent(type(self), pairs, target_delta)
        slack = self.float_slack(pairs)
        return Spent(self.name, epsilon, delta, True, (), slack.epsilon, target_delta - slack.ideal_delta(target_delta))

    @classmethod
    def float_slack(cls, pairs) -> FloatSlack:
        """The samplers' slack this accountant adds to its ideal result (none: the default)."""
        return NO_SLACK

    def spent_within(self, max_delta: float = DEFAULT_DELTA_TARGET) -> Spent:
        """The (eps, delta) this accountant states with delta <= `max_delta` where it can (a budget's
        delta): rdp and pld at target `max_delta`; basic's delta is the sum of the rounds' and may
        exceed it (the caller compares). advanced overrides (its delta adds the slack)."""
        return self.spent(max_delta)

    def get_epsilon(self, target_delta: float = DEFAULT_DELTA_TARGET) -> float | None:
        return self.spent(target_delta).epsilon

    def state_dict(self) -> dict:
        return {
            "accountant": self.name,
            "history": [{"event": event_to_dict(leaf), "count": count} for leaf, count in self.history.items()],
        }

    def load_state_dict(self, state: dict) -> Accountant:
        self.history = Counter()
        for item in state.get("history", []):
            self.compose(event_from_dict(item["event"]), item["count"])
        return self

    # --- what each accountant implements --------------------------------------------------------
    @abstractmethod
    def _unsupported_leaf(self, leaf: dp_event.DpEvent) -> str | None:
        """Why a single (non-composed, private) event cannot be accounted, or None."""

    @classmethod
    @abstractmethod
    def compute(cls, pairs: tuple[tuple[dp_event.DpEvent, int], ...], target_delta: float) -> tuple[float, float]:
        """(eps, delta) of the private leaf events composed `count` times each."""


@lru_cache(maxsize=4096)
def _cached_spent(cls: type[Accountant], pairs, target_delta: float) -> tuple[float, float]:
    if not pairs:
        return 0.0, 0.0
    epsilon, delta = cls.compute(pairs, target_delta)
    return float(epsilon), float(delta)


# --- basic and advanced: compose each round's stated (eps, delta) ---------------------------------
class _GuaranteeAccountant(Accountant):
    def _unsupported_leaf(self, leaf):
        if hasattr(leaf, "guarantee"):
            return None
        return (
            f"the {self.name} accountant needs each round's (eps, delta); {describe_event(leaf)} has none "
            "(give the round's per-round delta, or use rdp or pld)"
        )

    @staticmethod
    def guarantees(pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(eps_i, delta_i, count_i) arrays of the leaf events."""
        stated = np.array([leaf.guarantee() for leaf, _ in pairs], dtype=float).reshape(-1, 2)
        counts = np.array([count for _, count in pairs], dtype=float)
        return stated[:, 0], stated[:, 1], counts


class BasicAccountant(_GuaranteeAccountant):
    name = "basic"
    description = "basic composition (sum of eps and delta over the rounds)"

    @classmethod
    def compute(cls, pairs, target_delta):
        eps, delta, counts = cls.guarantees(pairs)
        return float(np.sum(counts * eps)), float(np.sum(counts * delta))


def advanced_composition(epsilons, delta_slack: float, counts=None) -> float:
    """eps of the DRV advanced composition of rounds eps_i (each `counts[i]` times) at slack delta'."""
    eps = np.asarray(epsilons, dtype=float)
    times = np.ones_like(eps) if counts is None else np.asarray(counts, dtype=float)
    if eps.size == 0:
        return 0.0
    if not np.all(np.isfinite(eps)):
        return math.inf
    return float(
        math.sqrt(2.0 * math.log(1.0 / delta_slack) * np.sum(times * eps**2)) + np.sum(times * eps * np.expm1(eps))
    )


class AdvancedAccountant(_GuaranteeAccountant):
    name = "advanced"
    description = "advanced composition, Dwork-Rothblum-Vadhan 2010 (heterogeneous form); basic where smaller"

    def spent_within(self, max_delta: float = DEFAULT_DELTA_TARGET) -> Spent:
        """Advanced composition's delta is the rounds' sum plus the slack delta': the slack is what
        `max_delta` leaves (max_delta - sum delta_i); with nothing left, basic composition."""
        max_delta = check_fraction(max_delta, "max_delta")
        if not self.private:
            return self.spent(max_delta)
        eps, delta, counts = self.guarantees(tuple(self.history.items()))
        slack = max_delta - float(np.sum(counts * delta))
        if slack > 0.0:
            return self.spent(slack)
        return Spent(self.name, float(np.sum(counts * eps)), float(np.sum(counts * delta)), True, (), 0.0, 0.0)

    @classmethod
    def compute(cls, pairs, target_delta):
        eps, delta, counts = cls.guarantees(pairs)
        basic_eps, basic_delta = float(np.sum(counts * eps)), float(np.sum(counts * delta))
        advanced = advanced_composition(eps, target_delta, counts)
        if advanced < basic_eps:
            return advanced, basic_delta + target_delta
        return basic_eps, basic_delta


# --- rdp and pld: the mechanism's own law, through dp_accounting -----------------------------------
def _mechanism_event(leaf: dp_event.DpEvent) -> dp_event.DpEvent:
    """The event whose law RDP/PLD account (a calibrated event's mechanism)."""
    return leaf.event if isinstance(leaf, CalibratedDpEvent) else leaf


def accounted_without_library(event: dp_event.DpEvent) -> bool:
    """Whether one client's rounds of `event` alone are accounted by every accountant without
    dp-accounting's package: each of its leaves is a generic (eps, delta) round (basic, advanced,
    pld in closed form; rdp refuses it) or not private. (pld composes a calibrated round's
    mechanism with the package's distributions, even where that is a generic round.)"""
    kinds = (EpsilonDeltaDpEvent, NotPrivateDpEvent, dp_event.NonPrivateDpEvent)
    return all(isinstance(leaf, kinds) for leaf, _ in flatten(event))


class RdpAccountant(Accountant):
    name = "rdp"
    description = "Renyi DP, dp_accounting RdpAccountant (Gaussian rounds, Poisson-subsampled or not)"
    orders: ClassVar[tuple[float, ...] | None] = None  # None: dp-accounting's DEFAULT_RDP_ORDERS

    @classmethod
    def _orders(cls) -> list[float]:
        from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

        return list(DEFAULT_RDP_ORDERS if cls.orders is None else cls.orders)

    def _unsupported_leaf(self, leaf):
        event = _mechanism_event(leaf)
        if hasattr(event, "rdp"):
            return None
        # A generic (eps, delta) round is ldpfed's own event, which dp-accounting's RdpAccountant
        # does not know (tested): answered without importing its package (~0.2-1.6 s of CPU, the
        # larger part of a 10^5-client tuple run's output work, where privacy.csv asks every round).
        if not isinstance(event, EpsilonDeltaDpEvent):
            from dp_accounting.rdp import RdpAccountant as LibraryRdpAccountant

            if LibraryRdpAccountant(self._orders()).supports(event):
                return None
        return (
            f"the rdp accountant cannot account {describe_event(leaf)} (a round known only by its (eps, delta) "
            "has no RDP curve); use pld, basic or advanced"
        )

    @classmethod
    def float_slack(cls, pairs) -> FloatSlack:
        return composed_slack((_mechanism_event(leaf), count) for leaf, count in pairs)

    @classmethod
    def compute(cls, pairs, target_delta):
        """The ideal curves' eps at delta_i, plus the samplers' float slack (ldpfed.samplers.float_slack)."""
        from dp_accounting.rdp import RdpAccountant as LibraryRdpAccountant
        from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

        orders = cls._orders()
        library = LibraryRdpAccountant(orders)
        own = np.zeros(len(orders))
        for leaf, count in pairs:
            event = _mechanism_event(leaf)
            if hasattr(event, "rdp"):
                own += count * np.asarray(event.rdp(np.asarray(orders)), dtype=float)
            else:
                library.compose(event, count)
        slack = cls.float_slack(pairs)
        epsilon, _ = compute_epsilon(orders, library.rdp + own, slack.ideal_delta(target_delta))
        return float(epsilon) + slack.epsilon, target_delta


class PldAccountant(Accountant):
    name = "pld"
    description = (
        "privacy loss distributions, dp_accounting (generic eps-DP rounds by from_privacy_parameters, "
        "Gaussian rounds with Poisson subsampling)"
    )
    value_discretization_interval: ClassVar[float] = PLD_DISCRETIZATION

    def _unsupported_leaf(self, leaf):
        event = _mechanism_event(leaf)
        if hasattr(event, "pld") or isinstance(event, GaussianDpEvent):
            return None
        if isinstance(event, PoissonSampledDpEvent) and isinstance(event.event, GaussianDpEvent):
            return None
        return f"the pld accountant cannot account {describe_event(leaf)}"

    grid_points: ClassVar[int] = 2**17

    @classmethod
    def discretization(cls, pairs) -> float:
        """The PLD grid step: dp_accounting's default 1e-4, widened so that the generic eps-DP
        rounds' total loss spans at most `grid_points` steps (the FFT composition of, say, 100
        rounds of eps = 8 on a 1e-4 grid takes seconds). Pessimistic rounding keeps every figure an
        upper bound; a homogeneous pure composition stays exact (eps is a multiple of the step)."""
        stated = [(leaf.epsilon, count) for leaf, count in pairs if isinstance(leaf, EpsilonDeltaDpEvent)]
        total = sum(eps * count for eps, count in stated)
        step = max(cls.value_discretization_interval, total / cls.grid_points)
        if len({eps for eps, _ in stated}) == 1:
            eps = stated[0][0]
            step = eps / math.ceil(eps / step)
        return step

    @classmethod
    def float_slack(cls, pairs) -> FloatSlack:
        return composed_slack((_mechanism_event(leaf), count) for leaf, count in pairs)

    @classmethod
    def compute(cls, pairs, target_delta):
        """The composed PLD's eps at delta_i, plus the samplers' float slack (ldpfed.samplers.float_slack).
        Identical generic (eps, delta) rounds alone: the same composition in closed form
        (ldpfed.accounting.optimal_composition), whose cost does not grow with the number of rounds."""
        slack = cls.float_slack(pairs)
        if len(pairs) == 1 and isinstance(pairs[0][0], EpsilonDeltaDpEvent):
            ((leaf, count),) = pairs
            epsilon = composed_epsilon(leaf.epsilon, leaf.delta, count, slack.ideal_delta(target_delta))
            return epsilon + slack.epsilon, target_delta
        from dp_accounting.pld import privacy_loss_distribution as pld_lib

        interval = cls.discretization(pairs)
        composed = pld_lib.identity(value_discretization_interval=interval)
        for leaf, count in pairs:
            event = _mechanism_event(leaf)
            if hasattr(event, "pld"):
                one = _self_composed(event.pld(interval), count)
            elif isinstance(event, GaussianDpEvent):  # count Gaussians = one with z / sqrt(count)
                one = _gaussian_pld(event.noise_multiplier, 1.0, interval, count)
            else:  # Poisson-sampled Gaussian
                one = _gaussian_pld(event.event.noise_multiplier, event.sampling_probability, interval)
                one = _self_composed(one, count)
            composed = composed.compose(one)
        return float(composed.get_epsilon_for_delta(slack.ideal_delta(target_delta))) + slack.epsilon, target_delta


# Bytes per point of the FFT that dp_accounting's self-composition runs (complex spectra, their
# power, the inverse and the real output; measured 104 to 118 for 10^6 to 10^8 Poisson-sampled
# Gaussian rounds).
PLD_BYTES_PER_POINT = 128


# dp_accounting builds a Gaussian round's PLD point by point on its grid (connect the dots), both
# adjacencies when Poisson-sampled. Measured per point of the grid (the shared machine, 0.6e6 to
# 1.8e7 points): 160 to 235 bytes at the peak; 1.8 to 1.9 us unsampled, 6.7 to 7.5 us sampled.
PLD_GAUSSIAN_BYTES_PER_POINT = 240
PLD_GAUSSIAN_SECONDS_PER_POINT = {False: 2e-6, True: 8e-6}  # keyed by "Poisson-sampled?"
PLD_TIME_LIMIT_S = 60.0  # what the pld accountant may be estimated to take on one round's grid
PLD_REMEDY = "use --accountant rdp (its cost does not grow with the rounds or the grid)"


def _gaussian_pld(noise_multiplier: float, sampling_prob: float, interval: float, count: int = 1):
    """dp_accounting's PLD of a Gaussian round (of `count` unsampled rounds: one Gaussian of noise
    z / sqrt(count)), refused first (one line, in milliseconds) when its grid would not fit in
    memory or take more than `PLD_TIME_LIMIT_S`: a small noise makes the loss range, hence the
    grid, large (z = 0.01 at q = 0.5: 6e7 points, minutes and gigabytes). The grid's size comes from
    the connect-the-dots bounds that dp_accounting reads before it builds the grid."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.pld import privacy_loss_mechanism as pld_mechanism

    standard_deviation = noise_multiplier / math.sqrt(count)
    loss = pld_mechanism.GaussianPrivacyLoss(
        standard_deviation, sampling_prob=sampling_prob, adjacency_type=pld_mechanism.AdjacencyType.REMOVE
    )
    bounds = loss.connect_dots_bounds()
    points = (bounds.epsilon_upper - bounds.epsilon_lower) / interval + 2  # a float: no overflow at a tiny z
    sampled = sampling_prob < 1.0
    what = (
        f"the pld accountant's loss distribution of {f'{count:,} Gaussian rounds' if count > 1 else 'a Gaussian round'}"
        f" (noise multiplier {noise_multiplier:g}"
        + (f", sample rate {sampling_prob:g}" if sampled else "")
        + (f", composed as one of noise {standard_deviation:.4g}" if count > 1 else "")
        + f": {points:,.0f} points on its {interval:g} grid)"
    )
    check_memory(PLD_GAUSSIAN_BYTES_PER_POINT * points, what, PLD_REMEDY)
    seconds = PLD_GAUSSIAN_SECONDS_PER_POINT[sampled] * points
    if seconds > PLD_TIME_LIMIT_S:
        raise LDPValueError(
            f"{what} would take about {seconds:,.0f} s to compute (estimated from its size), more than the "
            f"{PLD_TIME_LIMIT_S:g} s allowed; {PLD_REMEDY}"
        )
    return pld_lib.from_gaussian_mechanism(
        standard_deviation=standard_deviation, sampling_prob=sampling_prob, value_discretization_interval=interval
    )


def _self_composed(one, count: int):
    """`one` composed `count` times, refused first (one line, instead of an OOM kill) when the FFT
    would not fit in the memory available: its length is what dp_accounting computes from the same
    Chernoff tail bounds before it allocates (`compute_self_convolve_bounds`)."""
    from dp_accounting.pld import common as pld_common
    from scipy import fft

    pmf = getattr(one, "_pmf_remove", None)
    if count > 1 and hasattr(pmf, "to_dense_pmf"):
        probs = pmf.to_dense_pmf()._probs
        low, high = pld_common.compute_self_convolve_bounds(probs, count, PLD_TAIL_TRUNCATION)
        points = fft.next_fast_len(max(high - low + 1, len(probs)))
        check_memory(
            PLD_BYTES_PER_POINT * points,
            f"the pld accountant's composition of {count:,} rounds",
            "use --accountant rdp (its cost does not grow with the rounds)",
        )
    return one.self_compose(count, tail_mass_truncation=PLD_TAIL_TRUNCATION)


_REGISTRY: Registry[type[Accountant]] = Registry(
    "accountant", (BasicAccountant, AdvancedAccountant, RdpAccountant, PldAccountant)
)
available = _REGISTRY.available
get_class = _REGISTRY.get_class
# name -> class, read-only, for callers that list every accountant with its description
ACCOUNTANTS: Mapping[str, type[Accountant]] = MappingProxyType({name: get_class(name) for name in available()})


def get(name: str) -> Accountant:
    """A fresh accountant by name (basic, advanced, rdp, pld); an unknown name fails listing them."""
    return get_class(name)()


create_accountant = get  # Opacus's name for the same call

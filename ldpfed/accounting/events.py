"""Privacy-cost events: what one round of one client costs, as data (spec: gradient-noise.md,
Accounting across rounds; federated.md, Accounting per client and Who knows the noise).

An event is an immutable dp_accounting `DpEvent`, so the library's accountants consume it as it is
and any accountant can be chosen afterwards (ldpfed.accounting.accountants):

- `dp_accounting.GaussianDpEvent(z)`, optionally inside `PoissonSampledDpEvent(q, ...)`: the
  library's own; z = noise standard deviation / sensitivity.
- `EpsilonDeltaDpEvent(epsilon, delta)`: a round known only by its (eps, delta) guarantee, e.g.
  every pure eps-LDP randomizer (delta = 0). dp_accounting has no generic eps-DP event.
- `CalibratedDpEvent(event, epsilon, delta)`: a mechanism event together with the per-round
  (eps, delta) it was calibrated to, so that basic/advanced composition use the stated guarantee
  and RDP/PLD the mechanism's exact law.
- `DiscreteGaussianDpEvent(sigma, sensitivity, count, sampling_prob)`: `count` values with discrete
  Gaussian noise on an integer grid (the safe Gaussian sampler): PLD from dp_accounting's
  `from_discrete_gaussian_mechanism`; RDP bounded by the continuous Gaussian's with noise
  multiplier sigma/sensitivity (Canonne, Kamath & Steinke 2020, Proposition 5), without sampling.
- `NotPrivateDpEvent(reason)`: a value released without accounted noise. A subclass of
  dp_accounting's `NonPrivateDpEvent`, so every accountant treats it as infinitely costly; ldpfed
  reports `private: false` with the reason and no epsilon.

- `PlrvoDpEvent(k, theta, clip, params, sample_rate)`: one PLRV-O step, RDP by the joint
  accountant (gradient-noise.md, PLRV-O). An i.n.i.d. Gaussian round is `GaussianDpEvent(z)`
  (round event "inid-gaussian").

A later mechanism adds its own event class here, with the methods
the accountants ask for: `guarantee()` -> (eps, delta) for basic/advanced, `rdp(orders)` for RDP,
`pld(value_discretization_interval)` for PLD, and registers how a round of it is built with
`register_round_event`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attr
import numpy as np

import ldpfed.mechanisms as registry
from ldpfed.accounting.library import dp_event
from ldpfed.accounting.plrvo import PlrvoStep
from ldpfed.mechanisms.gaussian import Gaussian
from ldpfed.samplers.float_slack import FloatSlack, event_slack
from ldpfed.samplers.plrvo_safe import SafeLaw
from ldpfed.samplers.safe_grid import gaussian_sampler_slack
from ldpfed.validation import LDPValueError, canonical_name, check_epsilon, check_fraction, check_positive

GaussianDpEvent = dp_event.GaussianDpEvent
PoissonSampledDpEvent = dp_event.PoissonSampledDpEvent
SelfComposedDpEvent = dp_event.SelfComposedDpEvent


@attr.s(frozen=True, slots=True, auto_attribs=True)
class EpsilonDeltaDpEvent(dp_event.DpEvent):
    """A round that is (epsilon, delta)-DP with nothing more known (delta = 0: pure eps-DP).

    PLD: the privacy loss distribution of the generic (eps, delta)-DP mechanism, which dominates
    every (eps, delta)-DP mechanism (Kairouz, Oh & Viswanath 2015), from dp_accounting's
    `from_privacy_parameters`; its composition is the optimal composition of such rounds.
    """

    epsilon: float
    delta: float = 0.0

    def guarantee(self) -> tuple[float, float]:
        return self.epsilon, self.delta

    def pld(self, value_discretization_interval: float):
        from dp_accounting.pld import common as pld_common
        from dp_accounting.pld import privacy_loss_distribution as pld_lib

        return pld_lib.from_privacy_parameters(
            pld_common.DifferentialPrivacyParameters(self.epsilon, self.delta),
            value_discretization_interval=value_discretization_interval,
        )


@attr.s(frozen=True, slots=True, auto_attribs=True)
class CalibratedDpEvent(dp_event.DpEvent):
    """`event` (for RDP/PLD), calibrated to the per-round (epsilon, delta) (for basic/advanced)."""

    event: dp_event.DpEvent
    epsilon: float
    delta: float

    def guarantee(self) -> tuple[float, float]:
        return self.epsilon, self.delta


def pld_truncation(sigma: float, sensitivity: int) -> int:
    """The noise range [-T, T] of the discrete Gaussian's PLD (dp-accounting truncates the noise there)."""
    return math.ceil(11.6 * sigma) + int(sensitivity)


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DiscreteGaussianDpEvent(dp_event.DpEvent):
    """`count` values, each an integer (grid steps) plus N_Z(0, sigma^2), whose inputs differ by at
    most `sensitivity` steps, the whole round Poisson-sampled with `sampling_prob`.

    PLD: dp_accounting's discrete Gaussian (truncated at 11.6 s + sensitivity: mass left out < 1e-30),
    composed `count` times. The continuous Gaussian's PLD does NOT bound it in general (at large
    eps the discrete delta is the larger one), hence an event of its own. RDP (no sampling):
    D_alpha <= alpha sensitivity^2 / (2 sigma^2), the continuous Gaussian's curve, taken from
    dp_accounting's RdpAccountant for GaussianDpEvent(sigma / sensitivity). The sampled discrete
    Gaussian has no RDP bound here: the rdp accountant refuses it.
    """

    sigma: float
    sensitivity: int
    count: int = 1
    sampling_prob: float = 1.0
    # the sampler's float slack per value (ldpfed.samplers.float_slack), 0 in records made before it
    slack_over: float = 0.0
    slack_under: float = 0.0
    slack_mass: float = 0.0

    def float_slack(self):
        return FloatSlack(self.slack_over, self.slack_under, self.slack_mass).times(self.count)

    def pld(self, value_discretization_interval: float):
        from dp_accounting.pld import privacy_loss_distribution as pld_lib

        one = pld_lib.from_discrete_gaussian_mechanism(  # the library's 11.6 s tail bound, past the shift
            self.sigma,
            sensitivity=int(self.sensitivity),
            truncation_bound=pld_truncation(self.sigma, self.sensitivity),
            sampling_prob=self.sampling_prob,
            value_discretization_interval=value_discretization_interval,
        )
        return one.self_compose(self.count) if self.count > 1 else one

    def rdp(self, orders) -> np.ndarray:
        if self.sampling_prob < 1.0:
            raise LDPValueError("the rdp accountant has no bound for a Poisson-sampled discrete Gaussian; use pld")
        from dp_accounting.rdp import RdpAccountant as LibraryRdpAccountant

        library = LibraryRdpAccountant(list(orders))
        library.compose(GaussianDpEvent(self.sigma / self.sensitivity), int(self.count))
        return np.asarray(library.rdp)


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DiscreteGaussianVectorDpEvent(dp_event.DpEvent):
    """One vector release of the safe i.n.i.d. Gaussian (ldpfed.samplers.safe_grid): integer
    grid inputs plus N_Z(0, s^2) per coordinate, L2 sensitivity at most s / noise_multiplier steps.

    RDP: the continuous Gaussian's curve alpha / (2 z^2) (CKS 2020, Proposition 5, composed over the
    coordinates). No PLD (the continuous Gaussian's does not bound the discrete one): the pld
    accountant refuses it; basic/advanced use its calibrated (eps, delta).
    The slack_* fields: the sampler's float slack over the release's coordinates
    (`safe_grid.gaussian_sampler_slack`), which the rdp accountant composes into its result
    (ldpfed.samplers.float_slack); 0 in records made before it was accounted.

    Poisson sampling (`sampling_prob` < 1; the central trust model's rounds): at an integer order
    alpha the sampled release's divergence D_alpha(mixture || base) is exactly the continuous
    sampled Gaussian's (dp_accounting's `PoissonSampledDpEvent(q, GaussianDpEvent(z))`): expanding
    ((1 - q) + q p_v / p_0)^alpha binomially, every term is a moment E_0[(p_v / p_0)^k] of the
    integer-shifted discrete Gaussian, and for an integer shift v and integer k it equals the
    continuous one, exp(k (k - 1) |v|^2 / (2 s^2)) (the shift k v keeps the lattice, so the
    normaliser cancels). Non-integer orders get no bound (infinity), so the accountant uses the
    integer ones. The other direction, D_alpha(base || mixture), is bounded by the first as for
    the continuous Gaussian (Mironov, Talwar & Zhang 2019); tests/test_central_noise.py checks both
    directions against an exact high-precision computation on the lattice.
    """

    noise_multiplier: float
    slack_over: float = 0.0
    slack_under: float = 0.0
    slack_mass: float = 0.0
    sampling_prob: float = 1.0

    def float_slack(self):
        return FloatSlack(self.slack_over, self.slack_under, self.slack_mass)

    def rdp(self, orders) -> np.ndarray:
        from dp_accounting.rdp import RdpAccountant as LibraryRdpAccountant

        orders = np.asarray(orders, dtype=float)
        gaussian = GaussianDpEvent(self.noise_multiplier)
        if self.sampling_prob >= 1.0:
            library = LibraryRdpAccountant(list(orders))
            library.compose(gaussian)
            return np.asarray(library.rdp)
        integer = orders == np.round(orders)
        curve = np.full(orders.shape, np.inf)
        library = LibraryRdpAccountant(list(orders[integer]))
        library.compose(PoissonSampledDpEvent(self.sampling_prob, gaussian))
        curve[integer] = library.rdp
        return curve


@attr.s(frozen=True, slots=True, auto_attribs=True)
class NotPrivateDpEvent(dp_event.NonPrivateDpEvent):
    """A value left the client without accounted noise; `reason` says which and why."""

    reason: str


@attr.s(frozen=True, slots=True, auto_attribs=True)
class PlrvoDpEvent(dp_event.DpEvent):
    """One DP-SGD step with PLRV-O noise (ldpfed.gradient_noise.plrvo): Gamma(k, theta) inverse
    scale, clip C per example, `params` coordinates, Poisson sampling rate `sample_rate`.

    RDP: the joint accountant (sound) at the integer orders alpha = lam + 1 with lam C theta < 1,
    alpha_step(lam) / lam; +inf at every other order (none is accounted there).
    """

    k: float
    theta: float
    clip: float
    params: int
    sample_rate: float = 1.0
    sampler: str = "continuous"  # "safe": the bound for the safe sampler's law (samplers/plrvo_safe.py)

    def rdp(self, orders) -> list[float]:

        orders = [float(order) for order in orders]
        wanted = sorted({int(round(a - 1)) for a in orders if a > 1 and float(a - 1).is_integer()})
        law = SafeLaw.for_params(self.params) if self.sampler == "safe" else None
        step = PlrvoStep(self.k, self.theta, self.clip, self.params, self.sample_rate, law)
        lams, alphas = step.alphas("joint", wanted)
        by_lam = dict(zip(lams.tolist(), alphas.tolist()))
        return [
            by_lam[int(a - 1)] / (a - 1) if (a > 1 and float(a - 1).is_integer() and int(a - 1) in by_lam) else math.inf
            for a in orders
        ]


# --- building one round's event from a mechanism's parameters --------------------------------------
RoundEventBuilder = Callable[..., dp_event.DpEvent]
_ROUND_EVENTS: dict[str, RoundEventBuilder] = {}


def register_round_event(mechanism: str, builder: RoundEventBuilder) -> None:
    """`builder(epsilon=, delta=, noise_multiplier=, sample_rate=, accountant=)` -> one round's
    event for `mechanism` (raises LDPValueError for parameters the mechanism does not take)."""
    _ROUND_EVENTS[mechanism] = builder


def not_private(reason: str) -> NotPrivateDpEvent:
    return NotPrivateDpEvent(str(reason))


def pure_round(epsilon: float) -> EpsilonDeltaDpEvent:
    """One round of a pure eps-LDP randomizer."""
    return EpsilonDeltaDpEvent(check_epsilon(epsilon), 0.0)


def gaussian_round(
    noise_multiplier: float,
    *,
    sample_rate: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
) -> dp_event.DpEvent:
    """One Gaussian round with noise multiplier z (sd / sensitivity), Poisson-sampled with
    probability `sample_rate` if given, and calibrated to (epsilon, delta) if given."""
    event = GaussianDpEvent(check_positive(noise_multiplier, "noise_multiplier"))
    if sample_rate is not None:
        try:
            rate = float(sample_rate)
        except (TypeError, ValueError):
            rate = math.nan
        if not (0.0 < rate <= 1.0):
            raise LDPValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
        if rate < 1.0:
            event = PoissonSampledDpEvent(rate, event)
    if epsilon is None:
        return event
    return CalibratedDpEvent(event, check_epsilon(epsilon), check_fraction(delta, "delta"))


def legacy_event(epsilon: float, delta: float | None, mechanism: str, noise_multiplier: float | None = None):
    """The event of a round given as (eps, delta[, noise multiplier]); eps = inf: not private."""
    try:
        epsilon = float(epsilon)
    except (TypeError, ValueError):
        raise LDPValueError(f"epsilon must be a number > 0 (inf for no privacy), got {epsilon!r}") from None
    if math.isnan(epsilon) or epsilon <= 0:
        raise LDPValueError(f"epsilon must be > 0 (inf for no privacy), got {epsilon!r}")
    delta = 0.0 if delta is None else float(delta)
    if not (0.0 <= delta < 1.0):
        raise LDPValueError(f"delta must be in [0, 1), got {delta!r}")
    if math.isinf(epsilon):
        return not_private(f"mechanism {mechanism} releases its value without noise")
    if noise_multiplier is None:
        return EpsilonDeltaDpEvent(epsilon, delta)
    noise_multiplier = float(noise_multiplier)
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise LDPValueError(f"noise_multiplier must be a finite number > 0, got {noise_multiplier!r}")
    if delta == 0.0:
        raise LDPValueError("a Gaussian round needs its delta in (0, 1)")
    return CalibratedDpEvent(GaussianDpEvent(noise_multiplier), epsilon, delta)


def round_epsilon(event: dp_event.DpEvent, delta: float) -> float:
    """The per-round eps of a Gaussian (or sampled, or discrete Gaussian) event at per-round `delta`,
    from dp_accounting's PLD (accountant) (for basic/advanced composition of such rounds), with the
    sampler's float slack where the event has one."""
    from dp_accounting.pld import PLDAccountant

    delta = check_fraction(delta, "delta")
    slack = event_slack(event)  # the sampler's float slack (ldpfed.samplers.float_slack), if any
    if hasattr(event, "pld"):  # ldpfed's own events (e.g. the discrete Gaussian)
        return float(event.pld(1e-4).get_epsilon_for_delta(slack.ideal_delta(delta))) + slack.epsilon
    return float(PLDAccountant().compose(event).get_epsilon(delta))


def round_event(
    mechanism: str,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    noise_multiplier: float | None = None,
    sample_rate: float | None = None,
) -> dp_event.DpEvent:
    """One round's event for a mechanism named in `ldpfed mechanisms` (or 'none')."""
    key = canonical_name(mechanism)
    if key in _ROUND_EVENTS:
        return _ROUND_EVENTS[key](
            epsilon=epsilon, delta=delta, noise_multiplier=noise_multiplier, sample_rate=sample_rate
        )

    cls = registry.get_class(key)  # unknown names fail here, listing the known ones
    if cls.approximate:
        raise LDPValueError(f"no round event is registered for the approximate mechanism {cls.name!r}")
    if noise_multiplier is not None:
        raise LDPValueError(f"{cls.name} is pure eps-LDP: give its epsilon, not a noise multiplier")
    if sample_rate is not None:
        raise LDPValueError(
            f"{cls.name} is pure eps-LDP: amplification by sampling is accounted for Gaussian rounds only"
        )
    if epsilon is None:
        raise LDPValueError(f"{cls.name} needs its epsilon per round")
    cls(epsilon=epsilon, delta=delta)  # the mechanism's own checks (bad eps, a delta for a pure one)
    return pure_round(epsilon)


def _gaussian_builder(*, epsilon, delta, noise_multiplier, sample_rate) -> dp_event.DpEvent:
    """ldpfed's Gaussian randomizer given (eps, delta): its default (safe) sampler, a discrete
    Gaussian on the grid (`gaussian_mechanism_event`). Given a noise multiplier z: a continuous
    Gaussian round with sd / sensitivity = z (an accounting question about that mechanism)."""
    if (epsilon is None) == (noise_multiplier is None):
        raise LDPValueError("gaussian needs exactly one of epsilon (with delta) or noise_multiplier")
    if noise_multiplier is not None:
        return gaussian_round(noise_multiplier, sample_rate=sample_rate)

    mechanism = Gaussian(epsilon=epsilon, delta=delta)
    rate = 1.0 if sample_rate is None else sample_rate
    return CalibratedDpEvent(gaussian_mechanism_event(mechanism, sample_rate=rate), mechanism.epsilon, mechanism.delta)


def gaussian_mechanism_event(mechanism, count: int = 1, sample_rate: float = 1.0) -> dp_event.DpEvent:
    """The event of `count` values of a Gaussian mechanism object: the discrete Gaussian of its safe
    sampler (noise parameter s and sensitivity 2J + 2 in grid steps, with the sampler's float slack
    per value, dp-accounting's truncation included), or, for the continuous
    sampler, one Gaussian with noise multiplier (sigma/2)/sqrt(count) (m Gaussians compose exactly
    into one), Poisson-sampled when sample_rate < 1."""
    rate = check_fraction(sample_rate, "sample_rate") if sample_rate != 1.0 else 1.0
    safe = mechanism.safe_sampler
    if safe is not None:
        slack = gaussian_sampler_slack(
            safe.sigma, 1, safe.sensitivity, truncation=pld_truncation(safe.sigma, safe.sensitivity)
        )
        return DiscreteGaussianDpEvent(
            safe.sigma, safe.sensitivity, int(count), rate, slack.over, slack.under, slack.mass
        )
    return gaussian_round(mechanism.noise_multiplier / math.sqrt(count), sample_rate=None if rate == 1.0 else rate)


def _none_builder(*, epsilon, delta, noise_multiplier, sample_rate) -> dp_event.DpEvent:
    if any(value is not None for value in (epsilon, delta, noise_multiplier, sample_rate)):
        raise LDPValueError("mechanism none adds no noise and takes no privacy parameters")
    return not_private("mechanism none sends the clipped value without noise")


def _inid_gaussian_builder(*, epsilon, delta, noise_multiplier, sample_rate) -> dp_event.DpEvent:
    """i.n.i.d. Gaussian (ldpfed.gradient_noise.inid_gaussian): s_i^2 = z^2 D_i ||D||_1 has
    Mahalanobis sensitivity 1/z whatever the profile D, so a round is the Gaussian event of z."""
    if noise_multiplier is None or epsilon is not None or delta is not None:
        raise LDPValueError(
            "inid-gaussian is accounted by its noise multiplier (and sample rate); "
            "calibrate (eps, delta) with `ldpfed calibrate`"
        )
    return gaussian_round(noise_multiplier, sample_rate=sample_rate)


register_round_event("gaussian", _gaussian_builder)
register_round_event("inid-gaussian", _inid_gaussian_builder)
register_round_event("none", _none_builder)


# --- serialization -------------------------------------------------------------------------------
_LOCAL_EVENTS = {
    cls.__name__: cls
    for cls in (
        EpsilonDeltaDpEvent,
        CalibratedDpEvent,
        NotPrivateDpEvent,
        PlrvoDpEvent,
        DiscreteGaussianDpEvent,
        DiscreteGaussianVectorDpEvent,
    )
}


def event_to_dict(event: dp_event.DpEvent) -> dict:
    """JSON-ready {"type": class name, field: value...}, nested events included."""
    record = {"type": type(event).__name__}
    for field in attr.fields(type(event)):
        value = getattr(event, field.name)
        if isinstance(value, dp_event.DpEvent):
            value = event_to_dict(value)
        elif isinstance(value, (list, tuple)):
            value = [event_to_dict(v) if isinstance(v, dp_event.DpEvent) else v for v in value]
        record[field.name] = value
    return record


def event_from_dict(record: dict) -> dp_event.DpEvent:
    """Inverse of `event_to_dict` (ldpfed's events and dp_accounting's)."""
    fields = dict(record)
    name = fields.pop("type")
    cls = _LOCAL_EVENTS.get(name) or getattr(dp_event, name, None)
    if not (isinstance(cls, type) and issubclass(cls, dp_event.DpEvent)):
        raise LDPValueError(f"unknown privacy event {name!r}")
    for key, value in fields.items():
        if isinstance(value, dict) and "type" in value:
            fields[key] = event_from_dict(value)
        elif isinstance(value, list):
            fields[key] = [event_from_dict(v) if isinstance(v, dict) else v for v in value]
    return cls(**fields)


def describe_event(event: dp_event.DpEvent) -> str:
    """A short human-readable name of an event (for tables and the ledger's mechanism column)."""
    if isinstance(event, EpsilonDeltaDpEvent):
        return f"({event.epsilon:g}, {event.delta:g})-DP" if event.delta else f"{event.epsilon:g}-DP"
    if isinstance(event, CalibratedDpEvent):
        return f"{describe_event(event.event)} calibrated to ({event.epsilon:g}, {event.delta:g})"
    if isinstance(event, GaussianDpEvent):
        return f"Gaussian z={event.noise_multiplier:.6g}"
    if isinstance(event, DiscreteGaussianDpEvent):
        sampled = f", Poisson q={event.sampling_prob:g}" if event.sampling_prob < 1 else ""
        return f"{event.count} x discrete Gaussian s={event.sigma:.6g} steps, sensitivity {event.sensitivity}{sampled}"
    if isinstance(event, PoissonSampledDpEvent):
        return f"Poisson q={event.sampling_probability:g} of {describe_event(event.event)}"
    if isinstance(event, SelfComposedDpEvent):
        return f"{event.count} x {describe_event(event.event)}"
    if isinstance(event, dp_event.ComposedDpEvent):  # e.g. LDPVec's angle and norm
        return " + ".join(describe_event(part) for part in event.events)
    if isinstance(event, NotPrivateDpEvent):
        return f"not private: {event.reason}"
    if isinstance(event, PlrvoDpEvent):
        return f"PLRV-O k={event.k:g} theta={event.theta:g} C={event.clip:g} n={event.params} q={event.sample_rate:g}"
    return type(event).__name__

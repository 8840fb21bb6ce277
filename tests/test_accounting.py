"""Privacy accounting (gradient-noise.md, Accounting across rounds; federated.md, Accounting per
client): events, the four accountants against dp-accounting, Opacus's published values and an
exact mpmath reference, the per-client ledger, not-private releases and budgets."""

from __future__ import annotations

import json
import math

import attr
import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.pld import accountant as pld_accountant
from dp_accounting.pld import common as pld_common
from dp_accounting.rdp import RdpAccountant
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpfed.accounting import (
    Budget,
    CalibratedDpEvent,
    DiscreteGaussianDpEvent,
    EpsilonDeltaDpEvent,
    GaussianDpEvent,
    PoissonSampledDpEvent,
    PrivacyLedger,
    SelfComposedDpEvent,
    advanced_composition,
    create_accountant,
    event_from_dict,
    event_to_dict,
    gaussian_mechanism_event,
    gaussian_round,
    legacy_event,
    not_private,
    pure_round,
    round_epsilon,
    round_event,
)
from ldpfed.accounting.accountants import PLD_DISCRETIZATION
from ldpfed.mechanisms.gaussian import SENSITIVITY, Gaussian
from ldpfed.outputs import dumps
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError

# Opacus's published test vector (opacus/tests/accountants_test.py): Poisson-subsampled Gaussian,
# noise multiplier 1.5, q = 0.04, int(90 / 0.04) = 2250 steps, delta = 1e-5.
OPACUS_STEPS, OPACUS_Q, OPACUS_Z, OPACUS_DELTA = 2250, 0.04, 1.5, 1e-5


def record(ledger, client_id, round_, epsilon, delta, mechanism, noise_multiplier=None) -> None:
    """One round given as (eps, delta[, noise multiplier]), recorded as its event."""
    ledger.record_event(client_id, round_, legacy_event(epsilon, delta, mechanism, noise_multiplier), mechanism)


OPACUS_RDP_EPSILON = 7.32911117143  # test_rdp_accountant, assertAlmostEqual (7 places)
OPACUS_PRV_EPSILON = 6.777395712150674  # test_prv_accountant; PRV's default eps_error is 0.01
OPACUS_PRV_EPS_ERROR = 0.01


def opacus_event():
    return SelfComposedDpEvent(PoissonSampledDpEvent(OPACUS_Q, GaussianDpEvent(OPACUS_Z)), OPACUS_STEPS)


# --- published values ------------------------------------------------------------------------------
def test_rdp_on_opacus_test_vector():
    """dp-accounting's RDP gives 7.32933 where Opacus publishes 7.32911 (optimal order 3.9 in both):
    for fractional orders dp-accounting sums the absolute values of the binomial series (an upper
    bound), Opacus the signed series. So: equal to dp-accounting exactly, above Opacus's value by
    less than 3e-4 (4e-5 relative), never below it."""
    ours = create_accountant("rdp").compose(opacus_event()).get_epsilon(OPACUS_DELTA)
    library = RdpAccountant().compose(opacus_event()).get_epsilon(OPACUS_DELTA)
    assert ours == pytest.approx(library, rel=1e-12)
    assert OPACUS_RDP_EPSILON <= ours <= OPACUS_RDP_EPSILON + 3e-4


def test_pld_on_opacus_test_vector():
    """dp-accounting's PLD (pessimistic) and Opacus's PRV both compose the privacy loss
    distribution: they agree within PRV's eps error; both are well below the RDP figure."""
    ours = create_accountant("pld").compose(opacus_event()).get_epsilon(OPACUS_DELTA)
    library = PLDAccountant().compose(opacus_event()).get_epsilon(OPACUS_DELTA)
    assert ours == pytest.approx(library, rel=1e-9)
    assert abs(ours - OPACUS_PRV_EPSILON) <= OPACUS_PRV_EPS_ERROR
    assert ours < OPACUS_RDP_EPSILON - 0.5


def exact_composition_delta(eps: float, rounds: int, total_eps: float) -> float:
    """delta(total_eps) of `rounds` compositions of the generic eps-DP mechanism (binary randomized
    response), in mpmath: sum over the number j of 'unfavourable' outcomes of
    max(0, P(j) - e^total_eps Q(j)), P(j) = C(k, j) e^{(k-j) eps} / (1+e^eps)^k, Q the mirror
    (Kairouz, Oh & Viswanath 2015, Thm 3.3)."""
    mpmath.mp.dps = 50
    e, k, total = mpmath.mpf(eps), rounds, mpmath.mpf(total_eps)
    norm = (1 + mpmath.exp(e)) ** k
    delta = mpmath.mpf(0)
    for j in range(k + 1):
        p = mpmath.binomial(k, j) * mpmath.exp((k - j) * e) / norm
        q = mpmath.binomial(k, j) * mpmath.exp(j * e) / norm
        delta += max(mpmath.mpf(0), p - mpmath.exp(total) * q)
    return float(delta)


@pytest.mark.parametrize(("eps", "rounds"), [(0.1, 100), (0.5, 30), (1.0, 10)])
def test_pure_rounds_by_pld_match_the_exact_optimal_composition(eps, rounds):
    """The pld accountant's delta at a given total eps equals the exact optimal composition
    (mpmath), up to its pessimistic discretization; its eps at 1e-5 is below basic and advanced."""
    accountant = create_accountant("pld").compose(pure_round(eps), rounds)
    eps_pld = accountant.get_epsilon(1e-5)
    # the exact delta at the pld eps is within the target: pld is a valid (upper) bound ...
    assert exact_composition_delta(eps, rounds, eps_pld) <= 1e-5 * (1 + 1e-6)
    # ... and tight: a total eps smaller by 2 grid steps per round of the discretization fails
    assert exact_composition_delta(eps, rounds, eps_pld - 0.01) > 1e-5
    basic = create_accountant("basic").compose(pure_round(eps), rounds).get_epsilon(1e-5)
    advanced = create_accountant("advanced").compose(pure_round(eps), rounds).get_epsilon(1e-5)
    assert basic == pytest.approx(eps * rounds)
    assert eps_pld <= advanced <= basic
    assert eps_pld < basic
    # dp-accounting's KOV optimal composition gives the best eps on the grid (k - 2i) eps: pld is
    # at most that and within one grid step below
    kov = pld_accountant.advanced_composition(pld_common.DifferentialPrivacyParameters(eps, 0.0), rounds, 1e-5)
    assert kov - 2 * eps - 1e-9 <= eps_pld <= kov + 1e-9


def test_pld_beats_advanced_for_many_small_rounds():
    pld = create_accountant("pld").compose(pure_round(0.1), 100).get_epsilon(1e-5)
    advanced = create_accountant("advanced").compose(pure_round(0.1), 100).get_epsilon(1e-5)
    assert advanced == pytest.approx(advanced_composition([0.1] * 100, 1e-5))
    assert pld < advanced - 1.0  # 4.31 against 5.85


# --- advanced composition (DRV) --------------------------------------------------------------------
def test_advanced_composition_on_hand_derived_values():
    """k = 100 rounds of eps = 0.1, delta' = 1e-5:
    sqrt(2 * 100 * ln 1e5) * 0.1 = sqrt(2302.585) * 0.1 = 4.79853; 100 * 0.1 * (e^0.1 - 1) = 1.05171."""
    assert advanced_composition([0.1] * 100, 1e-5) == pytest.approx(4.79853 + 1.05171, abs=1e-4)
    assert advanced_composition([0.1], 1e-5, counts=[100]) == pytest.approx(advanced_composition([0.1] * 100, 1e-5))
    expected = math.sqrt(2 * math.log(1e3) * 0.05) + 0.1 * 0.1051709 + 0.2 * 0.2214028
    assert advanced_composition([0.1, 0.2], 1e-3) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(("eps", "k"), [(0.05, 200), (0.1, 100), (0.3, 50)])
def test_advanced_composition_is_valid_against_the_optimal_theorem(eps, k):
    optimal = pld_accountant.advanced_composition(pld_common.DifferentialPrivacyParameters(eps, 0.0), k, 1e-5)
    assert optimal <= advanced_composition([eps] * k, 1e-5)


def test_advanced_accountant_reports_basic_where_smaller():
    few = create_accountant("advanced").compose(pure_round(1.0), 2).spent(1e-5)
    assert (few.epsilon, few.delta) == (2.0, 0.0)
    many = create_accountant("advanced").compose(EpsilonDeltaDpEvent(0.05, 1e-7), 400).spent(1e-5)
    assert many.epsilon == pytest.approx(advanced_composition([0.05] * 400, 1e-5)) and many.epsilon < 20.0
    assert many.delta == pytest.approx(400 * 1e-7 + 1e-5)


# --- Gaussian rounds ---------------------------------------------------------------------------------
@pytest.mark.parametrize("noise_multiplier", [0.8, 2.0, 5.0])
def test_one_gaussian_round_against_dp_accounting(noise_multiplier):
    event = GaussianDpEvent(noise_multiplier)
    rdp = create_accountant("rdp").compose(event).get_epsilon(1e-5)
    assert rdp == pytest.approx(RdpAccountant().compose(event).get_epsilon(1e-5), rel=1e-12)
    exact = dp_accounting.get_epsilon_gaussian(noise_multiplier, 1e-5)
    pld = create_accountant("pld").compose(event).get_epsilon(1e-5)
    assert exact <= pld <= exact + 2 * PLD_DISCRETIZATION  # pessimistic, within its discretization
    assert pld < rdp


def _ideal(event):
    """The event without its sampler's float slack (the ideal law's fields only)."""
    return attr.evolve(event, slack_over=0.0, slack_under=0.0, slack_mass=0.0)


def test_calibrated_gaussian_round_uses_the_mechanisms_sigma():
    """The default (safe) Gaussian's round is its discrete Gaussian (s and 2J + 2 in grid steps),
    accounted by dp_accounting's discrete Gaussian PLD; the continuous sampler's a GaussianDpEvent."""
    event = round_event("gaussian", epsilon=1.0, delta=1e-6)
    assert isinstance(event, CalibratedDpEvent) and (event.epsilon, event.delta) == (1.0, 1e-6)
    safe = Gaussian(epsilon=1.0, delta=1e-6).safe_sampler
    assert _ideal(event.event) == DiscreteGaussianDpEvent(safe.sigma, safe.sensitivity, 1, 1.0)
    assert 0 < event.event.slack_under < event.event.slack_over < 1e-10 and 0 < event.event.slack_mass < 1e-15
    continuous = Gaussian(epsilon=1.0, delta=1e-6, sampler="continuous")
    assert gaussian_mechanism_event(continuous) == GaussianDpEvent(continuous.sigma / SENSITIVITY)
    # the analytic calibration is exact: one round's PLD eps at 1e-6 is 1.0 (up to discretization)
    assert round_epsilon(event.event, 1e-6) == pytest.approx(1.0, abs=2 * PLD_DISCRETIZATION)


def test_discrete_gaussian_event_pld_and_rdp():
    """The safe Gaussian's event: PLD from dp_accounting's discrete Gaussian (m values composed), RDP
    the continuous curve with z / sqrt(m); the sampled one has PLD but no RDP. The continuous PLD
    does not bound the discrete one in general (eps = 10^4 below), which is why it has its own event."""
    from dp_accounting.pld.privacy_loss_mechanism import DiscreteGaussianPrivacyLoss, GaussianPrivacyLoss

    event = DiscreteGaussianDpEvent(3000.0, 2050, 3)
    one = DiscreteGaussianDpEvent(3000.0, 2050).pld(1e-4)
    assert event.pld(1e-4).get_epsilon_for_delta(1e-6) == pytest.approx(one.self_compose(3).get_epsilon_for_delta(1e-6))
    orders = [2.0, 8.0, 32.0]
    library = dp_accounting.rdp.RdpAccountant(orders).compose(GaussianDpEvent(3000.0 / 2050 / math.sqrt(3)))
    assert np.allclose(event.rdp(np.array(orders)), library.rdp, rtol=1e-12)
    sampled = CalibratedDpEvent(DiscreteGaussianDpEvent(3000.0, 2050, 1, 0.1), 1.0, 1e-6)
    unsampled = CalibratedDpEvent(DiscreteGaussianDpEvent(3000.0, 2050), 1.0, 1e-6)
    amplified = create_accountant("pld").compose(sampled, 10).get_epsilon(1e-5)
    assert 0 < amplified < 0.5 * create_accountant("pld").compose(unsampled, 10).get_epsilon(1e-5)
    with pytest.raises(LDPValueError, match="Poisson-sampled discrete Gaussian"):
        create_accountant("rdp").compose(sampled, 10).get_epsilon(1e-5)
    sigma = 955.1568759658245  # the continuous calibration of eps = 10^4, delta = 1e-5, sensitivity 131074
    discrete = DiscreteGaussianPrivacyLoss(sigma, sensitivity=131074, truncation_bound=200_000).get_delta_for_epsilon(
        1e4
    )
    assert discrete > GaussianPrivacyLoss(sigma, sensitivity=131074).get_delta_for_epsilon(1e4)


def test_privatizer_round_event_is_the_discrete_gaussian_of_its_m_values():
    privatizer = UpdatePrivatizer("gaussian", 5.0, 0.1, delta=1e-6)
    mechanism = privatizer.per_value_mechanism(100)
    m = privatizer.dims_reported(100)
    safe = mechanism.safe_sampler
    event = privatizer.mechanism_event(100)
    assert _ideal(event) == DiscreteGaussianDpEvent(safe.sigma, safe.sensitivity, m, 1.0)
    assert 0 < event.slack_over < 1e-10  # per value; the event composes it over its m values
    assert privatizer.noise_multiplier(100) == pytest.approx(safe.sigma / safe.sensitivity / math.sqrt(m))


def test_update_privatizer_rounds_over_the_ledger_match_dp_accounting():
    ledger = PrivacyLedger()
    privatizer = UpdatePrivatizer("gaussian", 1.0, 0.1, delta=1e-6)
    for r in range(100):
        ledger.record_event(7, r, legacy_event(1.0, 1e-6, "gaussian", privatizer.noise_multiplier(50)), "gaussian")
    library = RdpAccountant().compose(dp_accounting.GaussianDpEvent(privatizer.noise_multiplier(50)), 100)
    totals = ledger.totals(delta_target=1e-5)["7"]
    assert totals["rdp_epsilon"] == pytest.approx(library.get_epsilon(1e-5), rel=1e-12)
    assert totals["pld_epsilon"] < totals["rdp_epsilon"] < totals["basic_epsilon"] == pytest.approx(100.0)


def test_m_gaussian_reports_compose_to_one_gaussian_with_multiplier_over_sqrt_m():
    """The identity behind UpdatePrivatizer.noise_multiplier, checked in dp_accounting."""
    z, m = 3.0, 4
    many = RdpAccountant().compose(dp_accounting.GaussianDpEvent(z), m)
    one = RdpAccountant().compose(dp_accounting.GaussianDpEvent(z / math.sqrt(m)))
    assert many.get_epsilon(1e-5) == pytest.approx(one.get_epsilon(1e-5), rel=1e-9)


def test_subsampling_only_lowers_the_cost():
    plain = create_accountant("pld").compose(gaussian_round(2.0), 20).get_epsilon(1e-5)
    sampled = create_accountant("pld").compose(gaussian_round(2.0, sample_rate=0.1), 20).get_epsilon(1e-5)
    assert sampled < plain / 3
    assert gaussian_round(1.0, sample_rate=1.0) == GaussianDpEvent(1.0)


# --- what each accountant refuses ------------------------------------------------------------------
def test_unsupported_events_are_refused_with_a_reason():
    with pytest.raises(LDPValueError, match="rdp accountant cannot account"):
        create_accountant("rdp").compose(pure_round(1.0))
    with pytest.raises(LDPValueError, match="basic accountant needs each round's"):
        create_accountant("basic").compose(gaussian_round(1.0))
    with pytest.raises(LDPValueError, match="unknown accountant"):
        create_accountant("prv")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mechanism": "laplace", "noise_multiplier": 1.0}, "not a noise multiplier"),
        ({"mechanism": "laplace", "epsilon": 1.0, "sample_rate": 0.1}, "Gaussian rounds only"),
        ({"mechanism": "laplace", "epsilon": 1.0, "delta": 1e-5}, "takes no delta"),
        ({"mechanism": "laplace"}, "needs its epsilon"),
        ({"mechanism": "nope", "epsilon": 1.0}, "unknown mechanism"),
        ({"mechanism": "gaussian", "epsilon": 1.0}, "give delta"),
        ({"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "noise_multiplier": 1.0}, "exactly one"),
        ({"mechanism": "gaussian", "noise_multiplier": 1.0, "sample_rate": 0.0}, "sample_rate"),
        ({"mechanism": "none", "epsilon": 1.0}, "takes no privacy parameters"),
    ],
)
def test_round_event_bad_input(kwargs, match):
    with pytest.raises(LDPValueError, match=match):
        round_event(**kwargs)


# --- not private -----------------------------------------------------------------------------------
def test_a_not_private_round_gives_private_false_and_no_epsilon():
    ledger = PrivacyLedger()
    record(ledger, "clean", 0, 0.5, None, "laplace")
    record(ledger, "open", 0, math.inf, 0.0, "none")
    record(ledger, "open", 1, 0.5, None, "laplace")
    ledger.record_event("thesis", 0, not_private("noise-free local steps in the released model"))
    totals = ledger.totals()
    assert totals["clean"]["private"] is True and totals["clean"]["basic_epsilon"] == 0.5
    for client in ("open", "thesis"):
        assert totals[client]["private"] is False and totals[client]["reasons"]
        assert all(totals[client][f"{name}_epsilon"] is None for name in ("basic", "advanced", "rdp", "pld"))
    assert not ledger.private and len(ledger.reasons()) == 2
    spent = ledger.max_spent("pld")
    assert spent.private is False and spent.epsilon is None
    state = json.loads(dumps(ledger.state_dict()))
    assert state["private"] is False and state["totals"]["open"]["pld_epsilon"] is None
    for name in ("basic", "advanced", "rdp", "pld"):
        assert create_accountant(name).compose(not_private("x"), 3).spent().to_dict() == {
            "accountant": name,
            "epsilon": None,
            "delta": None,
            "private": False,
            "reasons": ["x"],
            "float_slack_epsilon": None,
            "float_slack_delta": None,
        }


def test_dp_accountings_own_accountants_agree_that_it_is_not_private():
    event = not_private("clean release")
    assert isinstance(event, dp_accounting.NonPrivateDpEvent)
    assert math.isinf(PLDAccountant().compose(event).get_epsilon(1e-5))
    assert math.isinf(RdpAccountant().compose(event).get_epsilon(1e-5))


# --- the ledger -------------------------------------------------------------------------------------
def test_basic_composition_sums_over_the_rounds_a_client_took_part_in():
    ledger = PrivacyLedger()
    for round_, eps in enumerate([0.5, 0.25, 1.0]):
        record(ledger, "a", round_, eps, 1e-6, "piecewise")
    record(ledger, "b", 1, 0.5, None, "laplace")  # sampled in one round of three
    totals = ledger.totals()
    assert totals["a"]["rounds"] == 3 and totals["a"]["basic_epsilon"] == pytest.approx(1.75)
    assert totals["a"]["basic_delta"] == pytest.approx(3e-6)
    assert totals["b"]["rounds"] == 1 and totals["b"]["basic_epsilon"] == 0.5 and totals["b"]["basic_delta"] == 0.0
    assert totals["b"]["rdp_epsilon"] is None  # pure rounds have no RDP figure
    assert ledger.spent("b", "pld").epsilon <= 0.5 + 1e-9


def test_state_dict_round_trip_and_frames():
    ledger = PrivacyLedger()
    for r in range(3):
        record(ledger, r % 2, r, 0.5, 1e-6, "gaussian", noise_multiplier=1.5)
    ledger.record_event(5, 0, gaussian_round(1.5, sample_rate=0.04))
    ledger.record_event(6, 0, not_private("clean"))
    state = json.loads(dumps(ledger.state_dict(delta_target=1e-5)))
    assert state["amplification_by_client_sampling"] is False and len(state["entries"]) == 5
    restored = PrivacyLedger.from_state_dict(state)
    assert restored.totals(1e-5) == ledger.totals(1e-5)
    assert json.loads(dumps(restored.totals(1e-5))) == state["totals"]
    frame = ledger.to_frame(1e-5)
    assert list(frame["client_id"]) == ["0", "1", "5", "6"] and list(frame["rounds"]) == [2, 1, 1, 1]
    assert np.allclose(frame["basic_epsilon"][:2], [1.0, 0.5]) and list(frame["private"]) == [True] * 3 + [False]
    assert len(ledger.entries_frame()) == 5


@pytest.mark.parametrize(
    "event",
    [
        pure_round(0.3),
        EpsilonDeltaDpEvent(1.0, 1e-6),
        not_private("why"),
        gaussian_round(2.0),
        gaussian_round(2.0, sample_rate=0.5, epsilon=1.0, delta=1e-5),
        opacus_event(),
    ],
)
def test_events_serialize_and_come_back(event):
    assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((0, 0, 0.0, 0.0, "laplace"), {}, "epsilon"),
        ((0, 0, float("nan"), 0.0, "laplace"), {}, "epsilon"),
        ((0, 0, 1.0, 1.0, "gaussian"), {}, "delta"),
        ((0, 0, 1.0, -0.1, "gaussian"), {}, "delta"),
        ((0, -1, 1.0, 0.0, "laplace"), {}, "round"),
        ((0, 0, 1.0, 1e-5, "gaussian"), {"noise_multiplier": 0.0}, "noise_multiplier"),
        ((0, 0, 1.0, 0.0, "gaussian"), {"noise_multiplier": 1.0}, "delta"),
    ],
)
def test_bad_records(args, kwargs, match):
    with pytest.raises(LDPValueError, match=match):
        record(PrivacyLedger(), *args, **kwargs)


def test_duplicate_round_and_bad_delta_target():
    ledger = PrivacyLedger()
    record(ledger, 1, 4, 1.0, 0.0, "laplace")
    with pytest.raises(LDPValueError, match="already has an entry"):
        record(ledger, 1, 4, 1.0, 0.0, "laplace")
    with pytest.raises(LDPValueError, match="DpEvent"):
        ledger.record_event(1, 5, (1.0, 0.0))
    for bad in (0.0, 1.0, "x"):
        with pytest.raises(LDPValueError, match="delta_target"):
            ledger.totals(delta_target=bad)


# --- budgets ---------------------------------------------------------------------------------------
def test_a_budget_affords_the_last_round_within_it_and_not_one_more():
    ledger = PrivacyLedger()
    for r in range(4):
        ledger.record_event("c", r, pure_round(1.0))
    assert Budget(5.0, "basic").affords(ledger, "c", pure_round(1.0))  # 5 <= 5
    ledger.record_event("c", 4, pure_round(1.0))
    assert not Budget(5.0, "basic").affords(ledger, "c", pure_round(1.0))
    assert Budget(1.0).affords(ledger, "new client", pure_round(1.0))
    assert not Budget(1e9).affords(ledger, "new client", not_private("clean"))
    with pytest.raises(LDPValueError, match="rdp accountant cannot"):
        Budget(10.0, "rdp").affords(ledger, "c", pure_round(1.0))
    with pytest.raises(LDPValueError, match="max-epsilon"):
        Budget(0.0)


def test_a_budgeted_run_never_overspends_and_a_tighter_accountant_allows_more_rounds():
    """Clients sampled at random each round take part only if they can afford it: no client ends
    above the budget, and pld admits more rounds than basic for the same budget."""
    rng = np.random.default_rng(12)
    limit, event = 2.0, pure_round(0.1)
    rounds_taken = {}
    for accountant in ("basic", "pld"):
        ledger, budget = PrivacyLedger(), Budget(limit, accountant)
        for server_round in range(80):
            taking_part, stopped = budget.admit(ledger, rng.choice(6, size=4, replace=False), event)
            for client in taking_part:
                ledger.record_event(client, server_round, event)
            assert not any(budget.affords(ledger, client, event) for client in stopped)
        spent = [ledger.spent(client, accountant).epsilon for client in ledger.clients()]
        assert max(spent) <= limit
        rounds_taken[accountant] = sum(t["rounds"] for t in ledger.totals().values())
    assert rounds_taken["basic"] == 6 * 20  # 20 rounds of 0.1 each, then every client stops
    assert rounds_taken["pld"] >= 6 * 27  # pld: 27 rounds cost eps = 1.95 at delta 1e-5


# --- reported totals never decrease ---------------------------------------------------------------
PURE = st.builds(pure_round, st.floats(0.05, 2.0))
CALIBRATED_GAUSSIAN = st.builds(
    lambda eps, delta, q: round_event("gaussian", epsilon=eps, delta=delta, sample_rate=q),
    st.floats(0.2, 4.0),
    st.sampled_from([1e-7, 1e-6, 1e-5]),
    st.sampled_from([None, 0.05, 0.5]),
)
UNSAMPLED_CALIBRATED_GAUSSIAN = st.builds(  # rdp: the sampled discrete Gaussian has no RDP bound here
    lambda eps, delta: round_event("gaussian", epsilon=eps, delta=delta),
    st.floats(0.2, 4.0),
    st.sampled_from([1e-7, 1e-6, 1e-5]),
)
SAMPLED_GAUSSIAN = st.builds(gaussian_round, st.floats(0.6, 5.0), sample_rate=st.sampled_from([None, 0.01, 0.2]))


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    accountant_and_events=st.one_of(
        st.tuples(
            st.sampled_from(["basic", "advanced", "pld"]),
            st.lists(st.one_of(PURE, CALIBRATED_GAUSSIAN), min_size=1, max_size=6),
        ),
        st.tuples(
            st.just("rdp"), st.lists(st.one_of(UNSAMPLED_CALIBRATED_GAUSSIAN, SAMPLED_GAUSSIAN), min_size=1, max_size=6)
        ),
        st.tuples(st.just("pld"), st.lists(SAMPLED_GAUSSIAN, min_size=1, max_size=6)),
    ),
    skips=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_a_clients_reported_total_never_decreases(accountant_and_events, skips):
    accountant, events = accountant_and_events
    ledger = PrivacyLedger()
    previous = 0.0
    for server_round, (event, skip) in enumerate(zip(events, skips)):
        if skip:  # the client was not sampled: another client's round must not change its total
            ledger.record_event("other", server_round, event)
        else:
            ledger.record_event("c", server_round, event)
        total = ledger.spent("c", accountant).epsilon
        assert total >= previous - 1e-12
        previous = total


def test_a_wider_pld_grid_stays_an_upper_bound_close_to_the_fine_one(monkeypatch):
    """Heterogeneous large-eps rounds get a wider grid (speed); the figure stays pessimistic and
    within one grid step per round of the 1e-4 grid's."""
    from ldpfed.accounting.accountants import PldAccountant

    pairs = ((pure_round(0.7), 15), (pure_round(0.45), 15))
    fine = PldAccountant.compute(pairs, 1e-5)[0]  # the class method: no cache in between
    assert fine == pytest.approx(
        create_accountant("pld").compose(pairs[0][0], 15).compose(pairs[1][0], 15).get_epsilon(1e-5), rel=1e-12
    )
    monkeypatch.setattr(PldAccountant, "grid_points", 2**10)
    step = PldAccountant.discretization(pairs)
    assert step > 10 * PLD_DISCRETIZATION
    coarse = PldAccountant.compute(pairs, 1e-5)[0]
    assert fine < coarse <= fine + 30 * step
    assert coarse < 15 * 0.7 + 15 * 0.45  # still below basic composition


def test_budget_admits_within_and_refuses_what_it_cannot_hold():
    budget = Budget(1.0, "basic")
    ledger = PrivacyLedger()
    ledger.record_event("a", 0, pure_round(0.6))
    assert budget.admit(ledger, ["a", "b"], pure_round(0.3)) == (["a", "b"], [])
    assert budget.admit(ledger, ["a", "b"], pure_round(0.5)) == (["b"], ["a"])
    assert budget.record() == {"max_epsilon": 1.0, "max_delta": 1e-5, "accountant": "basic"}
    budget.check(pure_round(0.5))
    with pytest.raises(LDPValueError, match="private mechanism"):
        budget.check(not_private("mechanism none"))
    with pytest.raises(LDPValueError, match="rdp accountant cannot"):
        Budget(1.0, "rdp").check(pure_round(0.5))
    with pytest.raises(LDPValueError, match="below one round's cost"):
        budget.check(pure_round(1.5))
    for bad in (0, -1, math.inf, math.nan, "x"):
        with pytest.raises(LDPValueError, match="max-epsilon"):
            Budget(bad)
    with pytest.raises(LDPValueError, match="unknown accountant"):
        Budget(1.0, "prv")
    for bad in (0, 1, -1e-5, math.nan, "x"):
        with pytest.raises(LDPValueError, match="max-delta"):
            Budget(1.0, "basic", bad)


# --- a budget is a pair (eps, delta) ----------------------------------------------------------------
def _rounds_admitted(budget, event, rounds: int = 40) -> tuple[int, PrivacyLedger]:
    ledger = PrivacyLedger()
    for server_round in range(rounds):
        taking_part, _ = budget.admit(ledger, ["c"], event)
        if not taking_part:
            break
        ledger.record_event("c", server_round, event)
    return len(ledger), ledger


def test_a_budget_stops_a_client_before_its_delta_exceeds_max_delta():
    """Basic composition of (1, 1e-3) Gaussian rounds under (8, 0.005): five rounds (delta 0.005),
    not eight (delta 0.008, eps within); the default max-delta 1e-5 holds no such round at all."""

    event = gaussian_round(1.0, epsilon=1.0, delta=1e-3)
    rounds, ledger = _rounds_admitted(Budget(8.0, "basic", 0.005), event)
    spent = ledger.spent("c", "basic")
    assert rounds == 5 and spent.epsilon == 5.0 and spent.delta == pytest.approx(0.005, rel=1e-12)
    assert not Budget(8.0, "basic", 0.005).affords(ledger, "c", event)
    assert Budget(8.0, "basic", 0.0061).affords(ledger, "c", event)
    with pytest.raises(LDPValueError, match="max-delta 1e-05 is below one round's delta"):
        Budget(8.0, "basic").check(event)
    Budget(8.0, "basic", 1e-3).check(event)


@pytest.mark.parametrize("max_delta", [1e-5, 1e-7])
def test_pld_and_rdp_budgets_read_epsilon_at_max_delta(max_delta):
    """Gaussian rounds (z = 4): the rounds admitted are the most whose eps at delta = max_delta, by
    dp-accounting's own PLD and RDP accountants, stays within 2; a smaller max-delta admits fewer."""
    event = dp_accounting.GaussianDpEvent(4.0)
    for name, library in (("pld", PLDAccountant), ("rdp", RdpAccountant)):
        rounds, ledger = _rounds_admitted(Budget(2.0, name, max_delta), event)
        assert library().compose(event, rounds).get_epsilon(max_delta) <= 2.0
        assert library().compose(event, rounds + 1).get_epsilon(max_delta) > 2.0
        assert Budget(2.0, name, max_delta).max_spent(ledger).delta == max_delta


def test_advanced_composition_takes_its_slack_from_what_max_delta_leaves():
    """Rounds (0.1, 1e-7): after 50 the rounds hold 5e-6 of max-delta 1e-5, so advanced composition's
    slack delta' is the 5e-6 left and its total delta is 1e-5, not 1e-5 + 5e-6."""
    event = dp_accounting_calibrated(0.1, 1e-7)
    accountant = create_accountant("advanced").compose(event, 50)
    within = accountant.spent_within(1e-5)
    assert within.delta == pytest.approx(1e-5, rel=1e-9)
    assert within.epsilon == pytest.approx(advanced_composition([0.1], 5e-6, [50]), rel=1e-12)
    assert accountant.spent(1e-5).delta == pytest.approx(1.5e-5, rel=1e-9)  # the slack on top (not a budget's view)
    spent_out = create_accountant("advanced").compose(event, 100).spent_within(1e-5)  # the rounds hold it all
    assert spent_out.epsilon == pytest.approx(10.0) and spent_out.delta == pytest.approx(1e-5)


def dp_accounting_calibrated(epsilon: float, delta: float):
    from ldpfed.accounting import CalibratedDpEvent

    return CalibratedDpEvent(dp_accounting.GaussianDpEvent(10.0), epsilon, delta)

"""The distributed discrete Gaussian's accountant against the authors' reference values
(tests/data/ddgauss_reference.json: epsilon, the rounded norm bound and the parameter search, as the
authors' accounting_utils.py computed them once; its "source" says where they come from)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ldpfed.accounting import create_accountant
from ldpfed.accounting.ddgauss import (
    REFERENCE_ORDERS,
    DistributedDiscreteGaussianDpEvent,
    calibrate_local_stddev,
    ddgauss_epsilon,
    ddgauss_params,
    ideal_epsilon,
    poisson_subsampled_rdp,
    rounded_l2_norm_bound,
    sum_inflation,
)
from ldpfed.validation import LDPValueError

REFERENCE = json.loads((Path(__file__).parent / "data" / "ddgauss_reference.json").read_text())
BETA = math.exp(-0.5)
CLIP = REFERENCE["clip"]
# (gamma, sigma, n, D, beta, q, T, delta) with the reference's epsilon: coarse and fine grids, 2 to 1,000
# shares (tau matters at small sigma / gamma), no rounding bias and the reference's, Poisson sampling and T rounds.
EPSILON_CASES = REFERENCE["epsilon"]
PARAMS_CASES = REFERENCE["params"]


def _event(case: dict, local_stddev: float | None = None) -> DistributedDiscreteGaussianDpEvent:
    sigma = case["local_stddev"] if local_stddev is None else local_stddev
    return DistributedDiscreteGaussianDpEvent(
        case["gamma"], sigma, case["shares"], CLIP, case["padded_dims"], case["beta"], case["sampling_prob"]
    )


def _case_id(case: dict) -> str:
    return "-".join(f"{case[key]:g}" for key in ("gamma", "local_stddev", "shares", "padded_dims", "sampling_prob"))


def test_the_stored_values_are_the_references():
    """ldpfed's REFERENCE_ORDERS are the orders the values were computed at, and the grid is whole."""
    assert (
        "accounting_utils.py" in REFERENCE["source"]
        and "5e27a86323a35c2018fb97fbbe755c7ade9370ab" in REFERENCE["source"]
    )
    assert tuple(REFERENCE["rdp_orders"]) == REFERENCE_ORDERS
    assert len(EPSILON_CASES) == 13 and len(PARAMS_CASES) == 5 and len(REFERENCE["rounded_l2_norm_bound"]) == 10


@pytest.mark.parametrize("case", EPSILON_CASES, ids=_case_id)
def test_epsilon_matches_the_reference_on_a_grid(case):
    """At the reference's orders the two implementations agree within 1% (they agree to ~1e-14);
    at the ledger's orders (dp-accounting's, up to 1024) ldpfed's figure is never more than 1% above
    the reference's (it is lower where the best order exceeds the reference's largest, 256)."""
    expected, rounds, delta = case["epsilon"], case["rounds"], case["delta"]
    assert ddgauss_epsilon(_event(case), rounds, delta, orders=REFERENCE_ORDERS) == pytest.approx(expected, rel=0.01)
    assert ddgauss_epsilon(_event(case), rounds, delta) <= 1.01 * expected


@pytest.mark.parametrize("case", EPSILON_CASES, ids=_case_id)
def test_the_one_percent_band_tells_a_two_percent_error_in_sigma(case):
    """The comparison can fail: sigma off by 2% either way moves ldpfed's epsilon out of the band
    (by 1.6% to 48% on this grid; epsilon grows about as 1/sigma^2, tau makes it steeper)."""
    for factor in (0.98, 1.02):
        moved = ddgauss_epsilon(
            _event(case, factor * case["local_stddev"]), case["rounds"], case["delta"], REFERENCE_ORDERS
        )
        assert moved != pytest.approx(case["epsilon"], rel=0.01)


@pytest.mark.parametrize(
    "case",
    REFERENCE["rounded_l2_norm_bound"],
    ids=lambda case: f"{case['l2_norm']:g}-{case['beta']:.3g}-{case['dims']}",
)
def test_rounded_norm_bound_matches_the_reference(case):
    """KLS Theorem 1's bound is a closed form: equal to float precision, beta = 0 included."""
    bound = rounded_l2_norm_bound(case["l2_norm"], case["beta"], case["dims"])
    assert bound == pytest.approx(case["bound"], rel=1e-12)


def test_the_grid_exercises_tau_sampling_and_the_rounding_bound():
    """The comparison can fail where it matters: tau is large somewhere on the grid, and sampling
    and the rounding bound change the reference's epsilon."""
    taus = [sum_inflation(case["local_stddev"] / case["gamma"], case["shares"]) for case in EPSILON_CASES]
    assert max(taus) > 1e-3 and min(taus) == 0.0
    assert {case["shares"] for case in EPSILON_CASES} >= {2, 1000}
    assert {case["beta"] for case in EPSILON_CASES} == {0.0, BETA}
    sampled = EPSILON_CASES[10]
    assert sampled["sampling_prob"] < 1.0
    inputs = ("gamma", "local_stddev", "shares", "padded_dims", "beta", "rounds", "delta")
    unsampled = next(
        case
        for case in EPSILON_CASES
        if case["sampling_prob"] == 1.0 and all(case[key] == sampled[key] for key in inputs)
    )
    assert sampled["epsilon"] < 0.5 * unsampled["epsilon"]
    assert rounded_l2_norm_bound(CLIP / 1.0, BETA, 256) > 1.3 * CLIP  # coarse grid: the bound inflates


def test_the_ledger_gives_the_same_epsilon():
    """ldpfed's rdp accountant composes the event to the same figure, the sampler's float slack
    included in both."""
    event = DistributedDiscreteGaussianDpEvent(0.05, 1.0, 10, CLIP, 256, BETA, 0.05)
    spent = create_accountant("rdp").compose(event, 100).spent(1e-5)
    assert spent.epsilon == pytest.approx(ddgauss_epsilon(event, 100, 1e-5), rel=1e-12)
    assert spent.float_slack_epsilon == pytest.approx(event.float_slack().times(100).epsilon, rel=1e-12)


def test_the_share_samplers_float_slack_is_charged():
    """Every one of the n D share draws of a round carries the sampler's float slack (relative error
    rho = 2^-36 in its accept decision: ln r1 + ln r2 ~ 5 rho per draw, ldpfed.samplers.discrete_gaussian),
    so T rounds of 20 clients x D = 2^18 add ~5 rho 20 2^18 T = 1.9e-3 in eps at T = 5: the realized
    mechanism's figure exceeds the ideal law's by at least that, at the same delta."""
    event = DistributedDiscreteGaussianDpEvent(0.002, 0.2, 20, CLIP, 2**18, BETA)
    expected = 5 * 2.0**-36 * 20 * 2**18 * 5  # independent of the code: the leading term of the logs
    slack = event.float_slack().times(5)
    assert slack.epsilon == pytest.approx(expected, rel=1e-4)  # 2^-53 / Z and rho^2 terms: < 1e-5 relative
    assert ddgauss_epsilon(event, 5, 1e-5) >= ideal_epsilon(event, 5, 1e-5) + expected * (1 - 1e-4)


def test_the_calibration_meets_the_budget_with_the_slack():
    """The share sigma for a budget leaves room for the slack: the realized figure is within the
    budget, the ideal one below it by the slack (so a plan that left it out would understate)."""
    params = ddgauss_params(1.0, 1e-5, 20, 2**18, 16, CLIP, rounds=5)
    assert ddgauss_epsilon(params.event, 5, 1e-5) <= 1.0 * (1 + 1e-9)
    assert ideal_epsilon(params.event, 5, 1e-5) < 1.0 - 0.9 * params.event.float_slack().times(5).epsilon


def test_subsampled_bound_at_q_one_is_the_curve():
    """Zhu & Wang's bound at q -> 1 tends to the unsampled curve (only the l = alpha term is left,
    times 3 for alpha >= 3)."""
    event = DistributedDiscreteGaussianDpEvent(0.5, 0.6, 10, CLIP, 64, BETA, 1.0)
    orders = [2, 5, 20]
    near_one = poisson_subsampled_rdp(event.curve, 1.0 - 1e-12, orders)
    expected = event.curve(orders) + [0.0, math.log(3) / 4, math.log(3) / 19]
    assert near_one == pytest.approx(expected, rel=1e-6)


def _params_id(case: dict) -> str:
    return f"{case['epsilon']:g}-{case['shares']}-{case['padded_dims']}-{case['bits']}-{case['k_stddevs']}"


@pytest.mark.parametrize("case", PARAMS_CASES, ids=_params_id)
def test_params_match_the_reference(case):
    """gamma and sigma as the reference's `ddgauss_params` finds them, small n and few bits included."""
    params = ddgauss_params(
        case["epsilon"],
        case["delta"],
        case["shares"],
        case["padded_dims"],
        case["bits"],
        CLIP,
        sampling_prob=case["sampling_prob"],
        rounds=case["rounds"],
        beta=case["beta"],
        k_stddevs=case["k_stddevs"],
        orders=REFERENCE_ORDERS,
    )
    assert params.gamma == pytest.approx(case["gamma"], rel=0.01)
    assert params.local_stddev == pytest.approx(case["local_stddev"], rel=0.01)


@pytest.mark.parametrize("case", PARAMS_CASES, ids=_params_id)
def test_local_stddev_matches_the_reference_at_its_gamma(case):
    """At the reference's gamma, sigma for the budget is the reference's `ddgauss_local_stddev`
    (the second value its `ddgauss_params` returns)."""
    sigma = calibrate_local_stddev(
        case["epsilon"], case["delta"], case["rounds"], lambda s: _event(case, s), CLIP, REFERENCE_ORDERS
    )
    assert sigma == pytest.approx(case["local_stddev"], rel=0.01)


def test_params_meet_the_budget_with_sampling_and_rounds():
    params = ddgauss_params(2.0, 1e-5, 100, 256, 16, CLIP, sampling_prob=0.1, rounds=50, k_stddevs=2)
    assert 0.99 * 2.0 < params.spent <= 2.0
    spread = 2 * 2 * math.sqrt(CLIP**2 * 100**2 / 256 + (params.gamma**2 / 4 + params.local_stddev**2) * 100)
    assert spread / params.gamma <= 2**16 < 1.001 * spread / params.gamma


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ddgauss_params(1.0, 1e-5, 1000, 256, 5, CLIP), "bits = 5 is too few for the sum of 1000 clients"),
        (lambda: ddgauss_params(1.0, 1e-5, 100, 256, 16, 0.0), "clip norm c must be a finite number > 0"),
        (lambda: ddgauss_params(1.0, 1e-5, 100, 256, 16, -1.0), "clip norm c must be a finite number > 0"),
        (lambda: ddgauss_params(0.1, 1e-5, 100, 256, 8, CLIP, rounds=10_000), "cannot hold the noise"),
        (lambda: DistributedDiscreteGaussianDpEvent(1.0, 1.0, 10, CLIP, 16, 1.0), "beta must be in [0, 1)"),
        (lambda: ddgauss_params(1.0, 1e-5, 10, 16, 8, CLIP, sampling_prob=0.0), "sampling rate q must be in (0, 1]"),
    ],
)
def test_bad_input_gets_one_line(call, message):
    with pytest.raises(LDPValueError) as error:
        call()
    assert message in str(error.value) and "\n" not in str(error.value)

"""The samplers' float slack composed into the accounted (eps, delta) (ldpfed.samplers.float_slack).

Given a noise multiplier, the safe discrete Gaussian's reported eps is the ideal curve's (from
dp-accounting) plus the composed slack, never the ideal curve alone; with no slack (a continuous
sampler, or an old record) it is dp-accounting's value exactly. The composition rule itself is
checked by exact density ratios on a toy mechanism whose real law is as far from the ideal one as
the slack allows.
"""

from __future__ import annotations

import itertools
import math

import attr
import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from helpers import ldpfed, ldpfed_json

from ldpfed.accounting import DiscreteGaussianVectorDpEvent, SelfComposedDpEvent, create_accountant
from ldpfed.gradient_noise import InidGaussian
from ldpfed.samplers.float_slack import FloatSlack

TARGET = 1e-5
ACCOUNT_SAFE_INID = "account --mechanism inid-gaussian --noise-multiplier 1.1 --sampler safe"


def library_epsilon(noise_multiplier: float, releases: int, delta: float) -> float:
    """The ideal discrete Gaussian's eps: the continuous Gaussian's RDP curve, by dp-accounting."""
    return RdpAccountant().compose(dp_accounting.GaussianDpEvent(noise_multiplier), releases).get_epsilon(delta)


def reported(event, releases: int):
    return create_accountant("rdp").compose(SelfComposedDpEvent(event, releases)).spent(TARGET)


@pytest.fixture(scope="module")
def safe_event():
    return InidGaussian(np.ones(1000), noise_multiplier=1.1, sampler="safe").event()


def test_the_reported_eps_exceeds_the_ideal_curve_by_the_composed_slack(safe_event):
    """At d = 1000 the slack is ~7e-8 in eps per release: the reported eps is the ideal curve's at the
    delta the slack leaves, plus the slack's eps, so strictly above dp-accounting's ideal value."""
    assert isinstance(safe_event, DiscreteGaussianVectorDpEvent)
    one = safe_event.float_slack()
    assert 5e-8 < one.epsilon < 1e-7 and 0 < one.mass < 1e-12  # 1000 draws at ~7.3e-11 each
    for releases in (1, 10, 300):
        spent = reported(safe_event, releases)
        ideal = library_epsilon(1.1, releases, TARGET)
        slack = one.times(releases)
        assert spent.float_slack_epsilon == pytest.approx(releases * one.epsilon, rel=1e-12)
        assert spent.epsilon >= ideal + spent.float_slack_epsilon > ideal
        ideal_at_slack_delta = library_epsilon(1.1, releases, TARGET * math.exp(-slack.over) - slack.mass)
        assert spent.epsilon == pytest.approx(ideal_at_slack_delta + slack.epsilon, rel=1e-14)
        assert spent.delta == TARGET and spent.float_slack_delta == pytest.approx(
            TARGET - (TARGET * math.exp(-slack.over) - slack.mass), rel=1e-9
        )


def test_the_reported_eps_grows_with_the_rounds_and_so_does_its_slack(safe_event):
    spents = [reported(safe_event, releases) for releases in (1, 2, 5, 20, 100, 1000)]
    assert all(a.epsilon < b.epsilon for a, b in zip(spents, spents[1:]))
    assert all(a.float_slack_epsilon < b.float_slack_epsilon for a, b in zip(spents, spents[1:]))
    assert all(a.float_slack_delta < b.float_slack_delta for a, b in zip(spents, spents[1:]))


def test_without_slack_the_reported_eps_is_dp_accountings(safe_event):
    """The continuous sampler's event (GaussianDpEvent) and a record without slack (made before it
    was accounted) give exactly dp-accounting's value of the ideal curve."""
    continuous = InidGaussian(np.ones(1000), noise_multiplier=1.1, sampler="continuous").event()
    bare = attr.evolve(safe_event, slack_over=0.0, slack_under=0.0, slack_mass=0.0)
    for releases in (1, 10, 300):
        ideal = library_epsilon(1.1, releases, TARGET)
        for event in (continuous, bare):
            spent = reported(event, releases)
            assert spent.epsilon == ideal and spent.float_slack_epsilon == 0.0 and spent.float_slack_delta == 0.0


def test_a_calibrated_safe_gaussian_stays_within_its_budget_under_rdp():
    """Given (eps, delta), the calibration set the slack aside (with a 1% margin): one release's rdp
    total, slack included, is still within eps."""
    noise = InidGaussian(np.ones(1000), epsilon=1.0, delta=1e-5, sampler="safe")
    spent = create_accountant("rdp").compose(noise.event()).spent(1e-5)
    assert spent.float_slack_epsilon > 0 and spent.epsilon <= 1.0


def test_the_slack_is_in_the_json_of_account_and_dpsgd_privacy_record():
    record = ldpfed_json(ACCOUNT_SAFE_INID, "--rounds 10 --layers 1:1000")
    assert record["accountant"] == "rdp" and record["sampler"] == "safe"
    assert record["float_slack"]["epsilon"] == pytest.approx(10 * 1000 * 7.276e-11, rel=1e-3)
    assert record["epsilon"] > library_epsilon(1.1, 10, TARGET) + record["float_slack"]["epsilon"]
    from simulations.dpsgd import DPSGDConfig, privacy_record

    config = DPSGDConfig(perturbation="geodp", noise_multiplier=1.1, sampling="shuffle", epochs=3)
    dpsgd = privacy_record(config, 1000, 24, 1000)
    assert dpsgd["float_slack"]["epsilon"] == pytest.approx(3 * 1000 * 7.276e-11, rel=1e-3)  # (1 + 999) draws per step
    assert dpsgd["epsilon"] > library_epsilon(1.1, 6, TARGET) + dpsgd["float_slack"]["epsilon"]


# --- the composition rule, by exact density ratios --------------------------------------------------
def hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """delta(eps) = sum max(0, p - e^eps q): the smallest delta with P(S) <= e^eps Q(S) + delta."""
    return float(np.maximum(p - math.exp(epsilon) * q, 0.0).sum())


def composed(laws: list[np.ndarray]) -> np.ndarray:
    """The product law of independent releases (all output sequences)."""
    return np.array(
        [
            math.prod(law[o] for law, o in zip(laws, outputs))
            for outputs in itertools.product(*(range(law.size) for law in laws))
        ]
    )


def smallest_epsilon(p: np.ndarray, q: np.ndarray, delta: float) -> float:
    """The exact eps at delta of the pair (p, q) (both directions), by bisection on the hockey stick."""
    low, high = 0.0, 50.0
    for _ in range(200):
        middle = 0.5 * (low + high)
        if max(hockey_stick(p, q, middle), hockey_stick(q, p, middle)) <= delta:
            high = middle
        else:
            low = middle
    return high


@pytest.mark.parametrize("releases", [1, 3, 6])
def test_the_rule_bounds_a_real_law_as_far_from_the_ideal_as_the_slack_allows(releases):
    """Ideal: randomized response with eps0 (each input favours its own bit). Real: each release
    pushes its favoured output up by e^over (and, to stay a law, the other down by e^-under) plus an
    additive `mass` onto the favoured output, the extreme the per-release closeness allows. The
    rule's (eps_ideal(delta_i) + sum over + under, target) must hold for the real composition
    exactly; the ideal eps alone must not (the slack is needed)."""
    eps0, over, mass, target = 0.7, 0.02, 1e-4, 2e-3
    p_fav = math.exp(eps0) / (1.0 + math.exp(eps0))
    real_fav = min(1.0, p_fav * math.exp(over) + mass)
    under = math.log((1.0 - p_fav) / (1.0 - real_fav))
    one = FloatSlack(over, under, mass)
    # closeness of one release, in both directions, for every set of its two outputs
    ideal_law, real_law = [p_fav, 1 - p_fav], [real_fav, 1 - real_fav]
    for subset in ([0], [1], [0, 1]):
        assert sum(real_law[o] for o in subset) <= math.exp(over) * sum(ideal_law[o] for o in subset) + mass + 1e-15
        assert sum(ideal_law[o] for o in subset) <= math.exp(under) * sum(real_law[o] for o in subset) + 1e-15
    x_ideal = composed([np.array([p_fav, 1 - p_fav])] * releases)
    y_ideal = composed([np.array([1 - p_fav, p_fav])] * releases)
    x_real = composed([np.array([real_fav, 1 - real_fav])] * releases)
    y_real = composed([np.array([1 - real_fav, real_fav])] * releases)
    slack = one.times(releases)  # the sums over the releases (float_slack.composed_slack)
    ideal_epsilon = smallest_epsilon(x_ideal, y_ideal, slack.ideal_delta(target))
    bound = ideal_epsilon + slack.epsilon
    assert max(hockey_stick(x_real, y_real, bound), hockey_stick(y_real, x_real, bound)) <= target
    ideal_alone = smallest_epsilon(x_ideal, y_ideal, target)
    assert max(hockey_stick(x_real, y_real, ideal_alone), hockey_stick(y_real, x_real, ideal_alone)) > target
    without_delta_part = ideal_alone + slack.epsilon  # the slack's delta part is needed too
    assert (
        max(hockey_stick(x_real, y_real, without_delta_part), hockey_stick(y_real, x_real, without_delta_part)) > target
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        ("", "--layers or --profile"),
        ("--layers 1:100 --sample-rate 0.1", "Poisson"),
        ("--layers 1:100 --accountant pld", "rdp accountant only"),
        ("--layers 1:100 --delta 1e-6", "--noise-multiplier alone"),
    ],
)
def test_account_refuses_what_the_safe_inid_gaussian_has_no_bound_for(extra, message):
    result = ldpfed(ACCOUNT_SAFE_INID, "--rounds 3", extra)
    assert result.exit_code == 2 and message in result.output

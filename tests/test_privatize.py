"""Update privatization (federated.md, Federated LDP-SGD; analysis.md, Federated rounds): clipping,
m-of-d reporting with eps/m per coordinate, unbiased d/m reconstruction, exact noise moments
against Monte Carlo, worst-case moments, per-round cost, determinism and bad input.

Monte Carlo tolerances are 5 standard errors computed from the predicted variance (means) or
from the sample fourth moment (variances), with fixed seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ldpfed.mechanisms as registry
from ldpfed.accounting import CalibratedDpEvent, EpsilonDeltaDpEvent
from ldpfed.training.noise_privatizer import NoisePrivatizer
from ldpfed.training.privatize import UPDATE_MECHANISMS, UpdatePrivatizer
from ldpfed.validation import LDPValueError

Z = 5.0
DELTA = 1e-5
CLIP = 0.5
REPS = 40_000
# coordinates inside, at and beyond the clipping bound
UPDATE = np.array([-0.9, -0.5, -0.2, 0.0, 0.1, 0.35, 0.5, 2.0])
MECHANISMS = registry.available()


def _privatizer(name: str, epsilon: float = 2.0, **kwargs) -> UpdatePrivatizer:
    delta = DELTA if registry.get_class(name).approximate else None
    return UpdatePrivatizer(name, epsilon, CLIP, delta=delta, **kwargs)


def test_update_mechanisms_list_none_and_every_registered_mechanism():
    assert UPDATE_MECHANISMS[0] == "none" and set(UPDATE_MECHANISMS[1:]) == set(MECHANISMS)


def test_none_clips_each_coordinate_and_adds_nothing():
    privatizer = UpdatePrivatizer("none", None, CLIP)
    out = privatizer.privatize(UPDATE, np.random.default_rng(0))
    np.testing.assert_array_equal(out, np.clip(UPDATE, -CLIP, CLIP))
    np.testing.assert_array_equal(privatizer.clip_only(UPDATE), out)
    mean, variance = privatizer.noise_moments(out)
    assert not mean.any() and not variance.any()
    assert privatizer.round_cost() == (math.inf, 0.0)
    # a config's epsilon, delta and options for other mechanisms do not apply to "none"
    carried = UpdatePrivatizer("none", 1.0, CLIP, delta=1e-5, calibration="classic")
    assert carried.round_cost() == (math.inf, 0.0) and carried.describe()["options"] == {}


@pytest.mark.parametrize("report_dims", [None, 3, UPDATE.size])
@pytest.mark.parametrize("name", MECHANISMS)
def test_privatize_mean_and_variance_match_noise_moments(name, report_dims):
    """E[privatize(u)] = clip(u) + C b(t) and Var = C^2 [p V(t) + (p-1)(t+b(t))^2] per coordinate."""
    privatizer = _privatizer(name, epsilon=3.0, report_dims=report_dims)
    clipped = privatizer.clip_only(UPDATE)
    mean, variance = privatizer.noise_moments(clipped)
    batch = np.broadcast_to(UPDATE, (REPS, UPDATE.size))
    samples = privatizer.privatize(batch, np.random.default_rng(11)) - clipped
    m = privatizer.dims_reported(UPDATE.size)
    # exactly m coordinates reported per client, the others are 0 in the reconstruction
    assert np.all(np.count_nonzero(samples + clipped, axis=1) <= m)
    assert np.all(np.abs(samples.mean(axis=0) - mean) <= Z * np.sqrt(variance / REPS))
    # Var(s^2) = (mu4 - sigma^4)/R + 2 sigma^4/(R(R-1)); the second term matters for two-point
    # outputs (Duchi at t = 0), whose mu4 - sigma^4 is 0.
    fourth = np.mean((samples - samples.mean(axis=0)) ** 4, axis=0)
    sample_variance = samples.var(axis=0, ddof=1)
    se = np.sqrt(np.maximum(fourth - variance**2, 0.0) / REPS + 2 * variance**2 / (REPS * (REPS - 1)))
    assert np.all(np.abs(sample_variance - variance) <= Z * se)


@pytest.mark.parametrize(
    "name",
    [n for n in MECHANISMS if registry.get(n, 1.0, DELTA if registry.get_class(n).approximate else None).unbiased],
)
def test_unbiased_mechanisms_give_an_unbiased_update(name):
    privatizer = _privatizer(name)
    mean, _ = privatizer.noise_moments(privatizer.clip_only(UPDATE))
    assert not mean.any()


def test_variance_formula_on_a_hand_computed_case():
    """Laplace, eps = 2 per round, d = 8, m = 2: per value eps = 1, V = 8; p = 4.
    At t = 0: C^2 * 4 * 8 = 8. At t = 1 (u = C): C^2 * (4 * 8 + 3 * 1) = 8.75."""
    privatizer = UpdatePrivatizer("laplace", 2.0, CLIP, report_dims=2, sampler="continuous")  # real-number V = 8
    _, variance = privatizer.noise_moments(np.array([0.0, CLIP, 0, 0, 0, 0, 0, 0]))
    assert variance[0] == pytest.approx(8.0) and variance[1] == pytest.approx(8.75)


@pytest.mark.parametrize("options", [{}, {"estimator": "raw"}])
@pytest.mark.parametrize("name", MECHANISMS)
def test_worst_case_noise_is_the_maximum_over_the_domain(name, options):
    if options and name != "square-wave":
        options = {}
    privatizer = _privatizer(name, report_dims=2, **options)
    grid = np.linspace(-CLIP, CLIP, 20_001)
    # each row is one update of d = 8 coordinates, all equal to a grid value
    exact_mean, exact_variance = privatizer.noise_moments(np.repeat(grid[:, None], 8, axis=1))
    worst_mean, worst_variance = privatizer.per_coordinate_noise(8)
    assert worst_mean.shape == worst_variance.shape == (8,)
    # the grid contains both ends; a quadratic's max between grid points exceeds the grid max by
    # at most |A| h^2 / 4, below 1e-6 here (and the closed form may differ by rounding)
    assert exact_variance.max() * (1 - 1e-12) <= worst_variance[0] <= exact_variance.max() + 1e-6
    assert abs(worst_mean[0]) == pytest.approx(np.abs(exact_mean).max(), abs=1e-12)


@pytest.mark.parametrize("name", MECHANISMS)
def test_round_cost_is_the_budget_and_each_coordinate_gets_eps_over_m(name):
    privatizer = _privatizer(name, epsilon=5.0)
    eps, delta = privatizer.round_cost()
    assert eps == 5.0 and delta == (DELTA if registry.get_class(name).approximate else 0.0)
    for dims, m in [(1, 1), (8, 2), (1000, 2)]:  # Wang: max(1, min(d, floor(5/2.5)))
        per_value = privatizer.per_value_mechanism(dims)
        assert privatizer.dims_reported(dims) == m
        assert per_value.epsilon * m == pytest.approx(eps)
        if registry.get_class(name).approximate:
            assert per_value.delta * m == pytest.approx(DELTA)


@pytest.mark.parametrize("name", [n for n in MECHANISMS if not registry.get_class(n).approximate])
def test_a_round_report_is_eps_ldp(name):
    """The m reported values of two opposite updates (t = -1 vs t = +1 everywhere): the summed log
    density ratio of sampled outputs never exceeds the round budget (basic composition)."""
    eps, m = 2.0, 4
    privatizer = _privatizer(name, epsilon=eps, report_dims=m)
    mechanism = privatizer.per_value_mechanism(16)
    rng = np.random.default_rng(3)
    for source in (-1.0, 1.0):
        reports = mechanism.perturb(np.full((20_000, m), source), rng)
        ratio = (mechanism.log_density(reports, 1.0) - mechanism.log_density(reports, -1.0)).sum(axis=1)
        assert np.max(np.abs(ratio)) <= eps + 1e-9


def test_gaussian_noise_multiplier_and_round_event():
    privatizer = UpdatePrivatizer("gaussian", 5.0, CLIP, delta=DELTA)
    m = privatizer.dims_reported(100)
    safe = privatizer.per_value_mechanism(100).safe_sampler  # s / (2J + 2) in grid steps
    assert m == 2
    assert privatizer.noise_multiplier(100) == pytest.approx(safe.sigma / (2 * safe.grid_steps + 2) / math.sqrt(m))
    continuous = UpdatePrivatizer("gaussian", 5.0, CLIP, delta=DELTA, sampler="continuous")
    sigma = continuous.per_value_mechanism(100).sigma
    assert continuous.noise_multiplier(100) == pytest.approx(sigma / 2 / math.sqrt(m))
    assert privatizer.event(100) == CalibratedDpEvent(privatizer.mechanism_event(100), 5.0, DELTA)
    assert UpdatePrivatizer("laplace", 5.0, CLIP).event(100) == EpsilonDeltaDpEvent(5.0, 0.0)
    assert UpdatePrivatizer("laplace", 5.0, CLIP).noise_multiplier(100) is None


@pytest.mark.parametrize("name", ["none", *MECHANISMS])
def test_privatize_is_deterministic_in_the_seed(name):
    privatizer = (
        UpdatePrivatizer(name, 2.0, CLIP, delta=DELTA if name == "gaussian" else None)
        if name != "none"
        else UpdatePrivatizer("none", None, CLIP)
    )
    a = privatizer.privatize(UPDATE, np.random.default_rng(9))
    b = privatizer.privatize(UPDATE, np.random.default_rng(9))
    c = privatizer.privatize(UPDATE, np.random.default_rng(10))
    assert np.array_equal(a, b)
    assert name == "none" or not np.array_equal(a, c)
    # one vector equals the first row of a batch privatized with the same seed
    batch = privatizer.privatize(UPDATE[None, :], np.random.default_rng(9))
    assert np.array_equal(batch[0], a)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("sgd-noise", 1.0, 1.0), {}, "unknown mechanism"),
        (("laplace", 0.0, 1.0), {}, "epsilon"),
        (("laplace", -1.0, 1.0), {}, "epsilon"),
        (("laplace", None, 1.0), {}, "epsilon"),
        (("laplace", 1.0, 0.0), {}, "clip"),
        (("laplace", 1.0, float("inf")), {}, "clip"),
        (("laplace", 1.0, 1.0), {"report_dims": 0}, "report_dims"),
        (("laplace", 1.0, 1.0), {"delta": 1e-5}, "takes no delta"),
        (("gaussian", 1.0, 1.0), {}, "delta"),
        (("laplace", 1.0, 1.0), {"estimator": "raw"}, "option"),
    ],
)
def test_bad_construction(args, kwargs, match):
    with pytest.raises(LDPValueError, match=match):
        UpdatePrivatizer(*args, **kwargs)


def test_bad_updates():
    privatizer = UpdatePrivatizer("laplace", 1.0, 1.0, report_dims=9)
    rng = np.random.default_rng(0)
    with pytest.raises(LDPValueError, match="report_dims must be in \\[1, dims=8\\]"):
        privatizer.privatize(UPDATE, rng)
    for bad in (np.array([0.0, np.nan]), np.zeros((2, 2, 2)), np.zeros(0)):
        with pytest.raises(LDPValueError, match="update"):
            UpdatePrivatizer("laplace", 1.0, 1.0).privatize(bad, rng)
    with pytest.raises(TypeError, match="Generator"):
        UpdatePrivatizer("laplace", 1.0, 1.0).privatize(UPDATE, 0)


def test_every_update_privatizer_record_starts_with_its_round_budget_and_clipping():
    cases = (
        (
            UpdatePrivatizer("laplace", 2.0, 0.1, report_dims=1),
            ("laplace", 2.0, None, 0.1, "per coordinate to [-clip, clip]"),
        ),
        (
            NoisePrivatizer("inid-gaussian", epsilon=1.0, delta=1e-5, clip=0.5, layer_sizes=[4, 6]),
            ("inid-gaussian", 1.0, 1e-5, 0.5, "L2 per layer"),
        ),
    )
    for privatizer, head in cases:
        record = privatizer.describe(10)
        assert list(record)[:5] == ["mechanism", "epsilon_per_round", "delta_per_round", "clip", "clipping"]
        assert tuple(record.values())[:5] == head

"""Personalized LDP (mechanisms.md, Personalized LDP; analysis.md, Theorem 3): per-user budget and
region, grouped estimation, per-user guarantee, bad input.

Monte Carlo tolerances come from the exact variance (5 standard errors for means, chi-square
quantiles at 1e-6 for variances) computed in the test from the scalar mechanisms directly.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import ldpfed.mechanisms as registry
from ldpfed.mechanisms.personalized import PLDPGroup, group_users, perturb_personalized
from ldpfed.validation import LDPValueError

Z = 5.0
DELTA = 1e-5
BUDGETS = (0.5, 1.0, 3.0)
REGIONS = ((-1.0, 0.0), (0.0, 1.0), (-1.0, 1.0), (0.25, 0.75))


def _configs() -> list[tuple[str, dict]]:
    configs = []
    for name in registry.available():
        options = {"delta": DELTA} if registry.get_class(name).approximate else {}
        if name == "square-wave":
            configs += [(name, {**options, "estimator": e}) for e in ("raw", "debiased")]
        else:
            configs.append((name, options))
    return configs


CONFIGS = _configs()
IDS = [f"{name}-{'-'.join(str(v) for v in options.values())}" if options else name for name, options in CONFIGS]


def _population(users: int, seed: int = 0):
    """Values, budgets and regions of a fixed population; each value inside its own region
    (including the region's end points)."""
    rng = np.random.default_rng(seed)
    budgets = rng.choice(BUDGETS, size=users)
    region = rng.integers(0, len(REGIONS), size=users)
    low = np.array([r[0] for r in REGIONS])[region]
    high = np.array([r[1] for r in REGIONS])[region]
    values = low + (high - low) * rng.beta(0.7, 0.5, size=users)
    values[:4] = low[:4]
    values[4:8] = high[4:8]
    return values, budgets, low, high


def _exact_moments(values, budgets, low, high, name, options, debiased):
    """E and Var of the grouped estimate, computed per user from the scalar mechanism directly."""
    centre, half = (low + high) / 2, (high - low) / 2
    unit = np.clip((values - centre) / half, -1.0, 1.0)
    mean_shift = np.empty_like(values)
    variance = np.empty_like(values)
    for e in np.unique(budgets):
        mine = budgets == e
        mechanism = registry.get(name, e, **options)
        b1 = mechanism.bias_coefficients[1]
        if debiased:
            mean_shift[mine] = 0.0
            variance[mine] = half[mine] ** 2 * mechanism.variance(unit[mine]) / (1 + b1) ** 2
        else:
            mean_shift[mine] = half[mine] * mechanism.bias(unit[mine])
            variance[mine] = half[mine] ** 2 * mechanism.variance(unit[mine])
    n = values.size
    return values.mean() + mean_shift.mean(), variance.sum() / n**2


# --- grouped estimation ------------------------------------------------------------------------


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_grouped_estimates_mean_and_variance(name, options):
    """The debiased grouped estimate (unbiased) and the thesis' plain mean (bias sum r_z delta_z / r),
    both from the same reports, against their exact moments."""
    users, reps = 600, 400
    values, budgets, low, high = _population(users)
    # The repetitions are independent copies of the population, perturbed in one call (users are
    # independent) and estimated one copy at a time.
    tiled = [np.tile(column, reps) for column in (values, budgets, low, high)]
    reports = perturb_personalized(*tiled, name, np.random.default_rng(51), **options).reshape(reps, users)
    population = group_users(budgets, low, high, name, **options)
    estimates = {debiased: [population.estimate_mean(row, debiased) for row in reports] for debiased in (True, False)}
    low_q, high_q = stats.chi2.ppf([1e-6, 1 - 1e-6], df=reps - 1) / (reps - 1)
    for debiased, sample in estimates.items():
        sample = np.array(sample)
        expected, variance = _exact_moments(values, budgets, low, high, name, options, debiased)
        z = (sample.mean() - expected) / math.sqrt(variance / reps)
        assert abs(z) <= Z, (debiased, z)
        # The estimate averages 600 users (close to normal): s^2 / Var ~ chi2(R-1).
        ratio = sample.var(ddof=1) / variance
        assert low_q <= ratio <= high_q, (debiased, ratio)


@pytest.mark.parametrize("debiased", [True, False])
@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_group_statistics_give_theorem3_moments(name, options, debiased):
    """delta = sum r_z delta_z / r and sigma^2 = sum r_z Var_z / r^2 match the per-user computation."""
    values, budgets, low, high = _population(900, seed=1)
    statistics = group_users(budgets, low, high, name, **options).statistics(values, debiased)
    assert len(statistics) == len(BUDGETS) * len(REGIONS)
    counts = np.array([s.count for s in statistics])
    assert counts.sum() == values.size
    delta = sum(s.count * s.bias for s in statistics) / values.size
    sigma2 = sum(s.count * s.variance for s in statistics) / values.size**2
    expected, variance = _exact_moments(values, budgets, low, high, name, options, debiased)
    assert delta == pytest.approx(expected - values.mean(), abs=1e-12)
    assert sigma2 == pytest.approx(variance, rel=1e-10)
    if debiased:
        assert all(s.bias == 0.0 for s in statistics)


def test_whole_domain_region_is_the_plain_mechanism():
    """Region [-1, 1]: rescaling is the identity; same stream, same reports."""
    values = np.linspace(-1, 1, 101)
    reports = perturb_personalized(values, 2.0, -1.0, 1.0, "laplace", np.random.default_rng(3))
    direct = registry.get("laplace", 2.0).perturb(values, np.random.default_rng(3))
    np.testing.assert_allclose(reports, direct, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_half_region_rescales_to_and_from_the_unit_interval(name, options):
    values = np.linspace(0.0, 1.0, 51)
    reports = perturb_personalized(values, 1.5, 0.0, 1.0, name, np.random.default_rng(4), **options)
    unit = registry.get(name, 1.5, **options).perturb(2 * values - 1, np.random.default_rng(4))
    np.testing.assert_allclose(reports, 0.5 + 0.5 * unit, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_bounded_reports_stay_in_the_scaled_output_range(name, options):
    values, budgets, low, high = _population(3_000, seed=2)
    reports = perturb_personalized(values, budgets, low, high, name, np.random.default_rng(5), **options)
    groups, labels = group_users(budgets, low, high, name, **options)
    for z, group in enumerate(groups):
        if group.mechanism.bounded:
            spread = np.abs(reports[labels == z] - group.centre)
            assert spread.max() <= group.half_width * group.mechanism.output_bound * (1 + 1e-12)


def test_groups_and_labels():
    budgets = np.array([1.0, 2.0, 1.0, 1.0, 2.0])
    low = np.array([-1.0, -1.0, 0.0, -1.0, -1.0])
    high = np.array([0.0, 0.0, 1.0, 0.0, 0.0])
    groups, labels = group_users(budgets, low, high, "laplace")
    assert len(groups) == 3 and labels.shape == (5,)
    for i, z in enumerate(labels):
        assert (groups[z].epsilon, groups[z].low, groups[z].high) == (budgets[i], low[i], high[i])
    assert labels[0] == labels[3] and labels[1] == labels[4] and len({labels[0], labels[1], labels[2]}) == 3


def test_reproducible_from_the_generator():
    values, budgets, low, high = _population(200, seed=3)
    a = perturb_personalized(values, budgets, low, high, "laplace", np.random.default_rng(6))
    b = perturb_personalized(values, budgets, low, high, "laplace", np.random.default_rng(6))
    np.testing.assert_array_equal(a, b)


# --- per-user guarantee -------------------------------------------------------------------------


PURE = [n for n in registry.available() if not registry.get_class(n).approximate]


@pytest.mark.parametrize("name", PURE)
@pytest.mark.parametrize("region", REGIONS)
def test_density_ratio_within_region_at_most_e_to_user_budget(name, region):
    """Users of several budgets in one region: each one's group perturbs at her own budget, and
    between any two inputs of the region the density ratio (mechanism's log_density on the
    rescaled scale) is at most e^{e_user}."""
    budgets = np.array(BUDGETS)
    groups, labels = group_users(budgets, region[0], region[1], name)
    x = np.linspace(region[0], region[1], 41)
    for user, epsilon in enumerate(budgets):
        group = groups[labels[user]]
        assert group.epsilon == epsilon and (group.low, group.high) == region
        unit_x = group.to_unit(x)
        assert unit_x[0] == -1.0 and unit_x[-1] == 1.0  # the region covers the whole unit domain
        mechanism = group.mechanism
        bound = mechanism.output_bound if mechanism.bounded else 1.0 + 40.0 / epsilon
        y = np.unique(np.concatenate([np.linspace(-bound, bound, 801), [-1.0, 1.0]]))
        log_p = mechanism.log_density(y[None, :], unit_x[:, None])  # [x, y]
        finite = np.isfinite(log_p)
        assert np.all(finite.all(axis=0) | ~finite.any(axis=0)), "support depends on the input"
        columns = finite.all(axis=0)
        assert columns.sum() >= 2
        worst = (log_p[:, columns].max(axis=0) - log_p[:, columns].min(axis=0)).max()
        assert worst <= epsilon + 1e-9, worst


# --- bad input ----------------------------------------------------------------------------------


def test_value_outside_its_region_is_rejected():
    values = np.array([-0.5, 0.5, 0.2])
    low = np.array([-1.0, 0.0, -1.0])
    high = np.array([0.0, 1.0, 0.0])  # user 2 declares [-1, 0] but holds 0.2
    with pytest.raises(LDPValueError, match="privacy region.*user 2"):
        perturb_personalized(values, 1.0, low, high, "laplace", np.random.default_rng(0))
    with pytest.raises(LDPValueError, match="privacy region"):
        group_users(1.0, low, high, "laplace").statistics(values)
    with pytest.raises(LDPValueError, match="privacy region"):
        PLDPGroup(registry.get("laplace", 1.0), -1.0, 0.0).perturb([0.2], np.random.default_rng(0))


@pytest.mark.parametrize("low,high", [(0.5, 0.5), (0.5, 0.2), (-1.5, 0.0), (0.0, 1.2), (math.nan, 1.0)])
def test_bad_regions(low, high):
    with pytest.raises(LDPValueError, match="region"):
        perturb_personalized([0.5], 1.0, low, high, "laplace", np.random.default_rng(0))


@pytest.mark.parametrize("budget", [0.0, -1.0, math.nan, math.inf])
def test_bad_budgets(budget):
    with pytest.raises(LDPValueError, match="budgets"):
        perturb_personalized([0.5, 0.1], [1.0, budget], 0.0, 1.0, "laplace", np.random.default_rng(0))


def test_bad_shapes_and_values():
    rng = np.random.default_rng(0)
    with pytest.raises(LDPValueError, match="one entry per user"):
        perturb_personalized([0.5, 0.1, 0.2], [1.0, 2.0], 0.0, 1.0, "laplace", rng)
    with pytest.raises(LDPValueError, match="1-D"):
        perturb_personalized(np.zeros((2, 2)), 1.0, -1.0, 1.0, "laplace", rng)
    with pytest.raises(LDPValueError, match="1-D"):
        perturb_personalized([], 1.0, -1.0, 1.0, "laplace", rng)
    with pytest.raises(LDPValueError, match="NaN or inf"):
        perturb_personalized([0.5, math.nan], 1.0, -1.0, 1.0, "laplace", rng)
    with pytest.raises(LDPValueError, match="reports"):
        group_users(1.0, -1.0, 1.0, "laplace", users=2).estimate_mean([0.5, math.nan])
    with pytest.raises(LDPValueError, match="one entry per user"):
        group_users([1.0, 2.0], -1.0, 1.0, "laplace").estimate_mean([0.5, 0.1, 0.3])
    with pytest.raises(LDPValueError, match="one entry per user"):
        group_users([1.0, 2.0], -1.0, 1.0, "laplace").statistics([0.5, 0.1, 0.3])
    with pytest.raises(LDPValueError, match="users=n"):
        group_users(1.0, -1.0, 1.0, "laplace")


def test_bad_mechanism_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(LDPValueError, match="unknown mechanism"):
        perturb_personalized([0.5], 1.0, 0.0, 1.0, "nope", rng)
    with pytest.raises(LDPValueError, match="delta"):
        perturb_personalized([0.5], 1.0, 0.0, 1.0, "laplace", rng, delta=1e-5)
    with pytest.raises(TypeError, match="Generator"):
        perturb_personalized([0.5], 1.0, 0.0, 1.0, "laplace", 7)
    for name in registry.available():
        if registry.get_class(name).approximate:
            with pytest.raises(LDPValueError, match="delta"):
                perturb_personalized([0.5], 1.0, 0.0, 1.0, name, rng)


def test_every_region_combination_is_its_own_group():
    budgets, regions = [1.0, 2.0], list(itertools.product([-1.0, 0.0], [0.5, 1.0]))
    pairs = list(itertools.product(budgets, regions))
    groups, labels = group_users([b for b, _ in pairs], [r[0] for _, r in pairs], [r[1] for _, r in pairs], "laplace")
    assert len(groups) == len(pairs) and sorted(labels.tolist()) == list(range(len(pairs)))

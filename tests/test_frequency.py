"""Frequency oracles (mechanisms.md, Frequency estimation by histogram encoding): GRR, OUE and
histogram encoding on every scalar randomizer.

Monte Carlo checks use fixed seeds; tolerances come from the exact variance (5 standard errors for
means, chi-square quantiles at 1e-6 for variances), so they fail only on a real error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import ldpfed.mechanisms as registry
from ldpfed.frequency import (
    GeneralizedRR,
    HistogramEncoding,
    OptimizedUnaryEncoding,
    oracles,
)
from ldpfed.validation import LDPValueError

Z = 5.0
DELTA = 1e-5


def _histogram_configs() -> list[tuple[str, dict]]:
    configs = []
    for name in registry.available():
        options = {"mechanism": name}
        if registry.get_class(name).approximate:
            options["delta"] = DELTA
        if name == "square-wave":  # both estimators: raw is biased, debiased is not
            configs += [("histogram", {**options, "estimator": e}) for e in ("raw", "debiased")]
        else:
            configs.append(("histogram", options))
    return configs


CONFIGS = [("grr", {}), ("oue", {})] + _histogram_configs()
IDS = [f"{name}-{'-'.join(str(v) for v in options.values())}" if options else name for name, options in CONFIGS]


def _population(users: int, frequencies) -> np.ndarray:
    """Categories of a fixed population with exactly these frequencies (shuffled)."""
    counts = np.round(np.asarray(frequencies) * users).astype(int)
    counts[-1] = users - counts[:-1].sum()
    categories = np.repeat(np.arange(len(counts)), counts)
    return np.random.default_rng(0).permutation(categories)


# --- unbiasedness and exact variance -------------------------------------------------------------


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_estimate_unbiased_with_exact_variance(name, options):
    users, k, epsilon, reps = 500, 4, 2.0, 800
    categories = _population(users, [0.5, 0.3, 0.2, 0.0])
    truth = np.bincount(categories, minlength=k) / users
    oracle = oracles.get(name, epsilon, k, **options)
    estimates = np.array(
        [
            oracle.estimate(oracle.perturb(categories, rng))
            for rng in map(np.random.default_rng, np.random.SeedSequence(31).spawn(reps))
        ]
    )
    variance = oracle.variance(truth, users)
    assert variance.shape == (k,) and np.all(variance > 0)
    z = (estimates.mean(axis=0) - truth) / np.sqrt(variance / reps)
    assert np.all(np.abs(z) <= Z), z
    # Each estimate averages 500 users (close to normal): s^2 / Var ~ chi2(R-1); Bonferroni over k.
    ratio = estimates.var(axis=0, ddof=1) / variance
    low, high = stats.chi2.ppf([1e-6 / k, 1 - 1e-6 / k], df=reps - 1) / (reps - 1)
    assert np.all((low <= ratio) & (ratio <= high)), ratio


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_per_user_variance_matches_the_formula_precisely(name, options):
    """Users are independent, so Var(f_hat_c) = (n_c Var_in + (n - n_c) Var_out) / n^2 with the
    per-user variances Var_in (true category c) and Var_out (another one) = variance(e_c, n=1).
    One large run measures both per user. s^2 = sum (x - mu)^2 / (n-1) - n (xbar - mu)^2 / (n-1):
    the first term has standard error sqrt((m4 - s^4) / n) (sample fourth central moment), the
    second is below (5 sigma / sqrt(n))^2 with the same 5-standard-error confidence; the tolerance
    is the sum (the second term matters where m4 = s^4, e.g. OUE's Bernoulli(1/2) true bit)."""
    k, users, epsilon = 3, 60_000, 2.0
    oracle = oracles.get(name, epsilon, k, **options)
    reports = oracle.perturb(np.zeros(users, dtype=int), np.random.default_rng(61))
    contributions = oracle.contributions(reports)
    assert contributions.shape == (users, k)
    np.testing.assert_allclose(contributions.mean(axis=0), oracle.estimate(reports), rtol=1e-12, atol=1e-12)
    expected = oracle.variance(np.eye(k)[0], 1)  # [Var_in, Var_out, Var_out]
    assert np.all(np.abs(contributions.mean(axis=0) - np.eye(k)[0]) <= Z * np.sqrt(expected / users))
    centred = contributions - contributions.mean(axis=0)
    sample_var = centred.var(axis=0, ddof=1)
    se = np.sqrt(np.maximum((centred**4).mean(axis=0) - sample_var**2, 0.0) / users)
    tolerance = Z * se + Z**2 * expected / users
    assert np.all(np.abs(sample_var - expected) <= tolerance), (sample_var, expected, tolerance)


def test_contributions_add_over_chunks():
    oracle = oracles.get("oue", 1.0, 5)
    categories = _population(1_001, [0.1, 0.2, 0.3, 0.4, 0.0])
    reports = oracle.perturb(categories, np.random.default_rng(62))
    total = sum(oracle.contributions(chunk).sum(axis=0) for chunk in np.array_split(reports, 4))
    np.testing.assert_allclose(total / categories.size, oracle.estimate(reports), rtol=1e-12)


def test_counting_oracles_variance_formula_at_known_points():
    """Wang et al. 2017: GRR Var at f=0 is (e^eps + k - 2)/(n (e^eps - 1)^2); OUE is 4 e^eps/(n (e^eps - 1)^2)."""
    eps, k, n = 1.3, 6, 500
    e = math.exp(eps)
    zero = np.zeros(k)
    np.testing.assert_allclose(GeneralizedRR(eps, k).variance(zero, n), (e + k - 2) / (n * (e - 1) ** 2))
    np.testing.assert_allclose(OptimizedUnaryEncoding(eps, k).variance(zero, n), 4 * e / (n * (e - 1) ** 2))


def test_histogram_entry_budget_is_half_of_epsilon():
    oracle = oracles.get("histogram", 3.0, 5, mechanism="laplace")
    assert isinstance(oracle, HistogramEncoding)
    assert oracle.entry.epsilon == pytest.approx(1.5) and oracle.entry.delta is None
    assert oracle.epsilon == 3.0
    for name in registry.available():
        if registry.get_class(name).approximate:
            approx = oracles.get("histogram", 3.0, 5, mechanism=name, delta=DELTA)
            assert approx.entry.epsilon == pytest.approx(1.5)
            assert approx.entry.delta == pytest.approx(DELTA / 2)
            assert approx.delta == pytest.approx(DELTA)


def test_reports_have_the_documented_form():
    categories = np.array([0, 2, 1, 2, 2])
    rng = np.random.default_rng(1)
    grr = oracles.get("grr", 1.0, 3).perturb(categories, rng)
    assert grr.shape == (5,) and np.all((0 <= grr) & (grr < 3))
    oue = oracles.get("oue", 1.0, 3).perturb(categories, rng)
    assert oue.shape == (5, 3) and oue.dtype == bool
    hist = oracles.get("histogram", 1.0, 3).perturb(categories, rng)
    assert hist.shape == (5, 3) and hist.dtype == float


def test_perturbation_is_reproducible_from_the_generator():
    categories = _population(200, [0.25, 0.75])
    for name, options in CONFIGS:
        oracle = oracles.get(name, 1.0, 2, **options)
        a = oracle.perturb(categories, np.random.default_rng(9))
        b = oracle.perturb(categories, np.random.default_rng(9))
        np.testing.assert_array_equal(a, b)


# --- privacy -------------------------------------------------------------------------------------


def _grr_transition(oracle) -> np.ndarray:
    """P[x, y] = P(report y | category x) from the oracle's own log_probability."""
    reports = np.arange(oracle.k)
    return np.exp(np.stack([oracle.log_probability(reports, x) for x in range(oracle.k)]))


def _oue_transition(oracle) -> np.ndarray:
    """P[x, B] over all 2^k bit vectors B."""
    patterns = np.array(list(itertools.product([0, 1], repeat=oracle.k)), dtype=bool)
    return np.exp(np.stack([oracle.log_probability(patterns, x) for x in range(oracle.k)]))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(epsilon=st.floats(0.01, 15.0), k=st.integers(2, 40))
def test_grr_worst_case_ratio_is_e_to_eps(epsilon, k):
    P = _grr_transition(GeneralizedRR(epsilon, k))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    log_ratio = np.log(P[:, None, :]) - np.log(P[None, :, :])  # [x, x', y]
    assert log_ratio.max() <= epsilon + 1e-9
    assert log_ratio.max() == pytest.approx(epsilon, rel=1e-9)  # the bound is attained


@settings(max_examples=40, deadline=None, derandomize=True)
@given(epsilon=st.floats(0.01, 15.0), k=st.integers(2, 7))
def test_oue_worst_case_ratio_is_e_to_eps(epsilon, k):
    P = _oue_transition(OptimizedUnaryEncoding(epsilon, k))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    log_ratio = np.log(P[:, None, :]) - np.log(P[None, :, :])
    assert log_ratio.max() <= epsilon + 1e-9
    assert log_ratio.max() == pytest.approx(epsilon, rel=1e-9)


@pytest.mark.parametrize("name", ["grr", "oue"])
def test_sampler_follows_the_transition_probabilities(name):
    """The reports of one category match the P used in the privacy check (chi-square, 1e-6)."""
    k, users, category = 4, 40_000, 2
    oracle = oracles.get(name, 1.5, k)
    reports = oracle.perturb(np.full(users, category), np.random.default_rng(41))
    if name == "grr":
        observed = np.bincount(reports, minlength=k)
        expected = users * _grr_transition(oracle)[category]
    else:
        codes = reports @ (1 << np.arange(k)[::-1])  # same order as itertools.product
        observed = np.bincount(codes, minlength=2**k)
        expected = users * _oue_transition(oracle)[category]
    chi2 = np.sum((observed - expected) ** 2 / expected)
    assert chi2 <= stats.chi2.ppf(1 - 1e-6, df=expected.size - 1), chi2


@pytest.mark.parametrize("name", [n for n in registry.available() if not registry.get_class(n).approximate])
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 6.0])
def test_histogram_density_ratio_at_most_e_to_eps(name, epsilon):
    """Only the entries of the two categories differ; scan both over a grid of outputs."""
    oracle = oracles.get("histogram", epsilon, 3, mechanism=name)
    bound = oracle.entry.output_bound if oracle.entry.bounded else 1.0 + 30.0 / epsilon
    grid = np.unique(np.concatenate([np.linspace(-bound, bound, 401), [-1.0, 1.0]]))
    y0, y1 = (a.ravel() for a in np.meshgrid(grid, grid))
    # The third entry is the same for both categories; any possible output of the mechanism will do.
    third = oracle.entry.perturb(np.full(y0.shape, -1.0), np.random.default_rng(0))
    reports = np.column_stack([y0, y1, third])
    log_p = np.stack([oracle.log_probability(reports, x) for x in range(3)])
    for x, x_other in itertools.permutations(range(3), 2):
        a, b = log_p[x], log_p[x_other]
        both_impossible = np.isneginf(a) & np.isneginf(b)
        assert not np.any(np.isneginf(b) & ~np.isneginf(a)), "support depends on the input"
        possible = ~both_impossible
        assert np.max(a[possible] - b[possible]) <= epsilon + 1e-9


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_guarantee_describes_the_budget(name, options):
    oracle = oracles.get(name, 1.25, 3, **options)
    assert "1.25" in oracle.guarantee and "LDP" in oracle.guarantee
    summary = oracle.describe()
    assert summary["name"] == name and summary["epsilon"] == 1.25 and summary["k"] == 3


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
@pytest.mark.parametrize(
    "categories",
    [
        [0, 1, 3],  # k = 3: 3 is outside 0..2
        [-1, 0, 1],
        [0.5, 1.0, 2.0],  # not an integer code
        [0.0, np.nan, 1.0],
        [[0, 1], [1, 2]],  # not 1-D
        [],
        [True, False],
        ["a", "b"],
    ],
)
def test_bad_categories(name, options, categories):
    oracle = oracles.get(name, 1.0, 3, **options)
    with pytest.raises(LDPValueError, match="categories"):
        oracle.perturb(np.asarray(categories), np.random.default_rng(0))


def test_integral_floats_are_accepted_as_categories():
    oracle = oracles.get("grr", 1.0, 3)
    a = oracle.perturb(np.array([0.0, 2.0, 1.0]), np.random.default_rng(2))
    b = oracle.perturb(np.array([0, 2, 1]), np.random.default_rng(2))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
@pytest.mark.parametrize("k", [1, 0, -3, 2.5])
def test_bad_k(name, options, k):
    with pytest.raises(LDPValueError, match="k must be an integer >= 2"):
        oracles.get(name, 1.0, k, **options)


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.nan, math.inf, "one"])
def test_bad_epsilon(name, options, epsilon):
    with pytest.raises(LDPValueError, match="epsilon"):
        oracles.get(name, epsilon, 3, **options)


def test_bad_names_and_options():
    with pytest.raises(LDPValueError, match="unknown frequency oracle"):
        oracles.get("no-such-oracle", 1.0, 3)
    with pytest.raises(LDPValueError, match="grr takes no options"):
        oracles.get("grr", 1.0, 3, mechanism="laplace")
    with pytest.raises(LDPValueError, match="unknown mechanism"):
        oracles.get("histogram", 1.0, 3, mechanism="nope")
    with pytest.raises(LDPValueError, match="mechanism must be a name"):
        oracles.get("histogram", 1.0, 3, mechanism=registry.get("laplace", 1.0))
    with pytest.raises(LDPValueError, match="delta"):
        oracles.get("histogram", 1.0, 3, mechanism="laplace", delta=1e-5)
    with pytest.raises(LDPValueError, match="does not take option"):
        oracles.get("histogram", 1.0, 3, mechanism="laplace", estimator="raw")
    for name in registry.available():
        if registry.get_class(name).approximate:
            with pytest.raises(LDPValueError, match="delta"):  # total delta must be < 1 before halving
                oracles.get("histogram", 1.0, 3, mechanism=name, delta=1.5)


@pytest.mark.parametrize("name,options", CONFIGS, ids=IDS)
def test_bad_variance_arguments(name, options):
    oracle = oracles.get(name, 1.0, 3, **options)
    with pytest.raises(LDPValueError, match="frequencies"):
        oracle.variance([0.5, 0.5], 10)
    with pytest.raises(LDPValueError, match="frequencies"):
        oracle.variance([0.5, 1.5, 0.0], 10)
    with pytest.raises(LDPValueError, match="n must be"):
        oracle.variance([0.5, 0.5, 0.0], 0)


def test_bad_reports():
    with pytest.raises(LDPValueError, match="reports"):
        oracles.get("grr", 1.0, 3).estimate(np.array([0, 3]))
    with pytest.raises(LDPValueError, match="reports"):
        oracles.get("oue", 1.0, 3).estimate(np.zeros((4, 2), dtype=bool))
    with pytest.raises(LDPValueError, match="bits"):
        oracles.get("oue", 1.0, 3).estimate(np.full((4, 3), 2))
    with pytest.raises(LDPValueError, match="reports"):
        oracles.get("histogram", 1.0, 3).estimate(np.zeros(3))
    with pytest.raises(LDPValueError, match="NaN"):
        oracles.get("histogram", 1.0, 3).estimate(np.full((2, 3), np.nan))


def test_rng_must_be_a_generator():
    with pytest.raises(TypeError, match="Generator"):
        oracles.get("grr", 1.0, 3).perturb([0, 1], 0)

"""The cosine estimator of Andrew et al. (ICLR 2024): canary directions, the null law of their
cosines, the eps of two Gaussians, and the estimate on a Gaussian mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad

from ldpfed.audit.canaries import (
    all_iterates_estimate,
    canary_cosines,
    canary_directions,
    epsilon_exact_null,
    epsilon_two_gaussians,
    final_model_estimate,
    final_model_lower_limit,
    inclusion_coins,
    max_over_rounds,
)
from ldpfed.mechanisms.gaussian import analytic_sigma
from ldpfed.validation import LDPValueError


def _delta_by_integration(mean1, std1, mean2, std2, epsilon) -> float:
    """delta(eps) = int max(0, p1 - e^eps p2) dy, by quadrature (independent of the closed form)."""
    integrand = lambda y: max(0.0, stats.norm.pdf(y, mean1, std1) - math.exp(epsilon) * stats.norm.pdf(y, mean2, std2))  # noqa: E731
    low, high = min(mean1, mean2) - 40 * max(std1, std2), max(mean1, mean2) + 40 * max(std1, std2)
    return quad(integrand, low, high, points=sorted({mean1, mean2}), limit=500, epsabs=1e-13)[0]


@pytest.mark.parametrize("seed", range(6))
def test_two_gaussians_eps_matches_quadrature_of_the_privacy_loss(seed):
    rng = np.random.default_rng(seed)
    mean1, std1, mean2, std2 = rng.uniform(0, 3, 4) + [0, 0.3, 0, 0.3]
    delta = 1e-3
    epsilon = epsilon_two_gaussians(mean1, std1, mean2, std2, delta)
    both = max(
        _delta_by_integration(mean1, std1, mean2, std2, epsilon),
        _delta_by_integration(mean2, std2, mean1, std1, epsilon),
    )
    assert both == pytest.approx(delta, rel=1e-5)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-2])
@pytest.mark.parametrize("gap", [-1e-12, 0.0, 1e-12])  # equal stds take the linear branch
def test_equal_stds_give_the_analytic_gaussian_mechanism(epsilon, delta, gap):
    sigma = analytic_sigma(epsilon, delta, 1.0)  # Balle & Wang's calibration, solved for sigma
    assert epsilon_two_gaussians(0.0, sigma, 1.0, sigma + gap, delta) == pytest.approx(epsilon, rel=1e-6)


@pytest.mark.parametrize(("dimension", "expected"), [(200, 2.375326), (2000, 2.317789)])
def test_final_model_estimate_reproduces_the_reference_values(dimension, expected):
    # Values of the reference's own test (one_shot_epe/empirical_privacy_estimation_test.py,
    # test_closed_form_null_gaussian_alt_regression): mean = std = d^-1/2, delta = 0.01; d = 200
    # takes the exact-null threshold grid, d = 2000 the Gaussian null.
    scale = dimension**-0.5
    if dimension < 1000:
        assert epsilon_exact_null(scale, scale, dimension, 1e-2) == pytest.approx(expected, abs=1e-6)
    else:
        assert epsilon_two_gaussians(0.0, scale, scale, scale, 1e-2) == pytest.approx(expected, abs=1e-6)


def test_directions_are_unit_and_depend_on_the_canary_id_alone():
    root = np.random.SeedSequence(11)
    every = canary_directions(root, range(6), 300)
    assert np.allclose(np.linalg.norm(every, axis=1), 1.0)
    assert np.array_equal(canary_directions(root, [5, 3], 300), every[[5, 3]])
    assert not np.array_equal(canary_directions(np.random.SeedSequence(12), [5], 300)[0], every[5])


def test_unseen_canaries_follow_the_closed_form_null():
    # 4,000 cosines with one fixed vector in d = 50: (1 + cos) / 2 ~ Beta(24.5, 24.5). A KS test at
    # level 0.001 rejects a wrong law (e.g. N(0, 1/d) is off by 2% in sd here) only with more
    # draws, so this checks the exact law loosely and the scale tightly through the variance below.
    directions = canary_directions(np.random.SeedSequence(2), range(4000), 50)
    fixed = np.random.default_rng(3).standard_normal(50)
    cosines = canary_cosines(directions, fixed)
    assert stats.kstest((1 + cosines) / 2, stats.beta(24.5, 24.5).cdf).pvalue > 1e-3
    # Var cos = 1/d exactly; the sample variance of 4,000 draws has relative sd sqrt(2/3999) = 2.2%.
    assert np.var(cosines) == pytest.approx(1 / 50, rel=0.07)


def test_cosines_per_round_and_their_maximum():
    directions = np.eye(3)
    deltas = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    per_round = canary_cosines(directions, deltas)
    assert per_round.shape == (3, 3)
    assert np.allclose(per_round[1], 0.0)  # a zero delta gives cosine 0
    assert np.allclose(max_over_rounds(per_round), [1.0, 1 / math.sqrt(2), 0.0])
    with pytest.raises(LDPValueError):
        canary_cosines(directions, np.ones(4))


def test_coins_are_fair_and_seeded():
    coins = inclusion_coins(np.random.default_rng(0), 10_000)
    assert coins.dtype == bool and abs(coins.mean() - 0.5) < 4 * 0.005  # sd of the mean: 0.005
    assert np.array_equal(coins, inclusion_coins(np.random.default_rng(0), 10_000))


def _gaussian_mechanism_cosines(epsilon, delta, dimension, canaries, seed, directions):
    """All canaries inserted into one Gaussian mechanism: sum of unit directions + N(0, sigma^2 I),
    sigma calibrated (Balle & Wang) for sensitivity 1 at (eps, delta)."""
    sigma = analytic_sigma(epsilon, delta, 1.0)
    noise = np.random.default_rng(seed).standard_normal(dimension)
    return canary_cosines(directions, directions.sum(axis=0) + sigma * noise)


@pytest.fixture(scope="module")
def directions_10k():
    return canary_directions(np.random.SeedSequence(7), range(1000), 10_000)


# Spread of the single-run estimate (d = 10^4, 1,000 canaries, delta = 1e-5), measured on 20 noise
# seeds: relative error mean +23% / sd 25% at eps = 1, +9% / 10% at eps = 3, -12% / 5% at eps = 10.
# At eps = 1 the fit's std noise (2.2% relative at n = 1,000) moves eps by ~30% at delta = 1e-5; at
# eps = 10 the other 999 canaries add 999/d = 0.1 to the noise variance sigma^2 = 0.25 the
# estimator sees. The median of 5 seeds is held to 2 sd of the median (1.25 sd / sqrt(5)) around
# those measured biases: [-0.1, 0.6] at eps = 1, [-0.1, 0.25] at eps = 3, [-0.2, -0.04] at eps = 10.
@pytest.mark.parametrize(("epsilon", "low", "high"), [(1.0, -0.1, 0.6), (3.0, -0.1, 0.25), (10.0, -0.2, -0.04)])
def test_final_model_estimate_on_a_gaussian_mechanism(epsilon, low, high, directions_10k):
    estimates = [
        final_model_estimate(
            _gaussian_mechanism_cosines(epsilon, 1e-5, 10_000, 1000, seed, directions_10k), 10_000, 1e-5
        ).epsilon
        for seed in range(5)
    ]
    assert low <= np.median(estimates) / epsilon - 1 <= high


def test_all_iterates_estimate_compares_seen_and_unseen_maxima():
    rng = np.random.default_rng(0)
    unseen = rng.normal(0.0, 1.0, 2000)
    seen = rng.normal(1.0, 1.0, 2000)
    estimate = all_iterates_estimate(seen, unseen, dimension=100, delta=1e-3)
    # mu = 1 with equal stds is the Gaussian mechanism at sigma = 1 (eps 2.39 at delta 1e-3); the
    # fits of 2,000 draws move mu by ~0.03 and the stds by ~1.6%, i.e. eps by ~0.15.
    assert estimate.epsilon == pytest.approx(epsilon_two_gaussians(0.0, 1.0, 1.0, 1.0, 1e-3), abs=0.3)
    assert estimate.threat_model == "all iterates" and estimate.unseen == 2000


def test_lower_limit_sits_below_the_estimate_and_covers_the_truth():
    # 20 fits of 500 Gaussian cosines at a known eps: the 95% limit exceeds it at most 5% of the time
    # (Binomial(20, 0.05): 4 or more misses have probability 0.016), and stays below the estimate.
    dimension, delta, true_mean = 10_000, 1e-5, 0.01
    truth = epsilon_two_gaussians(0.0, dimension**-0.5, true_mean, dimension**-0.5, delta)
    misses = 0
    for seed in range(20):
        cosines = np.random.default_rng(seed).normal(true_mean, dimension**-0.5, 500)
        limit = final_model_lower_limit(cosines, dimension, delta, 0.95)
        assert limit <= final_model_estimate(cosines, dimension, delta).epsilon
        misses += limit > truth
    assert misses <= 3

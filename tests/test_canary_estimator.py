"""The cosine estimate on one Gaussian mechanism (ldpfed.audit.canaries): its sampling law, derived
from the fit of k inserted cosines, against Monte Carlo, and the estimate of the issue's setting
(d = 10^4, 1,000 canaries, all inserted) held to 3 of its own sd, not to a measured bias.

Tolerances: a check at 3 sd fails a sound estimator with probability 0.27%; the fixed seeds make
each outcome one draw of that."""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.audit.canaries import (
    canary_cosines,
    canary_directions,
    epsilon_two_gaussians,
    equal_variance_estimate,
    equal_variance_sd,
    final_model_estimate,
    fitted_estimate_law,
    gaussian_mechanism_slope,
)
from ldpfed.mechanisms.gaussian import analytic_sigma

DELTA = 1e-5


@pytest.mark.parametrize("epsilon", [1.0, 3.0, 10.0])
def test_the_gaussian_mechanisms_slope_is_the_derivative_of_its_eps(epsilon):
    mu, step = 1.0 / analytic_sigma(epsilon, DELTA, 1.0), 1e-5
    numeric = (epsilon_two_gaussians(0, 1, mu + step, 1, DELTA) - epsilon_two_gaussians(0, 1, mu - step, 1, DELTA)) / (
        2 * step
    )
    assert gaussian_mechanism_slope(mu, DELTA) == pytest.approx(numeric, rel=1e-4)


def _orthonormal(k: int, d: int, sigma: float, seeds: int) -> np.ndarray:
    """(seeds, k) cosines of k orthonormal canaries, all inserted, with sum_j c_j + sigma Z: exactly
    (1 + sigma Z_i) / ||Delta||, ||Delta||^2 = sum_i (1 + sigma Z_i)^2 + sigma^2 chi^2_{d-k}."""
    rng = np.random.default_rng(11)
    dots = 1.0 + sigma * rng.standard_normal((seeds, k))
    norms = np.sqrt(np.sum(dots**2, axis=1) + sigma**2 * rng.chisquare(d - k, seeds))
    return dots / norms[:, None]


def test_the_derived_sampling_law_matches_monte_carlo():
    # 120 draws of 1,000 orthonormal canaries at eps = 3 (d = 10^5, k/d = 0.01 of sigma^2 = 1.93): the
    # sample sd of 120 values has relative sd 1/sqrt(2 x 119) = 6.5%, the sample mean sd / sqrt(120)
    epsilon, k, d, seeds = 3.0, 1000, 100_000, 120
    sigma = analytic_sigma(epsilon, DELTA, 1.0)
    cosines = _orthonormal(k, d, sigma, seeds)
    equal = np.array([equal_variance_estimate(row, d, DELTA, inserted=k).epsilon for row in cosines])
    sd = equal_variance_sd(1.0 / sigma, k, d, DELTA, pairwise=False)
    assert abs(equal.std(ddof=1) / sd - 1) <= 3 * 0.065
    assert abs(equal.mean() - epsilon) <= 3 * sd / np.sqrt(seeds)  # unbiased: the k/d is taken out
    fitted = np.array([final_model_estimate(row, d, DELTA).epsilon for row in cosines])
    law_mean, law_sd = fitted_estimate_law(1.0 / sigma, k, d, DELTA, pairwise=False, nodes=6)
    assert abs(fitted.std(ddof=1) / law_sd - 1) <= 3 * 0.065
    assert abs(fitted.mean() - law_mean) <= 3 * law_sd / np.sqrt(seeds)
    assert law_mean > epsilon + 3 * law_sd / np.sqrt(seeds)  # the fitted std's kink: biased up


@pytest.fixture(scope="module")
def directions_10k():
    return canary_directions(np.random.SeedSequence(7), range(1000), 10_000)


@pytest.mark.parametrize("epsilon", [1.0, 3.0, 10.0])
def test_on_one_gaussian_mechanism_each_estimate_is_within_3_of_its_sd(epsilon, directions_10k):
    # the setting: d = 10^4, 1,000 canaries (random directions), all inserted in one release;
    # the equal-stds estimate within 3 sd of the analytic eps (sd 13%, 5.6%, 2.9% of it: 10% is out
    # of reach at eps 1 and 3 with 1,000 canaries, docs/results/canary_audit.md), Andrew et al.'s
    # within 3 sd of its derived mean (+30%, +10%, -13%: the std's kink and the other canaries' k/d)
    d, k = 10_000, 1000
    sigma = analytic_sigma(epsilon, DELTA, 1.0)
    noise = np.random.default_rng(int(epsilon)).standard_normal(d)
    cosines = canary_cosines(directions_10k, directions_10k.sum(axis=0) + sigma * noise)
    sd = equal_variance_sd(1.0 / sigma, k, d, DELTA)
    assert abs(equal_variance_estimate(cosines, d, DELTA, inserted=k).epsilon - epsilon) <= 3 * sd
    law_mean, law_sd = fitted_estimate_law(1.0 / sigma, k, d, DELTA, nodes=6)
    assert abs(final_model_estimate(cosines, d, DELTA).epsilon - law_mean) <= 3 * law_sd


def test_the_equal_stds_estimate_takes_out_the_other_canaries():
    # cosines whose mean is exactly mu_obs / sqrt(d), mu_obs = 1 / sqrt(sigma^2 + k/d): the corrected
    # estimate is the Gaussian mechanism's eps at sigma; without the correction, at the larger noise
    d, k, sigma = 10_000, 1000, 0.5
    cosines = np.full(5, (sigma**2 + k / d) ** -0.5 / np.sqrt(d)) + np.array([-1, -0.5, 0, 0.5, 1]) * 1e-3
    assert equal_variance_estimate(cosines, d, DELTA, inserted=k).epsilon == pytest.approx(
        epsilon_two_gaussians(0, sigma, 1, sigma, DELTA), rel=1e-9
    )
    uncorrected = equal_variance_estimate(cosines, d, DELTA).epsilon
    assert uncorrected == pytest.approx(epsilon_two_gaussians(0, 1, (sigma**2 + k / d) ** -0.5, 1, DELTA), rel=1e-9)

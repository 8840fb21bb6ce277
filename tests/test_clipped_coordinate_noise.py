"""`analysis.federated.clipped_coordinate_noise` against what the privatizer actually does:
m-of-d reporting, d/m rescaling and eps/m per value, for every mechanism and several m.

Exactness is checked against `UpdatePrivatizer.noise_moments` at single values; the Monte Carlo
tests privatize a batch of clients' updates many times and compare the pooled noise mean and the
pooled squared noise around each client's conditional mean with the prediction, within 5 standard
errors computed from the samples themselves (fixed seeds).
"""

from __future__ import annotations

import numpy as np
import pytest

import ldpfed.mechanisms as registry
from ldpfed.analysis.federated import clipped_coordinate_noise
from ldpfed.training.privatize import UpdatePrivatizer

Z = 5.0
DELTA = 1e-5


def variants():
    for name, options in registry.variants():
        yield pytest.param(name, options, id=name + "".join(f"-{v}" for v in options.values()))


def make_privatizer(name, epsilon, clip, report_dims, options):
    """The classic Gaussian calibration needs eps < 1 per value: it gets 0.8 m per round."""
    delta = DELTA if registry.get_class(name).approximate else None
    if options.get("calibration") == "classic":
        epsilon = 0.8 * report_dims
    return UpdatePrivatizer(name, epsilon, clip, delta=delta, report_dims=report_dims, **options)


def updates(clients, dims, clip, seed):
    """Clients' updates with per-coordinate centres and spread; about a quarter beyond [-C, C]."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.8, 0.8, dims) * clip + 0.6 * clip * rng.standard_normal((clients, dims))


def monte_carlo(privatizer, raw, repetitions, seed):
    """(noise (R, K, d), clipped (K, d)): privatize(u) - clip(u) in R independent repetitions."""
    clipped = privatizer.clip_only(raw)
    streams = np.random.SeedSequence(seed).spawn(repetitions)
    noise = np.stack([privatizer.privatize(raw, np.random.default_rng(s)) - clipped for s in streams])
    return noise, clipped


def check_against_monte_carlo(privatizer, raw, repetitions, seed):
    """Pooled over clients, coordinates and repetitions: noise mean and E[(noise - mu_k)^2] vs prediction."""
    clients, dims = raw.shape
    noise, clipped = monte_carlo(privatizer, raw, repetitions, seed)
    mean, variance = clipped_coordinate_noise(privatizer, dims, clipped.mean(axis=0), np.mean(clipped**2, axis=0))
    # Each client's conditional mean is the prediction at its own update (mean u, mean square u^2).
    client_means = np.stack([clipped_coordinate_noise(privatizer, dims, u, u**2)[0] for u in clipped])
    squared = ((noise - client_means) ** 2).ravel()
    measured_variance = squared.mean()
    variance_error = squared.std(ddof=1) / np.sqrt(squared.size)
    assert abs(measured_variance - variance.mean()) <= Z * variance_error, (measured_variance, variance.mean())
    mean_error = noise.std(ddof=1) / np.sqrt(noise.size)
    assert abs(noise.mean() - mean.mean()) <= Z * mean_error
    return measured_variance, float(variance.mean())


@pytest.mark.parametrize("report_dims", [1, 3, 12])
@pytest.mark.parametrize("name,options", list(variants()))
def test_moments_are_the_privatizers_exact_noise_moments(name, options, report_dims):
    privatizer = make_privatizer(name, 6.0, 0.4, report_dims, options)
    clipped = privatizer.clip_only(updates(5, 12, 0.4, seed=1))
    exact_mean, exact_variance = privatizer.noise_moments(clipped)
    for row, mean_row, variance_row in zip(clipped, exact_mean, exact_variance):
        mean, variance = clipped_coordinate_noise(privatizer, 12, row, row**2)
        np.testing.assert_allclose(mean, mean_row, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(variance, variance_row, rtol=1e-12)
    # Averaged over clients, the variance is the mean of the clients' conditional variances.
    _, pooled = clipped_coordinate_noise(privatizer, 12, clipped.mean(axis=0), np.mean(clipped**2, axis=0))
    np.testing.assert_allclose(pooled, exact_variance.mean(axis=0), rtol=1e-12)


@pytest.mark.parametrize("report_dims", [1, 4, 20])
@pytest.mark.parametrize("name,options", list(variants()))
def test_noise_matches_the_privatizer_by_monte_carlo(name, options, report_dims):
    privatizer = make_privatizer(name, 8.0, 0.3, report_dims, options)
    check_against_monte_carlo(privatizer, updates(8, 20, 0.3, seed=2), repetitions=400, seed=3)


# Cases where the old formula was far off: (mechanism, eps per round, d, m), clip 0.05. Old output vs privatizer:
# laplace 0.0032 vs 2.848 (ratio 890 at that clip), piecewise ratio 3924, square wave ratio 320.
ISSUE_CASES = [("laplace", 5.0, 1000, 2), ("piecewise", 15.3, 9840, 6), ("square-wave", 10.0, 650, 4)]


@pytest.mark.parametrize("name,epsilon,dims,report_dims", ISSUE_CASES)
def test_issue_cases_match_the_privatizer(name, epsilon, dims, report_dims):
    privatizer = UpdatePrivatizer(name, epsilon, 0.05, report_dims=report_dims)
    raw = updates(4, dims, 0.05, seed=4)
    measured, predicted = check_against_monte_carlo(privatizer, raw, repetitions=1500 // report_dims, seed=5)
    # What the old function returned: the per-value mechanism's C^2 V(t) alone, m and d/m ignored.
    clipped = privatizer.clip_only(raw) / 0.05
    per_value = privatizer.per_value_mechanism(dims)
    old = 0.05**2 * np.mean(per_value.variance(clipped))
    assert measured > 50 * old

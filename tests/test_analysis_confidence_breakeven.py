"""Confidence supremum against simulation, and the break-even population's formula and sign logic
(analysis.md, "Confidence supremum and break-even population")."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_doubles import ShrunkLaplace

from ldpfed.analysis import ColumnMoments, predict
from ldpfed.analysis.breakeven import break_even
from ldpfed.analysis.confidence import error_supremum
from ldpfed.analysis.montecarlo import simulate_deviations
from ldpfed.data import generate
from ldpfed.mechanisms.laplace import Laplace
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.validation import LDPValueError

ALPHA = 0.9


@pytest.mark.parametrize(
    "name,options,report_dims",
    [
        ("piecewise", {}, 8),
        ("square-wave", {"estimator": "raw"}, 8),
        ("square-wave", {"estimator": "raw"}, 2),
    ],
)
def test_supremum_covers_alpha_of_simulated_errors(name, options, report_dims):
    users, dims, repetitions = 1000, 8, 1000
    values = generate("uniform", users, dims, np.random.default_rng(2))
    prediction = predict(name, 2.0, users, dims, report_dims, values, **options)
    supremum = error_supremum(prediction.deviation_model(), ALPHA)
    mechanism = per_value_mechanism(name, 2.0, report_dims, **options)
    deviations = simulate_deviations(values, mechanism, report_dims, repetitions, seed=31).deviations

    within = np.abs(deviations) <= supremum.per_dimension  # per dimension and repetition
    standard_error = np.sqrt(ALPHA * (1 - ALPHA) / within.size)
    assert abs(within.mean() - ALPHA) <= 5 * standard_error
    all_within = np.all(np.abs(deviations) <= supremum.simultaneous, axis=1)
    assert abs(all_within.mean() - ALPHA) <= 5 * np.sqrt(ALPHA * (1 - ALPHA) / repetitions)
    assert supremum.simultaneous > supremum.max


def test_supremum_of_an_unbiased_normal_is_the_two_sided_quantile():
    prediction = predict("laplace", 1.0, 10_000, 3, 3)
    supremum = error_supremum(prediction.deviation_model(), 0.95)
    np.testing.assert_allclose(supremum.per_dimension, 1.959964 * np.sqrt(prediction.sigma2), rtol=1e-5)
    with pytest.raises(LDPValueError, match="alpha"):
        error_supremum(prediction.deviation_model(), 1.0)


# --- break-even -----------------------------------------------------------------------------------
def constant_columns(value, users=1000, dims=4):
    return ColumnMoments.from_summary(users, np.full(dims, value), variance=np.zeros(dims))


def test_break_even_by_hand_and_sign_logic():
    """A: unbiased, variance 8/e^2; B: biased (delta_B = 0.05 - 0.7 * 0.5), variance 2 * 0.1^2."""
    moments = constant_columns(0.5)
    users, dims, m = 1000, 4, 2
    a = predict(Laplace(epsilon=1.0, sampler="continuous"), None, users, dims, m, moments)
    b = predict(ShrunkLaplace(epsilon=1.0), None, users, dims, m, moments)
    variance_a, variance_b, bias_b = 8.0, 0.02, 0.05 - 0.7 * 0.5
    expected = (variance_b - variance_a) / (0.0 - bias_b**2) * dims / m  # spec formula (no spread)
    result = break_even(a, b)
    np.testing.assert_allclose(result.n_prime, expected, rtol=1e-12)
    assert result.total_n_prime == pytest.approx(expected, rel=1e-12)
    assert not result.total_dominates

    def mse_at(n):
        return (
            predict(Laplace(epsilon=1.0, sampler="continuous"), None, n, dims, m, moments.with_users(n)).mse,
            predict(ShrunkLaplace(epsilon=1.0), None, n, dims, m, moments.with_users(n)).mse,
        )

    # The exact predictions average 1/r_j over r_j ~ Bin(n, m/d), which moves the crossing by a
    # relative (1 - m/d)/r_j ~ 0.6% from the spec's line in 1/n: check 5% on either side.
    below, above = mse_at(int(np.floor(0.95 * expected))), mse_at(int(np.ceil(1.05 * expected)))
    assert below[1] < below[0]  # fewer users: the low-variance (biased) mechanism wins
    assert above[0] < above[1]  # more users: the unbiased one wins
    assert result.total_winner.startswith("laplace")  # at n = 1000 > n' = 177 (named with its sampler)


def test_break_even_keeps_the_sampling_term_at_the_crossing():
    """With spread data and m < d the two error lines cross exactly at n' (S_j^2 held fixed)."""
    values = generate("uniform", 2000, 4, np.random.default_rng(5))
    moments = ColumnMoments.from_array(values).summary()
    a = predict("piecewise", 4.0, 2000, 4, 2, moments)
    b = predict("square-wave", 4.0, 2000, 4, 2, moments, estimator="raw")
    result = break_even(a, b)
    ratio = 2.0
    line_a = a.mean_report_variance * ratio + a.sampling_coefficient * (ratio - 1)
    line_b = b.mean_report_variance * ratio + b.sampling_coefficient * (ratio - 1)
    crossing = result.n_prime
    np.testing.assert_allclose(line_a / crossing + a.bias**2, line_b / crossing + b.bias**2, rtol=1e-9)
    per_dimension_a = a.sigma2 + a.bias**2
    per_dimension_b = b.sigma2 + b.bias**2
    expected_winner = np.where(per_dimension_a < per_dimension_b, result.a, result.b)
    np.testing.assert_array_equal(result.winner, expected_winner)


def test_two_unbiased_mechanisms_never_cross():
    moments = constant_columns(0.3)
    a = predict("laplace", 1.0, 1000, 4, 4, moments)
    b = predict("piecewise", 1.0, 1000, 4, 4, moments)
    result = break_even(a, b)
    assert np.all(np.isnan(result.n_prime)) and result.total_dominates
    assert result.total_winner == "piecewise"  # the smaller variance at every n
    assert result.to_dict()["break_even_users"] is None


def test_negative_crossing_means_domination():
    """B has both the smaller variance and the smaller bias: n' < 0, B wins everywhere."""
    moments = constant_columns(0.5)
    a = predict(ShrunkLaplace(epsilon=1.0, shrink=0.3, scale=0.5), None, 1000, 4, 4, moments)
    b = predict(ShrunkLaplace(epsilon=1.0, shrink=0.9, scale=0.1), None, 1000, 4, 4, moments)
    result = break_even(a, b)
    assert result.total_n_prime < 0 and result.total_dominates
    assert result.total_winner == result.b


def test_break_even_needs_matching_configurations():
    with pytest.raises(LDPValueError, match="same users"):
        break_even(predict("laplace", 1.0, 1000, 4, 4), predict("laplace", 1.0, 2000, 4, 4))

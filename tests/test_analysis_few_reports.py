"""The predictor at few reports per dimension: r_j ~ Binomial(n, m/d) is averaged
over exactly, E[1/r_j | r_j > 0] against a high-precision reference, and the MSE against Monte Carlo
at E[r_j] = 2, 5 and 20, where treating 1/r_j as 1/E[r_j] was 1.26x off at E[r_j] = 5.

Monte Carlo tolerances: 4 standard errors of the mean over i.i.d. repetitions (fixed seeds), with
enough repetitions that 4 standard errors are below 5% of the MSE: passing means within 5%.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from ldpfed.analysis import predict
from ldpfed.analysis.montecarlo import simulate_deviations
from ldpfed.analysis.predictor import inverse_report_moment
from ldpfed.mechanisms.multidim import per_value_mechanism

mpmath.mp.dps = 40


def reference(users: int, fraction: float) -> tuple[float, float]:
    """(P(r = 0), E[1/r | r > 0]) from E[1/r; r > 0] = int_0^1 (G(t) - G(0)) / t dt, G(t) = (1 - q + q t)^n
    the probability generating function (1/k = int_0^1 t^(k-1) dt), in 40-digit arithmetic."""
    q = mpmath.mpf(fraction)
    none = (1 - q) ** users
    integral = mpmath.quad(lambda t: ((1 - q + q * t) ** users - none) / t, [0, 1 - 1 / (users * q + 1), 1])
    return float(none), float(integral / (1 - none))


@pytest.mark.parametrize(
    "users,fraction", [(100, 0.05), (100, 0.02), (40, 0.5), (1000, 0.001), (5000, 0.3), (10**6, 2e-5), (10**7, 0.01)]
)
def test_inverse_report_moment_matches_the_high_precision_reference(users, fraction):
    none, inverse = inverse_report_moment(users, fraction)
    expected_none, expected_inverse = reference(users, fraction)
    assert none == pytest.approx(expected_none, rel=1e-12, abs=1e-300)
    assert inverse == pytest.approx(expected_inverse, rel=1e-10)


def test_inverse_report_moment_small_cases_by_hand():
    assert inverse_report_moment(7, 1.0) == (0.0, 1 / 7)  # m = d: r = n
    none, inverse = inverse_report_moment(2, 0.5)  # r = 0, 1, 2 with 1/4, 1/2, 1/4
    assert none == 0.25 and inverse == pytest.approx((0.5 * 1 + 0.25 * 0.5) / 0.75, rel=1e-15)


def column_values(users, dims, seed):
    """Columns with means between -0.6 and 0.6 and spread: the r_j = 0 case costs theta_bar_j^2."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(np.linspace(-0.6, 0.6, dims), 0.3, size=(users, dims)), -1, 1)


# (expected reports n m / d, dims, repetitions); n = 100, m = 1. 4 standard errors shrink as
# 1/sqrt(repetitions); at these sizes and seeds they are 2.6-3.8% of the MSE (Laplace the widest),
# under the 5% the guard in the test demands, so passing still means within 5%.
CASES = [
    pytest.param(2, 50, 1500, id="r2"),
    pytest.param(5, 20, 3000, id="r5"),
    pytest.param(20, 5, 5000, id="r20"),
]


@pytest.mark.parametrize("name,options", [("laplace", {}), ("square-wave", {"estimator": "raw"}), ("piecewise", {})])
@pytest.mark.parametrize("expected_reports,dims,repetitions", CASES)
def test_prediction_within_5_percent_of_monte_carlo_at_few_reports(name, options, expected_reports, dims, repetitions):
    users, m, epsilon = 100, 1, 2.0
    values = column_values(users, dims, seed=expected_reports)
    prediction = predict(name, epsilon, users, dims, m, values, **options)
    assert prediction.r[0] == expected_reports
    mechanism = per_value_mechanism(name, epsilon, m, **options)
    measured = simulate_deviations(values, mechanism, m, repetitions, seed=100 + expected_reports)
    tolerance = 4 * measured.mse_standard_error
    assert tolerance < 0.05 * measured.mse, "too few repetitions to test the 5% bar"
    assert abs(prediction.mse - measured.mse) <= tolerance, (prediction.mse, measured.mse)
    # The deviation model's moments are those of the mixture over r_j: its mean too.
    mean_deviation = measured.deviations.mean(axis=0)
    mean_error = measured.deviations.std(axis=0, ddof=1) / np.sqrt(repetitions)
    assert np.all(np.abs(mean_deviation - prediction.bias) <= 5 * mean_error + 1e-12)


def test_the_no_report_case_is_stated_and_costs_theta_bar_squared():
    """At E[r_j] = 2, P(r_j = 0) = 0.99^100 / ... = (1 - 1/50)^100 = 0.133: stated in the prediction."""
    values = column_values(100, 50, seed=2)
    prediction = predict("laplace", 2.0, 100, 50, 1, values)
    none = (1 - 1 / 50) ** 100
    np.testing.assert_allclose(prediction.no_report_probability, none, rtol=1e-12)
    theta_bar = values.mean(axis=0)
    np.testing.assert_allclose(prediction.no_report_variance, none * (1 - none) * theta_bar**2, rtol=1e-10)
    exact = (1 - none) * (
        prediction.mean_report_variance * prediction.inverse_reports
        + prediction.sampling_coefficient * (prediction.inverse_reports - 1 / 100)
    ) + none * theta_bar**2
    np.testing.assert_allclose(prediction.sigma2 + prediction.bias**2, exact, rtol=1e-10)
    assert "P(r_j = 0)" in prediction.normal_approximation_warning
    assert prediction.to_dict()["normal_approximation_warning"] == prediction.normal_approximation_warning


def test_normal_approximation_warning_follows_berry_esseen():
    many = predict("laplace", 1.0, 10**6, 4, 4)  # r_j = 10^6: bound ~ 1e-3
    assert many.normal_approximation_warning is None
    few = predict("laplace", 1.0, 30, 4, 4)  # r_j = 30: bound 0.85 / sqrt(30) = 0.16
    assert few.berry_esseen.max > 0.1 and "Berry–Esseen" in few.normal_approximation_warning

"""Unit tests of the predictor's formulas (analysis.md, Per-dimension parameters) and of the
column moments it runs on."""

from __future__ import annotations

import json

import numpy as np
import pytest
from analysis_doubles import ShrunkLaplace
from scipy.stats import binom

from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.analysis import ColumnMoments, predict
from ldpfed.analysis.montecarlo import simulate_deviations
from ldpfed.mechanisms.laplace import Laplace
from ldpfed.validation import LDPValueError


def column_data(users=500, dims=4, seed=3):
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(np.linspace(-0.6, 0.6, dims), 0.3, size=(users, dims)), -1, 1)


def inverse_reports(users, fraction):
    """E[1/r | r > 0] for r ~ Binomial(n, q) by the full sum over k = 1..n (reference for the predictor)."""
    k = np.arange(1, users + 1)
    return np.sum(binom.pmf(k, users, fraction) / k) / binom.sf(0, users, fraction)


# --- closed forms ---------------------------------------------------------------------------------
def test_laplace_closed_form_without_data():
    # Per value eps/m: V = 8 m^2 / eps^2; r = n m / d; MSE = V / r = 8 m d / (eps^2 n).
    eps, n, d = 2.0, 10_000, 20
    prediction = predict("laplace", eps, n, d, d, sampler="continuous")  # the real-number 8/eps^2
    assert prediction.mse == pytest.approx(8 * d * d / (eps**2 * n), rel=1e-12)
    assert prediction.bias_sq == 0.0
    assert prediction.sigma2.shape == (d,)


def test_laplace_closed_form_with_sampling_term():
    eps, d, m = 2.0, 4, 2
    values = column_data(dims=d)
    n = values.shape[0]
    prediction = predict("laplace", eps, n, d, m, values, sampler="continuous")
    h = inverse_reports(n, m / d)  # E[1/r_j | r_j > 0]; P(r_j = 0) = 2^-500 here
    spread = values.var(axis=0, ddof=1)  # S_j^2 with divisor n - 1 (Cochran)
    expected = 8 * m**2 / eps**2 * h + spread * (h - 1 / n)
    np.testing.assert_allclose(prediction.sigma2, expected, rtol=1e-12)
    assert prediction.mse == pytest.approx(expected.mean(), rel=1e-12)


def test_biased_mechanism_matches_per_user_sums():
    """delta_j and E[V] from coefficients equal the per-user definitions (1/n) sum_i b(t_ij), V(t_ij)."""
    values = column_data()
    mechanism = ShrunkLaplace(epsilon=1.0)
    n, d = values.shape
    m = 2
    prediction = predict(mechanism, None, n, d, m, values)
    h = inverse_reports(n, m / d)
    np.testing.assert_allclose(prediction.bias, mechanism.bias(values).mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(prediction.noise_variance, mechanism.variance(values).mean(axis=0) * h, rtol=1e-12)
    # The conditional mean t + b(t) has slope (1 + b1) = shrink: the data spread shrinks with it.
    expected_sampling = mechanism.shrink**2 * values.var(axis=0, ddof=1) * (h - 1 / n)
    np.testing.assert_allclose(prediction.sampling_variance, expected_sampling, rtol=1e-12)
    assert prediction.mse == pytest.approx(np.mean(prediction.sigma2 + prediction.bias**2))


def test_sampling_term_needs_the_slope_factor_monte_carlo():
    """With a biased slope and m < d the (1+b1)^2 factor matters; the spec's bare S_j^2 fails by > 5 SE."""
    rng = np.random.default_rng(11)
    values = rng.uniform(-1, 1, size=(400, 4))
    mechanism = ShrunkLaplace(epsilon=1.0, shrink=0.3, offset=0.0, scale=0.02)
    m = 1
    prediction = predict(mechanism, None, 400, 4, m, values)
    measured = simulate_deviations(values, mechanism, m, 3000, seed=5)
    tolerance = 5 * measured.mse_standard_error
    assert abs(prediction.mse - measured.mse) <= tolerance
    uncorrected = prediction.mse + np.mean(prediction.sampling_variance) * (1 / mechanism.shrink**2 - 1)
    assert abs(uncorrected - measured.mse) > tolerance


def test_counts_override_expected_reports():
    values = column_data(dims=3)
    counts = np.array([100.0, 200.0, 400.0])
    prediction = predict("laplace", 1.0, 500, 3, 1, values, counts=counts, sampler="continuous")
    np.testing.assert_array_equal(prediction.r, counts)
    np.testing.assert_allclose(prediction.noise_variance, 8 / counts)


def test_a_dimension_nobody_reported_is_off_by_its_mean():
    values = column_data(dims=3)
    prediction = predict("laplace", 1.0, 500, 3, 1, values, counts=[0.0, 250.0, 250.0], sampler="continuous")
    assert prediction.bias[0] == pytest.approx(-values[:, 0].mean())
    assert prediction.sigma2[0] == 0.0 and prediction.berry_esseen.bound[0] == 0.0
    assert prediction.sigma2[1] > 0


def test_mechanism_instance_is_the_per_value_randomizer():
    by_name = predict("laplace", 3.0, 1000, 6, 3)
    by_object = predict(Laplace(epsilon=1.0), None, 1000, 6, 3)
    np.testing.assert_allclose(by_name.sigma2, by_object.sigma2)
    assert by_object.epsilon == pytest.approx(3.0)
    with pytest.raises(LDPValueError, match="per-value"):
        predict(Laplace(epsilon=1.0), 2.0, 1000, 6, 3)


def test_deviation_model_and_dict():
    prediction = predict("laplace", 1.0, 1000, 5, 2, column_data(users=1000, dims=5))
    model = prediction.deviation_model()
    assert isinstance(model, DeviationModel) and model.source == "model"
    np.testing.assert_allclose(model.sigma**2, prediction.sigma2)
    assert model.mse == pytest.approx(prediction.mse)
    summary = prediction.to_dict()
    for key in ("mse", "bias_sq", "variance", "berry_esseen", "mechanism", "epsilon", "users", "dims", "report_dims"):
        assert key in summary
    assert len(summary["per_dimension"]["sigma2"]) == 5


def test_without_data_and_m_below_d_is_a_flagged_upper_bound():
    prediction = predict("laplace", 1.0, 1000, 5, 2)
    assert "upper bound" in prediction.data_source
    with_data = predict("laplace", 1.0, 1000, 5, 2, column_data(users=1000, dims=5))
    assert prediction.mse > with_data.mse


def test_data_dependent_mechanism_without_data_is_an_error():
    with pytest.raises(LDPValueError, match="depends on the data"):
        predict(ShrunkLaplace(epsilon=1.0, offset=0.0), None, 100, 3, 3)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(report_dims=6), "report_dims"),
        (dict(users=0), "users"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(mechanism="nope"), "unknown mechanism"),
        (dict(dims=4), "dimensions"),
        (dict(users=499), "rows"),
        (dict(counts=[-1, 1, 1, 1, 1]), "counts"),
        (dict(counts=[1, 1, 1, 1, 501]), "counts"),
    ],
)
def test_bad_input(kwargs, message):
    arguments = dict(mechanism="laplace", epsilon=1.0, users=500, dims=5, report_dims=2, data=column_data(dims=5))
    arguments.update(kwargs)
    with pytest.raises(LDPValueError, match=message):
        predict(**arguments)


def test_out_of_domain_data_is_an_error():
    values = column_data(dims=2)
    values[0, 0] = 1.5
    with pytest.raises(LDPValueError, match=r"\[-1"):
        predict("laplace", 1.0, 500, 2, 1, values)


# --- column moments -------------------------------------------------------------------------------
def test_summary_moments_give_the_same_prediction():
    values = column_data(users=800, dims=6)
    moments = ColumnMoments.from_array(values)
    summary = ColumnMoments.from_summary(800, moments.mean, mean_sq=moments.mean_sq)
    np.testing.assert_allclose(summary.variance, moments.variance, rtol=1e-9)
    from_array = predict("laplace", 2.0, 800, 6, 2, values)
    from_summary = predict("laplace", 2.0, 800, 6, 2, summary)
    np.testing.assert_allclose(from_summary.sigma2, from_array.sigma2, rtol=1e-9)


def test_moments_files_round_trip(tmp_path):
    values = column_data(users=300, dims=3)
    moments = ColumnMoments.from_array(values)
    path = tmp_path / "moments.json"
    path.write_text(json.dumps(moments.to_dict()))
    loaded = ColumnMoments.read(path)
    np.testing.assert_allclose(loaded.variance, moments.variance, rtol=1e-9)
    csv = tmp_path / "moments.csv"
    csv.write_text("mean,variance\n" + "\n".join(f"{a},{b}" for a, b in zip(moments.mean, moments.variance)))
    np.testing.assert_allclose(ColumnMoments.read(csv, users=300).mean_sq, moments.mean_sq, rtol=1e-9)
    assert predict("laplace", 1.0, 300, 3, 1, path).mse == pytest.approx(predict("laplace", 1.0, 300, 3, 1, values).mse)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(users=10, mean=[2.0], mean_sq=[1.0]), "means"),
        (dict(users=10, mean=[0.5], mean_sq=[0.1]), "mean_sq"),
        (dict(users=10, mean=[0.5]), "mean_sq or variance"),
        (dict(users=10, mean=[0.5], mean_sq=[0.5], variance=[0.1]), "disagree"),
        (dict(users=10, mean=[0.5, 0.1], variance=[0.1]), "entries"),
        (dict(users=0, mean=[0.5], variance=[0.1]), "users"),
        (dict(users=10, mean=[float("nan")], variance=[0.1]), "finite"),
    ],
)
def test_bad_summary_moments(arguments, message):
    with pytest.raises(LDPValueError, match=message):
        ColumnMoments.from_summary(**arguments)


def test_unreadable_moments_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(LDPValueError, match="cannot read"):
        ColumnMoments.read(path)
    with pytest.raises(LDPValueError, match="does not exist"):
        ColumnMoments.read(tmp_path / "missing.json")


def test_one_pass_moments_equal_numpy_and_validate_the_domain():
    """ColumnMoments.from_array's tiled pass against plain numpy, on a shape that
    leaves partial tiles in both directions; NaN and out-of-domain values are still refused."""
    values = np.random.default_rng(4).uniform(-1, 1, size=(37, 11))
    moments = ColumnMoments.from_array(values, ranges=True, block=24, width=4)  # tiles of 4 columns x 6 rows
    np.testing.assert_allclose(moments.mean, values.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(moments.mean_sq, np.mean(values**2, axis=0), rtol=1e-13)
    np.testing.assert_allclose(moments.mean_fourth, np.mean(values**4, axis=0), rtol=1e-13)
    np.testing.assert_allclose(moments.variance, values.var(axis=0, ddof=1), rtol=1e-12)
    np.testing.assert_array_equal(moments.minimum, values.min(axis=0))
    np.testing.assert_array_equal(moments.maximum, values.max(axis=0))
    assert ColumnMoments.from_array(values).minimum is None  # ranges only on request
    for bad, message in ((np.nan, "NaN"), (1.5, r"\[-1.0, 1.0\]")):
        broken = values.copy()
        broken[30, 9] = bad
        with pytest.raises(LDPValueError, match=message):
            ColumnMoments.from_array(broken, block=24, width=4)

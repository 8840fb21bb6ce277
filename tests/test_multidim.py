"""m-of-d reporting (mechanisms.md, Several dimensions): sampling, estimators, additivity, bad input.

Statistical checks use fixed seeds and tolerances computed from the exact variance (5 standard
errors, or a chi-square quantile at 1e-6), so they fail only on a real error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import ldpfed.mechanisms as registry
from ldpfed.mechanisms.multidim import (
    ReportSums,
    _mask_of_smallest,
    mean_estimate,
    per_value_mechanism,
    perturb_tuples,
    sample_report_mask,
    scaled_estimate,
    summarize,
    wang_report_dims,
)
from ldpfed.validation import LDPValueError

Z = 5.0  # standard errors allowed in Monte Carlo comparisons
DELTA = 1e-5  # total delta given to approximate mechanisms


def _delta_for(name: str) -> float | None:
    return DELTA if registry.get_class(name).approximate else None


def _values(users: int, dims: int, seed: int) -> np.ndarray:
    """A fixed table in [-1, 1] with different means per dimension (hits both ends too)."""
    rng = np.random.default_rng(seed)
    centres = np.linspace(-0.8, 0.8, dims)
    table = np.clip(centres + 0.3 * rng.standard_normal((users, dims)), -1.0, 1.0)
    table[0] = 1.0
    table[1] = -1.0
    return table


# --- sampling the reported dimensions --------------------------------------------------------------


@pytest.mark.parametrize("dims,m", [(7, 1), (7, 3), (7, 6), (4, 4)])
def test_mask_has_exactly_m_per_row_and_marginal_m_over_d(dims, m):
    users = 20_000
    mask = sample_report_mask(users, dims, m, np.random.default_rng(11))
    assert mask.shape == (users, dims) and mask.dtype == bool
    assert np.all(mask.sum(axis=1) == m)
    # Each column count is Binomial(users, m/d) marginally.
    p = m / dims
    counts = mask.sum(axis=0)
    se = math.sqrt(users * p * (1 - p))
    if se == 0:  # m == d: every dimension always reported
        assert np.all(counts == users)
    else:
        assert np.all(np.abs(counts - users * p) <= Z * se), counts


def test_every_subset_equally_likely():
    """Uniform without replacement: all C(d, m) subsets have probability 1 / C(d, m)."""
    users, dims, m = 30_000, 5, 2
    mask = sample_report_mask(users, dims, m, np.random.default_rng(12))
    subsets = list(itertools.combinations(range(dims), m))
    codes = mask @ (1 << np.arange(dims))
    observed = np.array([np.sum(codes == sum(1 << j for j in s)) for s in subsets])
    assert observed.sum() == users
    expected = np.full(len(subsets), users / len(subsets))
    chi2 = np.sum((observed - expected) ** 2 / expected)
    assert chi2 <= stats.chi2.ppf(1 - 1e-6, df=len(subsets) - 1), (chi2, observed)


def test_masks_differ_across_users_and_are_reproducible():
    a = sample_report_mask(500, 6, 2, np.random.default_rng(3))
    b = sample_report_mask(500, 6, 2, np.random.default_rng(3))
    assert np.array_equal(a, b)
    assert len({row.tobytes() for row in a}) > 1


def test_the_mask_marks_each_rows_m_smallest_uniforms_and_m_where_a_row_ties():
    """The mask is a function of the generator's uniforms (a run replays it bit for bit): each row's
    m smallest; two equal uniforms at the m-th place still give m."""
    mask = sample_report_mask(300, 6, 2, np.random.default_rng(4))
    draws = np.random.default_rng(4).random((300, 6))
    assert np.array_equal(mask, draws <= np.sort(draws, axis=1)[:, 1:2])
    tied = _mask_of_smallest(np.array([[0.5, 0.1, 0.1, 0.9], [0.7, 0.2, 0.4, 0.2]]), 1)
    assert tied.sum(axis=1).tolist() == [1, 1] and not tied[:, [0, 3]].any() and not tied[1, 2]


# --- estimators ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", registry.available())
def test_mean_estimate_matches_bias_and_variance(name):
    """theta_hat_j given the mask has mean mean_{i in R_j}(t + b(t)) and variance sum V(t) / r_j^2.

    Standardized errors over repetitions and dimensions must have mean 0 and variance 1.
    """
    users, dims, m, epsilon, reps = 1_500, 5, 2, 2.0, 120
    table = _values(users, dims, seed=1)
    mechanism = per_value_mechanism(name, epsilon, m, _delta_for(name))
    z_scores = []
    for rng in map(np.random.default_rng, np.random.SeedSequence(21).spawn(reps)):
        mask, reports = perturb_tuples(table, mechanism, m, rng)
        estimate = mean_estimate(summarize(mask, reports))
        r = mask.sum(axis=0)
        expected = np.where(mask, table + mechanism.bias(table), 0.0).sum(axis=0) / r
        variance = np.where(mask, mechanism.variance(table), 0.0).sum(axis=0) / r**2
        z_scores.append((estimate - expected) / np.sqrt(variance))
    z = np.concatenate(z_scores)
    k = z.size
    assert abs(z.mean()) <= Z / math.sqrt(k), z.mean()
    # Sample variance of k ~unit-variance scores: chi-square with k-1 dof (normal approximation of
    # the mean of r_j > 500 reports; the CLT makes each score close to N(0, 1)).
    low, high = stats.chi2.ppf([1e-6, 1 - 1e-6], df=k - 1) / (k - 1)
    assert low <= z.var(ddof=1) <= high, z.var(ddof=1)


@pytest.mark.parametrize("name", registry.available())
def test_scaled_estimate_mean_and_variance(name):
    """Wang et al.: E = mean_i (t + b(t)); each user adds X_i = I_ij t*_ij with P(I_ij) = m/d."""
    users, dims, m, epsilon, reps = 1_000, 6, 2, 3.0, 150
    table = _values(users, dims, seed=2)
    mechanism = per_value_mechanism(name, epsilon, m, _delta_for(name))
    p = m / dims
    mean_report = table + mechanism.bias(table)
    second_moment = mechanism.variance(table) + mean_report**2
    expected = mean_report.mean(axis=0)
    var_x = p * second_moment - (p * mean_report) ** 2
    variance = (dims / (users * m)) ** 2 * var_x.sum(axis=0)

    estimates = np.array(
        [
            scaled_estimate(summarize(*perturb_tuples(table, mechanism, m, rng)), m)
            for rng in map(np.random.default_rng, np.random.SeedSequence(22).spawn(reps))
        ]
    )
    mean_error = estimates.mean(axis=0) - expected
    assert np.all(np.abs(mean_error) <= Z * np.sqrt(variance / reps)), mean_error / np.sqrt(variance / reps)
    # Monte Carlo variance per dimension against the exact one (chi-square, reps-1 dof; the
    # estimate averages 1000 users so it is close to normal), Bonferroni over dimensions.
    ratio = estimates.var(axis=0, ddof=1) / variance
    low, high = stats.chi2.ppf([1e-6 / dims, 1 - 1e-6 / dims], df=reps - 1) / (reps - 1)
    assert np.all((low <= ratio) & (ratio <= high)), ratio


def test_full_reporting_mean_and_scaled_estimates_agree():
    table = _values(300, 4, seed=3)
    mechanism = per_value_mechanism("laplace", 1.0, 4)
    mask, reports = perturb_tuples(table, mechanism, 4, np.random.default_rng(5))
    sums = summarize(mask, reports)
    assert mask.all()
    np.testing.assert_allclose(mean_estimate(sums), scaled_estimate(sums, 4))
    np.testing.assert_allclose(mean_estimate(sums), reports.mean(axis=0))


def test_mean_estimate_is_zero_where_no_user_reported():
    sums = ReportSums(np.array([2.0, 0.0]), np.array([1.0, 0.0]), np.array([1.0, 0.0]), users=2)
    np.testing.assert_array_equal(mean_estimate(sums), [0.5, 0.0])


def test_only_reported_entries_are_perturbed():
    table = _values(200, 5, seed=4)
    mask, reports = perturb_tuples(table, per_value_mechanism("laplace", 1.0, 2), 2, np.random.default_rng(6))
    assert np.all(reports[~mask] == 0.0)
    assert np.all(reports[mask] != table[mask])  # continuous noise: equality has probability 0


# --- sufficient statistics ------------------------------------------------------------------------


def test_report_sums_add_over_chunks():
    table = _values(1_003, 6, seed=5)
    mechanism = per_value_mechanism("laplace", 2.0, 3)
    mask, reports = perturb_tuples(table, mechanism, 3, np.random.default_rng(7))
    whole = summarize(mask, reports)
    chunked = ReportSums.zeros(6)
    for rows in np.array_split(np.arange(table.shape[0]), 7):
        chunked = chunked + summarize(mask[rows], reports[rows])
    assert chunked.users == whole.users == 1_003
    np.testing.assert_array_equal(chunked.count, whole.count)
    np.testing.assert_allclose(chunked.total, whole.total, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(chunked.total_sq, whole.total_sq, rtol=1e-12)
    np.testing.assert_allclose(mean_estimate(chunked), mean_estimate(whole), rtol=1e-12, atol=1e-12)


def test_summarize_counts_sums_and_squares():
    mask = np.array([[True, False], [True, True], [False, True]])
    reports = np.array([[0.5, 9.0], [-1.5, 2.0], [7.0, -3.0]])  # masked-out entries must be ignored
    sums = summarize(mask, reports)
    np.testing.assert_array_equal(sums.count, [2, 2])
    np.testing.assert_allclose(sums.total, [0.5 - 1.5, 2.0 - 3.0])
    np.testing.assert_allclose(sums.total_sq, [0.25 + 2.25, 4.0 + 9.0])
    assert sums.users == 3 and sums.dims == 2


def test_sample_variance_matches_numpy_and_is_nan_below_two_reports():
    rng = np.random.default_rng(8)
    reports = rng.normal(3.0, 2.0, size=(400, 4))
    mask = rng.random((400, 4)) < 0.5
    mask[:, 2] = False
    mask[:, 3] = False
    mask[10, 3] = True  # one report only
    sample_var = summarize(mask, reports).sample_variance()
    for j in range(2):
        assert sample_var[j] == pytest.approx(np.var(reports[mask[:, j], j], ddof=1), rel=1e-9)
    assert np.isnan(sample_var[2]) and np.isnan(sample_var[3])


def test_sample_variance_estimates_the_mechanism_variance():
    """With every user at t, the reports' sample variance estimates V(t) (chi-square tolerance)."""
    users = 4_000
    mechanism = per_value_mechanism("laplace", 1.0, 1)
    table = np.tile([-1.0, 0.0, 0.5], (users, 1))
    sums = summarize(*perturb_tuples(table, mechanism, 3, np.random.default_rng(9)))
    # Var of the sample variance for Laplace: V^2 (2/(r-1) + kurtosis_excess/r), excess kurtosis 3.
    v = mechanism.variance(0.0)
    se = v * math.sqrt(2 / (users - 1) + 3 / users)
    assert np.all(np.abs(sums.sample_variance() - v) <= Z * se)


# --- budget split and Wang et al.'s m -------------------------------------------------------------


@pytest.mark.parametrize(
    "epsilon,dims,expected",
    [
        (1.0, 10, 1),  # floor(0.4) = 0 -> at least 1
        (2.5, 10, 1),
        (4.99, 10, 1),
        (5.0, 10, 2),
        (7.5, 10, 3),
        (100.0, 10, 10),  # capped at d
        (100.0, 1, 1),
    ],
)
def test_wang_report_dims(epsilon, dims, expected):
    assert wang_report_dims(epsilon, dims) == expected


@pytest.mark.parametrize("name", registry.available())
@pytest.mark.parametrize("m", [1, 3, 8])
def test_per_value_budget_is_eps_over_m(name, m):
    approximate = registry.get_class(name).approximate
    mechanism = per_value_mechanism(name, 4.0, m, DELTA if approximate else None)
    assert mechanism.name == registry.get_class(name).name
    assert mechanism.epsilon == pytest.approx(4.0 / m)
    if approximate:
        assert mechanism.delta == pytest.approx(DELTA / m)
    else:
        assert mechanism.delta is None


def test_pure_mechanism_rejects_delta():
    pure = [n for n in registry.available() if not registry.get_class(n).approximate]
    for name in pure:
        with pytest.raises(LDPValueError, match="delta"):
            per_value_mechanism(name, 1.0, 2, delta=1e-5)


@pytest.mark.parametrize("name", [n for n in registry.available() if registry.get_class(n).approximate])
@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -1e-5, None])
def test_approximate_mechanism_needs_total_delta_in_open_unit_interval(name, delta):
    with pytest.raises(LDPValueError, match="delta"):
        per_value_mechanism(name, 1.0, 3, delta=delta)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [0, -1, 8, 2.5, "2"])
def test_bad_report_dims(m):
    table = _values(10, 7, seed=0)
    mechanism = per_value_mechanism("laplace", 1.0, 1)
    with pytest.raises(LDPValueError, match="report_dims"):
        sample_report_mask(10, 7, m, np.random.default_rng(0))
    with pytest.raises(LDPValueError, match="report_dims"):
        perturb_tuples(table, mechanism, m, np.random.default_rng(0))


@pytest.mark.parametrize("m", [0, -2, 1.5])
def test_per_value_mechanism_rejects_bad_report_dims(m):
    with pytest.raises(LDPValueError, match="report_dims"):
        per_value_mechanism("laplace", 1.0, m)


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.nan, math.inf, "abc"])
def test_bad_epsilon_names_the_total_budget(epsilon):
    with pytest.raises(LDPValueError, match="epsilon"):
        per_value_mechanism("laplace", epsilon, 2)
    with pytest.raises(LDPValueError, match="epsilon"):
        wang_report_dims(epsilon, 5)


def test_unknown_mechanism():
    with pytest.raises(LDPValueError, match="unknown mechanism"):
        per_value_mechanism("no-such-mechanism", 1.0, 1)


@pytest.mark.parametrize("values", [np.zeros(5), np.zeros((2, 3, 4)), np.float64(0.0)])
def test_values_must_be_two_dimensional(values):
    mechanism = per_value_mechanism("laplace", 1.0, 1)
    with pytest.raises(LDPValueError, match="2-D"):
        perturb_tuples(values, mechanism, 1, np.random.default_rng(0))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_are_rejected(bad):
    table = np.zeros((4, 3))
    table[2, 1] = bad
    with pytest.raises(LDPValueError, match="NaN or inf"):
        perturb_tuples(table, per_value_mechanism("laplace", 1.0, 1), 1, np.random.default_rng(0))


def test_out_of_domain_raises_unless_clipping_is_asked_for():
    table = np.full((50, 3), 0.5)
    table[0, 0] = 1.7
    mechanism = per_value_mechanism("laplace", 1.0, 3)
    with pytest.raises(LDPValueError, match=r"\[-1.0, 1.0\]"):
        perturb_tuples(table, mechanism, 3, np.random.default_rng(0))
    clipped = table.copy()
    clipped[0, 0] = 1.0
    # Same stream, same draws: clipping is exactly "perturb the clipped table".
    _, from_policy = perturb_tuples(table, mechanism, 3, np.random.default_rng(1), out_of_domain="clip")
    _, from_clipped = perturb_tuples(clipped, mechanism, 3, np.random.default_rng(1))
    np.testing.assert_array_equal(from_policy, from_clipped)


@pytest.mark.parametrize("m", [1, 2])
def test_rng_must_be_a_generator(m):
    with pytest.raises(TypeError, match="Generator"):
        perturb_tuples(np.zeros((3, 2)), per_value_mechanism("laplace", 1.0, m), m, 42)


@pytest.mark.parametrize("users,dims", [(0, 3), (3, 0), (-1, 3)])
def test_bad_mask_sizes(users, dims):
    with pytest.raises(LDPValueError):
        sample_report_mask(users, dims, 1, np.random.default_rng(0))

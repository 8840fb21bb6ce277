"""The per-round CLT prediction of the aggregate noise against repeated privatization of the same
clipped updates (ldpfed.analysis.round_noise; analysis.md, Federated rounds).

Synthetic federation: K = 50 clients, d = 200, C = 0.5, uneven FedAvg weights, values inside and
beyond [-C, C]; R independent privatizations (SeedSequence.spawn). Tolerances are 5 standard
errors computed in the test from the repetitions.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from update_federation import DIMS, clean_updates, privatizer, repeated_privatizations, sample_counts

from ldpfed.aggregation.updates import aggregate_updates
from ldpfed.analysis.round_noise import EXPECTED_FRACTION_BEYOND, predicted_aggregate_noise, round_noise_report
from ldpfed.validation import LDPValueError

Z = 5.0
REPS = 300
MECHANISMS = ["laplace", "piecewise", "duchi", "gaussian", "square-wave"]
# (eps per round, report_dims): Wang's m = 1 and m = 3 of d = 200, and every coordinate at eps/d
SETTINGS = [(1.0, None), (8.0, None), (4.0, DIMS)]


@functools.cache
def _repetitions(name: str, epsilon: float, report_dims: int | None):
    """(aggregate noise per repetition (R, d), predicted mean (d,), predicted variance (d,), reports)."""
    priv = privatizer(name, epsilon, report_dims)
    clean = priv.clip_only(clean_updates(21))
    counts = sample_counts(21)
    p = counts / counts.sum()
    clean_mean = p @ clean
    mean, variance = predicted_aggregate_noise(clean, counts, priv)
    noisy_means = np.array([p @ noisy for noisy in repeated_privatizations(priv, clean, REPS, seed=22)])
    reports = [round_noise_report(noisy, clean_mean, variance, mean) for noisy in noisy_means]
    return noisy_means - clean_mean, mean, variance, reports


@pytest.mark.parametrize("epsilon, report_dims", SETTINGS)
@pytest.mark.parametrize("name", MECHANISMS)
def test_predicted_variance_matches_the_empirical_variance_pooled_over_coordinates(name, epsilon, report_dims):
    """sum_z s_z^2 (sample variance over repetitions) against sum_z sum_k p_k^2 v_kz. The sum of
    sample variances is the average of q_r = R/(R-1) ||e_r - e_bar||^2, whose SE comes from the
    q_r (this keeps the slight correlation between coordinates of m-of-d reports)."""
    noise, _, variance, _ = _repetitions(name, epsilon, report_dims)
    q = REPS / (REPS - 1) * np.sum((noise - noise.mean(axis=0)) ** 2, axis=1)
    se = q.std(ddof=1) / np.sqrt(REPS)
    assert abs(q.mean() - variance.sum()) <= Z * se


@pytest.mark.parametrize("epsilon, report_dims", SETTINGS)
@pytest.mark.parametrize("name", MECHANISMS)
def test_measured_squared_distance_matches_the_prediction_on_average(name, epsilon, report_dims):
    """E||noisy - clean||^2 = sum_z (var_z + mean_z^2), read from round_noise_report."""
    _, mean, variance, reports = _repetitions(name, epsilon, report_dims)
    measured = np.array([r["measured_squared_distance"] for r in reports])
    predicted = reports[0]["predicted_squared_distance"]
    assert predicted == pytest.approx(variance.sum() + np.sum(mean**2))
    se = measured.std(ddof=1) / np.sqrt(REPS)
    assert abs(measured.mean() - predicted) <= Z * se


@pytest.mark.parametrize("epsilon, report_dims", SETTINGS)
@pytest.mark.parametrize("name", MECHANISMS)
def test_predicted_noise_mean_matches_the_average_noise(name, epsilon, report_dims):
    """w_z = (e_bar_z - mean_z)^2 / (var_z / R) has expectation 1 per coordinate; their sum is
    compared with d using the SE of the sum from the w_z themselves. Square-wave's mean is not 0."""
    noise, mean, variance, _ = _repetitions(name, epsilon, report_dims)
    assert np.all(variance > 0)
    w = (noise.mean(axis=0) - mean) ** 2 / (variance / REPS)
    assert abs(w.sum() - DIMS) <= Z * np.sqrt(DIMS) * w.std(ddof=1)
    if name == "square-wave":
        assert np.sum(mean**2) > 0
    else:
        assert not mean.any()


def test_z_scores_are_standard_normal_for_gaussian_noise_on_every_coordinate():
    """Gaussian with every coordinate reported: the aggregate noise is exactly N(0, var) per
    coordinate and independent over coordinates and repetitions, so the share of |z| > 1.96 has
    SE sqrt(f (1 - f) / (R d)) around f = 2 Phi(-1.96), and mean z^2 has SE sqrt(2 / (R d))."""
    _, _, _, reports = _repetitions("gaussian", 4.0, DIMS)
    fraction = np.mean([r["fraction_abs_z_above_1_96"] for r in reports])
    square = np.mean([r["z_mean_square"] for r in reports])
    cells = REPS * DIMS
    assert abs(fraction - EXPECTED_FRACTION_BEYOND) <= Z * np.sqrt(
        EXPECTED_FRACTION_BEYOND * (1 - EXPECTED_FRACTION_BEYOND) / cells
    )
    assert abs(square - 1.0) <= Z * np.sqrt(2.0 / cells)
    assert all(r["z_coordinates"] == DIMS and r["unexplained_coordinates"] == 0 for r in reports)


@pytest.mark.parametrize("name", MECHANISMS)
def test_worst_case_model_covers_the_exact_prediction(name):
    """The server's model deviation (worst case over [-C, C]) is never below the exact variance."""
    priv = privatizer(name, 8.0)
    clean = priv.clip_only(clean_updates(21))
    counts = sample_counts(21)
    mean, variance = predicted_aggregate_noise(clean, counts, priv)
    model = aggregate_updates(
        priv.privatize(clean, np.random.default_rng(23)), counts, privatizer=priv, deviation="model"
    ).deviation
    assert np.all(model.sigma**2 >= variance * (1 - 1e-12))
    assert np.all(np.abs(model.delta) >= np.abs(mean) * (1 - 1e-12))


def test_mechanism_none_predicts_and_measures_no_noise():
    none = privatizer("none")
    clean = none.clip_only(clean_updates(21))
    counts = sample_counts(21)
    mean, variance = predicted_aggregate_noise(clean, counts, none)
    assert not mean.any() and not variance.any()
    noisy_mean = aggregate_updates(none.privatize(clean, np.random.default_rng(0)), counts, privatizer=none).plain_mean
    report = round_noise_report(noisy_mean, counts @ clean / counts.sum(), variance, mean)
    assert report["measured_squared_distance"] <= 1e-28 and report["predicted_squared_distance"] == 0.0
    assert report["ratio"] is None and report["z_coordinates"] == 0 and report["unexplained_coordinates"] == 0


def test_round_noise_report_by_hand():
    """noise = (0.3, -4, 0, 1), mean = (0, 0, 0, 1), var = (1, 4, 0, 0):
    measured 0.09 + 16 + 0 + 1 = 17.09, predicted (1 + 4) + 1 = 6, z = (0.3, -2), coordinate 4 is
    explained (noise = mean), none unexplained; then noise 0.5 where var = 0 and mean = 0 is."""
    clean = np.array([1.0, 2.0, -1.0, 0.0])
    noisy = clean + np.array([0.3, -4.0, 0.0, 1.0])
    report = round_noise_report(noisy, clean, [1.0, 4.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    assert report["measured_squared_distance"] == pytest.approx(17.09)
    assert report["predicted_variance_trace"] == 5.0 and report["predicted_bias_squared"] == 1.0
    assert report["predicted_squared_distance"] == 6.0 and report["ratio"] == pytest.approx(17.09 / 6)
    assert report["z_coordinates"] == 2 and report["fraction_abs_z_above_1_96"] == 0.5
    assert report["z_mean_square"] == pytest.approx((0.09 + 4.0) / 2) and report["z_max_abs"] == pytest.approx(2.0)
    assert report["unexplained_coordinates"] == 0
    shifted = round_noise_report(noisy + np.array([0, 0, 0.5, 0]), clean, [1.0, 4.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    assert shifted["unexplained_coordinates"] == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (([1.0, 2.0], [1.0], [1.0, 1.0]), "clean_mean"),
        (([1.0, 2.0], [1.0, 2.0], [1.0]), "predicted_variance"),
        (([1.0, 2.0], [1.0, 2.0], [1.0, -1.0]), ">= 0"),
        (([1.0, np.nan], [1.0, 2.0], [1.0, 1.0]), "NaN"),
        (([[1.0, 2.0]], [1.0, 2.0], [1.0, 1.0]), "noisy_mean"),
        (([1.0, 2.0], [1.0, 2.0], [1.0, 1.0], [0.0]), "predicted_mean"),
    ],
)
def test_round_noise_report_rejects_bad_input(args, message):
    with pytest.raises(LDPValueError, match=message):
        round_noise_report(*args)


def test_predicted_aggregate_noise_rejects_bad_input():
    lap = privatizer("laplace")
    clean = clean_updates(21)
    with pytest.raises(LDPValueError, match="weights"):
        predicted_aggregate_noise(clean, sample_counts(21)[:-1], lap)
    with pytest.raises(LDPValueError, match="NaN"):
        predicted_aggregate_noise(np.where(clean > 0.5, np.nan, clean), sample_counts(21), lap)
    with pytest.raises(LDPValueError, match="privatizer"):
        predicted_aggregate_noise(clean, sample_counts(21), "laplace")

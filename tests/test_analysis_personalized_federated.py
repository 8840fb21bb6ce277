"""Personalized-LDP groups (thesis Theorem 3) and federated round prediction (Theorems 12-13,
corrected) against Monte Carlo with the actual mechanisms."""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.analysis import ColumnMoments
from ldpfed.analysis.federated import clipped_coordinate_noise, predict_round
from ldpfed.analysis.personalized import PersonalizedGroup, predict_personalized
from ldpfed.mechanisms.multidim import (
    ReportSums,
    mean_estimate,
    per_value_mechanism,
    perturb_tuples,
    summarize,
)
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError

DIMS = 4
# (users, total epsilon, region): one group keeps its values in [-1, 0], the other in [0, 1].
GROUP_SPECS = ((600, 2.0, (-1.0, 0.0)), (400, 6.0, (0.0, 1.0)))


def group_values(seed=3):
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high, size=(users, DIMS)) for users, _, (low, high) in GROUP_SPECS]


def simulate_personalized(values, name, options, report_dims, repetitions, seed):
    """Each group rescales its region to [-1, 1], reports m of d, maps back; the collector averages."""
    truth = np.concatenate(values).mean(axis=0)
    deviations = np.empty((repetitions, DIMS))
    streams = np.random.SeedSequence(seed).spawn(repetitions)
    for k, stream in enumerate(streams):
        rngs = [np.random.default_rng(s) for s in stream.spawn(len(values))]
        sums = ReportSums.zeros(DIMS)
        for (_, epsilon, (low, high)), group, rng in zip(GROUP_SPECS, values, rngs):
            centre, half = (low + high) / 2, (high - low) / 2
            mechanism = per_value_mechanism(name, epsilon, report_dims, **options)
            mask, reports = perturb_tuples((group - centre) / half, mechanism, report_dims, rng, out_of_domain="clip")
            sums = sums + summarize(mask, np.where(mask, centre + half * reports, 0.0))
        deviations[k] = mean_estimate(sums) - truth
    return deviations


@pytest.mark.parametrize("name,options", [("piecewise", {}), ("square-wave", {"estimator": "raw"})])
@pytest.mark.parametrize("report_dims", [DIMS, 2])
def test_personalized_groups_match_monte_carlo(name, options, report_dims):
    values = group_values()
    groups = [
        PersonalizedGroup(name, epsilon, ColumnMoments.from_array(group), region, options=options)
        for (_, epsilon, region), group in zip(GROUP_SPECS, values)
    ]
    prediction = predict_personalized(groups, report_dims)
    deviations = simulate_personalized(values, name, options, report_dims, 2000, seed=41)
    per_repetition = np.mean(deviations**2, axis=1)
    measured, standard_error = per_repetition.mean(), per_repetition.std(ddof=1) / np.sqrt(per_repetition.size)
    assert 5 * standard_error < 0.1 * measured
    assert abs(prediction.mse - measured) <= 5 * standard_error
    # The per-dimension bias is the report-weighted group bias (Theorem 3), visible for square wave.
    np.testing.assert_allclose(
        prediction.bias, deviations.mean(axis=0), atol=5 * deviations.std(axis=0, ddof=1).max() / np.sqrt(2000)
    )


def test_one_full_region_group_is_the_plain_predictor():
    from ldpfed.analysis import predict

    values = np.random.default_rng(1).uniform(-1, 1, size=(500, DIMS))
    moments = ColumnMoments.from_array(values)
    single = predict_personalized([PersonalizedGroup("piecewise", 2.0, moments)], 2)
    plain = predict("piecewise", 2.0, 500, DIMS, 2, values)
    np.testing.assert_allclose(single.sigma2, plain.sigma2, rtol=1e-12)
    np.testing.assert_allclose(single.bias, plain.bias, atol=1e-15)


def test_values_outside_their_region_are_an_error():
    values = np.random.default_rng(1).uniform(-1, 1, size=(50, DIMS))
    with pytest.raises(LDPValueError, match="region"):
        predict_personalized(
            [PersonalizedGroup("piecewise", 1.0, ColumnMoments.from_array(values, ranges=True), (0.0, 1.0))]
        )
    with pytest.raises(LDPValueError, match="region"):
        predict_personalized([PersonalizedGroup("piecewise", 1.0, ColumnMoments.from_array(values), (0.5, 0.2))])


# --- federated rounds -----------------------------------------------------------------------------
def test_round_prediction_matches_monte_carlo_with_biased_noise():
    """Clients perturb clipped update coordinates with square wave (raw, biased); the extra squared
    distance of the round includes the corrected cross term -2 eta <E w_new - w_opt, sum p mu>."""
    rng = np.random.default_rng(8)
    clients, coordinates, clip, eta = 3, 6, 0.5, 0.3
    weights = np.array([0.5, 0.3, 0.2])
    updates = rng.uniform(-clip, clip, size=(clients, coordinates))
    models = rng.normal(size=(clients, coordinates))
    optimum = rng.normal(size=coordinates)
    mechanism = per_value_mechanism("square-wave", 1.0, 1, estimator="raw")
    # every coordinate reported with eps 1 (m = d): the privatizer's per-value mechanism is `mechanism`
    privatizer = UpdatePrivatizer("square-wave", coordinates * 1.0, clip, report_dims=coordinates, estimator="raw")
    assert privatizer.per_value_mechanism(coordinates) == mechanism

    moments = [clipped_coordinate_noise(privatizer, coordinates, u, u**2) for u in updates]
    means, variances = np.array([m for m, _ in moments]), np.array([v for _, v in moments])
    clean = weights @ models - eta * (weights @ updates)
    round_prediction = predict_round(weights, variances, eta, means, expected_offset=clean - optimum)

    repetitions = 20_000
    perturbed = clip * mechanism.perturb(np.broadcast_to(updates / clip, (repetitions, clients, coordinates)), rng)
    noise = np.einsum("k,rkz->rz", weights, perturbed - updates)  # sum_k p_k n_k
    extra = np.sum((clean - eta * noise - optimum) ** 2, axis=1) - np.sum((clean - optimum) ** 2)

    standard_error = extra.std(ddof=1) / np.sqrt(repetitions)
    assert abs(round_prediction.extra_squared_distance - extra.mean()) <= 5 * standard_error
    thesis_cross = round_prediction.cross_term / eta  # printed without eta
    thesis = round_prediction.variance_term + round_prediction.bias_term + thesis_cross
    assert abs(thesis - extra.mean()) > 5 * standard_error
    noise_sd = noise.std(axis=0, ddof=1)
    np.testing.assert_allclose(
        noise.mean(axis=0), round_prediction.noise_mean, atol=5 * noise_sd.max() / np.sqrt(repetitions)
    )
    np.testing.assert_allclose(
        noise.var(axis=0, ddof=1), round_prediction.noise_variance, rtol=5 * np.sqrt(2 / repetitions) * 1.5
    )


def test_unbiased_round_keeps_only_the_variance_term():
    prediction = predict_round([0.25, 0.75], np.full((2, 3), 4.0), 0.1)
    assert prediction.extra_squared_distance == pytest.approx(0.01 * (0.0625 + 0.5625) * 4.0 * 3)
    assert prediction.parameter_noise_model().sigma == pytest.approx(np.full(3, 0.1 * np.sqrt(0.625 * 4)))


def test_worst_case_coordinate_noise_is_the_largest_variance():
    privatizer = UpdatePrivatizer("piecewise", 1.0, 2.0, report_dims=1)
    _, worst = clipped_coordinate_noise(privatizer, 3)
    grid = np.linspace(-1, 1, 2001)
    variance = np.array([clipped_coordinate_noise(privatizer, 3, 2.0 * t, 4.0 * t * t)[1][0] for t in grid])
    assert worst[0] == pytest.approx(variance.max(), rel=1e-6) and worst[0] >= variance.max() * (1 - 1e-12)


def test_round_input_errors():
    with pytest.raises(LDPValueError, match="sum to 1"):
        predict_round([0.5, 0.6], np.ones((2, 3)), 0.1)
    with pytest.raises(LDPValueError, match="one row per client"):
        predict_round([0.5, 0.5], np.ones((3, 3)), 0.1)
    with pytest.raises(LDPValueError, match="UpdatePrivatizer"):
        clipped_coordinate_noise(per_value_mechanism("laplace", 1.0, 1), 3)
    with pytest.raises(LDPValueError, match="clip"):
        clipped_coordinate_noise(UpdatePrivatizer("laplace", 1.0, 0.5), 3, [0.6, 0, 0], [0.36, 0, 0])
    with pytest.raises(LDPValueError, match="both"):
        clipped_coordinate_noise(UpdatePrivatizer("laplace", 1.0, 0.5), 3, [0.1, 0, 0])


def test_given_counts_condition_on_the_groups():
    """With every group's actual r_jz the groups are strata: one group equals the plain predictor
    with counts, and mismatched shares move the bias by sum_z (r_jz/r_j - n_z/n) xbar_jz."""
    from ldpfed.analysis import predict

    values = group_values()
    counts = [np.array([300.0, 310, 290, 305]), np.array([190.0, 200, 210, 195])]
    single = predict_personalized(
        [PersonalizedGroup("piecewise", 2.0, ColumnMoments.from_array(values[0]), (-1.0, 0.0), counts=counts[0])], 2
    )
    rescaled = (values[0] + 0.5) / 0.5
    plain = predict("piecewise", 2.0, 600, DIMS, 2, rescaled, counts=counts[0])
    np.testing.assert_allclose(single.sigma2, 0.25 * plain.sigma2, rtol=1e-12)  # h^2 = 1/4

    groups = [
        PersonalizedGroup("piecewise", eps, ColumnMoments.from_array(v), region, counts=c)
        for (_, eps, region), v, c in zip(GROUP_SPECS, values, counts)
    ]
    prediction = predict_personalized(groups, 2)
    r = counts[0] + counts[1]
    shares = (counts[0] / r, counts[1] / r)
    expected_bias = sum(s * v.mean(axis=0) for s, v in zip(shares, values)) - np.concatenate(values).mean(axis=0)
    np.testing.assert_allclose(prediction.bias, expected_bias, atol=1e-12)  # piecewise itself is unbiased
    with pytest.raises(LDPValueError, match="every PLDP group or for none"):
        predict_personalized([groups[0], PersonalizedGroup("piecewise", 2.0, groups[1].moments, (0.0, 1.0))], 2)

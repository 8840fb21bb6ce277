"""Frequency estimators and consistency post-processing as aggregators: IBU against multi-freq-ldpy
0.2.5 (live when installed, and the vectors stored by tests/data/make_multi_freq_ldpy_reference.py),
and Wang et al.'s (NDSS 2020) family on hand cases and on the properties each one claims."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import ldpfed.aggregation as aggregation
import ldpfed.frequency as frequency
from ldpfed.aggregation.consistency import (
    base_pos,
    norm,
    norm_cut,
    norm_mul,
    power_posterior_mean,
    weighted_simplex_projection,
)
from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.aggregation.ibu import (
    IterativeBayesianUpdate,
    channel_of,
    iterative_bayesian_update,
    observed_frequencies,
    two_level_ibu,
)
from ldpfed.aggregation.simplex import project_to_simplex
from ldpfed.validation import LDPValueError

REFERENCE = np.load(Path(__file__).parent / "data" / "multi_freq_ldpy_reference.npz")
FLAT = DeviationModel(0.0, 1.0)  # IBU and the model-free methods ignore it
LIBRARY_STOP = {"max_abs": "max-abs", "mse": "mse", "mae": "mae", "max_squared": "max-squared"}


def _library_channel(kind: str, epsilon: float, k: int) -> tuple[float, float]:
    """multi-freq-ldpy's float p and q (GRR_Aggregator_IBU, UE_Aggregator_IBU with optimal=True)."""
    if kind == "grr":
        p = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
        return p, (1 - p) / (k - 1)
    return 0.5, 1 / (math.exp(epsilon) + 1)


def _ibu_from_reports(kind, reports, epsilon, k, iterations, tolerance, stop) -> np.ndarray:
    """ldpfed's IBU aggregator on the unbiased estimate of the given reports."""
    p, q = _library_channel(kind, epsilon, k)
    supports = np.bincount(reports, minlength=k) if kind == "grr" else reports.sum(axis=0)
    f_hat = (supports / len(reports) - q) / (p - q)
    aggregator = IterativeBayesianUpdate(channel=((p, q),), iterations=iterations, tolerance=tolerance, stop=stop)
    return aggregator(f_hat, FLAT).estimate


# ---- IBU against multi-freq-ldpy ---------------------------------------------------------------
def _stored_cases():
    settings = zip(
        REFERENCE["ibu_settings_iterations"], REFERENCE["ibu_settings_tolerance"], REFERENCE["ibu_settings_stop"]
    )
    settings = list(enumerate(settings))
    cases = []
    for case, (k, epsilon, _) in enumerate(REFERENCE["ibu_cases"]):
        for index, (iterations, tolerance, stop) in settings:
            for kind in ("grr", "oue"):
                cases.append((case, int(k), float(epsilon), kind, index, int(iterations), float(tolerance), str(stop)))
    return cases


@pytest.mark.parametrize(("case", "k", "epsilon", "kind", "index", "iterations", "tolerance", "stop"), _stored_cases())
def test_ibu_equals_the_stored_multi_freq_ldpy_results(case, k, epsilon, kind, index, iterations, tolerance, stop):
    stored = REFERENCE[f"case{case}_{kind}_reports"]
    reports = stored if kind == "grr" else np.unpackbits(stored, axis=1, count=k).astype(bool)
    expected = REFERENCE[f"case{case}_{kind}_ibu{index}"]
    ours = _ibu_from_reports(kind, reports, epsilon, k, iterations, tolerance, LIBRARY_STOP[stop])
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-6)
    # the full-matrix form on the same observed frequencies (GRR: the exact channel)
    p, q = _library_channel(kind, epsilon, k)
    channel = q + (p - q) * np.eye(k)
    supports = np.bincount(reports, minlength=k) if kind == "grr" else reports.sum(axis=0)
    general = iterative_bayesian_update(
        supports / supports.sum(), channel, iterations=iterations, tolerance=tolerance, stop=LIBRARY_STOP[stop]
    )
    np.testing.assert_allclose(general, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["grr", "oue"])
@pytest.mark.parametrize(("k", "epsilon"), [(2, 0.5), (12, 1.0), (40, 3.0)])
def test_ibu_equals_the_live_multi_freq_ldpy(kind, k, epsilon):
    pytest.importorskip("multi_freq_ldpy", reason="multi-freq-ldpy not installed (the stored vectors are checked)")
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_IBU
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_IBU

    rng = np.random.default_rng([k, int(epsilon * 10)])
    values = rng.zipf(1.3, 2500) % k
    oracle = frequency.get(kind, epsilon, k)
    reports = oracle.perturb(values, rng)  # ldpfed's reports; both sides get the same ones
    for iterations, tolerance, stop in ((10_000, 1e-12, "max_abs"), (30, 1e-4, "mse"), (5, 1e-12, "max_squared")):
        if kind == "grr":
            expected = GRR_Aggregator_IBU(list(reports), k, epsilon, iterations, tolerance, stop)
        else:
            expected = UE_Aggregator_IBU(reports.astype(float), k, epsilon, True, iterations, tolerance, stop)
        ours = _ibu_from_reports(kind, reports, epsilon, k, iterations, tolerance, LIBRARY_STOP[stop])
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-6)


# ---- IBU properties --------------------------------------------------------------------------
def test_ibu_recovers_the_frequencies_from_noise_free_observations():
    """y = A f exactly with f inside the simplex: f is the maximum-likelihood point, and IBU
    converges to it (at a zero frequency EM converges sublinearly: not asked to 1e-6 here)."""
    f = np.array([0.45, 0.3, 0.15, 0.06, 0.04])
    oracle = frequency.get("grr", 1.0, 5)
    p, q = channel_of(oracle)
    estimate = IterativeBayesianUpdate(channel=((p, q),))(f, FLAT).estimate  # f_hat = f: y = q + (p - q) f
    np.testing.assert_allclose(estimate, f, atol=1e-6)


def test_ibu_runs_every_attribute_as_if_alone():
    """Two attributes in one call: each stops on its own criterion, non-negative, sums to one."""
    rng = np.random.default_rng(0)
    sizes, channels = (3, 6), ((0.6, 0.2), (0.5, 0.1))
    f_hat = np.concatenate([rng.normal(1 / k, 0.2, k) for k in sizes])
    together = IterativeBayesianUpdate(categories=sizes, channel=channels, iterations=40, tolerance=1e-5)(f_hat, FLAT)
    alone = [
        IterativeBayesianUpdate(channel=(c,), iterations=40, tolerance=1e-5)(part, FLAT).estimate
        for c, part in zip(channels, np.split(f_hat, [3]))
    ]
    np.testing.assert_allclose(together.estimate, np.concatenate(alone), atol=1e-15)
    assert np.all(together.estimate >= 0)
    np.testing.assert_allclose([together.estimate[:3].sum(), together.estimate[3:].sum()], 1.0, atol=1e-12)
    assert together.record == {
        "aggregator": "ibu",
        "iterations": 40,
        "tolerance": 1e-5,
        "stop": "max-abs",
        "deviation_source": "model",
        "halfwidth": 1.0,
    }


def test_two_level_ibu_is_the_full_matrix_update():
    observed = np.array([0.1, 0.5, 0.4, 0.2, 0.8])
    sizes, p, q = (3, 2), np.array([0.7, 0.6]), np.array([0.15, 0.4])
    blocks = two_level_ibu(observed, p, q, sizes, iterations=12, tolerance=1e-30)
    first = iterative_bayesian_update(observed[:3], q[0] + (p[0] - q[0]) * np.eye(3), iterations=12, tolerance=1e-30)
    second = iterative_bayesian_update(observed[3:], q[1] + (p[1] - q[1]) * np.eye(2), iterations=12, tolerance=1e-30)
    np.testing.assert_allclose(blocks, np.concatenate([first, second]), rtol=1e-12)


def test_observed_frequencies_invert_the_estimator():
    """f_hat = (y - q) / (p - q) for GRR; y back, normalized per attribute."""
    y = np.array([0.2, 0.5, 0.3])
    p, q = 0.6, 0.2
    f_hat = (y - q) / (p - q)
    np.testing.assert_allclose(observed_frequencies(f_hat, [p], [q], (3,)), y, atol=1e-15)


def test_ibu_needs_the_channel_and_valid_options():
    with pytest.raises(LDPValueError, match="channel"):
        IterativeBayesianUpdate()(np.array([0.5, 0.5]), FLAT)
    with pytest.raises(LDPValueError, match="stop"):
        IterativeBayesianUpdate(stop="euclid")
    with pytest.raises(LDPValueError, match="tolerance"):
        IterativeBayesianUpdate(tolerance=0)
    with pytest.raises(LDPValueError, match="counting"):
        channel_of(frequency.get("histogram", 1.0, 3))


# ---- consistency post-processing: hand cases -------------------------------------------------
ESTIMATES = np.array([0.5, -0.1, 0.3, 0.4, 0.2, 0.2, -0.3])  # two attributes: 4 and 3 categories
SIZES = (4, 3)


def test_hand_cases():
    # base-pos: negatives to 0
    np.testing.assert_allclose(base_pos(ESTIMATES), [0.5, 0, 0.3, 0.4, 0.2, 0.2, 0])
    # norm: sums 1.1 and 0.1, shifted by -0.1/4 and +0.9/3
    np.testing.assert_allclose(norm(ESTIMATES, SIZES), [0.475, -0.125, 0.275, 0.375, 0.5, 0.5, 0.0])
    # norm-mul: positives 1.2 (x 1/1.2) and 0.4 (x 2.5)
    np.testing.assert_allclose(norm_mul(ESTIMATES, SIZES), [5 / 12, 0, 3 / 12, 4 / 12, 0.5, 0.5, 0])
    # norm-cut: 0.5 + 0.4 = 0.9 <= 1 < 1.2 (theta = 0.4); second attribute sums to 0.4: all kept
    np.testing.assert_allclose(norm_cut(ESTIMATES, SIZES), [0.5, 0, 0, 0.4, 0.2, 0.2, 0])
    # norm-sub: subtract 0.2/3 from the three positives; second: add 0.3 to each positive
    np.testing.assert_allclose(project_to_simplex(ESTIMATES, SIZES), [1.3 / 3, 0, 0.7 / 3, 1 / 3, 0.5, 0.5, 0])
    # mle-apx with variances 1, 2, 3, 4: f = x - lambda w, lambda = 0.025 on the positives
    weighted = weighted_simplex_projection(ESTIMATES[:4], np.array([1.0, 2, 3, 4]), (4,))
    np.testing.assert_allclose(weighted, [0.475, 0, 0.225, 0.3])


def test_norm_cut_keeps_ties_together():
    # 0.4, 0.4, 0.3: all three sum to 1.1 > 1, the two tied 0.4 sum to 0.8: both kept, 0.3 cut
    np.testing.assert_allclose(norm_cut([0.4, 0.3, 0.4, -0.2], (4,)), [0.4, 0, 0.4, 0])
    # 0.6, 0.6: their sum 1.2 > 1 and they are tied: both cut, and then 0.1 too (the estimates at
    # least as large as 0.1 sum to 1.3), so no threshold leaves a sum <= 1 but the empty set
    np.testing.assert_allclose(norm_cut([0.6, 0.6, 0.1], (3,)), [0, 0, 0])


def test_power_posterior_mean_against_an_independent_computation():
    """The posterior mean for the returned exponent, by explicit sums; the exponent maximizes the
    mixture likelihood on a grid of s."""
    estimates = np.array([0.55, 0.2, 0.12, 0.03, -0.02])
    sigma = np.array([0.05, 0.05, 0.06, 0.05, 0.04])
    mean, exponent = power_posterior_mean(estimates, sigma)

    def atoms(s):
        weights = [(i + 1) ** -s for i in range(5)]
        return [w / sum(weights) for w in weights]

    def log_likelihood(s):
        a = atoms(s)
        total = 0.0
        for x, sd in zip(estimates, sigma):
            density = sum(math.exp(-0.5 * ((x - ai) / sd) ** 2) for ai in a) / (sd * math.sqrt(2 * math.pi) * 5)
            total += math.log(density)
        return total

    grid = np.linspace(0, 8, 801)
    best = grid[np.argmax([log_likelihood(s) for s in grid])]
    assert abs(exponent - best) <= 0.011
    a = atoms(exponent)
    for x, sd, m in zip(estimates, sigma, mean):
        weights = [math.exp(-0.5 * ((x - ai) / sd) ** 2) for ai in a]
        assert m == pytest.approx(sum(w * ai for w, ai in zip(weights, a)) / sum(weights), rel=1e-9)


# ---- consistency post-processing: properties -------------------------------------------------
def _noisy_blocks(seed: int):
    rng = np.random.default_rng(seed)
    sizes = (5, 17, 2)
    truth = np.concatenate([rng.dirichlet(np.full(k, 0.4)) for k in sizes])
    return sizes, truth, truth + rng.normal(0, 0.1, truth.size)


def _sums(values, sizes):
    return np.add.reduceat(values, np.cumsum((0, *sizes[:-1])))


@pytest.mark.parametrize("seed", range(5))
def test_claimed_properties(seed):
    sizes, _, estimates = _noisy_blocks(seed)
    sigma = np.random.default_rng(seed).uniform(0.05, 0.2, estimates.size)
    model = DeviationModel(0.0, sigma)
    results = {
        name: aggregation.get(name, categories=sizes)(estimates, model).estimate
        for name in ("base-pos", "norm", "norm-mul", "norm-cut", "norm-sub", "mle-apx", "power", "power-ns")
    }
    for name in ("norm", "norm-mul", "norm-sub", "mle-apx", "power-ns"):
        np.testing.assert_allclose(_sums(results[name], sizes), 1.0, atol=1e-12, err_msg=name)
    for name in ("base-pos", "norm-mul", "norm-cut", "norm-sub", "mle-apx", "power", "power-ns"):
        assert np.all(results[name] >= 0), name
    assert np.all(_sums(results["norm-cut"], sizes) <= 1 + 1e-12)
    # norm keeps the differences; norm-mul keeps the ratios of the positives
    np.testing.assert_allclose(np.diff(results["norm"][:5]), np.diff(estimates[:5]), atol=1e-12)
    positive = estimates[:5] > 0
    if positive.sum() >= 2:
        ratios = results["norm-mul"][:5][positive] / estimates[:5][positive]
        np.testing.assert_allclose(ratios, ratios[0], rtol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_norm_cut_keeps_a_maximal_top_set(seed):
    sizes, _, estimates = _noisy_blocks(seed)
    cut = norm_cut(estimates, sizes)
    for block, values in zip(np.split(cut, np.cumsum(sizes)[:-1]), np.split(estimates, np.cumsum(sizes)[:-1])):
        kept = block > 0
        np.testing.assert_array_equal(block[kept], values[kept])
        if kept.any() and (values > 0).sum() > kept.sum():
            assert values[~kept].max() <= values[kept].min()  # a top set
            assert block.sum() + values[~kept].max() > 1  # the next one would pass 1


@pytest.mark.parametrize("seed", range(5))
def test_mle_apx_is_the_weighted_projection(seed):
    """KKT: (x_v - f_v) / w_v = lambda on the support, x_v / w_v <= lambda off it; equal weights
    give norm-sub."""
    sizes, _, estimates = _noisy_blocks(seed)
    weights = np.random.default_rng(seed + 100).uniform(0.5, 2.0, estimates.size)
    projected = weighted_simplex_projection(estimates, weights, sizes)
    for f, x, w in zip(*(np.split(a, np.cumsum(sizes)[:-1]) for a in (projected, estimates, weights))):
        support = f > 0
        multipliers = (x[support] - f[support]) / w[support]
        np.testing.assert_allclose(multipliers, multipliers[0], atol=1e-12)
        assert np.all(x[~support] / w[~support] <= multipliers[0] + 1e-12)
    equal = weighted_simplex_projection(estimates, np.full(estimates.size, 0.3), sizes)
    np.testing.assert_allclose(equal, project_to_simplex(estimates, sizes), atol=1e-12)


def test_power_recovers_a_zipf_distribution():
    """Estimates of a Zipf(1.2) histogram with known noise: the fitted exponent is near 1.2 and the
    posterior mean beats the raw estimate's squared error (fixed seed; the noise sd is 0.01)."""
    k = 64
    truth = np.arange(1, k + 1) ** -1.2
    truth /= truth.sum()
    estimates = truth + np.random.default_rng(1).normal(0, 0.01, k)
    mean, exponent = power_posterior_mean(estimates, np.full(k, 0.01))
    assert abs(exponent - 1.2) < 0.3
    assert np.mean((mean - truth) ** 2) < 0.5 * np.mean((estimates - truth) ** 2)


def test_registry_names_and_options():
    names = aggregation.available("frequency")
    for name in ("base-pos", "norm", "norm-mul", "norm-cut", "mle-apx", "power", "power-ns", "simplex"):
        assert name in names
        assert name not in aggregation.available("mean")
        assert aggregation.accepted_options(name) == {"categories"}
    assert aggregation.get_class("norm-sub") is aggregation.get_class("simplex")
    assert aggregation.get_class("Norm_Sub").name == "simplex"
    with pytest.raises(LDPValueError, match="does not apply"):
        aggregation.check_names(["norm-cut"], "mean")

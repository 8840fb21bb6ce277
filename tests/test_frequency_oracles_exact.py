"""The new frequency oracles' laws, exactly (spec: mechanisms.md, Frequency estimation): OLH, BLH,
Hadamard response, subset selection, SHE, THE, HCMS.

Each discrete oracle's `log_probability` is a probability law (it sums to 1 over every output), its
worst ratio between two categories is e^eps, the sampler draws that law (chi-square against the exact
probabilities), and the server's fast support counting (compiled hash walk, Walsh-Hadamard transform,
bincount) equals the plain (n, k) support matrix summed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.linalg
from scipy import stats

import ldpfed.frequency as frequency
from ldpfed.frequency.base import estimate_in_chunks
from ldpfed.frequency.hadamard import walsh_hadamard
from ldpfed.frequency.hashing import PRIME, collision_probability, hash_values
from ldpfed.frequency.sketches import residue_moments
from ldpfed.frequency.thresholding import optimal_threshold
from ldpfed.validation import LDPValueError

NEW = ("olh", "blh", "hadamard", "subset-selection", "she", "the", "hcms")
CHI2_LEVEL = 1e-4  # a correct sampler fails one such test in 10^4


def test_every_new_name_is_registered_and_builds():
    assert set(NEW) <= set(frequency.available())
    for name in NEW:
        oracle = frequency.get(name, 1.0, 6)
        assert oracle.name == name and oracle.k == 6


def test_unknown_options_are_one_clear_error():
    with pytest.raises(LDPValueError, match="olh takes no options"):
        frequency.get("olh", 1.0, 4, g=3)
    with pytest.raises(LDPValueError, match="hcms takes options columns, hashes, seed"):
        frequency.get("hcms", 1.0, 4, width=3)
    with pytest.raises(LDPValueError, match="power of 2"):
        frequency.get("hcms", 1.0, 4, columns=6)


def test_olh_g_and_blh_g():
    assert frequency.get("olh", 4.0, 10).g == round(math.e**4 + 1) == 56
    assert frequency.get("olh", 0.1, 10).g == 2
    assert frequency.get("blh", 4.0, 10).g == 2


# --- laws: sum to one, ratio e^eps, sampled as stated ---------------------------------------------
def _hadamard_outputs(oracle):
    return np.arange(oracle.size)


def _subset_outputs(oracle):
    return np.array(list(itertools.combinations(range(oracle.k), oracle.omega)))


def _hcms_outputs(oracle):
    grid = itertools.product(range(oracle.hashes), range(oracle.columns), (-1, 1))
    return np.array(list(grid))


ENUMERATED = {
    "hadamard": (dict(), _hadamard_outputs),
    "subset-selection": (dict(), _subset_outputs),
    "hcms": (dict(hashes=3, columns=4), _hcms_outputs),
}


@pytest.mark.parametrize("name", sorted(ENUMERATED))
@pytest.mark.parametrize("epsilon", [0.5, 3.0])
def test_enumerable_laws_sum_to_one_and_their_ratio_is_e_eps(name, epsilon):
    options, outputs_of = ENUMERATED[name]
    oracle = frequency.get(name, epsilon, 5, **options)
    outputs = outputs_of(oracle)
    logs = np.array([oracle.log_probability(outputs, c) for c in range(oracle.k)])
    np.testing.assert_allclose(np.exp(logs).sum(axis=1), 1.0, rtol=1e-12)
    worst = max(np.max(logs[a] - logs[b]) for a in range(oracle.k) for b in range(oracle.k))
    assert worst <= epsilon + 1e-12
    assert worst == pytest.approx(epsilon, abs=1e-9)  # the bound is reached (rounding is 2^-53)


@pytest.mark.parametrize("name", sorted(ENUMERATED))
def test_enumerable_samplers_draw_their_law(name):
    """Chi-square of 60,000 reports of category 2 against exp(log_probability) over every output."""
    options, outputs_of = ENUMERATED[name]
    oracle = frequency.get(name, 1.0, 5, **options)
    outputs = outputs_of(oracle)
    reports = np.asarray(oracle.perturb(np.full(60_000, 2), np.random.default_rng(5)))
    reports = reports.reshape(len(reports), -1)
    index = {tuple(row): i for i, row in enumerate(outputs.reshape(len(outputs), -1))}
    observed = np.bincount([index[tuple(row)] for row in reports], minlength=len(outputs))
    expected = np.exp(oracle.log_probability(outputs, 2)) * len(reports)
    assert stats.chisquare(observed, expected).pvalue > CHI2_LEVEL


@pytest.mark.parametrize("name", ["olh", "blh"])
def test_local_hashing_value_law_given_the_seed(name):
    """Given a seed (a, b), y is GRR over g values around h(x): P sums to 1 over y, the worst ratio
    between categories is e^eps, and the sampler's y agrees with it (chi-square on y - h(x) mod g
    over all seeds, a law that does not depend on the seed)."""
    oracle = frequency.get(name, 2.0, 7)
    g = oracle.g
    seeds = np.array([[5, 11], [123456789, 42], [PRIME - 1, 0]])
    for a, b in seeds:
        reports = np.array([[a, b, y] for y in range(g)])
        logs = np.array([oracle.log_probability(reports, c) for c in range(oracle.k)])
        seed_mass = -math.log(PRIME - 1) - math.log(PRIME)
        np.testing.assert_allclose(np.exp(logs - seed_mass).sum(axis=1), 1.0, rtol=1e-12)
        assert np.max(logs[:, None, :] - logs[None, :, :]) <= 2.0 + 1e-12
    reports = oracle.perturb(np.full(50_000, 3), np.random.default_rng(6))
    shift = (reports[:, 2] - hash_values(reports[:, 0], reports[:, 1], 3, g)) % g
    expected = np.full(g, oracle._move / (g - 1))
    expected[0] = oracle.p
    assert stats.chisquare(np.bincount(shift, minlength=g), expected * len(reports)).pvalue > CHI2_LEVEL


def test_hash_seeds_come_from_the_client_generator():
    oracle = frequency.get("olh", 2.0, 50)
    first = oracle.perturb(np.arange(50), np.random.default_rng(7))
    again = oracle.perturb(np.arange(50), np.random.default_rng(7))
    other = oracle.perturb(np.arange(50), np.random.default_rng(8))
    np.testing.assert_array_equal(first, again)
    assert len(np.unique(first[:, :2], axis=0)) == 50  # one seed per user
    assert not np.array_equal(first[:, :2], other[:, :2])


def test_collision_probability_against_monte_carlo_and_the_uniform_value():
    """kappa from exact residue counts; a Monte Carlo over 400,000 seeds agrees within 4 SE, and
    kappa differs from 1/g by less than g/P."""
    g = 7
    kappa = collision_probability(g)
    assert abs(kappa - 1 / g) < g / PRIME
    rng = np.random.default_rng(9)
    a, b = rng.integers(1, PRIME, 400_000), rng.integers(0, PRIME, 400_000)
    hits = np.mean(hash_values(a, b, 3, g) == hash_values(a, b, 11, g))
    assert abs(hits - kappa) < 4 * math.sqrt(kappa * (1 - kappa) / a.size)
    kappa2, tau = residue_moments(4)
    assert kappa2 == pytest.approx(1 / 4, rel=1e-8) and tau == pytest.approx(1 / 16, rel=1e-8)


# --- the server's fast counting equals the plain support matrix ----------------------------------
@pytest.mark.parametrize(("name", "k"), [("olh", 37), ("blh", 37), ("hadamard", 37), ("subset-selection", 37)])
def test_fast_support_counts_equal_the_support_matrix(name, k):
    oracle = frequency.get(name, 1.5, k)
    reports = oracle.perturb(np.random.default_rng(10).integers(0, k, 3000), np.random.default_rng(11))
    np.testing.assert_array_equal(oracle.support_counts(reports), oracle._supports(reports).sum(axis=0))
    np.testing.assert_allclose(oracle.estimate(reports), oracle.contributions(reports).mean(axis=0), atol=1e-12)


def test_hcms_sketch_equals_the_sum_of_contributions():
    oracle = frequency.get("hcms", 2.0, 300, hashes=8, columns=64, seed=3)
    reports = oracle.perturb(np.random.default_rng(12).integers(0, 300, 4000), np.random.default_rng(13))
    np.testing.assert_allclose(oracle.estimate(reports), oracle.contributions(reports).mean(axis=0), atol=1e-10)


def test_walsh_hadamard_is_the_sylvester_matrix():
    values = np.random.default_rng(14).integers(-50, 50, size=(32, 3))
    np.testing.assert_array_equal(walsh_hadamard(values), scipy.linalg.hadamard(32) @ values)


def test_chunked_estimate_equals_the_one_shot_estimate():
    """Same reports chunked or not: the generator is consumed chunk by chunk, so compare against
    the per-chunk perturbations made with the same stream."""
    oracle = frequency.get("olh", 2.0, 16)
    users = np.arange(1000) % 16
    chunked = estimate_in_chunks(oracle, users, np.random.default_rng(15), chunk_entries=3 * 250)
    rng = np.random.default_rng(15)
    reports = np.concatenate([oracle.perturb(users[s : s + 250], rng) for s in range(0, 1000, 250)])
    np.testing.assert_allclose(chunked, oracle.estimate(reports), atol=1e-12)


# --- THE and SHE ---------------------------------------------------------------------------------
def test_the_threshold_is_wang_et_al_optimum():
    """theta minimizes q(1-q)/(p-q)^2 (checked on a dense grid, independent of the optimizer)."""
    for epsilon in (0.5, 2.0, 5.0):
        grid = np.linspace(0.5, 1.0, 200_001)[1:-1]
        p = 1 - 0.5 * np.exp(epsilon * (grid - 1) / 2)
        q = 0.5 * np.exp(-epsilon * grid / 2)
        assert optimal_threshold(epsilon) == pytest.approx(grid[np.argmin(q * (1 - q) / (p - q) ** 2)], abs=1e-5)


@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_the_p_and_q_are_the_samplers(epsilon):
    """p, q from the safe Laplace's exact grid mass: close to the continuous formulas (grid and eps'
    <= eps/2) and equal to the sampler's frequencies within 4 SE over 400,000 entries each."""
    oracle = frequency.get("the", epsilon, 2)
    theta = oracle.theta
    assert oracle.p == pytest.approx(1 - 0.5 * math.exp(epsilon * (theta - 1) / 2), rel=5e-3)
    assert oracle.q == pytest.approx(0.5 * math.exp(-epsilon * theta / 2), rel=5e-3)
    bits = oracle.perturb(np.zeros(400_000, dtype=int), np.random.default_rng(16))
    for column, probability in ((0, oracle.p), (1, oracle.q)):
        se = math.sqrt(probability * (1 - probability) / bits.shape[0])
        assert abs(bits[:, column].mean() - probability) < 4 * se


def test_she_is_histogram_encoding_on_laplace():
    she, histogram = frequency.get("she", 2.0, 8), frequency.get("histogram", 2.0, 8)
    assert she.entry == histogram.entry
    f = np.full(8, 1 / 8)
    np.testing.assert_array_equal(she.variance(f, 100), histogram.variance(f, 100))
    assert she.variance(f, 1)[0] == pytest.approx(8 / 2.0**2, rel=2e-3)  # Wang et al.: 8/eps^2

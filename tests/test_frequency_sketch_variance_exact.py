"""The count mean sketches' variance (HCMS, CMS: `ldpfed.frequency.sketches`) is exact, collision
terms included: checked by enumeration on a small case. With the prime P = 7 in place of 2^31 - 1,
m = 2 columns, s = 2 hash functions and k = 3 categories, every public hash draw (all (a, b, c) in
[0, P)^3 for each hash function: 343^2 draws) is enumerated, and given the draw each user's report
(row j, column l, kept or flipped bit) is enumerated too; users are independent given the draw, so
Var f_hat = (E_h[sum_i Var(Z_i | h)] + Var_h(sum_i E[Z_i | h])) / (n (1 - kappa))^2 exactly (up to
float rounding). A formula that dropped the collision term (or used kappa = 1/m) would miss by far
more than the tolerance."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ldpfed.frequency.sketches as sketches
from ldpfed.frequency.sketches import CountMeanSketch, HadamardCountMeanSketch, residue_moments

SMALL_PRIME, COLUMNS, HASHES, K = 7, 2, 2, 3
USERS = np.array([0, 0, 1])  # categories 0 (twice) and 1; category 2 empty


@pytest.fixture
def small_prime(monkeypatch):
    monkeypatch.setattr(sketches, "PRIME", SMALL_PRIME)


def _hash_tables() -> np.ndarray:
    """(P^3, k): h(x) = ((a x^2 + b x + c) mod P) mod m for every (a, b, c) (the stated family)."""
    triples = np.array(list(itertools.product(range(SMALL_PRIME), repeat=3)))
    x = np.arange(K)
    return ((triples[:, :1] * x**2 + triples[:, 1:2] * x + triples[:, 2:]) % SMALL_PRIME) % COLUMNS


def _draws() -> np.ndarray:
    """(P^6, s, k): every pair of hash functions, uniform."""
    tables = _hash_tables()
    first, second = np.meshgrid(np.arange(len(tables)), np.arange(len(tables)), indexing="ij")
    return np.stack([tables[first.ravel()], tables[second.ravel()]], axis=1)


def _exact_variance(moments, kappa: float) -> np.ndarray:
    """Var f_hat(d) per category from each user's (E[Z_i(d) | h], E[Z_i(d)^2 | h]) over the draws."""
    draws = _draws()
    mean_sum, variance_sum = 0.0, 0.0
    for x in USERS:
        mean, second = moments(draws, x)  # (draws, k) each
        mean_sum = mean_sum + mean
        variance_sum = variance_sum + second - mean**2
    n = USERS.size
    total = variance_sum.mean(axis=0) + mean_sum.var(axis=0)
    unbiased = (mean_sum.mean(axis=0) / n - kappa) / (1 - kappa)
    return total / (n * (1 - kappa)) ** 2, unbiased


def _assert_exact(oracle, moments) -> None:
    """The enumerated estimate is unbiased and its variance is the oracle's `variance`."""
    kappa, _ = residue_moments(COLUMNS)
    exact, unbiased = _exact_variance(moments, kappa)
    truth = np.bincount(USERS, minlength=K) / USERS.size
    np.testing.assert_allclose(unbiased, truth, atol=1e-12)
    np.testing.assert_allclose(oracle.variance(truth, USERS.size), exact, rtol=1e-9)


def test_hcms_variance_is_exact_on_a_small_case(small_prime):
    oracle = HadamardCountMeanSketch(2.0, K, hashes=HASHES, columns=COLUMNS)
    hadamard = np.array([[1, 1], [1, -1]])
    keep = 1.0 - oracle._flip

    def moments(draws, x):
        mean, second = 0.0, 0.0
        for j, column in itertools.product(range(HASHES), range(COLUMNS)):
            w = hadamard[draws[:, j, x], column]  # the user's entry H[h_j(x), l]
            value = oracle.scale * w[:, None] * hadamard[draws[:, j, :], column]  # Z_i(d) when the bit is kept
            weight = 1.0 / (HASHES * COLUMNS)
            mean = mean + weight * (keep - (1 - keep)) * value
            second = second + weight * value**2
        return mean, second

    _assert_exact(oracle, moments)


def test_cms_variance_is_exact_on_a_small_case(small_prime):
    oracle = CountMeanSketch(2.0, K, hashes=HASHES, columns=COLUMNS)
    flip = oracle._flip

    def moments(draws, x):
        mean, second = 0.0, 0.0
        for j in range(HASHES):
            one = np.where(draws[:, j, :] == draws[:, j, x : x + 1], 1.0 - flip, flip)  # P(bit at h_j(d) = 1)
            high, low = (1.0 - flip) / (1.0 - 2.0 * flip), -flip / (1.0 - 2.0 * flip)  # z for bit 1, bit 0
            mean = mean + (one * high + (1 - one) * low) / HASHES
            second = second + (one * high**2 + (1 - one) * low**2) / HASHES
        return mean, second

    _assert_exact(oracle, moments)

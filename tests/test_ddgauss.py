"""The distributed discrete Gaussian's encoder and decoder (ldpfed.protocols.ddgauss)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpfed.accounting.ddgauss import ShareSampler as _ShareSampler
from ldpfed.protocols.ddgauss import DistributedDiscreteGaussian
from ldpfed.samplers.discrete_gaussian import _Proposal
from ldpfed.validation import LDPValueError


def _vectors(rng, rows, dims, scale):
    """Rows of random direction and norm up to 2 scale (some are clipped)."""
    x = rng.normal(size=(rows, dims))
    return x / np.linalg.norm(x, axis=1, keepdims=True) * scale * rng.uniform(0, 2, size=(rows, 1))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    dims=st.integers(1, 70),
    clients=st.integers(1, 20),
    gamma=st.floats(1e-3, 2.0),
    beta=st.sampled_from([0.0, math.exp(-0.5), 0.9]),
    seed=st.integers(0, 2**32 - 1),
)
def test_integers_round_trip_exactly_without_a_wrap(dims, clients, gamma, beta, seed):
    """Without noise and without a modular wrap the server gets back exactly the sum of the
    clients' rounded integer vectors, and its estimate of the clipped sum is within the rounding's
    gamma n sqrt(D) (R is orthogonal; each rounded coordinate moves by less than one step)."""
    rng = np.random.default_rng(seed)
    clip = 1.0
    probe = DistributedDiscreteGaussian(dims, clip, gamma, 1.0, 62, beta)
    # the smallest modulus that holds n rounded vectors of norm <= norm_bound (no wrap possible)
    bits = max(2, math.ceil(math.log2(2 * clients * probe.norm_bound + 2)))
    ddg = DistributedDiscreteGaussian(dims, clip, gamma, 1.0, bits, beta)
    x = _vectors(rng, clients, dims, clip)
    rounded = ddg.quantize(x, seed, rng)
    assert np.all(np.einsum("ij,ij->i", rounded, rounded) <= ddg.norm_bound**2)
    total = ddg.aggregate(ddg.wrap(rounded))
    assert np.array_equal(ddg.centered(total), rounded.sum(axis=0))
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    clipped = x * np.minimum(1.0, clip / norms)
    error = np.linalg.norm(ddg.decode(total, seed) - clipped.sum(axis=0))
    assert error <= gamma * clients * math.sqrt(ddg.padded_dims) * (1 + 1e-9)


def test_encoding_is_the_rounded_vector_plus_the_share_modulo_m():
    """encode = wrap(quantize + shares) from the client's generator, in that order; the sum of the
    noisy integers comes back exactly when it does not wrap."""
    ddg = DistributedDiscreteGaussian(30, 1.0, 0.01, 0.05, 20)
    x = _vectors(np.random.default_rng(0), 8, 30, 1.0)
    encoded = ddg.encode(x, 5, np.random.default_rng(1))
    replay = np.random.default_rng(1)
    noisy = ddg.quantize(x, 5, replay) + ddg.shares(8, replay)
    assert np.array_equal(encoded, ddg.wrap(noisy))
    assert encoded.dtype == np.int64 and encoded.min() >= 0 and encoded.max() < 2**20
    assert np.array_equal(ddg.centered(ddg.aggregate(encoded)), noisy.sum(axis=0))
    assert not np.array_equal(encoded, ddg.encode(x, 5, np.random.default_rng(2)))  # the client's secret


def test_each_client_encodes_from_its_own_generator():
    """encode_each: row i is encode(row i) with generator i, whatever the other rows."""
    ddg = DistributedDiscreteGaussian(30, 1.0, 0.01, 0.05, 20)
    x = _vectors(np.random.default_rng(0), 4, 30, 1.0)
    seeds = np.random.SeedSequence(9).spawn(4)
    together = ddg.encode_each(x, 5, [np.random.default_rng(seed) for seed in seeds])
    alone = [ddg.encode(row, 5, np.random.default_rng(seed))[0] for row, seed in zip(x, seeds)]
    assert np.array_equal(together, np.array(alone))


def test_the_rotation_comes_from_the_public_seed():
    ddg = DistributedDiscreteGaussian(30, 1.0, 0.01, 0.05, 20)
    assert np.array_equal(ddg.signs(3), ddg.signs(3)) and not np.array_equal(ddg.signs(3), ddg.signs(4))
    x = _vectors(np.random.default_rng(0), 1, 30, 0.5)
    total = ddg.aggregate(ddg.wrap(ddg.quantize(x, 3, np.random.default_rng(1))))
    assert np.linalg.norm(ddg.decode(total, 3) - x[0]) < 0.1  # 0.01 sqrt(32) rounding at most
    assert np.linalg.norm(ddg.decode(total, 4) - x[0]) > 0.3  # another round's rotation: garbage


@pytest.mark.parametrize("share_steps", [0.4, 3.0])
def test_the_sum_carries_n_shares_of_noise(share_steps):
    """Zero vectors (no rounding), n = 40 clients, d = 50 (D = 64): every decoded coordinate's
    variance is gamma^2 n Var N_Z(0, s^2) (R^T is orthogonal and the shares i.i.d.), = n sigma^2 up to
    1e-30 relative at s = 3, and the exact discrete variance at s = 0.4 (0.0428 s^2 less). 300
    repetitions x 50 coordinates, 15,000 values of a near-normal sum: the sample variance has
    relative standard error sqrt(2/15,000) = 1.2% (coordinates of one repetition are uncorrelated:
    R^T of i.i.d. noise); tolerance 5 standard errors, 6%."""
    n, dims, gamma, reps = 40, 50, 0.1, 300
    ddg = DistributedDiscreteGaussian(dims, 1.0, gamma, share_steps * gamma, 24)
    rng = np.random.default_rng(11)
    zeros = np.zeros((n, dims))
    sums = np.array([ddg.decode(ddg.aggregate(ddg.encode(zeros, r, rng)), r) for r in range(reps)])
    k = np.arange(-60, 61)
    law = np.exp(-(k**2) / (2 * share_steps**2))
    exact = gamma**2 * n * float(np.sum(law * k**2) / np.sum(law))
    measured = float(np.mean(sums**2))  # the noise has mean 0 exactly (symmetric shares)
    assert measured == pytest.approx(exact, rel=5 * math.sqrt(2 / sums.size))
    if share_steps >= 3:
        assert exact == pytest.approx(n * ddg.local_stddev**2, rel=1e-12)


def test_the_estimate_is_unbiased():
    """The mean of 400 decoded sums of 10 fixed vectors is their clipped sum: each coordinate's
    error has variance <= n (sigma^2 + gamma^2/4) / 400; tolerance 5 of those standard errors."""
    n, dims, gamma, sigma, reps = 10, 20, 0.05, 0.02, 400
    ddg = DistributedDiscreteGaussian(dims, 1.0, gamma, sigma, 24)
    x = _vectors(np.random.default_rng(3), n, dims, 1.0)
    clipped = x * np.minimum(1.0, 1.0 / np.linalg.norm(x, axis=1, keepdims=True))
    rng = np.random.default_rng(4)
    sums = np.array([ddg.decode(ddg.aggregate(ddg.encode(x, r, rng)), r) for r in range(reps)])
    standard_error = math.sqrt(n * (sigma**2 + gamma**2 / 4) / reps)
    assert np.max(np.abs(sums.mean(axis=0) - clipped.sum(axis=0))) < 5 * standard_error


def test_small_shares_have_the_discrete_gaussian_law():
    """The share sampler below s = 10 (the parent's acceptance formula stops there): chi-square of
    20,000 draws at s = 0.8 against N_Z(0, 0.64) over |n| <= 3 (+ the tail cell), 5 degrees of
    freedom: below 20.5 with probability 0.999."""
    s, draws = 0.8, 20_000
    values = _ShareSampler.for_sigma(s).draw(draws, np.random.default_rng(5))
    k = np.arange(-40, 41)
    law = np.exp(-(k**2) / (2 * s * s))
    law /= law.sum()
    cells = [np.abs(values) == j for j in range(3)] + [np.abs(values) >= 3]
    expected = [law[np.abs(k) == j].sum() for j in range(3)] + [law[np.abs(k) >= 3].sum()]
    observed = np.array([c.sum() for c in cells])
    chi2 = float(np.sum((observed - draws * np.array(expected)) ** 2 / (draws * np.array(expected))))
    assert chi2 < 20.5
    # where the parent's closed form holds, the exact sum agrees with it
    assert _ShareSampler.for_sigma(15.0).acceptance == pytest.approx(_Proposal.for_sigma(15.0).acceptance, rel=1e-12)


SMALL = DistributedDiscreteGaussian(10, 1.0, 0.1, 0.1, 16)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: DistributedDiscreteGaussian(10, 0.0, 0.1, 0.1, 16), "clip norm c must be a finite number > 0"),
        (lambda: DistributedDiscreteGaussian(10, -2.0, 0.1, 0.1, 16), "clip norm c must be a finite number > 0"),
        (lambda: DistributedDiscreteGaussian(10, 1.0, 0.1, 0.1, 63), "bits must be at most 62"),
        (lambda: DistributedDiscreteGaussian(10, 1.0, 0.1, 0.1, 8, beta=1.0), "beta must be in [0, 1)"),
        (lambda: DistributedDiscreteGaussian(10, 1e4, 1e-6, 0.1, 40), "gamma = 1e-06 is too fine for clip norm 10000"),
        (
            lambda: DistributedDiscreteGaussian.for_budget(250, 10.0, 5, 1.0, 1e-5, 1000),
            "bits = 5 is too few for the sum of 1000 clients",
        ),
        (
            lambda: DistributedDiscreteGaussian.for_budget(250, 10.0, 8, 0.1, 1e-5, 100, rounds=10_000),
            "cannot hold the noise that 10000 rounds",
        ),
        (
            lambda: DistributedDiscreteGaussian(10, 1.0, 0.1, 0.1, 16).encode(
                np.ones((2, 9)), 0, np.random.default_rng()
            ),
            "vectors must be finite with 10 coordinates",
        ),
        (
            lambda: SMALL.decode(np.zeros(10, dtype=np.int64), 0),
            "the modular sum must have 16 coordinates",
        ),
    ],
)
def test_bad_input_gets_one_line(build, message):
    with pytest.raises(LDPValueError) as error:
        build()
    assert message in str(error.value) and "\n" not in str(error.value)

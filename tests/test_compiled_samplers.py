"""The compiled safe samplers  against the frozen numpy code they
replace (tests/reference_safe_samplers.py): the same reports, bit for bit, from the same Generator
state, and the Generator left in the same state (the same words consumed); `perturb_rows` equal to
row-by-row `perturb`; the bounds that decide the discrete Gaussian's accept test without an exp,
against mpmath; and the 64-bit words of every bit generator (MT19937's `random_raw` gives 32 bits,
which gave the numpy samplers a wrong law).

Since the reports are bit-identical, the laws, audits, exhaustive window-map test and moment tests
of the numpy samplers (test_grid_sampler_exact, test_floating_point_safety, test_audit,
test_mechanism_privacy) keep their meaning for the compiled ones.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import reference_safe_samplers as reference

import ldpfed.mechanisms as mech
from ldpfed.mechanisms.hybrid import EPSILON_STAR
from ldpfed.samplers import discrete_gaussian, words
from ldpfed.samplers.discrete_gaussian import _EXP_BAND
from ldpfed.samplers.discrete_laplace import DiscreteLaplaceSampler
from ldpfed.samplers.safe_grid import gaussian_integers
from ldpfed.validation import LDPValueError

BIT_GENERATORS = (np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64)
# (name, options, epsilons): every safe kernel and its table regimes (Laplace: a wide table below
# eps ~ 0.04; Hybrid: Duchi's numpy sampler up to e_star, the grid kernel with atoms above)
CASES = [
    ("laplace", {}, (0.02, 0.3, 1.0, 7.0, 300.0)),
    ("piecewise", {}, (0.05, 1.0, 6.0, 40.0)),
    ("square-wave", {"estimator": "raw"}, (0.05, 1.0, 6.0)),
    ("square-wave", {"estimator": "debiased"}, (0.3, 2.0, 40.0)),
    ("hybrid", {}, (0.3, EPSILON_STAR * 1.01, 1.0, 6.0, 40.0)),
    ("gaussian", {}, (0.05, 0.5, 1.0, 8.0, 60.0)),
]


def mechanism(name, options, epsilon):
    return mech.get(name, epsilon, delta=1e-5 if mech.get_class(name).approximate else None, **options)


def inputs(size, seed):
    """Uniform inputs with the domain edges, 0 and exact grid points among them."""
    t = np.random.default_rng(seed).uniform(-1.0, 1.0, size)
    edges = np.array([-1.0, 1.0, 0.0, -0.5, 2.0**-16, 1.0 - 2.0**-16, -1.0 + 2.0**-53, 0.75])
    t[: min(size, edges.size)] = edges[: min(size, edges.size)]
    return t


def same_draws(got, want, generator_a, generator_b):
    """Equal reports, and equal next words: the same words were consumed."""
    next_words = [g.bit_generator.random_raw(3) for g in (generator_a, generator_b)]
    return np.array_equal(got, want) and got.dtype == want.dtype and np.array_equal(*next_words)


@pytest.mark.parametrize(("name", "options", "epsilons"), CASES, ids=lambda c: c if isinstance(c, str) else None)
def test_reports_are_bit_identical_to_the_numpy_samplers(name, options, epsilons):
    """Sizes below, at and across the 16384-value block, four bit generators, several seeds."""
    for epsilon in epsilons:
        m = mechanism(name, options, epsilon)
        for size, seed in ((1, 0), (7, 1), (16384, 2), (2 * 16384 + 5, 3)):
            t = inputs(size, seed)
            for bit_generator in BIT_GENERATORS:
                a, b = np.random.Generator(bit_generator(seed + 10)), np.random.Generator(bit_generator(seed + 10))
                assert same_draws(m.perturb(t, a), reference.perturb(m, t, b), a, b), (epsilon, size, bit_generator)


def test_shapes_and_empty_inputs_follow_the_numpy_samplers():
    for name, options, epsilons in CASES:
        m = mechanism(name, options, epsilons[1])
        for t in (np.zeros((0,)), np.full((3, 4), 0.25), np.array(0.5)):
            a, b = np.random.default_rng(5), np.random.default_rng(5)
            got = m.perturb(t, a)
            assert got.shape == t.shape and same_draws(got, reference.perturb(m, t, b), a, b)


def test_the_comparison_can_fail():
    """One raw word consumed out of place changes the reports: the identity above is not vacuous."""
    m = mechanism("piecewise", {}, 1.0)
    a, b = np.random.default_rng(8), np.random.default_rng(8)
    b.bit_generator.random_raw(1)
    t = inputs(1000, 0)
    assert not np.array_equal(m.perturb(t, a), reference.perturb(m, t, b))


@pytest.mark.parametrize("epsilon", [0.02, 1.0, 9.0])
def test_noise_alone_is_bit_identical(epsilon):
    """The integer noises that ldpfed.gradient_noise draws directly (`_signed_noise`, `attempt`)."""
    laplace = DiscreteLaplaceSampler.shared(epsilon)
    gaussian = mechanism("gaussian", {}, epsilon).safe_sampler
    for size in (0, 5, 50_000):
        a, b = np.random.default_rng(size), np.random.default_rng(size)
        assert same_draws(laplace._signed_noise(size, a), reference.laplace_noise(laplace, size, b), a, b)
        assert same_draws(gaussian.noise(size, a), reference.gaussian_noise(gaussian, size, b), a, b)
        proposal = gaussian._proposal
        assert same_draws(proposal.attempt(size, a), reference.gaussian_attempt(proposal, size, b), a, b)
        assert same_draws(
            gaussian_integers(gaussian.sigma, (1, size), a)[0], reference.gaussian_noise(gaussian, size, b), a, b
        )


@pytest.mark.parametrize("name", ["laplace", "piecewise", "hybrid", "gaussian", "duchi"])
@pytest.mark.parametrize("sampler", ["safe", "continuous"])
def test_perturb_rows_equals_perturb_row_by_row(name, sampler):
    """Each row from its own Generator, rows shorter and longer than a block, bit for bit."""
    delta = 1e-5 if mech.get_class(name).approximate else None
    m = mech.get(name, 1.0, delta=delta, sampler=sampler)
    for k in (9, 16384 + 3):
        values = inputs(3 * k, k).reshape(3, k)
        rows = m.perturb_rows(values, [np.random.default_rng(s) for s in (4, 5, 6)])
        one_by_one = np.stack([m.perturb(row, np.random.default_rng(s)) for row, s in zip(values, (4, 5, 6))])
        assert np.array_equal(rows, one_by_one)


def test_perturb_rows_checks_its_arguments():
    m = mech.get("piecewise", 1.0)
    with pytest.raises(LDPValueError, match="one generator per row"):
        m.perturb_rows(np.zeros((2, 3)), [np.random.default_rng(0)])
    with pytest.raises(TypeError, match="Generator"):
        m.perturb_rows(np.zeros((1, 3)), [0])
    shared = np.random.default_rng(1)  # the same Generator twice: its lock is taken once
    assert m.perturb_rows(np.zeros((2, 3)), [shared, shared]).shape == (2, 3)


def test_exp_bounds_bracket_any_float_exp_within_2_to_minus_48():
    """low < e^b (1 - 2^-48) and e^b (1 + 2^-48) < high (mpmath, 60 digits) over the bounded
    range and its edges, so u < low and u > high give the verdict of u < fl(exp(b)) for any exp
    within 2^-48 (libm's and numpy's are within 2 ulp); outside the range the bounds decide nothing."""
    words.compiled()
    exp_bounds = discrete_gaussian.exp_bounds  # the compiled kernel
    rng = np.random.default_rng(3)
    b = np.concatenate(
        [
            rng.uniform(-30.5, 0.125, 3000),
            -rng.exponential(1.0, 3000),
            [
                -30.5 + 1e-12,
                -30.375,
                -30.0,
                -29.5,
                -0.125,
                -0.125 - 1e-16,
                -0.375,
                0.0,
                -0.0,
                1e-300,
                -1e-300,
                1e-16,
                0.125 - 1e-16,
                -1e-9,
            ],
        ]
    )
    b = b[(b > -30.5) & (b < 0.125)]
    margin = mpmath.mpf(2) ** -48
    with mpmath.workdps(60):
        for x in b:
            low, high = exp_bounds(float(x))
            exact = mpmath.exp(mpmath.mpf(float(x)))
            assert mpmath.mpf(low) < exact * (1 - margin) and mpmath.mpf(high) > exact * (1 + margin), x
            assert (high - low) / math.exp(x) < 4.0 * _EXP_BAND  # narrow: few attempts need the exp
    for x in (-30.5, -40.0, -745.5, 0.125, 0.5, 3.0):
        assert exp_bounds(x) == (-1.0, 2.0)


def test_exp_bounds_give_the_verdict_of_the_exp_next_to_it():
    """At u one ulp either side of fl(exp(b)) the bounds decide nothing (the exp decides), and
    far from it they decide what the exp would."""
    words.compiled()
    exp_bounds = discrete_gaussian.exp_bounds
    for x in np.random.default_rng(4).uniform(-30.0, 0.0, 2000):
        e = math.exp(x)
        low, high = exp_bounds(x)
        assert low <= math.nextafter(e, 0.0) and math.nextafter(e, 1.0) <= high
        assert low > e * (1 - 4 * _EXP_BAND) and high < e * (1 + 4 * _EXP_BAND)


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_mt19937_gives_full_64_bit_words(name):
    """MT19937's random_raw returns 32-bit words; the numpy samplers used them as 64-bit ones (a
    dither with one half zero; a Laplace alias column always 0; a Gaussian sign bit always 0).
    The kernels take next_uint64 from every bit generator: the mean and variance are the
    mechanism's, within 5 standard errors (the numpy samplers fail this)."""
    m = mechanism(name, {}, 1.0)
    n = 400_000
    x = 0.3
    reports = m.perturb(np.full(n, x), np.random.Generator(np.random.MT19937(9)))
    variance = float(m.variance(x))
    assert abs(reports.mean() - x) <= 5 * math.sqrt(variance / n)
    fourth = {"laplace": 6.0, "gaussian": 3.0}[name]  # kurtosis of the noise (Var s^2 ~ (kurtosis - 1) V^2 / n)
    assert abs(reports.var() / variance - 1) <= 5 * math.sqrt((fourth - 1) / n)


def test_mt19937_rounding_is_unbiased_at_the_grid_scale():
    """The half-step bias of the old 32-bit dither, seen directly on round_to_grid."""
    from ldpfed.samplers.grid import round_to_grid

    n = 200_000
    k = round_to_grid(np.full(n, 0.3), np.random.Generator(np.random.MT19937(2)))
    assert abs(k.mean() - 0.3) <= 5 * 0.5 / math.sqrt(n)


def test_importing_the_mechanisms_does_not_import_numba():
    """numba (~0.4 s) is imported on the first sampling call, not by `import ldpfed.mechanisms`
    (commands that never sample, e.g. `ldpfed mechanisms` or `account`, do not pay it)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])  # this checkout's ldpfed
    code = "import sys, ldpfed.mechanisms, ldpfed.cli.main; print('numba' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert result.stdout.strip() == "False"

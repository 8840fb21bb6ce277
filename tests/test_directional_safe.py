"""LDPVec's floating-point-safe Gaussian angle noise (spec: mechanisms.md,
Floating-point safety; directional.md, LDPVec): the released angles lie on a fixed grid, the
calibration meets (eps_dir, delta_dir) by dp_accounting's RDP accountant with the rounding
inflation, the exact moments hold for the safe law, the auditor's floating-point event fires for
the continuous sampler only, and the ledger names the sampler."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from ldpfed.directional import windows as win
from ldpfed.directional.ldpvec import LDPVec

CONTINUOUS = {"sampler": "continuous"}


def _vec(epsilon=1.0, dims_window="fixed", **kwargs):
    return LDPVec("gaussian", epsilon, clip=1.0, delta=1e-5, beta=0.5, window=dims_window, **kwargs)


def _grid_residual(vec: LDPVec, angles: np.ndarray, dims: int) -> np.ndarray:
    """|angle - F(m)| where F(m) = centre + half * (m g / half) is the safe release for integer m,
    m recovered by rounding: zero exactly on the grid (the computation of the release itself)."""
    step = vec.budget(dims).angle_grid_step
    half, centre = win.half_widths(vec.beta, dims), win.centres(vec.window, vec.beta, dims)
    m = np.rint((angles - centre) / step)
    return np.abs(angles - win.from_offsets((m * step) / half, centre, vec.beta))


def test_the_default_sampler_is_safe_and_labelled():
    vec, continuous = _vec(), _vec(options=CONTINUOUS)
    assert vec.angle_sampler == "safe" and continuous.angle_sampler == "continuous"
    assert vec.budget(6).angle_sampler == "safe" and vec.budget(6).angle_grid_step > 0
    assert "floating-point safe" in vec.describe(6)["angle_noise_sampler"]
    assert "NOT floating-point safe" in continuous.describe(6)["angle_noise_sampler"]
    assert continuous.budget(6).angle_grid_step is None
    assert LDPVec("laplace", 1.0, clip=1.0).angle_sampler is None


@pytest.mark.parametrize("window", ["fixed", "centred"])
def test_safe_angles_lie_on_one_fixed_grid_whatever_the_input(window):
    """Two very different inputs: every released angle is F(m) for an integer m, F fixed by the
    public (beta, window, d) alone; the continuous sampler's angles are not (the test can fail)."""
    d, n = 6, 4000
    rng = np.random.default_rng(30)
    inputs = np.stack([np.r_[1.0, np.zeros(d - 1)], rng.standard_normal(d)])
    for options, on_grid in (({}, True), (CONTINUOUS, False)):
        vec = _vec(4.0, window, magnitude="normalize", options=options)
        for x in inputs:
            _, angles = vec.perturb_polar(np.broadcast_to(x, (n, d)), rng)
            residual = _grid_residual(vec if on_grid else _vec(4.0, window, magnitude="normalize"), angles, d)
            if on_grid:
                assert np.all(residual == 0.0)
            else:
                assert np.mean(residual > 0.0) > 0.99


def test_the_calibration_meets_the_direction_budget_with_the_rounding_inflation():
    """Against dp_accounting directly: the angle noise sd s (radians), over the sensitivity
    inflated by the rounding (L2 (1 + sqrt(d-1)/J) with the grid g = L2/J), is a Gaussian noise
    multiplier whose RDP epsilon at delta_dir is <= eps_dir; the continuous sampler keeps the
    analytic Gaussian's sd, and the safe one costs a few percent more noise."""
    from dp_accounting import GaussianDpEvent
    from dp_accounting.rdp import RdpAccountant

    d = 50
    for epsilon in (0.5, 2.0, 8.0):
        split = _vec(epsilon).budget(d)
        _, l2 = win.sensitivities(0.5, d)
        steps = l2 / split.angle_grid_step  # J
        assert steps == 2 ** math.ceil(math.log2(2**10 * math.sqrt(d - 1)))
        inflated = l2 * (1.0 + math.sqrt(d - 1) / steps)
        eps = RdpAccountant().compose(GaussianDpEvent(split.angle_sigma / inflated)).get_epsilon(split.direction_delta)
        assert eps <= split.direction_epsilon
        assert eps > 0.95 * split.direction_epsilon  # not over-noised
        continuous = _vec(epsilon, options=CONTINUOUS).budget(d)
        assert 1.0 < split.angle_sigma / continuous.angle_sigma < 1.15


def test_the_safe_characteristic_factor_against_mpmath():
    """E[exp(i (theta* - theta))] of the rounding plus discrete Gaussian integers, summed directly
    in high precision, against the closed form (two-point rounding times exp(-s^2/2))."""
    vec = _vec(100.0, magnitude="normalize")
    d = 4
    randomizer = vec._randomizers(d)[2]
    step, s = randomizer.step, randomizer.noise.sigma_steps
    assert 50 < s < 2000  # a sum of a few thousand terms
    mpmath.mp.dps = 30
    offsets = np.array([[0.3, -0.7, 0.123456]])
    closed = randomizer.characteristic(offsets)[0]
    for t, half, value in zip(offsets[0], randomizer.half, closed):
        scaled = mpmath.mpf(float(t)) * mpmath.mpf(float(half)) / mpmath.mpf(step)
        f = scaled - mpmath.floor(scaled)
        width = int(15 * s)
        weights = [mpmath.exp(-(mpmath.mpf(n) ** 2) / (2 * mpmath.mpf(s) ** 2)) for n in range(-width, width + 1)]
        noise = mpmath.fsum(w * mpmath.expj(mpmath.mpf(step) * n) for w, n in zip(weights, range(-width, width + 1)))
        noise /= mpmath.fsum(weights)
        rounding = (1 - f) * mpmath.expj(-f * step) + f * mpmath.expj((1 - f) * step)
        exact = complex(rounding * noise)
        assert abs(value - exact) < 1e-13


@pytest.mark.parametrize("options", [{}, CONTINUOUS])
def test_expected_output_against_monte_carlo_for_both_samplers(options):
    d, reps = 5, 40000
    vec = LDPVec("gaussian", 30.0, clip=1.0, delta=1e-5, beta=0.3, magnitude="split", options=options)
    rng = np.random.default_rng(31)
    g = rng.standard_normal(d)
    expected = vec.expected_output(g)[0]
    samples = vec.perturb(np.repeat(g[None], reps, axis=0), rng)
    standard_error = samples.std(axis=0) / math.sqrt(reps)
    assert np.max(np.abs(samples.mean(axis=0) - expected) / standard_error) < 4.0


def test_safe_angle_variance_includes_the_rounding():
    """Var = s^2 + g^2 f (1 - f): exact, and above the integer noise's s^2 off the grid."""
    vec = _vec(2.0)
    d = 5
    randomizer = vec._randomizers(d)[2]
    g = np.random.default_rng(32).standard_normal(d)
    _, variance = vec.angle_noise_moments(g)
    offsets = vec.angle_offsets(g)
    f = np.mod(offsets * randomizer.half / randomizer.step, 1.0)
    np.testing.assert_allclose(variance, randomizer.sd**2 + randomizer.step**2 * f * (1 - f), rtol=1e-12)


@pytest.mark.parametrize("window", ["fixed", "centred"])
def test_the_floating_point_event_fires_for_the_continuous_sampler_only(window):
    from ldpfed.audit import run_audit
    from ldpfed.audit.ldpvec_subject import ldpvec_subject

    safe = run_audit(
        ldpvec_subject("gaussian", 1.0, 1e-5, dims=4, window=window, release="offsets"), samples=100_000, seed=3
    )
    assert safe.sampler == "safe" and safe.verdict == "pass"
    continuous = run_audit(
        ldpvec_subject("gaussian", 1.0, 1e-5, dims=4, window=window, release="offsets", sampler="continuous"),
        samples=100_000,
        seed=3,
    )
    assert continuous.sampler == "continuous" and continuous.verdict == "fail"
    assert continuous.event.startswith("never-produced")


def test_the_safe_grid_is_what_the_audit_subject_tests():
    """Every safe release passes the subject's exact grid test (so the event cannot fire)."""
    from ldpfed.audit.ldpvec_subject import ldpvec_subject

    subject = ldpvec_subject("gaussian", 1.0, 1e-5, dims=6, release="offsets")
    rng = np.random.default_rng(33)
    for which in (0, 1):
        assert np.all(subject.producible(subject.draw(which, 5000, rng), 1 - which))


def test_the_ledger_event_names_the_sampler():
    from ldpfed.accounting import (
        CalibratedDpEvent,
        DiscreteGaussianVectorDpEvent,
        EpsilonDeltaDpEvent,
        create_accountant,
    )
    from ldpfed.accounting.accountants import flatten

    d = 20
    normalize = _vec(2.0, magnitude="normalize").round_event(d)
    assert isinstance(normalize, CalibratedDpEvent) and isinstance(normalize.event, DiscreteGaussianVectorDpEvent)
    assert normalize.event.noise_multiplier == _vec(2.0, magnitude="normalize").budget(d).angle_noise_multiplier
    split = _vec(2.0).round_event(d)
    leaves = [leaf for leaf, _ in flatten(split)]
    assert len(leaves) == 2 and all(isinstance(leaf, CalibratedDpEvent) for leaf in leaves)
    spent = create_accountant("basic").compose(split, 3).spent(1e-4)
    assert spent.epsilon == pytest.approx(6.0) and spent.delta == pytest.approx(3e-5)
    rdp = create_accountant("rdp").compose(normalize, 3).spent(1e-4)
    assert rdp.private and rdp.epsilon < 6.0
    assert isinstance(_vec(2.0, options=CONTINUOUS).round_event(d), EpsilonDeltaDpEvent)
    assert hash(split) == hash(_vec(2.0).round_event(d))  # the ledger counts events in a Counter


def test_budgets_beyond_the_safe_range_say_so():
    from ldpfed.validation import LDPValueError

    with pytest.raises(LDPValueError, match="sampler='continuous'"):
        _vec(5e4, magnitude="normalize").budget(10)
    assert _vec(5e4, magnitude="normalize", options=CONTINUOUS).budget(10).angle_sigma > 0

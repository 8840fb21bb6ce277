"""GeoDP for central DP-SGD: noise, sensitivity and additive RDP accounting (spec: directional.md, GeoDP)."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

from ldpfed.directional import windows as win
from ldpfed.directional.geodp import (
    GeoDP,
    clip_rows,
    neighbouring_relation,
    numeric_noise,
    rdp_epsilon,
    step_event,
    thesis_averaged_event,
    training_event,
)
from ldpfed.directional.spherical import to_spherical
from ldpfed.validation import LDPValueError


def _library_epsilon(event, delta: float) -> float:
    """The reference: dp-accounting's RdpAccountant used directly (not through ldpfed)."""
    from dp_accounting.rdp import RdpAccountant

    return float(RdpAccountant().compose(event).get_epsilon(delta))


def test_numeric_accounting_matches_the_opacus_test_vector():
    """Poisson-subsampled Gaussian, z = 1.5, q = 0.04, 2250 steps, delta 1e-5: RDP eps 7.329 (Opacus)."""
    event = training_event("numeric", 1.5, sampling="poisson", sample_rate=0.04, steps=2250, epochs=1)
    assert rdp_epsilon(event, 1e-5) == pytest.approx(7.329, abs=2e-3)


@pytest.mark.parametrize("sigma", [0.8, 2.0])
def test_geodp_composes_magnitude_and_direction_additively(sigma):
    """Two Gaussian releases of multiplier sigma compose to one of sigma/sqrt(2) (RDP adds up); the
    thesis' average charges a single Gaussian of sigma, which is smaller."""
    kwargs = dict(sampling="poisson", sample_rate=0.02, steps=500, epochs=1)
    geodp = rdp_epsilon(training_event("geodp", sigma, **kwargs), 1e-5)
    single = dp_accounting.GaussianDpEvent(sigma / math.sqrt(2.0))
    equivalent = _library_epsilon(
        dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(0.02, single), 500), 1e-5
    )
    averaged = _library_epsilon(
        dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(0.02, thesis_averaged_event(sigma)), 500),
        1e-5,
    )
    numeric = _library_epsilon(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.02, dp_accounting.GaussianDpEvent(sigma)), 500
        ),
        1e-5,
    )
    assert rdp_epsilon(training_event("numeric", sigma, **kwargs), 1e-5) == pytest.approx(numeric, rel=1e-9)
    assert geodp == pytest.approx(equivalent, rel=1e-9)
    assert averaged == pytest.approx(numeric, rel=1e-12)
    assert geodp > 1.3 * averaged


def test_shuffled_epochs_compose_without_amplification_under_replace_one():
    """One release per epoch (parallel composition inside it), no amplification, at multiplier sigma/2:
    a replaced example moves its batch's clipped sum by 2C. dp-accounting's PLD under REPLACE_ONE
    (which doubles the shift itself) is the independent lower reference; add/remove at sigma is below it."""
    from dp_accounting.pld import PLDAccountant

    event = training_event("numeric", 2.0, sampling="shuffle", sample_rate=0.5, steps=10, epochs=4)
    assert neighbouring_relation("shuffle") == "replace-one" and neighbouring_relation("poisson") == "add-or-remove-one"
    direct = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(1.0), 4)
    assert rdp_epsilon(event, 1e-5) == pytest.approx(_library_epsilon(direct, 1e-5), rel=1e-12)
    replace_one = PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    reference = replace_one.compose(dp_accounting.GaussianDpEvent(2.0), 4).get_epsilon(1e-5)
    add_remove = _library_epsilon(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 4), 1e-5)
    assert rdp_epsilon(event, 1e-5) >= reference > add_remove
    assert step_event("numeric", 2.0, "replace-one") == dp_accounting.GaussianDpEvent(1.0)
    assert step_event("geodp", 2.0, "replace-one") == dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(1.0), dp_accounting.GaussianDpEvent(2.0)]
    )


def test_noise_scales_are_the_spec_formulas():
    mechanism = GeoDP(noise_multiplier=1.3, clip=0.5, batch_size=64, beta=0.2, sampler="continuous")
    magnitude_sd, angle_sd = mechanism.noise_sd(100)
    assert magnitude_sd == pytest.approx(0.5 * 1.3 / 64)
    assert angle_sd == pytest.approx(math.sqrt(102) * 0.2 * math.pi * 1.3 / 64)
    # The safe sampler (the default): the same sds, inflated by the rounding: sqrt(d)/J <= 2^-10 (and its
    # float slack, 2^-11 of that).
    safe = GeoDP(noise_multiplier=1.3, clip=0.5, batch_size=64, beta=0.2).noise_sd(100)
    for value, spec in zip(safe, (magnitude_sd, angle_sd)):
        assert spec < value <= spec * (1 + 2.0**-10 * (1 + 2.0**-10))


@pytest.mark.parametrize("window", ["fixed", "centred"])
def test_per_example_angle_average_has_the_claimed_sensitivity(window):
    """Adding one example moves the released magnitude by <= C/B and the mean angle vector by at most
    (beta pi / 2) sqrt(d+2) / B <= the spec's sqrt(d+2) beta pi / B (add/remove neighbours)."""
    rng = np.random.default_rng(0)
    d, batch, beta = 9, 16, 0.4
    mechanism = GeoDP(noise_multiplier=1.0, clip=1.0, batch_size=batch, beta=beta, window=window)
    reference = rng.standard_normal(d)
    _, l2 = win.sensitivities(beta, d)
    worst_angle, worst_radius = 0.0, 0.0
    for _ in range(200):
        data = rng.standard_normal((batch, d)) * rng.exponential(1.0, (batch, 1))
        extra = rng.standard_normal((1, d)) * 10.0
        r0, a0 = mechanism._summaries(data, reference)
        r1, a1 = mechanism._summaries(np.r_[data, extra], reference)
        worst_angle = max(worst_angle, float(np.linalg.norm(a1 - a0)))
        worst_radius = max(worst_radius, abs(r1 - r0))
    assert worst_radius <= 1.0 / batch * (1 + 1e-12)
    assert worst_angle <= 0.5 * l2 / batch * (1 + 1e-12)


def test_angles_of_the_batch_mean_are_not_one_over_b_sensitive():
    """Why GeoDP averages per-example angles: the angles of the clipped batch MEAN (the paper's
    reading) move by far more than sqrt(d+2) beta pi / B when one example is added."""
    d, batch, beta = 5, 50, 1.0
    data = np.tile([[1.0, 0.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0, 0.0]], (batch // 2, 1))
    data[0, 0] += 1e-3  # a mean near zero pointing along +e_1
    extra = np.array([[-1.0, 0.0, 0.0, 0.0, 0.0]])
    _, before = to_spherical(clip_rows(data, 1.0).mean(axis=0))
    _, after = to_spherical(clip_rows(np.r_[data, extra], 1.0).mean(axis=0))
    _, l2 = win.sensitivities(beta, d)
    assert np.linalg.norm(after - before) > 5 * l2 / batch


def test_clean_release_of_identical_examples_is_the_clipped_gradient():
    rng = np.random.default_rng(1)
    g = rng.standard_normal(12) * 3.0
    mechanism = GeoDP(noise_multiplier=1.0, clip=1.0, batch_size=8, beta=1.0)
    np.testing.assert_allclose(mechanism.clean(np.tile(g, (8, 1))), clip_rows(g[None], 1.0)[0], atol=1e-12)


@pytest.mark.parametrize("sampler", ["safe", "continuous"])
def test_privatize_noise_matches_its_scale(sampler):
    """With identical examples and beta = 1, the released vector's norm has the magnitude noise sd."""
    rng = np.random.default_rng(2)
    g = np.r_[0.6, np.zeros(4)]  # angles (0, pi/2...) well inside beta = 1 windows
    mechanism = GeoDP(noise_multiplier=2.0, clip=1.0, batch_size=10, beta=1.0, sampler=sampler)
    outputs = np.array([mechanism.privatize(np.tile(g, (10, 1)), rng) for _ in range(2000)])
    norms = np.linalg.norm(outputs, axis=1)  # = |r + noise| whatever the angles
    assert abs(norms.mean() - 0.6) < 4 * 0.2 / math.sqrt(2000)
    assert norms.std() == pytest.approx(0.2, rel=0.08)
    numeric = np.array([numeric_noise(np.tile(g, (10, 1)), 1.0, 2.0, 10, rng) for _ in range(2000)])
    np.testing.assert_allclose(numeric.mean(axis=0), g, atol=4 * 0.2 / math.sqrt(2000))
    np.testing.assert_allclose(numeric.std(axis=0), 0.2, rtol=0.08)


def test_an_empty_poisson_batch_releases_noise_around_the_window_centres():
    mechanism = GeoDP(noise_multiplier=1.0, clip=1.0, batch_size=8, beta=0.5)
    radius, angles = mechanism._summaries(np.zeros((0, 5)), None)
    assert radius == 0.0
    np.testing.assert_allclose(angles, win.centres("fixed", 0.5, 5))
    assert mechanism.privatize(np.zeros((0, 5)), np.random.default_rng(0)).shape == (5,)


def test_bad_parameters_raise():
    for kwargs in (dict(noise_multiplier=0.0), dict(clip=-1.0), dict(batch_size=0), dict(beta=2.0), dict(window="x")):
        args = dict(noise_multiplier=1.0, clip=1.0, batch_size=4)
        args.update(kwargs)
        with pytest.raises(LDPValueError):
            GeoDP(**args)
    with pytest.raises(LDPValueError):
        training_event("geodp", 1.0, sampling="random", sample_rate=0.1, steps=1, epochs=1)
    with pytest.raises(LDPValueError):
        step_event("vector", 1.0)


def test_safe_geodp_releases_its_sums_on_fixed_grids():
    """The safe sampler's magnitude release B r* is an integer multiple of its grid step C/J,
    whatever the batch; the continuous one's is not (the check can fail)."""
    rng = np.random.default_rng(4)
    for sampler, on_grid in (("safe", True), ("continuous", False)):
        mechanism = GeoDP(noise_multiplier=1.0, clip=1.0, batch_size=8, beta=1.0, sampler=sampler)
        step = mechanism.clip / 1024  # J = 2^10 for one coordinate
        multiples = []
        for batch in (np.tile(np.r_[0.6, np.zeros(4)], (8, 1)), rng.standard_normal((8, 5))):
            norm_of_sum, _, _ = mechanism._sums(batch, None)
            if sampler == "safe":
                magnitude, _ = mechanism.safe_noises(5)
                assert magnitude.steps[0] == step
                released = magnitude.perturb(np.full(200, norm_of_sum)[:, None], rng)[:, 0]
            else:
                released = norm_of_sum + mechanism.noise_sd(5)[0] * 8 * rng.standard_normal(200)
            multiples.append(released / step)
        residual = np.abs(np.concatenate(multiples) - np.rint(np.concatenate(multiples)))
        assert np.all(residual == 0) if on_grid else np.mean(residual > 1e-6) > 0.99


def test_safe_training_event_is_the_discrete_gaussian_for_shuffled_epochs_only():
    from dp_accounting import GaussianDpEvent
    from dp_accounting.rdp import RdpAccountant

    for perturbation, releases in (("numeric", 1), ("geodp", 2)):
        event = training_event(
            perturbation, 1.2, sampling="shuffle", sample_rate=0.1, steps=30, epochs=3, sampler="safe", dims=50
        )
        library = RdpAccountant().compose(GaussianDpEvent(0.6), 3)  # replace-one: the sum / magnitude at sigma/2
        if releases == 2:  # GeoDP's direction keeps sigma
            library.compose(GaussianDpEvent(1.2), 3)
        library = library.get_epsilon(1e-5)
        # the ideal curve plus the samplers' float slack (~7e-11 per draw, 50 draws per step): just above
        assert library < rdp_epsilon(event, 1e-5) < library * (1 + 1e-6)
        with pytest.raises(LDPValueError, match="Poisson"):
            training_event(
                perturbation, 1.2, sampling="poisson", sample_rate=0.1, steps=30, epochs=3, sampler="safe", dims=50
            )

"""The floating-point-safe samplers of the i.n.i.d. noises (ldpfed.samplers.safe_grid): the
release lies on a fixed per-coordinate grid, its moments match the closed forms (Monte Carlo,
tolerances from the variance), its exact one-coordinate privacy loss obeys the interpolation
bound (Laplace), and its calibration is dp-accounting's RDP conversion (Gaussian)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent
from dp_accounting.rdp import RdpAccountant

from ldpfed.accounting import PrivacyLedger, create_accountant
from ldpfed.gradient_noise import InidGaussian, InidLaplace, calibrate, layer_profile, listing
from ldpfed.samplers.safe_grid import laplace_step_ratio, laplace_table
from ldpfed.training.noise_privatizer import NoisePrivatizer
from ldpfed.validation import LDPValueError

Z = 5.0
PROFILE = layer_profile([1.0, 0.5, 2.0], [7, 3, 20])


def on_grid(release, steps):
    return np.all(np.rint(release / steps) * steps == release)


@pytest.mark.parametrize("noise", [InidLaplace(PROFILE, epsilon=1.0), InidGaussian(PROFILE, epsilon=1.0, delta=1e-5)])
def test_safe_is_the_default_and_releases_on_a_fixed_grid(noise):
    assert noise.sampler == "safe" and noise.describe()["floating_point_safe"] is True
    rng = np.random.default_rng(0)
    for centre in (np.zeros(PROFILE.size), PROFILE, -0.3 * PROFILE):
        assert on_grid(noise.perturb(np.broadcast_to(centre, (200, PROFILE.size)), rng), noise.steps)
    rows = {row["name"]: row for row in listing()}
    assert rows[noise.name]["sampler"] == "safe" and rows[noise.name]["samplers"] == ["safe", "continuous"]
    assert rows["plrvo"]["sampler"] == "safe" and rows["r1smg"]["samplers"] == ["continuous"]
    assert rows["product-noise"]["floating_point_safe"] is False


@pytest.mark.parametrize("noise", [InidLaplace(PROFILE, epsilon=1.0), InidGaussian(PROFILE, epsilon=1.0, delta=1e-5)])
def test_release_moments_match_the_closed_forms(noise):
    """Unbiased, with Var = g^2 (E N^2 + f (1 - f)) per coordinate (release_variance), by Monte
    Carlo; the 4th moment bounds the variance estimate's spread (Laplace: kurtosis 6)."""
    n = 40_000
    rng = np.random.default_rng(1)
    centre = np.linspace(-0.9, 0.9, PROFILE.size) * PROFILE
    error = noise.perturb(np.broadcast_to(centre, (n, PROFILE.size)), rng) - centre
    variance = noise.release_variance(centre)
    assert np.all(np.abs(error.mean(axis=0)) <= Z * np.sqrt(variance / n))
    kurtosis = 6.0 if isinstance(noise, InidLaplace) else 3.0
    assert np.all(np.abs(error.var(axis=0) / variance - 1) <= Z * math.sqrt((kurtosis - 1) / n))
    # The worst-input bound (g^2 / 4 rounding) is within a hair of the exact per-input variance.
    assert np.all(noise.coordinate_variance() >= variance)
    np.testing.assert_allclose(noise.coordinate_variance(), variance, rtol=1e-6)


def test_safe_laplace_integer_noise_has_the_laplace_variance_of_its_scale():
    """E N^2 gamma^2 = 2 (a Laplace of scale 1 in units of b) up to the discretization, O(gamma^2)."""
    table, gamma = laplace_table(), laplace_step_ratio()
    assert gamma == pytest.approx(math.log(2) / table._table[1], rel=1e-4)  # integer weights
    noise = InidLaplace(PROFILE, epsilon=1.0)
    np.testing.assert_allclose(noise.steps**2 * table._noise_second_moment, 2 * noise.scales**2, rtol=1e-4)


def test_safe_laplace_calibration_leaves_room_for_the_grid():
    noise = InidLaplace(PROFILE, epsilon=1.0)
    assert noise.condition() == pytest.approx(noise.calibration_epsilon, rel=1e-12)
    assert noise.calibration_epsilon < 1.0 and noise.realized_epsilon() <= 1.0
    assert noise.realized_epsilon() == pytest.approx(1.0, rel=1e-11)
    gamma = laplace_step_ratio()
    assert noise.grid_cost() == pytest.approx(PROFILE.size * (gamma**2 / 8 + 2 * gamma * 2.0**-22), rel=1e-12)
    with pytest.raises(LDPValueError):  # a grid cost above half the budget is refused
        InidLaplace(np.full(2_000_000, 1e-3), epsilon=1e-3)


@pytest.mark.parametrize(("x", "x_prime"), [(0.0, 1.0), (0.3, 5.7), (-2.5, 40.25), (0.5, 0.5)])
def test_safe_laplace_one_coordinate_loss_is_within_the_interpolation_bound(x, x_prime):
    """Exact law of one coordinate in grid units: P(o | x) = (1 - f) p(o - a) + f p(o - a - 1) with the
    integer table's exact masses. Its worst log ratio is <= gamma |x - x'| + gamma^2 / 8 and (far in
    the tails) >= gamma_min |x - x'|: the bound the calibration charges is attained up to O(gamma^2)."""
    table, gamma = laplace_table(), laplace_step_ratio()
    length = table._table[1]
    outputs = np.arange(-6 * length, 6 * length + 60)

    def log_mass(t):
        a = math.floor(t)
        f = t - a
        low, high = table.noise_log_mass(outputs - a), table.noise_log_mass(outputs - a - 1)
        return np.logaddexp(np.log1p(-f) + low, (np.log(f) if f > 0 else -np.inf) + high)

    ratio = np.abs(log_mass(x) - log_mass(x_prime))
    assert ratio.max() <= gamma * abs(x - x_prime) + gamma**2 / 8 + 1e-12
    weights = np.array(table._table[0], dtype=float)
    gamma_min = float(np.min(np.log(weights[:-1] / weights[1:])))
    assert ratio.max() >= gamma_min * abs(x - x_prime) - 1e-12


def test_safe_gaussian_is_calibrated_by_the_rdp_library_with_its_float_slack():
    noise = InidGaussian(PROFILE, epsilon=1.0, delta=1e-5)
    slack_eps, slack_delta = noise.calibration_slack
    assert 0 < slack_eps < 1e-6 and 0 < slack_delta < 1e-12
    assert noise.float_slack[0] <= slack_eps and noise.float_slack[1] <= slack_delta

    def library_eps(z):
        return RdpAccountant().compose(GaussianDpEvent(z)).get_epsilon(1e-5 - slack_delta)

    z = noise.noise_multiplier
    assert library_eps(z) <= 1.0 - slack_eps < library_eps(z * (1 - 1e-6))
    # s = z (J + sqrt(d)) grid steps: the Mahalanobis sensitivity after the rounding.
    bare = z * (noise.grid_steps + math.sqrt(PROFILE.size))  # plus the float slack of the rounding
    assert bare < noise.sigma_steps < bare * (1 + 1e-6)
    assert noise.grid_steps >= 2**10 * math.sqrt(PROFILE.size)
    # More noise than the analytic (continuous) calibration, by the RDP conversion and the grid.
    continuous = InidGaussian(PROFILE, epsilon=1.0, delta=1e-5, sampler="continuous")
    assert 1.0 < noise.scales[0] / continuous.scales[0] < 1.3
    # The ledger: rdp and basic accept it and stay within the calibrated budget; pld refuses it.
    ledger = PrivacyLedger()
    ledger.record_event("c", 0, noise.event())
    assert ledger.spent("c", "basic").epsilon == pytest.approx(1.0)
    assert ledger.spent("c", "rdp", delta_target=1e-5).epsilon <= 1.0
    assert create_accountant("pld").unsupported(noise.event()) is not None


def test_continuous_sampler_is_an_explicit_option_everywhere():
    assert calibrate("inid-laplace", epsilon=1.0, dims=10, sampler="continuous").sampler == "continuous"
    with pytest.raises(LDPValueError):
        calibrate("r1smg", epsilon=1.0, delta=1e-5, dims=10, sampler="safe")
    with pytest.raises(LDPValueError):
        calibrate("inid-gaussian", epsilon=1.0, delta=1e-5, dims=10, sampler="exact")
    privatizer = NoisePrivatizer("inid-gaussian", epsilon=1.0, delta=1e-5, dims=10)
    assert privatizer.describe(10)["sampler"] == "safe" and privatizer.noise(10).floating_point_safe
    clipped = privatizer.clip_only(np.random.default_rng(5).standard_normal((3, 10)))
    mean, variance = privatizer.noise_moments(clipped)
    np.testing.assert_array_equal(variance, privatizer.noise(10).release_variance(clipped))
    assert on_grid(privatizer.privatize(clipped, np.random.default_rng(6)), privatizer.noise(10).steps)


# --- PLRV-O ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("eta", [2, 5, 20])
@pytest.mark.parametrize("shift", [0.4, 37.3, 800.5])
def test_safe_plrvo_moment_bound_holds_for_the_exact_sampled_law(eta, shift):
    """One atom, one coordinate, computed exactly: inputs 0 and `shift` grid steps, the two-point
    rounding of the latter, the discrete Laplace table's exact masses. E_P0[(P1/P0)^eta] is below the
    bound the accountant charges at the rate-shift gamma0 shift + gamma' (plrvo_safe.py, (i)-(iii)),
    and above the continuous Laplace's moment at gamma0 shift (the bound is not vacuous)."""
    from ldpfed.samplers.plrvo_safe import SafeLaw

    law = SafeLaw.for_params(10)
    table, gamma0, tau = law.table, law.step_ratio, law.table_error
    length = table._table[1]
    n = np.arange(-45 * length, 45 * length + 2 * int(shift) + 4)
    log_p0 = table.noise_log_mass(n)
    a, f = math.floor(shift), shift - math.floor(shift)
    log_p1 = np.logaddexp(np.log1p(-f) + table.noise_log_mass(n - a), np.log(f) + table.noise_log_mass(n - a - 1))
    moment = float(np.sum(np.exp((1 - eta) * log_p0 + eta * log_p1)))
    c_a = eta / (2 * eta - 1) + (2 * eta - 1) * gamma0**2 / 24
    s = gamma0 * shift + law.shift_ratio
    bound = math.exp((2 * eta - 1) * tau) * (c_a * math.exp((eta - 1) * s) + (1 - c_a) * math.exp(-eta * s))
    s0 = gamma0 * shift
    continuous = eta / (2 * eta - 1) * math.exp((eta - 1) * s0) + (eta - 1) / (2 * eta - 1) * math.exp(-eta * s0)
    assert continuous * (1 - 1e-9) <= moment <= bound, (continuous, moment, bound)


def test_safe_plrvo_sampler_is_the_default_with_its_accountant():
    from ldpfed.accounting.plrvo import PlrvoStep
    from ldpfed.gradient_noise import PLRVO

    noise = PLRVO(10, k=20.0, theta=0.5, clip=1.0)
    assert noise.sampler == "safe" and noise.law is not None
    continuous = PLRVO(10, k=20.0, theta=0.5, clip=1.0, sampler="continuous")
    # The safe accountant charges a little more than the continuous one, for the same (k, theta).
    safe_eps, continuous_eps = noise.epsilon("joint")[0], continuous.epsilon("joint")[0]
    assert continuous_eps <= safe_eps <= continuous_eps * 1.001
    assert PlrvoStep(20.0, 0.5, 1.0, 10, 1.0, noise.law).epsilon(1, 1e-5)[0] == safe_eps
    # Moments: unbiased, variance = the atoms' mean of g^2 (E N^2 + f(1 - f)) <= the worst-input value.
    n = 100_000
    centre = np.linspace(-1, 1, 10)
    error = noise.perturb(np.broadcast_to(centre, (n, 10)), np.random.default_rng(2)) - centre
    variance = noise.coordinate_variance()
    assert np.all(np.abs(error.mean(axis=0)) <= Z * np.sqrt(variance / n))
    # Lomax tail: the 4th moment is finite for k = 20; its kurtosis bounds the variance estimate's spread.
    kurtosis = 6 * (20 - 1) * (20 - 2) / ((20 - 3) * (20 - 4))  # E z^4 / (E z^2)^2 of the Lomax-Laplace
    assert np.all(np.abs(error.var(axis=0) / variance - 1) <= Z * math.sqrt((kurtosis - 1) / n))
    np.testing.assert_allclose(variance, continuous.coordinate_variance(), rtol=2e-3)
    # The calibration searches (k, theta) with the safe accountant.
    found = calibrate("plrvo", epsilon=2.0, dims=50, sample_rate=0.05, steps=10)
    assert found.sampler == "safe" and found.epsilon("joint")[0] <= 2.0
    assert found.event().sampler == "safe"


def test_mechanisms_listing_shows_the_gradient_noises_samplers():
    import json

    from typer.testing import CliRunner

    from ldpfed.cli.main import app

    result = CliRunner().invoke(app, ["mechanisms", "--gradient-noises", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert {name: row["sampler"] for name, row in rows.items()} == {
        "inid-gaussian": "safe",
        "inid-laplace": "safe",
        "plrvo": "safe",
        "r1smg": "continuous",
        "product-noise": "continuous",
    }


def test_safe_gaussian_float_slack_scales_with_delta_at_large_dimension():
    """Regression: the slack's multiplicative part (r2^d - 1) multiplies delta; bounded by 1 it made
    d = 10^4 refuse eps = 1, delta = 1e-5."""
    noise = InidGaussian(layer_profile([1.0], [10_000]), epsilon=1.0, delta=1e-5)
    assert noise.calibration_slack[1] < 1e-9 and noise.calibration_slack[0] < 1e-5

"""Gradient noises of gradient-noise.md: the spec's check values, exact optimality conditions,
sampler moments against closed forms (tolerances from the variance), and the claims' marking."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from ldpfed.accounting import (
    PlrvoDpEvent,
    PrivacyLedger,
    SelfComposedDpEvent,
    create_accountant,
    event_from_dict,
    event_to_dict,
)
from ldpfed.accounting import plrvo as plrvo_module
from ldpfed.accounting.plrvo import PlrvoStep, search_parameters
from ldpfed.gradient_noise import (
    GUARANTEE_FAILS,
    PLRVO,
    R1SMG,
    InidGaussian,
    InidLaplace,
    ProductNoise,
    calibrate,
    layer_profile,
    listing,
    optimal_eta,
)
from ldpfed.gradient_noise.inid_gaussian import h
from ldpfed.gradient_noise.product_noise import log_delta, search_k
from ldpfed.mechanisms.gaussian import analytic_sigma
from ldpfed.mechanisms.laplace import Laplace
from ldpfed.validation import LDPValueError

Z = 5.0  # z-score of the Monte Carlo checks
PROFILE = layer_profile([1.0, 0.5, 2.0], [7, 3, 20])


def assert_mean(samples, expected, variance, label=""):
    error = abs(float(np.mean(samples)) - expected)
    assert error <= Z * math.sqrt(variance / samples.size), f"{label}: mean {np.mean(samples)} vs {expected}"


# --- i.n.i.d. Gaussian ----------------------------------------------------------------------------
def test_eta_star_check_value_and_root():
    eta = optimal_eta(1.0, 1e-5)
    assert eta == pytest.approx(0.268051, abs=5e-7)
    assert h(eta, 1.0) <= 1e-5 < h(eta * (1 + 1e-9), 1.0)
    mp = mpmath.findroot(
        lambda e: mpmath.ncdf(e / 2 - 1 / e) - mpmath.e * mpmath.ncdf(-1 / e - e / 2) - mpmath.mpf("1e-5"), 0.27
    )
    assert eta == pytest.approx(float(mp), rel=1e-9)


def test_inid_gaussian_condition_holds_with_equality_and_mse():
    noise = InidGaussian(PROFILE, epsilon=0.7, delta=1e-6, sampler="continuous")
    assert noise.condition() == pytest.approx(noise.eta**2, rel=1e-12)
    assert noise.mse() == pytest.approx(np.sum(noise.scales**2), rel=1e-12)
    assert noise.mse() == pytest.approx(PROFILE.sum() ** 2 / noise.eta**2, rel=1e-12)
    # Any other feasible allocation costs more: s_i proportional to D_i (the condition met with equality).
    other = PROFILE * math.sqrt(PROFILE.size) / noise.eta
    assert np.sum((PROFILE / other) ** 2) == pytest.approx(noise.eta**2)
    assert np.sum(other**2) > noise.mse()


def test_inid_gaussian_uniform_profile_is_the_iid_analytic_gaussian():
    clip, dims = 0.8, 50
    noise = InidGaussian(layer_profile([clip], [dims]), epsilon=2.0, delta=1e-5, sampler="continuous")
    np.testing.assert_allclose(noise.scales, analytic_sigma(2.0, 1e-5, sensitivity=clip), rtol=1e-9)


def test_inid_gaussian_release_is_delta_private_at_eta_star_by_the_pld_library():
    """The whole release is a Gaussian of Mahalanobis shift eta*: dp_accounting's PLD of the
    Gaussian with noise multiplier 1/eta* gives delta(eps = 1) = 1e-5."""
    noise = InidGaussian(PROFILE, epsilon=1.0, delta=1e-5, sampler="continuous")
    pld = pld_lib.from_gaussian_mechanism(standard_deviation=noise.noise_multiplier, value_discretization_interval=1e-5)
    assert pld.get_delta_for_epsilon(1.0) == pytest.approx(1e-5, rel=2e-3)


def test_inid_gaussian_sampler_variance():
    noise = InidGaussian(PROFILE, epsilon=1.0, delta=1e-5, sampler="continuous")
    draws = noise.sample(20_000, np.random.default_rng(1))
    ratio = draws.var(axis=0) / noise.coordinate_variance()
    assert np.all(np.abs(ratio - 1) <= Z * math.sqrt(2 / 20_000)), ratio


# --- i.n.i.d. Laplace -----------------------------------------------------------------------------
def test_inid_laplace_condition_equality_mse_and_delta_variant():
    noise = InidLaplace(PROFILE, epsilon=1.5, sampler="continuous")
    assert noise.condition() == pytest.approx(1.5, rel=1e-12)
    assert noise.mse() == pytest.approx(np.sum(noise.coordinate_variance()), rel=1e-12)
    approximate = InidLaplace(PROFILE, epsilon=1.5, delta=0.01, sampler="continuous")
    assert approximate.condition() == pytest.approx(1.5 - math.log(0.99), rel=1e-12)


def test_inid_laplace_uniform_profile_is_the_iid_laplace():
    """D_i = 2 (a coordinate in [-1, 1]) on d coordinates: eps spread as eps/d per coordinate."""
    dims = 8
    noise = InidLaplace(np.full(dims, 2.0), epsilon=1.0, sampler="continuous")
    np.testing.assert_allclose(noise.scales, Laplace(epsilon=1.0 / dims).scale, rtol=1e-12)


def test_inid_laplace_density_ratio_is_at_most_eps():
    noise = InidLaplace(PROFILE, epsilon=1.0, sampler="continuous")
    rng = np.random.default_rng(2)
    y = noise.sample(1000, rng)
    shift = PROFILE * np.sign(rng.standard_normal(PROFILE.size))  # a worst-case neighbour
    log_ratio = np.sum((np.abs(y - shift) - np.abs(y)) / noise.scales, axis=1)
    assert np.max(log_ratio) <= 1.0 + 1e-12
    assert np.sum(PROFILE / noise.scales) == pytest.approx(1.0)  # attained far in the tails


# --- R1SMG and product noise ----------------------------------------------------------------------
@pytest.mark.parametrize(("dims", "expected"), [(10, 24.591526), (100, 1.331629)])
def test_r1smg_inverse_psi_check_values(dims, expected):
    assert R1SMG(dims, epsilon=1.0, delta=1e-5).inv_psi == pytest.approx(expected, abs=5e-7)


def test_r1smg_moments():
    noise = R1SMG(20, epsilon=1.0, delta=1e-5, sensitivity=0.5)
    draws = noise.sample(40_000, np.random.default_rng(3))
    squared = np.sum(draws**2, axis=1)  # = sigma* z^2: variance 2 sigma*^2
    assert_mean(squared, noise.sigma, 2 * noise.sigma**2, "E|n|^2")
    assert np.allclose(noise.coordinate_variance(), noise.sigma / 20)


def test_product_noise_check_values():
    noise = ProductNoise(10**6, epsilon=0.1, k=1000)
    assert noise.t == pytest.approx(428.899, abs=5e-4)
    assert noise.delta == pytest.approx(1.144e-6, abs=5e-10)


def test_product_noise_delta_against_scipy_at_moderate_arguments():
    from scipy.special import hyp1f1

    dims, eps, k = 40, 2.0, 50.0
    t = math.sqrt(2 * k ** (4 / dims) * (dims / 4 + 1.5) ** (1 + 4 / dims) / math.e ** (1 + 2 / dims))
    lam = eps / t
    x = lam**2 / 2
    delta = (
        math.exp(-x)
        / (k * math.sqrt(math.pi))
        * (hyp1f1(dims / 4 + 0.5, 0.5, x) + math.sqrt(2) * lam * hyp1f1(dims / 4 + 1, 1.5, x))
        * math.sqrt(dims - 1)
        / (math.sqrt(dims / 2 - 1.5) * math.sqrt(dims / 2 + 0.75))
    )
    assert math.exp(log_delta(k, dims, eps)) == pytest.approx(delta, rel=1e-10)


def test_product_noise_searched_k_is_the_smallest_meeting_delta():
    k = search_k(1000, 1.0, 1e-5)
    assert log_delta(k, 1000, 1.0) <= math.log(1e-5) < log_delta(k * (1 - 1e-6), 1000, 1.0)
    noise = ProductNoise(1000, epsilon=1.0, delta=1e-5)
    assert noise.k == k and noise.k_searched and noise.delta <= 1e-5


def test_product_noise_moments():
    noise = ProductNoise(30, epsilon=1.0, k=10.0, sensitivity=2.0)
    draws = noise.sample(40_000, np.random.default_rng(4))
    norms = np.linalg.norm(draws, axis=1)  # sigma_M |N(0,1)|
    s = noise.sigma_m
    assert_mean(norms, s * math.sqrt(2 / math.pi), s**2 * (1 - 2 / math.pi), "E|n|")
    assert_mean(norms**2, s**2, 2 * s**4, "E|n|^2")


@pytest.mark.parametrize("noise", [R1SMG(10, epsilon=1.0, delta=1e-5), ProductNoise(10, epsilon=1.0, k=5.0)])
def test_failing_claims_are_marked_and_never_private(noise):
    record = noise.describe()
    assert record["guarantee_holds"] is False and GUARANTEE_FAILS in record["warning"]
    assert [row["status"] for row in listing() if row["name"] == noise.name] == [GUARANTEE_FAILS]
    ledger = PrivacyLedger()
    ledger.record_event("c", 0, noise.event())
    for name in ("basic", "pld", "rdp"):
        spent = ledger.spent("c", name)
        assert spent.private is False and spent.epsilon is None
    assert GUARANTEE_FAILS in ledger.reasons()[0]


# --- PLRV-O ---------------------------------------------------------------------------------------
def test_plrvo_sampler_moments_and_tail():
    k, theta = 6.0, 2.0
    noise = PLRVO(1, k=k, theta=theta)
    z = noise.sample(200_000, np.random.default_rng(5)).ravel()
    mean_abs = 1 / ((k - 1) * theta)
    second = 2 / ((k - 1) * (k - 2) * theta**2)
    fourth = 24 / ((k - 1) * (k - 2) * (k - 3) * (k - 4) * theta**4)
    assert noise.mean_abs() == pytest.approx(mean_abs)
    assert_mean(np.abs(z), mean_abs, second - mean_abs**2, "E|z|")
    assert_mean(z**2, second, fourth - second**2, "E z^2")
    assert_mean(z, 0.0, second, "E z")
    s = 0.3
    tail = (1 + theta * s) ** (-k)
    assert_mean((np.abs(z) > s).astype(float), tail, tail * (1 - tail), "P(|z| > s)")


def test_plrvo_one_step_sampler_matches_the_gamma_laplace_mixture():
    k, theta, n = 4.0, 0.5, 50_000
    rng = np.random.default_rng(6)
    one_step = PLRVO(1, k=k, theta=theta).sample(n, rng).ravel()
    two_step = rng.laplace(0.0, 1.0 / rng.gamma(k, theta, n))
    assert stats.ks_2samp(one_step, two_step).pvalue > 1e-4


def test_plrvo_paper_accountant_check_value():
    eps, _ = PlrvoStep(30000, 5e-5, 0.1, 26010, 0.01).epsilon(300, 1e-5, "paper")
    assert eps == pytest.approx(0.1718, abs=1e-3)


def _mp_alpha(k, theta, clip, params, q, lam, accountant):
    """alpha_step at order lam straight from the spec's formula, in mpmath (40 digits)."""
    with mpmath.workdps(40):
        k, theta, clip, q = (mpmath.mpf(v) for v in (k, theta, clip, q))
        xs = [clip * (mpmath.sqrt(i) - mpmath.sqrt(i - 1)) for i in range(1, params + 1)]

        def g(x, eta):
            return eta / mpmath.mpf(2 * eta - 1) * (1 - theta * (eta - 1) * x) ** (-k) + (eta - 1) / mpmath.mpf(
                2 * eta - 1
            ) * (1 + theta * eta * x) ** (-k)

        w = [mpmath.binomial(lam + 1, eta) * (1 - q) ** (lam + 1 - eta) * q**eta for eta in range(lam + 2)]
        if accountant == "joint":
            return float(mpmath.log(mpmath.fsum(w[e] * mpmath.fprod(g(x, e) for x in xs) for e in range(lam + 2))))
        return float(mpmath.fsum(mpmath.log(mpmath.fsum(w[e] * g(x, e) for e in range(lam + 2))) for x in xs))


@pytest.mark.parametrize("accountant", ["joint", "paper"])
def test_plrvo_accountants_against_mpmath(accountant):
    k, theta, clip, params, q = 40.0, 0.05, 1.0, 5, 0.1
    lams, alphas = PlrvoStep(k, theta, clip, params, q).alphas(accountant, orders=(1, 2, 5, 12))
    for lam, alpha in zip(lams, alphas):
        assert alpha == pytest.approx(_mp_alpha(k, theta, clip, params, q, int(lam), accountant), rel=1e-9)


def test_plrvo_joint_accountant_is_never_below_the_paper_one_and_feeds_the_rdp_ledger():
    step = PlrvoStep(20.0, 0.05, 1.0, 200, 0.05)
    joint, _ = step.epsilon(50, 1e-5, "joint")
    paper, _ = step.epsilon(50, 1e-5, "paper")
    assert joint > paper
    event = PlrvoDpEvent(20.0, 0.05, 1.0, 200, 0.05)
    assert event_from_dict(event_to_dict(event)) == event
    spent = create_accountant("rdp").compose(SelfComposedDpEvent(event, 50)).spent(1e-5)
    assert spent.private and spent.epsilon >= joint - 1e-12
    assert spent.epsilon == pytest.approx(joint, rel=0.05)  # dp_accounting's coarser order grid


def test_plrvo_parameter_search_meets_the_target_at_its_edge():
    target, clip, params, q, steps = 2.0, 1.0, 100, 0.05, 20
    found = search_parameters(target, clip, params, q, steps, 1e-5, ks=[50.0, 500.0])
    assert found.epsilon <= target
    assert plrvo_module.inverse_scale_tail(found.k, found.theta) <= 1e-3
    assert (found.k - 1) * found.theta >= 0.1
    over, _ = PlrvoStep(found.k, found.theta * 1.001, clip, params, q).epsilon(steps, 1e-5)
    assert over > target
    noise = calibrate("plrvo", epsilon=target, dims=params, clip=clip, sample_rate=q, steps=steps)
    assert noise.epsilon("joint")[0] <= target


def test_perturb_shapes_and_bad_input():
    noise = calibrate("inid-gaussian", epsilon=1.0, delta=1e-5, dims=30)
    rng = np.random.default_rng(7)
    assert noise.perturb(np.zeros(30), rng).shape == (30,)
    assert noise.perturb(np.zeros((4, 30)), rng).shape == (4, 30)
    with pytest.raises(LDPValueError):
        noise.perturb(np.zeros(29), rng)
    with pytest.raises(LDPValueError):
        noise.perturb(np.full(30, np.nan), rng)
    with pytest.raises(LDPValueError):
        calibrate("nope", epsilon=1.0)
    with pytest.raises(LDPValueError):
        calibrate("r1smg", epsilon=1.0, delta=1e-5, dims=2)


# --- a client's privatizer ------------------------------------------------------------------------
def test_noise_privatizer_clips_each_layer_and_calibrates_for_the_local_sensitivity():
    from ldpfed.training.noise_privatizer import NoisePrivatizer

    privatizer = NoisePrivatizer(
        "inid-gaussian",
        epsilon=1.0,
        delta=1e-5,
        dims=10,
        layer_sizes=[4, 6],
        layer_clips=[1.0, 0.5],
        sampler="continuous",
    )
    rng = np.random.default_rng(8)
    updates = rng.standard_normal((5, 10)) * 3
    clipped = privatizer.clip_only(updates)
    assert np.allclose(np.linalg.norm(clipped[:, :4], axis=1), 1.0)
    assert np.allclose(np.linalg.norm(clipped[:, 4:], axis=1), 0.5)
    small = updates * 1e-3  # inside both balls: unchanged
    assert np.array_equal(privatizer.clip_only(small), small)
    # Any two clipped updates are neighbours: Mahalanobis diameter eta* (sensitivity 2 C_l).
    scales = np.sqrt(privatizer.noise(10).coordinate_variance())
    diameter = np.concatenate([np.full(4, 2.0 / 2.0), np.full(6, 1.0 / 6**0.5)])
    assert np.sum((diameter / scales) ** 2) == pytest.approx(optimal_eta(1.0, 1e-5) ** 2)
    single = NoisePrivatizer("inid-gaussian", epsilon=1.0, delta=1e-5, dims=10, clip=0.5, sampler="continuous")
    assert np.allclose(np.sqrt(single.noise(10).coordinate_variance()), analytic_sigma(1.0, 1e-5, sensitivity=1.0))
    assert privatizer.privatize(updates, rng).shape == (5, 10)
    failing = NoisePrivatizer("r1smg", epsilon=1.0, delta=1e-5, dims=10)
    assert not failing.private and failing.event(10).reason.startswith("r1smg")


def test_a_privatizer_reads_whether_its_noise_is_private_from_the_noise_class(monkeypatch):
    """`private` and the round's event both follow `guarantee_holds`, the one place a noise says
    its published guarantee fails: a sound noise marked failing is not private in either."""
    from ldpfed.training.noise_privatizer import NoisePrivatizer

    assert NoisePrivatizer("inid-gaussian", epsilon=1.0, delta=1e-5, dims=10).private
    monkeypatch.setattr(InidGaussian, "guarantee_holds", False)
    marked = NoisePrivatizer("inid-gaussian", epsilon=1.0, delta=1e-5, dims=10)
    assert not marked.private
    assert not create_accountant("basic").compose(marked.event(10)).spent(1e-5).private

"""Scalar randomizers: exact bias/variance/third moment against Monte Carlo, the spec's check
values, numerical robustness at extreme budgets, and bad input (mechanisms.md)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import ldpfed.mechanisms as mech
from ldpfed.mechanisms.hybrid import EPSILON_STAR
from ldpfed.validation import LDPValueError

DELTA = 1e-5
# (name, options): every randomizer, both SW estimators, both Gaussian calibrations.
CONFIGS = mech.variants()
T_VALUES = np.array([-1.0, -0.3, 0.0, 0.7, 1.0])


def make(name, epsilon, **options):
    delta = DELTA if mech.get_class(name).approximate else None
    return mech.get(name, epsilon, delta=delta, **options)


def config_id(config):
    name, options = config
    return name + "".join(f"-{v}" for v in options.values())


def mc_cases():
    for config in CONFIGS:
        for epsilon in (0.5, 1.0, 4.0, 10.0):
            # (Above ~10, PM's variance comes from tail events of probability e^(-eps/2): too rare
            # for a sample-based standard error at this n; large eps is covered analytically below.)
            if config[1].get("calibration") == "classic" and epsilon >= 1:
                continue  # classic calibration is valid only for eps < 1
            yield pytest.param(config, epsilon, id=f"{config_id(config)}-eps{epsilon:g}")
    # SW keeps ~1/eps of its mass on the background, so Monte Carlo still resolves it at eps = 16,
    # where the samplers switch to the plateau-anchored inverse CDF (base.plateau_quantile).
    for config in CONFIGS[2:4]:
        yield pytest.param(config, 16.0, id=f"{config_id(config)}-eps16")
    # The continuous samplers (sampler="continuous", NOT floating-point safe) keep their formulas.
    for name, options in CONFIGS:
        if options.get("calibration") == "classic":
            continue
        for epsilon in (1.0, 4.0):
            config = (name, {**options, "sampler": "continuous"})
            yield pytest.param(config, epsilon, id=f"{config_id(config)}-eps{epsilon:g}")


# --- Monte Carlo against the exact statistics ---------------------------------------------------
@pytest.mark.parametrize(("config", "epsilon"), list(mc_cases()))
def test_bias_variance_and_third_moment_match_monte_carlo(config, epsilon):
    name, options = config
    mechanism = make(name, epsilon, **options)
    n = 40_000
    seed = [zlib.crc32(config_id(config).encode()), int(epsilon * 1000)]
    rng = np.random.default_rng(seed)
    reports = mechanism.perturb(np.repeat(T_VALUES[:, None], n, axis=1), rng)  # shape (5, n)

    expected_mean = T_VALUES + mechanism.bias(T_VALUES)
    expected_var = mechanism.variance(T_VALUES)
    expected_rho = mechanism.third_abs_central_moment(T_VALUES)

    # Each statistic is a mean of n iid terms around the exact mean; it must lie within 5 of its
    # standard errors (estimated from the same samples) of the exact value. (A tiny relative slack
    # covers degenerate cases such as Duchi at t = 0, where (t* - t)^2 = B^2 exactly.)
    deviation = reports - expected_mean[:, None]
    for terms, expected in (
        (deviation, np.zeros_like(expected_mean)),
        (deviation**2, expected_var),
        (np.abs(deviation) ** 3, expected_rho),
    ):
        estimate = terms.mean(axis=1)
        standard_error = terms.std(axis=1, ddof=1) / math.sqrt(n)
        slack = 1e-12 * (np.abs(expected) + expected_var)
        assert np.all(np.abs(estimate - expected) <= 5 * standard_error + slack), (
            estimate,
            expected,
            standard_error,
        )


def test_monte_carlo_test_can_fail_the_thesis_printed_pm_variance():
    """The PM erratum: the thesis' printed V(t) is rejected by the same Monte Carlo check."""
    epsilon, t, n = 1.0, 0.7, 40_000
    z = math.exp(epsilon / 2)
    printed = t / (z - 1) + math.exp(epsilon / 2 + 3) / (3 * (z - 1) ** 2)
    pm = make("piecewise", epsilon)
    squares = (pm.perturb(np.full(n, t), np.random.default_rng(7)) - t) ** 2
    standard_error = squares.std(ddof=1) / math.sqrt(n)
    assert abs(squares.mean() - printed) > 5 * standard_error
    assert abs(squares.mean() - float(pm.variance(t))) <= 5 * standard_error


# --- the spec's public check values (e = 1) ------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "options", "at_zero", "at_one"),
    [
        ("laplace", {}, 8.0, 8.0),
        ("piecewise", {}, 3.6821, 5.2236),
        ("duchi", {}, 4.6827, 3.6827),
        ("hybrid", {}, 4.2890, 4.2890),
        ("square-wave", {"estimator": "debiased"}, 3.7978, 5.5161),
    ],
)
def test_public_check_values(name, options, at_zero, at_one):
    """The spec's values are for the real-number mechanisms (sampler="continuous"); the safe
    samplers' exact variances differ by their grid terms: < 0.15% at eps = 1 (Laplace's noise is
    calibrated for 2J + 2 grid steps, J = 2048: (1 + 1/J)^2)."""
    mechanism = make(name, 1.0, sampler="continuous", **options)
    assert round(float(mechanism.variance(0.0)), 4) == at_zero
    assert round(float(mechanism.variance(1.0)), 4) == at_one
    assert round(float(mechanism.variance(-1.0)), 4) == at_one
    safe = make(name, 1.0, **options)
    for t, value in ((0.0, at_zero), (1.0, at_one), (-1.0, at_one)):
        assert float(safe.variance(t)) == pytest.approx(value, rel=1.5e-3)


def test_square_wave_half_width_check_value():
    assert round(mech.get("square-wave", 1.0).half_width, 5) == 0.25608


# --- the overflow-free forms agree with the spec's direct formulas where those are finite --------
@pytest.mark.parametrize("epsilon", [0.01, 0.3, 1.0, 3.0, 10.0, 30.0])
def test_stable_forms_match_the_spec_formulas(epsilon):
    e, big = epsilon, math.exp(epsilon)
    # Piecewise: V(t) = t^2/(z-1) + (z+3)/(3(z-1)^2), output bound C = (z+1)/(z-1)
    z = math.exp(e / 2)
    pm = mech.get("piecewise", e, sampler="continuous")
    assert pm.variance_coefficients[2] == pytest.approx(1 / (z - 1), rel=1e-9)
    assert pm.variance_coefficients[0] == pytest.approx((z + 3) / (3 * (z - 1) ** 2), rel=1e-9)
    assert pm.output_bound == pytest.approx((z + 1) / (z - 1), rel=1e-12)
    # Square wave: b_w, and the debiased variance from the spec's moments at v = 0.3
    sw = mech.get("square-wave", e, estimator="debiased", sampler="continuous")
    b = (e * big - big + 1) / (2 * big * (big - 1 - e))
    assert sw.half_width == pytest.approx(b, rel=1e-6 if e < 0.1 else 1e-12)
    p, q, v = big / (2 * b * big + 1), 1 / (2 * b * big + 1), 0.3
    mean_y = q * (1 + 2 * b) / 2 + 2 * b * (p - q) * v
    second_y = q * ((1 + b) ** 3 + b**3) / 3 + (p - q) * (6 * b * v * v + 2 * b**3) / 3
    direct = 4 * (second_y - mean_y**2) / (2 * b * (p - q)) ** 2
    assert float(sw.variance(2 * v - 1)) == pytest.approx(direct, rel=1e-6 if e < 0.1 else 1e-9)
    raw = mech.get("square-wave", e, estimator="raw", sampler="continuous")
    assert float(raw.bias(2 * v - 1)) == pytest.approx(2 * (mean_y - v), rel=1e-9, abs=1e-12)
    # Duchi: B = (e^e+1)/(e^e-1)
    assert mech.get("duchi", e, sampler="continuous").output_bound == pytest.approx((big + 1) / (big - 1), rel=1e-12)


def test_symmetries_of_the_exact_statistics():
    for epsilon in (0.1, 1.0, 7.0):
        for estimator in ("raw", "debiased"):
            sw = mech.get("square-wave", epsilon, estimator=estimator)
            assert abs(sw.bias_coefficients[0]) < 1e-12  # b(t) is odd in t
            assert abs(sw.variance_coefficients[1]) < 1e-12 * sw.variance_coefficients[0]  # V is even
        assert mech.get("square-wave", epsilon, estimator="debiased").unbiased
        assert not mech.get("square-wave", epsilon, estimator="raw").unbiased


@pytest.mark.parametrize("epsilon", [EPSILON_STAR + 1e-6, 0.7, 1.0, 3.0, 50.0])
def test_hybrid_variance_does_not_depend_on_t_above_e_star(epsilon):
    for sampler in ("safe", "continuous"):
        hybrid = mech.get("hybrid", epsilon, sampler=sampler)
        variance = hybrid.variance(np.linspace(-1, 1, 11))
        # (safe: alpha is a ratio of integers below 2^53, so the t^2 term cancels to 2^-53)
        assert np.ptp(variance) <= 1e-12 * variance.max() + 2.0**-53


@pytest.mark.parametrize("epsilon", [0.05, 0.3, EPSILON_STAR])
def test_hybrid_is_duchi_up_to_e_star(epsilon):
    hybrid, duchi = mech.get("hybrid", epsilon), mech.get("duchi", epsilon)
    assert hybrid.alpha == 0.0
    assert hybrid.variance_coefficients == duchi.variance_coefficients
    t = np.linspace(-1, 1, 1000)
    reports = hybrid.perturb(t, np.random.default_rng(1))
    assert set(np.unique(reports)) <= {-duchi.output_bound, duchi.output_bound}


def test_hybrid_e_star_value():
    assert EPSILON_STAR == pytest.approx(0.6094, abs=5e-5)


# --- extreme budgets: finite parameters, statistics and reports ----------------------------------
EXTREME_CASES = [
    pytest.param(config, epsilon, id=f"{config_id(config)}-eps{epsilon:g}")
    for config in CONFIGS
    for epsilon in (1e-3, 0.05, 100.0, 1000.0, 5000.0)
    if not (config[1].get("calibration") == "classic" and epsilon >= 1)  # tested to raise
    and epsilon >= mech.get_class(config[0]).epsilon_range[0]  # gaussian starts at 1e-2
]


@pytest.mark.parametrize(("config", "epsilon"), EXTREME_CASES)
def test_extreme_budgets_stay_finite(config, epsilon):
    name, options = config
    mechanism = make(name, epsilon, **options)
    coefficients = (*mechanism.bias_coefficients, *mechanism.variance_coefficients)
    assert all(math.isfinite(c) for c in coefficients), coefficients
    t = np.linspace(-1, 1, 2001)
    assert np.all(mechanism.variance(t) >= 0)
    assert np.all(np.isfinite(mechanism.third_abs_central_moment(t)))
    reports = mechanism.perturb(np.tile(t, 20), np.random.default_rng(3))
    assert np.all(np.isfinite(reports))
    if mechanism.bounded:
        assert np.all(np.abs(reports) <= mechanism.output_bound * (1 + 1e-12))


def test_large_budget_limits():
    t = np.linspace(-1, 1, 101)
    rng = np.random.default_rng(5)
    # PM and Hybrid concentrate on t; SW keeps ~1/eps of its mass on the uniform background.
    assert np.allclose(mech.get("piecewise", 5000, sampler="continuous").perturb(t, rng), t, atol=1e-12)
    assert np.allclose(mech.get("hybrid", 5000, sampler="continuous").perturb(t, rng), t, atol=1e-12)
    # The safe samplers: the input rounded to the grid (within 2 steps of 2^-16), eps' capped at
    # ln(2^53 - 1) for the integer weights (Duchi: b' = 2^-53).
    for name in ("piecewise", "hybrid", "square-wave"):
        safe = mech.get(name, 5000)
        assert np.all(np.abs(safe.perturb(t, rng) - t) <= 2.0**-15)
        assert 36.0 < safe.exact_epsilon <= math.log(2.0**53)
    # SW: b_w underflows to 0 and q = 1/(1 + rho) with rho = eps - 1 + e^-eps -> 4999, so y is v
    # with probability 1 - q and U[0, 1] otherwise; kappa = 1 - q. Independently derived:
    # Var(y) = q [(1 - q)(v^2 - v) + 1/3 - q/4], debiased V = 4 Var(y) / kappa^2.
    sw = mech.get("square-wave", 5000, estimator="debiased", sampler="continuous")
    q, v = 1 / 5000, (t + 1) / 2
    var_y = q * ((1 - q) * (v * v - v) + 1 / 3 - q / 4)
    assert np.allclose(sw.variance(t), 4 * var_y / (1 - q) ** 2, rtol=1e-9)
    assert np.allclose(mech.get("square-wave", 5000, sampler="continuous").variance(t), 4 * var_y, rtol=1e-9)


# --- registry and bad input ----------------------------------------------------------------------
def test_registry_order_and_lookup():
    assert mech.available() == ["laplace", "piecewise", "square-wave", "duchi", "hybrid", "gaussian"]
    assert isinstance(mech.get("Square_Wave", 1.0), mech.get_class("square-wave"))
    assert mech.get("square-wave", 1.0).describe()["options"] == {"estimator": "raw"}
    assert mech.get("square-wave", 1.0, sampler="continuous").describe()["options"] == {
        "sampler": "continuous",
        "estimator": "raw",
    }
    gaussian = mech.get("gaussian", 1.0, delta=1e-5)
    assert gaussian.describe()["options"] == {"calibration": "analytic"}
    assert gaussian.describe()["floating_point_safe"] and "NOT floating-point safe" not in gaussian.guarantee
    assert "(1, 1e-05)" in gaussian.guarantee and gaussian.approximate
    continuous = mech.get("gaussian", 1.0, delta=1e-5, sampler="continuous")
    assert not continuous.describe()["floating_point_safe"] and "NOT floating-point safe" in continuous.guarantee
    for name in ("piecewise", "square-wave", "duchi", "hybrid"):
        described = mech.get(name, 1.0).describe()
        assert described["bounded"] and described["privacy"] == "pure eps"


@pytest.mark.parametrize("name", ["laplace", "piecewise", "square-wave", "duchi", "hybrid", "gaussian"])
@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan"), float("inf"), "abc", None])
def test_bad_epsilon_raises(name, epsilon):
    delta = DELTA if name == "gaussian" else None
    with pytest.raises(LDPValueError, match="epsilon"):
        mech.get(name, epsilon, delta=delta)


@pytest.mark.parametrize("name", ["laplace", "piecewise", "square-wave", "duchi", "hybrid"])
def test_delta_given_to_pure_mechanism_raises(name):
    with pytest.raises(LDPValueError, match="delta"):
        mech.get(name, 1.0, delta=1e-5)


@pytest.mark.parametrize("delta", [None, 0.0, 1.0, -0.1, 1.5, float("nan"), "x"])
def test_gaussian_bad_delta_raises(delta):
    with pytest.raises(LDPValueError, match="delta"):
        mech.get("gaussian", 1.0, delta=delta)


def test_unknown_name_option_and_option_values_raise():
    with pytest.raises(LDPValueError, match="unknown mechanism"):
        mech.get("exponential", 1.0)
    with pytest.raises(LDPValueError, match="estimator"):
        mech.get("piecewise", 1.0, estimator="raw")
    with pytest.raises(LDPValueError, match="estimator must be one of"):
        mech.get("square-wave", 1.0, estimator="em")
    with pytest.raises(LDPValueError, match="calibration must be one of"):
        mech.get("gaussian", 0.5, delta=DELTA, calibration="rdp")
    with pytest.raises(LDPValueError, match="epsilon < 1"):
        mech.get("gaussian", 1.0, delta=DELTA, calibration="classic")


@pytest.mark.parametrize("config", CONFIGS[:-1], ids=config_id)
def test_bad_values_raise_or_clip_explicitly(config):
    name, options = config
    mechanism = make(name, 0.5 if options.get("calibration") == "classic" else 1.0, **options)
    rng = np.random.default_rng(0)
    for bad in ([0.0, float("nan")], [float("inf")], [-float("inf"), 0.5]):
        with pytest.raises(LDPValueError, match="NaN or inf"):
            mechanism.perturb(bad, rng)
        with pytest.raises(LDPValueError, match="NaN or inf"):
            mechanism.perturb(bad, rng, out_of_domain="clip")
    with pytest.raises(LDPValueError, match=r"\[-1.0, 1.0\]"):
        mechanism.perturb([0.2, 1.5], rng)
    with pytest.raises(LDPValueError, match="out_of_domain"):
        mechanism.perturb([0.2], rng, out_of_domain="ignore")
    with pytest.raises(TypeError, match="Generator"):
        mechanism.perturb([0.2], np.random.RandomState(0))
    with pytest.raises(TypeError, match="Generator"):
        mechanism.perturb([0.2], 0)
    # Clipping is explicit and equals perturbing the clipped values with the same stream.
    clipped = mechanism.perturb([-3.0, 0.2, 1.5], np.random.default_rng(9), out_of_domain="clip")
    expected = mechanism.perturb([-1.0, 0.2, 1.0], np.random.default_rng(9))
    assert np.array_equal(clipped, expected)


@pytest.mark.parametrize("config", CONFIGS[:-1], ids=config_id)
def test_perturb_keeps_shape_and_is_reproducible(config):
    name, options = config
    mechanism = make(name, 1.0, **options)
    values = np.random.default_rng(2).uniform(-1, 1, size=(3, 7, 5000))  # > one sampling block
    first = mechanism.perturb(values, np.random.default_rng(11))
    assert first.shape == values.shape and first.dtype == np.float64
    assert np.array_equal(first, mechanism.perturb(values, np.random.default_rng(11)))
    assert mechanism.perturb(0.25, np.random.default_rng(1)).shape == ()
    assert mechanism.perturb([], np.random.default_rng(1)).shape == (0,)
    # The input is never modified in place.
    assert np.array_equal(values, np.random.default_rng(2).uniform(-1, 1, size=(3, 7, 5000)))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1.0 + 1e-9])
@pytest.mark.parametrize("position", [0, 300_001, 699_999])
def test_bad_value_anywhere_in_a_large_array_is_found(bad, position):
    """Validation reduces large arrays block by block; a bad value in any block must be found."""
    values = np.zeros(700_000)
    values[position] = bad
    with pytest.raises(LDPValueError, match="NaN or inf" if not math.isfinite(bad) else r"\[-1.0, 1.0\]"):
        mech.get("duchi", 1.0).perturb(values, np.random.default_rng(0))


def test_variants_cover_every_mechanism_and_option_value():
    """The parametrized tests above run over `variants()`: it must not drop a mechanism or an option value."""
    assert sorted({name for name, _ in CONFIGS}) == sorted(mech.available())
    assert ("square-wave", {"estimator": "debiased"}) in CONFIGS
    assert ("gaussian", {"calibration": "classic"}) in CONFIGS
    assert len(CONFIGS) == 8

"""Floating-point safety of the default samplers (mechanisms.md, Floating-point safety),
moments against a high-precision reference up to eps = 1000, and the budget
ranges.

The audits here look at the floats actually emitted, not at the analytic densities: that is what
the density-ratio tests missed.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import ldpfed.mechanisms as mech
from ldpfed.frequency import oracles
from ldpfed.validation import LDPValueError

PURE = [(name, options) for name, options in mech.variants() if not mech.get_class(name).approximate]


def config_id(config):
    name, options = config
    return name + "".join(f"-{v}" for v in options.values())


# --- an exact producibility oracle for numpy's Laplace ---------------------------------------------
def numpy_laplace_noise(k: np.ndarray, scale: float) -> np.ndarray:
    """numpy's Generator.laplace(0, scale) for the uniform U = k / 2^53 (distributions.c:
    U >= 0.5: -scale log(2 - U - U); 0 < U < 0.5: scale log(U + U)), with the C library's log
    as numpy's C code calls it (math.log), not numpy's SIMD np.log, which differs from it in the
    last bit of some values where numpy dispatches AVX-512 kernels."""
    u = k / 2.0**53
    argument = np.where(u >= 0.5, 2.0 - u - u, np.where(u > 0, u + u, 1.0))
    log = np.fromiter(map(math.log, argument.ravel().tolist()), dtype=float, count=argument.size).reshape(u.shape)
    return np.where(u >= 0.5, 0.0 - scale * log, 0.0 + scale * log)


def producible_by_numpy_laplace(y: np.ndarray, t: float, scale: float) -> np.ndarray:
    """Whether each float y equals t + numpy's Laplace noise for some 53-bit uniform: invert the
    noise's formula and test the neighbouring k exactly (the formula is monotone in k)."""
    z = y - t
    u = np.where(z >= 0, 1.0 - np.exp(-z / scale) / 2.0, np.exp(z / scale) / 2.0)
    centre = np.round(u * 2.0**53)
    found = np.zeros(y.shape, dtype=bool)
    for offset in range(-64, 65):
        k = np.clip(centre + offset, 1, 2.0**53 - 1)
        found |= (t + numpy_laplace_noise(k, scale)) == y
    return found


@pytest.mark.float_portable
def test_the_oracle_exposes_the_continuous_laplace_sampler():
    """sampler="continuous" is what ldpfed's Laplace was: most reports of t = 0.5 are floats that
    t = 0 can never produce (the spec measured 81.5% at eps = 1). The oracle also accepts what t = 0
    itself emits, so it is exact, not merely suspicious."""
    laplace = mech.get("laplace", 1.0, sampler="continuous")
    rng = np.random.default_rng(0)
    from_zero = laplace.perturb(np.zeros(2000), rng)
    assert producible_by_numpy_laplace(from_zero, 0.0, laplace.scale).all()
    from_half = laplace.perturb(np.full(20_000, 0.5), rng)
    share = 1.0 - producible_by_numpy_laplace(from_half, 0.0, laplace.scale).mean()
    assert share > 0.7


def test_default_laplace_reports_of_half_are_all_producible_from_zero():
    """Fails on the old sampler (share ~0.8): the default now emits multiples of 1/J only, every one
    of which t = 0 produces with positive probability (its noise has full support on the grid)."""
    laplace = mech.get("laplace", 1.0)
    reports = laplace.perturb(np.full(20_000, 0.5), np.random.default_rng(1))
    safe = getattr(laplace, "safe_sampler", None)
    if safe is None:  # the old continuous default: decide with the exact numpy oracle
        unproducible = ~producible_by_numpy_laplace(reports, 0.0, laplace.scale)
    else:  # a fixed grid: y J must be an integer, and t = 0 gives it positive mass
        grid = reports * safe.grid_steps
        unproducible = (grid != np.rint(grid)) | ~np.isfinite(laplace.log_density(reports, 0.0))
    assert unproducible.mean() == 0.0


@pytest.mark.parametrize("config", PURE, ids=config_id)
def test_default_samplers_emit_a_set_of_floats_that_does_not_depend_on_the_input(config):
    """Sampler-agnostic empirical audit at eps = 1: the floats emitted for t = 0.5 must (almost)
    all be floats that t = 0 emitted too. A continuous sampler fails at ~100% (floats never repeat);
    a grid sampler leaves only outputs too rare to be seen in 2e6 draws: ~2% for Hybrid, whose
    background points carry alpha B / T ~ 1.1e-6 each (e^-2.3 of them unseen), less for the others."""
    name, options = config
    mechanism = mech.get(name, 1.0, **options)
    rng = np.random.default_rng(2)
    seen = np.unique(mechanism.perturb(np.zeros(2_000_000), rng))
    reports = mechanism.perturb(np.full(20_000, 0.5), rng)
    unseen = ~np.isin(reports, seen)
    assert unseen.mean() < 0.05
    continuous = mech.get(name, 1.0, sampler="continuous", **options)
    if name != "duchi":  # Duchi's two outputs are a fixed set even in the textbook sampler
        seen = np.unique(continuous.perturb(np.zeros(200_000), rng))
        share = (~np.isin(continuous.perturb(np.full(20_000, 0.5), rng), seen)).mean()
        assert share > 0.9 * (continuous.alpha if name == "hybrid" else 1.0)  # Hybrid: its PM part


@pytest.mark.parametrize("config", PURE, ids=config_id)
@pytest.mark.parametrize("epsilon", [0.5, 4.0, 40.0])
def test_safe_reports_lie_on_the_declared_output_set(config, epsilon):
    """Every report, from any input, is index * step (or an atom) with positive mass from EVERY
    input: the support does not depend on t."""
    name, options = config
    mechanism = mech.get(name, epsilon, **options)
    assert mechanism.describe()["floating_point_safe"]
    rng = np.random.default_rng(3)
    reports = mechanism.perturb(np.repeat([-1.0, -0.37, 0.0, 0.81, 1.0], 4000), rng)
    for t in (-1.0, 0.0, 1.0):
        assert np.isfinite(mechanism.log_density(reports, t)).all()


# --- Bernoulli decisions: probabilities that a 53-bit uniform resolves exactly ------------------
@pytest.mark.parametrize("epsilon", [0.5, 5.0, 40.0, 700.0])
@pytest.mark.parametrize("k", [2, 7])
def test_grr_and_oue_probabilities_are_what_is_sampled_and_keep_the_ratio(epsilon, k):
    """Fails on the old code at eps = 40: p = e^eps/(e^eps + k - 1) rounds to 1.0, so the float
    comparison never reports another category (an infinite ratio), and q is not a multiple of
    2^-53, so the estimator used a probability the sampler does not realize."""
    bound = mpmath.e ** mpmath.mpf(epsilon)
    grr = oracles.get("grr", epsilon, k)
    move = (1 - grr.p) * 2**53
    assert move == int(move) and move >= 1  # P(other) = 1 - p is a positive multiple of 2^-53
    assert grr.q * (k - 1) == pytest.approx(1 - grr.p, rel=1e-15)
    assert mpmath.mpf(grr.p) / mpmath.mpf(grr.q) <= bound
    oue = oracles.get("oue", epsilon, k)
    assert oue.q * 2**53 == int(oue.q * 2**53) and oue.q > 0
    assert (1 - mpmath.mpf(oue.q)) / mpmath.mpf(oue.q) <= bound  # p = 1/2
    assert oue.p == 0.5


def test_grr_sampler_realizes_its_probability():
    """The report keeps the category exactly when u >= move: frequencies match p (binomial)."""
    grr = oracles.get("grr", 1.0, 4)
    reports = grr.perturb(np.zeros(200_000, dtype=int), np.random.default_rng(4))
    kept = np.mean(reports == 0)
    assert abs(kept - grr.p) < 5 * math.sqrt(grr.p * (1 - grr.p) / 200_000)


@pytest.mark.parametrize("epsilon", [0.5, 5.0, 40.0, 1000.0])
def test_duchi_threshold_stays_inside_its_dyadic_bounds(epsilon):
    """The safe Duchi's threshold is b' at t = -1 and 1 - b' at t = 1 exactly (b' a positive multiple
    of 2^-53), and monotone, so every realized P(+B | t) is in [b', 1 - b'] and the ratio holds."""
    duchi = mech.get("duchi", epsilon).safe_sampler
    flip = duchi.flip
    assert flip * 2**53 == int(flip * 2**53) and flip > 0
    t = np.linspace(-1, 1, 100_001)
    threshold = duchi.probability_plus(t)
    assert threshold[0] == flip and threshold[-1] == 1.0 - flip
    assert np.all(np.diff(threshold) >= 0)
    assert (1 - mpmath.mpf(flip)) / mpmath.mpf(flip) <= mpmath.e ** mpmath.mpf(epsilon)


# --- moments against a high-precision reference --------------------------------
mpmath.mp.dps = 50
LARGE = [0.01, 1.0, 10.0, 37.0, 40.0, 100.0, 1000.0]
T_CHECK = [-1.0, 0.0, 0.5, 1.0]


def abs_cube_integral(a, b, c):
    """int_a^b |y - c|^3 dy in mpmath."""

    def antiderivative(y):
        d = y - c
        return mpmath.sign(d) * d**4 / 4

    return antiderivative(b) - antiderivative(a)


def continuous_reference(name, options, epsilon, t):
    """(mean, variance, third absolute central moment) of the real-number mechanism, in mpmath,
    from the spec's definitions (densities and atoms), not from ldpfed's formulas; with enough
    digits that e^eps and the differences of its powers are exact (e^1000 ~ 1e434)."""
    with mpmath.workdps(60 + int(epsilon)):
        return _continuous_reference(name, options, epsilon, t)


def _continuous_reference(name, options, epsilon, t):
    e, t = mpmath.mpf(epsilon), mpmath.mpf(t)
    if name == "laplace":
        b = 2 / e
        return t, 2 * b**2, 6 * b**3
    if name == "duchi":
        big = (mpmath.e**e + 1) / (mpmath.e**e - 1)
        plus = mpmath.mpf(1) / 2 + t * (mpmath.e**e - 1) / (2 * mpmath.e**e + 2)
        mean = plus * big - (1 - plus) * big
        second = big**2
        return mean, second - mean**2, plus * abs(big - mean) ** 3 + (1 - plus) * abs(big + mean) ** 3
    if name == "piecewise":
        z = mpmath.e ** (e / 2)
        c = (z + 1) / (z - 1)
        left = (c + 1) / 2 * t - (c - 1) / 2
        right = left + c - 1
        high = (mpmath.e**e - mpmath.e ** (e / 2)) / (2 * mpmath.e ** (e / 2) + 2)
        low = (1 - mpmath.e ** (-e / 2)) / (2 * mpmath.e ** (e / 2) + 2)
        pieces = [(-c, left, low), (left, right, high), (right, c, low)]
    elif name == "square-wave":
        big = mpmath.e**e
        bw = (e * big - big + 1) / (2 * big * (big - 1 - e))
        p, q = big / (2 * bw * big + 1), 1 / (2 * bw * big + 1)
        v = (t + 1) / 2
        if options["estimator"] == "raw":
            scale, shift = mpmath.mpf(2), mpmath.mpf(-1)
        else:
            scale = 1 / (bw * (p - q))
            shift = -scale * q * (bw + mpmath.mpf(1) / 2) - 1
        pieces = [(-bw, v - bw, q), (v - bw, v + bw, p), (v + bw, 1 + bw, q)]
        pieces = [(scale * a + shift, scale * b + shift, d / scale) for a, b, d in pieces]
    elif name == "hybrid":
        from ldpfed.mechanisms.hybrid import EPSILON_STAR

        alpha = 1 - mpmath.e ** (-e / 2) if epsilon > EPSILON_STAR else mpmath.mpf(0)
        pm = _continuous_reference("piecewise", {}, epsilon, t)
        duchi = _continuous_reference("duchi", {}, epsilon, t)
        return t, alpha * pm[1] + (1 - alpha) * duchi[1], alpha * pm[2] + (1 - alpha) * duchi[2]
    mean = sum(d * (b**2 - a**2) / 2 for a, b, d in pieces)
    second = sum(d * (b**3 - a**3) / 3 for a, b, d in pieces)
    third = sum(d * abs_cube_integral(a, b, mean) for a, b, d in pieces)
    return mean, second - mean**2, third


def close(value, reference, rel):
    reference = float(reference)
    return abs(float(value) - reference) <= rel * abs(reference) + 1e-300


@pytest.mark.parametrize("config", PURE, ids=config_id)
@pytest.mark.parametrize("epsilon", LARGE)
def test_continuous_moments_match_a_high_precision_reference(config, epsilon):
    """Fails on the old code for Duchi (V(+-1) = B^2 - 1 became 0 above eps ~ 37) and Hybrid
    below e_star; every other mechanism's forms hold to 1e-9 relative up to eps = 1000."""
    name, options = config
    mechanism = mech.get(name, epsilon, sampler="continuous", **options)
    for t in T_CHECK:
        mean, variance, third = continuous_reference(name, options, epsilon, t)
        assert (
            close(t + float(mechanism.bias(t)), mean, 1e-9) or abs(float(mean) - t - float(mechanism.bias(t))) < 1e-12
        )
        assert close(mechanism.variance(t), variance, 1e-9), (t, float(mechanism.variance(t)), float(variance))
        if float(third) > 1e-250:
            assert close(mechanism.third_abs_central_moment(np.array([t]))[0], third, 1e-6), (t, float(third))


def window_reference(sampler, t):
    """(mean, variance) of a safe window sampler, in exact rationals and mpmath: the TPDF rounding
    law over K, and for each K the integer weights summed over the M indices (no closed forms of
    the module reused)."""
    from fractions import Fraction

    law = sampler.law
    j, half, i_max = law.grid_steps, law.window_half, law.half_range
    x = mpmath.mpf(t) * j
    low = mpmath.floor(x)
    f = x - low
    cdf = lambda z: (1 + z) ** 2 / 2 if z <= 0 else 1 - (1 - z) ** 2 / 2  # noqa: E731
    w_minus = (mpmath.mpf(1) / 2 - f) ** 2 / 2 if f < 0.5 else mpmath.mpf(0)
    w_two = (f - mpmath.mpf(1) / 2) ** 2 / 2 if f > 0.5 else mpmath.mpf(0)
    w_zero = cdf(mpmath.mpf(1) / 2 - f) - w_minus
    weights = [w_minus, w_zero, 1 - w_minus - w_zero - w_two, w_two]
    sum_all_sq = Fraction(i_max * (i_max + 1) * (2 * i_max + 1), 3)
    first, second = mpmath.mpf(0), mpmath.mpf(0)
    for d, w in zip((-1, 0, 1, 2), weights):
        k = int(low) + d
        window = range(k - half, k + half + 1)
        mean_k = Fraction((law.high - law.low) * sum(window), law.total)
        sq_k = Fraction((law.high - law.low) * sum(i * i for i in window) + law.low * sum_all_sq, law.total)
        value, value_sq = (
            mpmath.mpf(mean_k.numerator) / mean_k.denominator,
            mpmath.mpf(sq_k.numerator) / sq_k.denominator,
        )
        step = mpmath.mpf(sampler.step)
        atom_mean = atom_sq = mpmath.mpf(0)
        if law.atom_total:
            a = mpmath.mpf(sampler.atom_value)
            plus = mpmath.mpf(law.atom_base + law.atom_slope * (j + 1 + k)) / law.total
            minus = mpmath.mpf(law.atom_base + law.atom_slope * (j + 1 - k)) / law.total
            atom_mean, atom_sq = a * (plus - minus), a * a * (plus + minus)
        first += w * (value * step + atom_mean)
        second += w * (value_sq * step**2 + atom_sq)
    return first, second - first**2


# Window mechanisms only: Hybrid at or below e_star is Duchi, whose moments the next test checks.
WINDOW_CASES = [
    pytest.param(config, epsilon, id=f"{config_id(config)}-{epsilon:g}")
    for epsilon in LARGE
    for config in PURE
    if config[0] not in ("laplace", "duchi")
    and mech.get(config[0], epsilon, **config[1]).safe_sampler.__class__.__name__ == "GridSampler"
]


@pytest.mark.parametrize("config, epsilon", WINDOW_CASES)
def test_safe_window_moments_match_a_high_precision_reference(config, epsilon):
    name, options = config
    mechanism = mech.get(name, epsilon, **options)
    for t in (-1.0, 0.3, 1.0):
        mean, variance = window_reference(mechanism.safe_sampler, t)
        assert abs(t + float(mechanism.bias(t)) - float(mean)) <= 1e-12 * (1 + abs(float(mean)))
        assert close(mechanism.variance(t), variance, 1e-9), (t, float(mechanism.variance(t)), float(variance))


@pytest.mark.parametrize("epsilon", LARGE)
def test_safe_duchi_and_laplace_moments_match_a_high_precision_reference(epsilon):
    duchi = mech.get("duchi", epsilon)
    b = mpmath.mpf(duchi.safe_sampler.flip)
    big = 1 / (1 - 2 * b)
    for t in T_CHECK:
        plus = b + (1 - 2 * b) * (1 + mpmath.mpf(t)) / 2
        mean = big * (2 * plus - 1)
        assert close(duchi.variance(t), big**2 - mean**2, 1e-9)
    if epsilon >= 1e-3:
        laplace = mech.get("laplace", epsilon).safe_sampler
        weights, length = laplace._table
        total = mpmath.fsum(weights)
        w = [mpmath.mpf(x) / total for x in weights]
        mean_r = mpmath.fsum(p * r for r, p in enumerate(w))
        var_r = mpmath.fsum(p * (r - mean_r) ** 2 for r, p in enumerate(w))
        second_g = 2 * length**2 + var_r + (length + mean_r) ** 2
        zero = 1 / (2 - w[0] / 2)
        variance = (mpmath.mpf(1) / 4 + 2 * zero * second_g) / laplace.grid_steps**2
        assert close(laplace.variance_coefficients[0], variance, 1e-9)


# --- budget ranges ------------------------------------------------------------
@pytest.mark.parametrize("config", mech.variants(), ids=config_id)
@pytest.mark.parametrize("epsilon", [1e-300, 1e-20, 1e5, 1e300])
def test_extreme_budgets_fail_cleanly_with_the_range(config, epsilon):
    """The old code raised ZeroDivisionError / OverflowError here (or returned a negative SW
    variance at 1e300); every mechanism now refuses, naming its range."""
    name, options = config
    delta = 1e-5 if mech.get_class(name).approximate else None
    with pytest.raises(LDPValueError, match=r"epsilon in \[[0-9e.+-]+, [0-9e.+-]+\]"):
        mech.get(name, epsilon, delta, **options)


@pytest.mark.parametrize("config", mech.variants(), ids=config_id)
def test_both_ends_of_the_range_work(config):
    name, options = config
    delta = 1e-5 if mech.get_class(name).approximate else None
    low, high = mech.get_class(name).epsilon_range
    for epsilon in (low, high):
        if options.get("calibration") == "classic" and epsilon >= 1:
            continue
        mechanism = mech.get(name, epsilon, delta, **options)
        t = np.linspace(-1, 1, 9)
        assert np.all(np.isfinite(mechanism.variance(t))) and np.all(mechanism.variance(t) >= 0)
        assert np.all(np.isfinite(mechanism.third_abs_central_moment(t)))
        assert np.all(np.isfinite(mechanism.perturb(t, np.random.default_rng(0))))


# --- the safe Gaussian: a discrete Gaussian on the grid -------------------------
from dp_accounting.pld.privacy_loss_mechanism import DiscreteGaussianPrivacyLoss  # noqa: E402
from scipy import stats  # noqa: E402

from ldpfed.samplers.discrete_gaussian import DiscreteGaussianSampler  # noqa: E402
from ldpfed.samplers.grid import rounding_weights  # noqa: E402

GAUSSIAN_CASES = [(0.5, 1e-5), (1.0, 1e-5), (4.0, 1e-8)]


def hockey_stick(log_p: np.ndarray, log_q: np.ndarray, epsilon: float) -> float:
    """sum_y max(0, P(y) - e^eps Q(y)) from log masses on a common support."""
    return float(np.sum(np.maximum(0.0, np.exp(log_p) - np.exp(epsilon + log_q))))


@pytest.mark.parametrize("epsilon,delta", GAUSSIAN_CASES)
def test_safe_gaussian_reports_lie_on_the_grid_with_mass_from_every_input(epsilon, delta):
    """Fails on the old code (sampler="safe" was refused): every report is a multiple of 1/J and
    has positive mass from every input, so the output set does not depend on t."""
    gaussian = mech.get("gaussian", epsilon, delta)
    assert gaussian.describe()["floating_point_safe"] and gaussian.sampler == "safe"
    safe = gaussian.safe_sampler
    reports = gaussian.perturb(np.repeat([-1.0, -0.37, 0.0, 0.81, 1.0], 4000), np.random.default_rng(10))
    codes = reports * safe.grid_steps
    assert np.array_equal(codes, np.rint(codes))
    for t in (-1.0, 0.0, 1.0):
        assert np.isfinite(gaussian.log_density(reports, t)).all()


@pytest.mark.parametrize("epsilon,delta", GAUSSIAN_CASES)
def test_safe_gaussian_meets_eps_delta_on_its_exact_law(epsilon, delta):
    """The (eps, delta) condition three ways: the calibrated s is tight for dp-accounting's bound,
    the library's delta of the discrete Gaussian is monotone in the shift (the argument that covers
    every pair of grid inputs), and the hockey-stick divergence between the exact output laws of
    t = -1 and t = 1 (the rounding mixture included), summed over the grid, is <= delta."""
    gaussian = mech.get("gaussian", epsilon, delta)
    safe = gaussian.safe_sampler
    assert gaussian.exact_delta == safe.delta_bound <= delta
    assert safe.delta_bound_for(safe.sigma * (1 - 1e-6)) > delta  # the smallest s, not a loose one
    shifts = [1, safe.sensitivity // 2, safe.sensitivity - 1, safe.sensitivity]
    library = [DiscreteGaussianPrivacyLoss(safe.sigma, sensitivity=d).get_delta_for_epsilon(epsilon) for d in shifts]
    assert np.all(np.diff(library) >= 0) and library[-1] <= delta
    j, span = safe.grid_steps, safe.truncation(safe.sigma)
    y = np.arange(-j - 2 - span, j + 3 + span) / j
    for t, t_other in ((-1.0, 1.0), (1.0, -1.0), (0.3, -0.7)):
        measured = hockey_stick(gaussian.log_density(y, t), gaussian.log_density(y, t_other), epsilon)
        assert measured <= delta
    weaker = DiscreteGaussianSampler(epsilon, delta, safe.continuous_sigma)
    weaker.__dict__["sigma"] = 0.9 * safe.sigma  # the check has power: 10% less noise fails it
    assert hockey_stick(weaker.log_mass(y, -1.0), weaker.log_mass(y, 1.0), epsilon) > delta


def pmf_chi_square(gaussian, reports, t_model) -> float:
    """p-value of the grid codes of `reports` against exp(log_density(., t_model)), in bins of
    ~s/4 steps over t_model J +- 5 s (at most a handful of reports fall outside)."""
    safe = gaussian.safe_sampler
    j, span = safe.grid_steps, int(5 * safe.sigma)
    codes = np.arange(int(t_model * j) - span, int(t_model * j) + span + 1)
    mass = np.exp(gaussian.log_density(codes / j, t_model))
    bins = np.arange(0, codes.size, max(1, int(safe.sigma / 4)))
    expected = np.add.reduceat(mass, bins) * reports.size
    position = np.rint(reports * j).astype(np.int64) - codes[0]
    inside = (position >= 0) & (position < codes.size)
    assert (~inside).sum() <= 5  # beyond 5 s: P ~ 6e-7 per report
    observed = np.add.reduceat(np.bincount(position[inside], minlength=codes.size), bins)
    keep = expected > 5
    return stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-5), (4.0, 1e-8)])
def test_safe_gaussian_samples_its_exact_pmf(epsilon, delta):
    gaussian = mech.get("gaussian", epsilon, delta)
    reports = gaussian.perturb(np.full(100_000, 0.3), np.random.default_rng(11))
    assert pmf_chi_square(gaussian, reports, 0.3) > 1e-3


def test_safe_gaussian_chi_square_has_power():
    """The same check rejects reports of t = 1 against the pmf of t = 0.5 at eps = 4 (a shift of
    ~0.23 noise sd, with 10^5 draws): the test is not vacuous."""
    gaussian = mech.get("gaussian", 4.0, 1e-8)
    reports = gaussian.perturb(np.full(100_000, 1.0), np.random.default_rng(11))
    assert pmf_chi_square(gaussian, reports, 0.5) < 1e-6


@pytest.mark.parametrize("epsilon,delta", GAUSSIAN_CASES)
def test_safe_gaussian_moments_match_mpmath_and_monte_carlo(epsilon, delta):
    """Var = (1/4 + Var N)/J^2 with Var N over the whole integer line in mpmath by Poisson summation
    (sum_n e^{-n^2/2s^2} = s sqrt(2 pi) sum_k e^{-2 pi^2 s^2 k^2}, and n^2 e^{..} likewise), and
    the third absolute central moment against a direct sum over the rounding law and the support;
    both against Monte Carlo with tolerances from the sampling variance."""
    gaussian = mech.get("gaussian", epsilon, delta)
    safe = gaussian.safe_sampler
    s = mpmath.mpf(safe.sigma)
    root = s * mpmath.sqrt(2 * mpmath.pi)
    terms = [mpmath.exp(-2 * mpmath.pi**2 * s * s * k * k) for k in range(-3, 4)]
    normalizer = root * mpmath.fsum(terms)
    second = root * mpmath.fsum((s * s - 4 * mpmath.pi**2 * s**4 * k * k) * w for k, w in zip(range(-3, 4), terms))
    var_n = second / normalizer
    variance = (mpmath.mpf(1) / 4 + var_n) / safe.grid_steps**2
    assert close(gaussian.variance_coefficients[0], variance, 1e-9)
    assert var_n <= s * s  # discrete Gaussian: variance at most s^2 (CKS)
    assert gaussian.bias_coefficients == (0.0, 0.0)

    n, p = safe._support
    for t in (-1.0, 0.3, 0.77):
        x = t * safe.grid_steps
        low, weights = rounding_weights(x)
        direct = sum(w * (p @ np.abs(n + low + d - x) ** 3) for d, w in zip((-1, 0, 1, 2), weights))
        assert close(gaussian.third_abs_central_moment(np.array([t]))[0], direct / safe.grid_steps**3, 1e-9)

    rng = np.random.default_rng(12)
    size = 200_000
    t = 0.3
    reports = gaussian.perturb(np.full(size, t), rng)
    v = float(gaussian.variance(t))
    assert abs(reports.mean() - t) < 5 * math.sqrt(v / size)
    fourth = 3 * v * v  # ~Gaussian: Var of the squared deviation ~ 2 v^2
    assert abs(np.mean((reports - t) ** 2) - v) < 5 * math.sqrt((fourth - v * v) / size)
    cube = np.abs(reports - t) ** 3
    assert abs(cube.mean() - gaussian.third_abs_central_moment(np.array([t]))[0]) < 5 * cube.std() / math.sqrt(size)


def test_safe_gaussian_float_decisions_cost_little():
    """The variance stays within 0.5% of the continuous analytic Gaussian's at eps = 1 (the 2J + 2
    calibration and the discrete law), and delta_bound is within 1e-9 of delta (tight)."""
    safe = mech.get("gaussian", 1.0, 1e-5)
    continuous = mech.get("gaussian", 1.0, 1e-5, sampler="continuous")
    assert safe.variance(0.0) == pytest.approx(continuous.variance(0.0), rel=5e-3)
    assert safe.exact_delta == pytest.approx(1e-5, rel=1e-6)


def test_safe_gaussian_refuses_a_delta_its_float_bound_cannot_meet():
    with pytest.raises(LDPValueError, match="delta >= 1e-12"):
        mech.get("gaussian", 1.0, 1e-14)
    assert mech.get("gaussian", 1.0, 1e-14, sampler="continuous").delta == 1e-14

"""ldpfed.directional: hyperspherical transforms, angle windows, rotation, LDPVec (spec: directional.md)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy.linalg import hadamard

import ldpfed.mechanisms as mechanisms
from ldpfed.directional import MAGNITUDES, WINDOWS, LDPVec, cosine, from_spherical, leading_energy_share, to_spherical
from ldpfed.directional import rotation as rot
from ldpfed.directional import windows as win
from ldpfed.directional.spherical import exact_cos, exact_sin
from ldpfed.validation import LDPValueError

U = np.finfo(float).eps
BASES = [name for name in mechanisms.available()]


def _delta(base):
    return 1e-5 if mechanisms.get_class(base).approximate else None


def _safe_norm(g):
    """||g|| without overflow or underflow (scaled by the largest |g_z|)."""
    scale = np.max(np.abs(g), axis=-1)
    scale = np.where(scale > 0, scale, 1.0)
    return scale * np.linalg.norm(g / scale[..., None], axis=-1)


def _hard_vectors(rng, d):
    """Rows with zeros, negative zeros, zero tails, extreme scales and norm carried by the tail."""
    rows = [rng.standard_normal(d) for _ in range(7)]
    rows[0][::3] = 0.0
    rows[0][1::3] *= -0.0  # negative zeros between non-zeros
    rows[1][d // 2 :] = 0.0  # zero tail
    rows[1][d // 2 :: 2] = -0.0
    rows[2] *= 1e300
    rows[3] *= 1e-300
    rows[4][:-1] *= 1e-4  # the last coordinate carries the norm: worst case of the product
    rows[5][:] = 0.0
    rows[5][1] = -0.0
    rows[6] = -np.abs(rows[6])
    return np.array(rows)


@pytest.mark.parametrize("d", [2, 3, 4, 10, 1000, 100_000, 1_000_000])
def test_round_trip_exact_to_float_precision(d):
    rng = np.random.default_rng(d)
    g = _hard_vectors(rng, d) if d < 1_000_000 else _hard_vectors(rng, d)[[0, 1, 4]]
    radius, angles = to_spherical(g)
    back = from_spherical(radius, angles)
    assert np.all(np.isfinite(angles)) and np.all(np.isfinite(back))
    # Coordinate z carries a random walk of ~sqrt(z) roundings (module docstring): bound sqrt(d).
    tolerance = (16.0 + 2.0 * math.sqrt(d)) * U * _safe_norm(g)
    assert np.all(np.max(np.abs(back - g), axis=1) <= tolerance)
    assert np.all(back[g == 0] == 0)  # zeros, negative zeros and zero tails stay exact zeros
    np.testing.assert_allclose(radius, _safe_norm(g), rtol=4 * U * math.sqrt(d))


@pytest.mark.float_portable
def test_a_row_converts_alike_alone_and_in_a_batch():
    """Row k of a batch's coordinates equals the row converted alone, bit for bit (what makes
    LDPVec's batched privatization equal the row-by-row one). 400 rows x 24 coordinates: on
    AVX-512, ~6% of arctan2 values differ in the last bit between numpy's SIMD kernel and the C
    library's atan2, which a strided operand could send one path to and not the other."""
    rng = np.random.default_rng(12)
    rows = rng.normal(size=(400, 24)) * rng.exponential(size=(400, 1))
    radius, angles = to_spherical(rows)
    noisy = angles + rng.normal(scale=4.0, size=angles.shape)  # perturbed angles leave their ranges
    back = from_spherical(radius, noisy)
    for k in range(0, 400, 7):
        alone_radius, alone_angles = to_spherical(rows[k])
        assert alone_radius == radius[k]
        np.testing.assert_array_equal(alone_angles, angles[k])
        np.testing.assert_array_equal(from_spherical(radius[k], noisy[k]), back[k])
        np.testing.assert_array_equal(from_spherical(radius[k : k + 1], noisy[k : k + 1])[0], back[k])


def test_signed_zeros_and_zero_vector():
    radius, angles = to_spherical(np.array([[0.0, -0.0, 0.0, 0.0], [1.0, -0.0, 0.0, -0.0]]))
    back = from_spherical(radius, angles)
    assert np.array_equal(np.signbit(back), np.signbit([[0.0, -0.0, 0.0, 0.0], [1.0, -0.0, 0.0, -0.0]]))
    assert radius[0] == 0.0 and np.all(np.isfinite(angles))


def test_angles_match_mpmath_reference_and_ranges():
    rng = np.random.default_rng(1)
    g = rng.standard_normal((20, 6))
    g[:, 3] = np.where(rng.random(20) < 0.3, 0.0, g[:, 3])
    radius, angles = to_spherical(g)
    assert np.all((angles[:, :-1] >= 0) & (angles[:, :-1] <= np.pi))
    assert np.all((angles[:, -1] > -np.pi) & (angles[:, -1] <= np.pi))
    mpmath.mp.dps = 40
    for row, theta in zip(g, angles):
        values = [mpmath.mpf(float(v)) for v in row]
        for z in range(4):
            tail = mpmath.sqrt(sum(v * v for v in values[z + 1 :]))
            assert abs(theta[z] - float(mpmath.atan2(tail, values[z]))) <= 4 * U
        assert abs(theta[4] - float(mpmath.atan2(values[5], values[4]))) <= 4 * U


def test_exact_trigonometry_at_the_angles_of_zeros():
    assert exact_cos(np.pi / 2) == 0.0 and exact_sin(np.pi) == 0.0 and exact_sin(-np.pi) == 0.0
    assert exact_cos(np.pi) == -1.0 and exact_cos(0.0) == 1.0 and exact_sin(np.pi / 2) == 1.0
    x = np.random.default_rng(2).uniform(-20, 20, 1000)
    np.testing.assert_allclose(exact_sin(x), np.sin(x), atol=1e-14)
    np.testing.assert_allclose(exact_cos(x), np.cos(x), atol=1e-14)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("beta", [0.05, 0.5, 1.0])
def test_clipped_angle_sensitivity(window, beta):
    """Any two inputs' clipped angle vectors differ by at most L1 = beta d pi, L2 = beta pi sqrt(d+2),
    and inputs at opposite window edges reach both bounds."""
    d, rng = 12, np.random.default_rng(3)
    l1, l2 = win.sensitivities(beta, d)
    assert l1 == pytest.approx(beta * d * np.pi) and l2 == pytest.approx(beta * np.pi * math.sqrt(d + 2))
    reference = rng.standard_normal(d)
    centre = win.centres(window, beta, d, reference)
    _, angles = to_spherical(rng.standard_normal((4000, d)) * rng.exponential(1, (4000, 1)))
    clipped = win.clip_angles(angles, centre, beta)
    difference = clipped[:2000] - clipped[2000:]
    assert np.max(np.sum(np.abs(difference), axis=1)) <= l1 * (1 + 1e-12)
    assert np.max(np.linalg.norm(difference, axis=1)) <= l2 * (1 + 1e-12)
    half = win.half_widths(beta, d)
    low, high = win.from_offsets(-np.ones(d - 1), centre, beta), win.from_offsets(np.ones(d - 1), centre, beta)
    edge_difference = win.clip_angles(high, centre, beta) - win.clip_angles(low, centre, beta)
    assert np.sum(np.abs(edge_difference)) == pytest.approx(l1) and np.all(np.abs(edge_difference) <= 2 * half + 1e-12)
    inner = clipped[:, :-1]
    assert np.all(inner >= -1e-12) and np.all(inner <= np.pi + 1e-12)  # inner windows inside [0, pi]


def test_fixed_windows_are_the_thesis_windows():
    beta, d = 0.25, 7
    centre = win.centres("fixed", beta, d)
    low = win.from_offsets(-np.ones(d - 1), centre, beta)
    high = win.from_offsets(np.ones(d - 1), centre, beta)
    np.testing.assert_allclose(low, [(1 - beta) * np.pi] * (d - 2) + [-beta * np.pi])
    np.testing.assert_allclose(high, [np.pi] * (d - 2) + [beta * np.pi])


def test_centred_windows_keep_the_reference_direction():
    """An update equal to the public reference passes the centred windows unchanged, however small beta."""
    rng = np.random.default_rng(4)
    reference = rng.standard_normal(30)
    _, angles = to_spherical(reference)
    centre = win.centres("centred", 0.05, 30, reference)
    np.testing.assert_allclose(win.clip_angles(angles, centre, 0.05), angles, atol=1e-13)
    fixed = win.clip_angles(angles, win.centres("fixed", 0.05, 30), 0.05)
    assert np.max(np.abs(fixed - angles)) > 1.0  # the fixed window moves them far


def test_hadamard_rotation_is_orthogonal():
    rng = np.random.default_rng(5)
    d = 13
    signs = rot.random_signs(d, rng)
    assert signs.size == 16 and rot.padded_dims(16) == 16 and rot.padded_dims(2) == 2
    matrix = hadamard(16) * signs / 4.0
    x = rng.standard_normal((3, d))
    padded = np.c_[x, np.zeros((3, 3))]
    np.testing.assert_allclose(rot.rotate(x, signs), padded @ matrix.T, atol=1e-14)
    np.testing.assert_allclose(rot.unrotate(rot.rotate(x, signs), signs, d), x, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(rot.rotate(x, signs), axis=1), np.linalg.norm(x, axis=1))


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("magnitude", MAGNITUDES)
def test_budget_split_adds_up(base, magnitude):
    eps, d = 3.0, 50
    vec = LDPVec(base, eps, clip=1.0, delta=_delta(base), beta=0.5, magnitude=magnitude)
    split = vec.budget(d)
    assert split.angles_total() == pytest.approx(split.direction_epsilon, rel=1e-12)
    if magnitude == "split":
        assert split.magnitude_epsilon == pytest.approx(eps / d)
        assert split.magnitude_epsilon + split.angles_total() == pytest.approx(eps, rel=1e-12)
        if base == "gaussian":
            assert split.magnitude_delta + split.direction_delta == pytest.approx(1e-5)
    elif magnitude == "normalize":
        assert split.magnitude_epsilon == 0.0 and split.angles_total() == pytest.approx(eps, rel=1e-12)
    else:
        assert not split.private and split.spent_epsilon == math.inf and not vec.private
        assert "not_private_reason" in vec.describe(d)
    if magnitude != "exact-unsafe":
        assert split.private and split.spent_epsilon == eps
    if base == "laplace":  # Lap(L1/eps_dir) on every angle: scale beta d pi / eps_dir
        inner_scale = win.half_widths(0.5, d)[0] * 2.0 / split.inner_angle_epsilon
        last_scale = win.half_widths(0.5, d)[-1] * 2.0 / split.last_angle_epsilon
        l1, _ = win.sensitivities(0.5, d)
        assert inner_scale == pytest.approx(l1 / split.direction_epsilon) == pytest.approx(last_scale)


def test_budget_with_rotation_counts_padded_dims():
    split = LDPVec("piecewise", 2.0, clip=1.0, rotation="hadamard").budget(100)
    assert split.dims == 128 and split.magnitude_epsilon == pytest.approx(2.0 / 128)


@pytest.mark.parametrize(
    "base,options",
    [
        ("laplace", {}),
        ("piecewise", {}),
        ("duchi", {}),
        ("square-wave", {"estimator": "debiased"}),
        ("gaussian", {}),
        ("gaussian", {"sampler": "continuous"}),
    ],
)
def test_angle_noise_is_unbiased_with_the_exact_variance(base, options):
    """Monte Carlo mean and variance of every released angle against the exact moments
    (tolerances from the variance: z-scores over all angles, fixed seed)."""
    d, reps = 8, 20000
    vec = LDPVec(base, 8.0, clip=1.0, delta=_delta(base), beta=0.5, window="fixed", options=options)
    g = np.random.default_rng(6).standard_normal(d)
    _, clean = vec.clipped_polar(g)
    bias, variance = vec.angle_noise_moments(g)
    assert np.all(bias == 0)
    _, noisy = vec.perturb_polar(np.repeat(g[None], reps, axis=0), np.random.default_rng(7))
    z_mean = (noisy.mean(axis=0) - clean[0]) / np.sqrt(variance[0] / reps)
    assert np.max(np.abs(z_mean)) < 4.0
    # Var of the sample variance ~ 2 sigma^4 / n for near-normal noise; bounded ones are lighter-tailed.
    sample_var = noisy.var(axis=0, ddof=1)
    kurtosis_bound = 6.0 if base == "laplace" else 2.0
    z_var = (sample_var - variance[0]) / (variance[0] * math.sqrt(kurtosis_bound / reps * 1.5))
    assert np.max(np.abs(z_var)) < 4.5


def test_split_magnitude_is_unbiased():
    vec = LDPVec("piecewise", 20.0, clip=2.0, beta=1.0, magnitude="split")
    g = np.random.default_rng(8).standard_normal(5)
    radius, _ = vec.clipped_polar(g)
    released, _ = vec.perturb_polar(np.repeat(g[None], 20000, axis=0), np.random.default_rng(9))
    magnitude = mechanisms.get("piecewise", 20.0 / 5)
    t = 2 * radius[0] / 2.0 - 1
    sd = 0.5 * 2.0 * math.sqrt(float(magnitude.variance(t)))
    assert abs(released.mean() - radius[0]) < 4 * sd / math.sqrt(20000)


@pytest.mark.parametrize("base", ["laplace", "gaussian"])
def test_expected_output_against_monte_carlo(base):
    """The exact mean of the Cartesian output (shrinkage prod phi_i) against Monte Carlo."""
    d, reps = 6, 40000
    vec = LDPVec(base, 40.0, clip=1.0, delta=_delta(base), beta=0.3, window="centred", magnitude="normalize")
    rng = np.random.default_rng(10)
    g, reference = rng.standard_normal(d), rng.standard_normal(d)
    expected = vec.expected_output(g, reference=reference)[0]
    samples = vec.perturb(np.repeat(g[None], reps, axis=0), rng, reference=reference)
    standard_error = samples.std(axis=0) / math.sqrt(reps)
    assert np.max(np.abs(samples.mean(axis=0) - expected) / standard_error) < 4.0
    shrink = expected / vec.preprocess(g, reference=reference)[0]
    assert np.all(np.diff(shrink[:-1]) < 0)  # the bias grows along the coordinates


def test_characteristic_factors_against_mpmath():
    """E[cos(theta + N)] = phi cos(theta) with phi = 1/(1+b^2) (Laplace), exp(-s^2/2) (Gaussian)."""
    mpmath.mp.dps = 30
    theta, b, s = mpmath.mpf("1.1"), mpmath.mpf("0.7"), mpmath.mpf("0.4")
    laplace = mpmath.quad(
        lambda x: mpmath.cos(theta + x) * mpmath.exp(-abs(x) / b) / (2 * b), [-mpmath.inf, 0, mpmath.inf]
    )
    gaussian = mpmath.quad(lambda x: mpmath.cos(theta + x) * mpmath.npdf(x, 0, s), [-mpmath.inf, mpmath.inf])
    assert float(laplace) == pytest.approx(float(mpmath.cos(theta)) / (1 + 0.7**2), rel=1e-12)
    assert float(gaussian) == pytest.approx(float(mpmath.cos(theta)) * math.exp(-(0.4**2) / 2), rel=1e-12)


@pytest.mark.parametrize("base", ["laplace", "piecewise"])
def test_direction_density_ratio_is_bounded_by_the_direction_budget(base):
    """Worst-case neighbours (every angle at opposite window edges): the log density ratio of the
    released angle offsets, summed over angles, never exceeds eps_dir and Laplace reaches it."""
    d, vec = 10, LDPVec(base, 5.0, clip=1.0, beta=0.5, magnitude="normalize")
    split, _, inner, last = vec._randomizers(d)
    rng = np.random.default_rng(11)
    t, t_other = -np.ones(d - 1), np.ones(d - 1)
    outputs = np.c_[inner.perturb(np.full((20000, d - 2), -1.0), rng), last.perturb(np.full(20000, -1.0), rng)]
    log_ratio = np.zeros(20000)
    for z, mechanism in enumerate([inner] * (d - 2) + [last]):
        log_ratio += mechanism.log_density(outputs[:, z], t[z]) - mechanism.log_density(outputs[:, z], t_other[z])
    assert np.max(log_ratio) <= split.direction_epsilon * (1 + 1e-9)
    if base == "laplace":
        assert np.max(log_ratio) > 0.999 * split.direction_epsilon


def test_noise_free_limit_and_diagnostics():
    rng = np.random.default_rng(12)
    g = rng.standard_normal((3, 40))
    vec = LDPVec("laplace", 2e5, clip=0.5, beta=1.0, magnitude="exact-unsafe")  # per angle <= 1e4: the range
    clipped = vec.clip_updates(g)
    np.testing.assert_allclose(np.linalg.norm(clipped, axis=1), 0.5)
    out = vec.perturb(g, rng)
    assert np.all(cosine(out, clipped) > 0.999)
    assert leading_energy_share(np.ones((1, 200)))[0] == pytest.approx(0.01)
    assert cosine(np.zeros((1, 3)), np.ones((1, 3)))[0] == 0.0


def test_rotation_spreads_the_energy_of_angle_noise():
    """Angle noise piles the output's energy into the first coordinates; the rotation undoes it."""
    rng = np.random.default_rng(13)
    g = rng.standard_normal((20, 4096))
    # eps = 5e4 (little noise, to show the pile-up) is beyond the safe sampler's range (its float
    # slack refuses eps above ~10^3): the continuous sampler, as the property is the rotation's.
    continuous = {"sampler": "continuous"}
    plain = LDPVec("gaussian", 5e4, clip=1.0, delta=1e-5, beta=1.0, magnitude="normalize", options=continuous)
    rotated = LDPVec(
        "gaussian", 5e4, clip=1.0, delta=1e-5, beta=1.0, magnitude="normalize", rotation="hadamard", options=continuous
    )
    assert plain.budget(4096).angle_sigma > 0.05
    assert np.median(leading_energy_share(plain.perturb(g, rng))) > 0.5
    assert np.median(leading_energy_share(rotated.perturb(g, rng, rotation_seed=1))) < 0.05


def test_preprocess_round_trips_with_rotation():
    rng = np.random.default_rng(14)
    g = rng.standard_normal((2, 20))
    vec = LDPVec("duchi", 1.0, clip=10.0, beta=1.0, magnitude="exact-unsafe", rotation="hadamard")
    np.testing.assert_allclose(vec.preprocess(g, rotation_seed=5), g, atol=1e-13)
    with pytest.raises(LDPValueError):
        vec.preprocess(g)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(beta=0.0),
        dict(beta=1.5),
        dict(window="moving"),
        dict(magnitude="exact"),
        dict(rotation="dct"),
        dict(base="nope"),
        dict(epsilon=-1.0),
        dict(clip=0.0),
        dict(base="gaussian", delta=None),
        dict(base="laplace", delta=1e-5),
    ],
)
def test_bad_parameters_raise(kwargs):
    args = dict(base="laplace", epsilon=1.0, clip=1.0)
    args.update(kwargs)
    with pytest.raises(LDPValueError):
        LDPVec(**args)


def test_bad_updates_raise():
    vec = LDPVec("laplace", 1.0, clip=1.0)
    for bad in (np.array([1.0]), np.array([1.0, np.nan]), np.ones((2, 2, 2))):
        with pytest.raises(LDPValueError):
            vec.perturb(bad, np.random.default_rng(0))


@pytest.mark.parametrize("base", ["laplace", "piecewise", "gaussian"])
@pytest.mark.parametrize("magnitude", ["split", "normalize"])
def test_polar_release_density_ratio_at_the_worst_case_neighbours(base, magnitude):
    """The whole release (magnitude and angles) at the worst-case neighbours: the log density ratio
    stays within the budget for pure bases (Laplace reaches it), and for Gaussian exceeds eps only
    on a set of probability at most delta."""
    from ldpfed.directional.neighbours import polar_log_ratio, polar_release, worst_case_neighbours

    d, eps = 6, 4.0
    # The density ratio is that of the continuous laws (log_density); the safe samplers' grids are
    # audited through the Cartesian release (test_directional_audit.py).
    options = {"sampler": "continuous"}
    vec = LDPVec(base, eps, clip=1.0, delta=_delta(base), beta=0.5, magnitude=magnitude, options=options)
    x, x_other = worst_case_neighbours(vec, d)
    _, offsets = vec.clipped_polar(np.stack([x, x_other]))
    releases = polar_release(vec, np.tile(x, (50_000, 1)), np.random.default_rng(15))
    log_ratio = polar_log_ratio(vec, x, x_other, releases)
    if base == "gaussian":
        # P[L > eps] - e^eps P'[L > eps] <= delta; with 50,000 draws: no more than a handful above eps.
        assert np.mean(log_ratio > eps) < 1e-5 + 4 * math.sqrt(1e-5 / 50_000) + 1e-4
    else:
        assert np.max(log_ratio) <= eps * (1 + 1e-9)
    if base == "laplace":
        assert np.max(log_ratio) > 0.99 * eps


def test_exact_unsafe_releases_have_disjoint_magnitudes():
    """The thesis' Algorithm 6 as printed: the neighbours' releases are told apart with certainty."""
    from ldpfed.directional.neighbours import polar_log_ratio, polar_release, worst_case_neighbours

    vec = LDPVec("laplace", 4.0, clip=1.0, beta=0.5, magnitude="exact-unsafe")
    x, x_other = worst_case_neighbours(vec, 6)
    rng = np.random.default_rng(16)
    first, second = (polar_release(vec, np.tile(v, (1000, 1)), rng) for v in (x, x_other))
    assert np.all(np.abs(first[:, 0] - 1.0) < 1e-12) and np.all(second[:, 0] < 1e-17)
    np.testing.assert_allclose(np.linalg.norm(vec.perturb(np.tile(x, (5, 1)), rng), axis=1), 1.0)
    with pytest.raises(LDPValueError):
        polar_log_ratio(vec, x, x_other, first)


def test_worst_case_neighbours_reach_the_window_edges():
    from ldpfed.directional.neighbours import worst_case_neighbours

    for window, beta in (("fixed", 0.5), ("centred", 1.0), ("fixed", 1.0)):
        vec = LDPVec("laplace", 1.0, clip=1.0, beta=beta, window=window)
        x, x_other = worst_case_neighbours(vec, 40)
        _, angles = vec.clipped_polar(np.stack([x, x_other]))
        np.testing.assert_allclose(np.abs(angles[0] - angles[1]), 2 * win.half_widths(beta, 40), atol=1e-6)
    with pytest.raises(LDPValueError):
        worst_case_neighbours(LDPVec("laplace", 1.0, clip=1.0, rotation="hadamard"), 8)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("base", BASES)
def test_smallest_dimensions(d, base):
    """d = 2 has only the circular angle (window 2 beta pi), d = 3 one inner angle besides it."""
    vec = LDPVec(base, 2.0, clip=1.0, delta=_delta(base), beta=0.5, magnitude="split")
    split = vec.budget(d)
    assert split.magnitude_epsilon + split.angles_total() == pytest.approx(2.0)
    out = vec.perturb(np.array([[0.3, 0.4, 0.0][:d], [0.0, 0.0, 0.0][:d]]), np.random.default_rng(17))
    assert out.shape == (2, d) and np.all(np.isfinite(out))


def test_round_events_for_the_ledger():
    from ldpfed.accounting import create_accountant

    spent = create_accountant("basic").compose(LDPVec("piecewise", 0.5, clip=1.0).round_event(), 4).spent(1e-5)
    assert spent.private and spent.epsilon == pytest.approx(2.0)
    gaussian = LDPVec("gaussian", 1.0, clip=1.0, delta=1e-6).round_event()
    assert create_accountant("basic").compose(gaussian, 3).spent(1e-5).delta == pytest.approx(3e-6)
    unsafe = create_accountant("basic").compose(
        LDPVec("laplace", 1.0, clip=1.0, magnitude="exact-unsafe").round_event()
    )
    assert not unsafe.private and unsafe.spent(1e-5).epsilon is None

"""Privacy guarantees of the scalar randomizers (mechanisms.md).

Pure mechanisms: the worst log density (safe samplers: probability) ratio over outputs y and inputs
t, t' is at most eps, and the bound is attained. That alone would only check a formula, so the
samplers are also tested against `log_density`: KS for the continuous samplers' continuous part,
chi-square for atoms and for the safe samplers' exact masses on their fixed output grid. Gaussian: the analytic
(eps, delta) condition holds at the calibrated sigma and is tight, against dp-accounting too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import ldpfed.mechanisms as mech
from ldpfed.mechanisms.gaussian import analytic_delta, analytic_sigma, classic_sigma

PURE = [(name, options) for name, options in mech.variants() if not mech.get_class(name).approximate]
CONTINUOUS = [(name, {**options, "sampler": "continuous"}) for name, options in PURE]
P_THRESHOLD = 1e-4  # fixed significance level of the goodness-of-fit tests (seeded)


def config_id(config):
    name, options = config
    return name + "".join(f"-{v}" for v in options.values())


def atoms(mechanism) -> list[float]:
    """Output values carrying positive probability (Duchi's +-B, also inside Hybrid)."""
    if mechanism.name == "duchi":
        return [-mechanism.output_bound, mechanism.output_bound]
    if mechanism.name == "hybrid":
        return [-mechanism.duchi.output_bound, mechanism.duchi.output_bound]
    return []


def worst_log_ratio(mechanism, t, t_other, rng) -> float:
    """max over y of log p(y|t) - log p(y|t'), on a grid plus samples from both inputs (which
    hit narrow plateaus and atoms); fails if the supports differ."""
    bound = mechanism.output_bound if mechanism.bounded else 12.0 / mechanism.epsilon + 2.0
    y = np.concatenate(
        [
            np.linspace(-1.05 * bound, 1.05 * bound, 4001),
            mechanism.perturb(np.full(200, t), rng),
            mechanism.perturb(np.full(200, t_other), rng),
            atoms(mechanism),
        ]
    )
    log_p, log_q = mechanism.log_density(y, t), mechanism.log_density(y, t_other)
    assert np.array_equal(np.isfinite(log_p), np.isfinite(log_q)), "support depends on the input"
    finite = np.isfinite(log_p)
    assert finite.any()
    return float(np.max(log_p[finite] - log_q[finite]))


# --- density ratio -------------------------------------------------------------------------------
@pytest.mark.parametrize("config", PURE + CONTINUOUS, ids=config_id)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    log_epsilon=st.floats(min_value=-3.0, max_value=math.log10(5000.0)),
    t=st.floats(min_value=-1.0, max_value=1.0),
    t_other=st.floats(min_value=-1.0, max_value=1.0),
)
def test_worst_density_ratio_is_at_most_e_to_the_eps(config, log_epsilon, t, t_other):
    name, options = config
    epsilon = 10.0**log_epsilon
    mechanism = mech.get(name, epsilon, **options)
    ratio = worst_log_ratio(mechanism, t, t_other, np.random.default_rng(0))
    assert mechanism.exact_epsilon <= epsilon
    assert ratio <= mechanism.exact_epsilon + 1e-9 * max(1.0, epsilon)


@pytest.mark.parametrize("config", CONTINUOUS, ids=config_id)
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 6.0, 40.0])
def test_density_ratio_bound_is_attained_at_the_extreme_inputs(config, epsilon):
    """A test that could not fail would be worthless: the bound is tight at t = -1, t' = 1."""
    name, options = config
    mechanism = mech.get(name, epsilon, **options)
    ratio = worst_log_ratio(mechanism, 1.0, -1.0, np.random.default_rng(1))
    assert ratio == pytest.approx(epsilon, rel=1e-9)


@pytest.mark.parametrize("config", PURE, ids=config_id)
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 6.0, 40.0])
def test_safe_probability_ratio_is_nearly_attained(config, epsilon):
    """Safe samplers: eps' = exact_epsilon <= eps is the worst ratio between GRID inputs; between
    t = 1 and -1 the rounding mixes up to 3 grid inputs (weights 1/8, 3/4, 1/8), which can hide at
    most ln(4/3) of it (and 1/(J + 1) of it for the unbounded Laplace)."""
    name, options = config
    mechanism = mech.get(name, epsilon, **options)
    ratio = worst_log_ratio(mechanism, 1.0, -1.0, np.random.default_rng(1))
    exact = mechanism.exact_epsilon
    assert exact <= epsilon and exact >= min(epsilon * (1 - 1e-3), 36.0)
    assert exact - math.log(4 / 3) - 0.01 * exact <= ratio <= exact + 1e-9 * exact


# --- samplers follow log_density -----------------------------------------------------------------
def continuous_cdf(mechanism, t, points=400_001):
    """CDF of the continuous part implied by exp(log_density), by midpoint integration."""
    if mechanism.bounded:
        low, high = -mechanism.output_bound, mechanism.output_bound
    else:
        spread = 15.0 * math.sqrt(float(mechanism.variance(t)))
        low, high = t - spread, t + spread
    edges = np.linspace(low, high, points)
    mids = (edges[1:] + edges[:-1]) / 2
    mass = np.exp(mechanism.log_density(mids, t)) * np.diff(edges)
    cumulative = np.concatenate([[0.0], np.cumsum(mass)])
    return edges, cumulative


def safe_support(mechanism, t) -> np.ndarray:
    """Every output value of a safe sampler with non-negligible mass given t, in increasing order."""
    safe = mechanism.safe_sampler
    if hasattr(safe, "law"):  # window samplers: codes -I..I times step, plus Hybrid's atoms
        values = np.arange(-safe.law.half_range, safe.law.half_range + 1) * safe.step
        if safe.law.atom_total:
            values = np.concatenate([values, [-safe.atom_value, safe.atom_value]])
        return np.unique(values)
    if hasattr(safe, "grid_steps"):  # discrete Laplace: t +- 30 standard deviations
        spread = 30.0 * math.sqrt(float(mechanism.variance(t)))
        return (
            np.arange(math.floor((t - spread) * safe.grid_steps), math.ceil((t + spread) * safe.grid_steps) + 1)
            / safe.grid_steps
        )
    return np.array([-safe.output_bound, safe.output_bound])  # Duchi


@pytest.mark.parametrize("config", PURE, ids=config_id)
@pytest.mark.parametrize("epsilon", [0.4, 1.5, 6.0])
@pytest.mark.parametrize("t", [-1.0, -0.3, 0.6])
def test_safe_sampler_matches_its_exact_mass(config, epsilon, t):
    """The safe samplers emit only values of their output set, with the masses of log_density:
    the masses sum to 1 and a chi-square over ~40 bins of equal mass accepts the samples."""
    name, options = config
    mechanism = mech.get(name, epsilon, **options)
    n = 20_000
    rng = np.random.default_rng([int(epsilon * 10), int((t + 1) * 10), len(config_id(config)), 7])
    reports = mechanism.perturb(np.full(n, t), rng)
    support = safe_support(mechanism, t)
    mass = np.exp(mechanism.log_density(support, t))
    assert mass.sum() == pytest.approx(1.0, abs=1e-9)
    position = np.searchsorted(support, reports)
    assert np.all(support[np.minimum(position, support.size - 1)] == reports), "a report off the output set"
    edges = np.searchsorted(np.cumsum(mass), np.linspace(0, 1, 41)[1:-1])  # ~equal-mass bins
    bins = np.unique(np.concatenate([[0], np.minimum(edges + 1, support.size - 1)]))
    expected = np.add.reduceat(mass, bins) * n
    observed = np.add.reduceat(np.bincount(position, minlength=support.size), bins)
    keep = expected > 0
    assert np.all(observed[~keep] == 0)
    assert stats.chisquare(observed[keep], expected[keep] * observed.sum() / expected[keep].sum()).pvalue > P_THRESHOLD


@pytest.mark.parametrize("config", [*CONTINUOUS, ("gaussian", {"sampler": "continuous"})], ids=config_id)
@pytest.mark.parametrize("epsilon", [0.4, 1.5, 6.0])
@pytest.mark.parametrize("t", [-1.0, -0.3, 0.6])
def test_sampler_matches_log_density(config, epsilon, t):
    name, options = config
    delta = 1e-5 if name == "gaussian" else None
    mechanism = mech.get(name, epsilon, delta=delta, **options)
    n = 20_000
    rng = np.random.default_rng([int(epsilon * 10), int((t + 1) * 10), len(config_id(config))])
    reports = mechanism.perturb(np.full(n, t), rng)
    assert np.all(np.isfinite(mechanism.log_density(reports, t)))  # every report is in the support

    # Atoms: observed counts against exp(log_density) (the pmf), plus the continuous remainder.
    point_masses = atoms(mechanism)
    on_atom = np.isin(reports, point_masses)
    atom_probability = [float(np.exp(mechanism.log_density(a, t))) for a in point_masses]
    continuous_probability = 1.0 - sum(atom_probability)
    if point_masses:
        observed = [int(np.sum(reports == a)) for a in point_masses] + [int(np.sum(~on_atom))]
        expected = np.array(atom_probability + [continuous_probability]) * n
        keep = expected > 0
        assert np.all(np.array(observed)[~keep] == 0)
        if keep.sum() > 1:
            assert stats.chisquare(np.array(observed)[keep], expected[keep]).pvalue > P_THRESHOLD

    if continuous_probability > 1e-9:
        edges, cumulative = continuous_cdf(mechanism, t)
        assert cumulative[-1] == pytest.approx(continuous_probability, rel=1e-3)  # density integrates
        continuous = reports[~on_atom]
        assert continuous.size > 100
        cdf = lambda x: np.interp(x, edges, cumulative / cumulative[-1])  # noqa: E731
        assert stats.kstest(continuous, cdf).pvalue > P_THRESHOLD


def test_goodness_of_fit_detects_a_wrong_sampler():
    """The KS check has power: PM samples at t = 0.6 are rejected against the density at t = 0.2."""
    pm = mech.get("piecewise", 1.5, sampler="continuous")
    reports = pm.perturb(np.full(20_000, 0.6), np.random.default_rng(4))
    edges, cumulative = continuous_cdf(pm, 0.2)
    assert stats.kstest(reports, lambda x: np.interp(x, edges, cumulative)).pvalue < P_THRESHOLD


# --- Gaussian: the analytic (eps, delta) condition -----------------------------------------------
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    log_epsilon=st.floats(min_value=-2.0, max_value=3.0),
    log_delta=st.floats(min_value=-12.0, max_value=-0.5),
)
def test_analytic_sigma_satisfies_the_condition_and_is_tight(log_epsilon, log_delta):
    epsilon, delta = 10.0**log_epsilon, 10.0**log_delta
    sigma = mech.get("gaussian", epsilon, delta=delta, sampler="continuous").sigma
    assert math.isfinite(sigma) and sigma > 0
    # Phi(D/(2s) - e s/D) - e^e Phi(-D/(2s) - e s/D) <= delta at sigma, > delta just below it.
    assert analytic_delta(sigma, epsilon) <= delta
    assert analytic_delta(sigma * (1 - 1e-6), epsilon) > delta


@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 0.5, 1.0, 4.0, 30.0, 1000.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 0.01])
def test_analytic_sigma_agrees_with_dp_accounting(epsilon, delta):
    """An independent implementation: dp-accounting's exact Gaussian privacy loss (sensitivity 2)."""
    sigma = analytic_sigma(epsilon, delta)
    reference = GaussianPrivacyLoss(sigma, sensitivity=2.0)
    assert reference.get_delta_for_epsilon(epsilon) <= delta * (1 + 1e-6)
    assert GaussianPrivacyLoss(sigma * (1 - 1e-5), sensitivity=2.0).get_delta_for_epsilon(epsilon) > delta


@pytest.mark.parametrize("epsilon", [1e-2, 0.05, 0.3, 0.9])
@pytest.mark.parametrize("delta", [1e-9, 1e-5, 0.1])
def test_classic_sigma_is_valid_but_larger_than_analytic(epsilon, delta):
    classic = mech.get("gaussian", epsilon, delta=delta, calibration="classic", sampler="continuous")
    analytic = mech.get("gaussian", epsilon, delta=delta, sampler="continuous")
    assert classic.sigma == pytest.approx(classic_sigma(epsilon, delta))
    assert classic.sigma == pytest.approx(2 * math.sqrt(2 * math.log(1.25 / delta)) / epsilon)
    assert classic.sigma >= analytic.sigma
    assert analytic_delta(classic.sigma, epsilon) <= delta  # classic satisfies the exact condition
    assert classic.variance_coefficients == (classic.sigma**2, 0.0, 0.0)


def test_gaussian_guarantee_text_names_eps_and_delta():
    gaussian = mech.get("gaussian", 2.0, delta=1e-6)
    assert gaussian.guarantee.startswith("(2, 1e-06)-LDP")
    assert "analytic" in gaussian.guarantee
    assert "2-LDP" in mech.get("piecewise", 2.0).guarantee


@pytest.mark.parametrize(
    ("name", "options", "epsilon"),
    [("piecewise", {}, 40.0), ("square-wave", {"estimator": "debiased"}, 25.0), ("square-wave", {}, 25.0)],
)  # the continuous inverse CDF (the safe samplers have no plateau of floats to place)
def test_plateau_is_sampled_exactly_at_large_eps(name, options, epsilon):
    """At large eps the plateau is ~1e-9 wide; the plateau-anchored inverse CDF must still place
    reports uniformly on it (a form anchored at -C loses all digits here) with the right mass."""
    mechanism = mech.get(name, epsilon, sampler="continuous", **options)
    t, n = 0.6, 20_000
    reports = mechanism.perturb(np.full(n, t), np.random.default_rng(8))
    if name == "piecewise":
        low, high = mechanism.plateau(t)
        plateau_mass = 1 / (1 + math.exp(-epsilon / 2))
    else:
        scale, shift = mechanism._report_affine
        v, b = (t + 1) / 2, mechanism.half_width
        low, high = scale * (v - b) + shift, scale * (v + b) + shift
        plateau_mass = 1 - 1 / (1 + mechanism._constants[1])  # 1 - q
    assert 0 < high - low < 1e-8
    on_plateau = (reports >= low) & (reports <= high)
    assert stats.binomtest(int(on_plateau.sum()), n, plateau_mass).pvalue > P_THRESHOLD
    positions = (reports[on_plateau] - low) / (high - low)
    assert stats.kstest(positions, "uniform").pvalue > P_THRESHOLD

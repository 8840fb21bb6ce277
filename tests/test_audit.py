"""The empirical auditor (spec: audit.md): its bounds, its power, and its verdicts.

A test of an auditor must show both that sound mechanisms pass and that broken ones fail: each
"fail" test below is a claim the auditor refutes, each "pass" test asserts a lower bound that is
also close to the claim (the auditor has power, not only soundness).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

import ldpfed.audit.floating_point as floating_point
import ldpfed.mechanisms as mech
from ldpfed.audit import audit, build_subject, gaussian_vector_subject, run_audit
from ldpfed.audit.bounds import clopper_pearson_lower, clopper_pearson_upper, epsilon_lower_bound
from ldpfed.audit.floating_point import replay, replay_mismatch, replays_exactly
from ldpfed.audit.subject import FLOATING_POINT_FAMILIES, AuditSubject
from ldpfed.audit.subjects import SCALAR_INPUTS, has_sampler_option, scalar_inverter
from ldpfed.mechanisms.gaussian import analytic_sigma
from ldpfed.validation import LDPValueError

SAMPLES = 200_000  # per input; audits of scalar mechanisms take ~1-2 s at this size
# A set no draw of x' falls in, hit by k of n held-out draws of x, certifies about
# ln(k / ln(1/alpha)) (ln(1/alpha) ~ 7 here), so a quarter of the samples costs ln 4 = 1.4. At 50,000
# every continuous sampler's floating-point event still certifies 4.3 (Gaussian, bit patterns) to
# 7.9 (Laplace), over the 3.0 the test asserts; the sampler inversion runs 4-7x quicker.
FLOAT_EVENT_SAMPLES = 50_000
CONTINUOUS = [
    ("laplace", {}),
    ("piecewise", {}),
    ("square-wave", {"estimator": "raw"}),
    ("square-wave", {"estimator": "debiased"}),
    ("hybrid", {}),
    ("gaussian", {"delta": 1e-5}),
]
REAL_VALUED = ("threshold", "likelihood-ratio")


def config_id(config):
    name, options = config
    return name + "".join(f"-{v}" for k, v in options.items() if k != "delta")


# --- bounds --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("hits", "trials"), [(0, 50), (1, 50), (17, 50), (49, 50), (50, 50), (3, 100_000)])
def test_clopper_pearson_bounds_match_scipy_exact_interval(hits, trials):
    """An independent implementation: scipy's exact binomial interval at two-sided level 2 alpha."""
    alpha = 0.005
    interval = stats.binomtest(hits, trials).proportion_ci(confidence_level=1 - 2 * alpha, method="exact")
    assert float(clopper_pearson_lower(hits, trials, alpha)) == pytest.approx(interval.low, abs=1e-12)
    assert float(clopper_pearson_upper(hits, trials, alpha)) == pytest.approx(interval.high, abs=1e-12)


def test_epsilon_lower_bound_subtracts_delta_and_is_minus_inf_when_nothing_is_certified():
    alpha = 0.01
    p_low, q_high = clopper_pearson_lower(600, 1000, alpha), clopper_pearson_upper(100, 1000, alpha)
    assert float(epsilon_lower_bound(600, 1000, 100, 1000, 0.0, alpha)) == pytest.approx(math.log(p_low / q_high))
    assert float(epsilon_lower_bound(600, 1000, 100, 1000, 0.05, alpha)) == pytest.approx(
        math.log((p_low - 0.05) / q_high)
    )
    assert epsilon_lower_bound(0, 1000, 0, 1000, 0.0, alpha) == -np.inf
    assert epsilon_lower_bound(600, 1000, 100, 1000, 0.9, alpha) == -np.inf


@pytest.mark.parametrize("q", [0.003, 0.05])
def test_each_bound_misses_no_more_often_than_its_level(q):
    """Coverage, by simulating counts: each Clopper–Pearson bound misses the true probability in
    at most alpha of the runs. At q = 0.003 (6 expected hits) a normal-approximation upper bound
    misses in ~15% of runs; the exact one must not. Then eps_lower, with P[x in S] = e^eps q
    exactly, exceeds eps in at most 2 alpha of the runs."""
    epsilon, trials, alpha, runs = 1.0, 2000, 0.05, 40_000
    tolerance = 4 * math.sqrt(alpha * (1 - alpha) / runs)
    rng = np.random.default_rng(16)
    p = math.exp(epsilon) * q
    top, bottom = rng.binomial(trials, p, size=runs), rng.binomial(trials, q, size=runs)
    assert np.mean(clopper_pearson_lower(top, trials, alpha) > p) <= alpha + tolerance
    assert np.mean(clopper_pearson_upper(bottom, trials, alpha) < q) <= alpha + tolerance
    assert np.mean(epsilon_lower_bound(top, trials, bottom, trials, 0.0, alpha) > epsilon) <= 2 * alpha + 2 * tolerance


def test_confidence_is_split_over_two_bounds_per_evaluated_event():
    result = audit("grr", 1.0, samples=20_000, seed=1, confidence=0.95)
    alpha = 0.05 / (2 * len(result.events))
    for row in result.events:
        assert row["p_numerator_lower"] == pytest.approx(
            float(clopper_pearson_lower(row["hits_numerator"], row["draws_numerator"], alpha)), rel=1e-12
        )
        assert row["p_denominator_upper"] == pytest.approx(
            float(clopper_pearson_upper(row["hits_denominator"], row["draws_denominator"], alpha)), rel=1e-12
        )
    assert result.epsilon_lower == max(row["epsilon_lower"] for row in result.events)


def test_events_are_evaluated_on_the_held_out_half_only():
    result = audit("duchi", 1.0, samples=10_001, seed=2)
    assert all(row["draws_numerator"] == row["draws_denominator"] == 10_001 - 5_000 for row in result.events)


# --- floating-point events: the floats the samplers actually emit --------------------------------
@pytest.mark.parametrize("config", CONTINUOUS, ids=config_id)
def test_continuous_samplers_fail_on_their_floats(config):
    """Mironov 2012 (mechanisms.md, Floating-point safety): the continuous samplers emit floats
    whose set depends on the input, which the floating-point events turn into eps_lower >> eps."""
    name, options = config
    sampler = {"sampler": "continuous"} if has_sampler_option(name) else {}
    result = audit(name, 1.0, samples=FLOAT_EVENT_SAMPLES, seed=3, **options, **sampler)
    assert result.sampler == "continuous"
    assert result.verdict == "fail"
    assert result.epsilon_lower > 3.0
    assert result.event.split(":")[0] in FLOATING_POINT_FAMILIES


@pytest.mark.parametrize("config", CONTINUOUS, ids=config_id)
def test_continuous_samplers_pass_real_valued_events_with_power(config):
    """The same samplers follow their densities: events on real-valued statistics do not refute
    the claim, and the best one comes close to it (so the floats, not the law, are the flaw)."""
    name, options = config
    sampler = {"sampler": "continuous"} if has_sampler_option(name) else {}
    result = audit(name, 1.0, samples=SAMPLES, seed=4, families=REAL_VALUED, **options, **sampler)
    assert result.verdict == "pass"
    if name != "gaussian":  # (eps, delta): the delta-tail cannot be reached at this sample size
        assert result.epsilon_lower > 0.8


@pytest.mark.float_portable
@pytest.mark.parametrize("name", ["laplace", "piecewise", "square-wave", "hybrid"])
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_sampler_inversion_recognises_every_output_of_the_input_itself(name, epsilon):
    """No false 'impossible': every draw of t' is producible by t' (the event's denominator is 0)."""
    mechanism = mech.get(name, epsilon, **({"sampler": "continuous"} if has_sampler_option(name) else {}))
    inverter, reason = scalar_inverter(mechanism)
    assert inverter is not None, reason
    draws = mechanism.perturb(np.full(20_000, 1.0), np.random.default_rng(5))
    assert inverter.producible(draws, 1.0).all()


@pytest.mark.float_portable
def test_sampler_inversion_agrees_with_a_wide_brute_force_search():
    """Outputs of t = -1 that the inverter calls impossible for t' = +1 are not hit by any lattice
    point within +-2000 of the analytic inverse CDF either (an independent search)."""
    mechanism = mech.get("laplace", 1.0, **({"sampler": "continuous"} if has_sampler_option("laplace") else {}))
    inverter, reason = scalar_inverter(mechanism)
    assert inverter is not None, reason
    draws = mechanism.perturb(np.full(2_000, -1.0), np.random.default_rng(6))
    impossible = draws[~inverter.producible(draws, 1.0)][:200]
    assert impossible.size > 100
    b = mechanism.scale
    noise = impossible - 1.0
    u = np.where(noise < 0, np.exp(noise / b) / 2, 1 - np.exp(-noise / b) / 2)  # Laplace CDF
    centre = np.round(u * 2.0**53).astype(np.int64)
    for offset in range(-2000, 2001, 500):
        window = centre[:, None] + np.arange(offset, offset + 500)[None, :]
        outputs = replay(mechanism._sample, 1.0, window.ravel()).reshape(window.shape)
        assert not np.any(outputs == impossible[:, None])


@pytest.mark.float_portable
@pytest.mark.parametrize(("loc", "scale"), [(0.0, 1.0), (-1.0, 2.0), (1.0, 1.0 / 3.0), (0.5, 40.0)])
def test_laplace_replay_computes_what_the_generator_computes(loc, scale):
    """The stand-in's laplace equals Generator.laplace bit for bit on the same uniforms, on any
    CPU: both use the C library's log. With numpy's SIMD np.log (the old stand-in) 44 to 733 of
    these 2 x 10^5 draws differed in the last bit where numpy dispatches AVX-512 kernels."""
    n = 200_000
    expected = np.random.default_rng(1).laplace(loc, scale, n)
    uniforms = np.random.default_rng(1).random(n)
    assert np.all(uniforms > 0)  # numpy redraws u = 0: the streams would part there
    got = floating_point._ReplayUniforms(uniforms).laplace(loc, scale, n)
    np.testing.assert_array_equal(got.view(np.uint64), expected.view(np.uint64))


@pytest.mark.float_portable
def test_scalar_log_is_the_c_librarys_log(monkeypatch):
    """math.log calls the C library's log: scalar_log must equal it value for value (0 gives -inf),
    compiled and in its math.log fallback (no numba, or numba with SVML)."""
    values = np.concatenate([[0.0, 1.0, 2.0, 5e-324, 1.0 - 2**-53], np.random.default_rng(2).random(100_000) * 2.0])
    expected = [-math.inf if value == 0 else math.log(value) for value in values.tolist()]
    np.testing.assert_array_equal(floating_point.scalar_log(values), expected)
    monkeypatch.setattr(floating_point, "_compiled_log", lambda: None)
    np.testing.assert_array_equal(floating_point.scalar_log(values.reshape(5, -1)).ravel(), expected)


def test_a_failed_replay_check_is_reported_never_dropped(monkeypatch):
    """A log one ulp off the generator's (what np.log gives on AVX-512 for some values) must not
    give an inversion: the audit says that the never-produced family was unavailable and why, in
    its result and its JSON, and still fails the continuous sampler on its other float events."""

    def off_by_one_ulp(values):
        exact = np.array([-math.inf if value == 0 else math.log(value) for value in np.ravel(values).tolist()])
        return np.nextafter(exact, np.inf).reshape(np.shape(values))

    monkeypatch.setattr(floating_point, "scalar_log", off_by_one_ulp)
    laplace = mech.get("laplace", 1.0, sampler="continuous")
    draw = lambda t, n, rng: laplace.perturb(np.full(n, t), rng)  # noqa: E731
    reason = replay_mismatch(laplace._sample, draw, SCALAR_INPUTS)
    assert reason is not None and "differs from the generator" in reason
    result = audit("laplace", 1.0, sampler="continuous", samples=20_000, seed=3)
    assert [row["family"] for row in result.unavailable_families] == ["never-produced"]
    assert result.to_dict()["unavailable_families"][0]["reason"] == reason
    assert "never-produced" not in {row["family"] for row in result.events}
    assert result.verdict == "fail"
    with pytest.raises(LDPValueError, match="differs from the generator"):
        audit("laplace", 1.0, sampler="continuous", samples=20_000, seed=3, families=("never-produced",))


def test_audits_name_the_families_they_could_not_build():
    """The safe samplers draw raw words: no lattice inversion, and the result says so; a sampler
    that replays exactly reports nothing unavailable."""
    safe = audit("laplace", 1.0, samples=10_000, seed=3)
    assert [row["family"] for row in safe.unavailable_families] == ["never-produced"]
    assert "bit_generator" in safe.unavailable_families[0]["reason"]
    continuous = audit("piecewise", 1.0, sampler="continuous", samples=10_000, seed=3)
    assert continuous.unavailable_families == []
    assert "never-produced" in {row["family"] for row in continuous.events}


def test_replay_check_rejects_samplers_it_cannot_invert():
    continuous = {"sampler": "continuous"} if has_sampler_option("gaussian") else {}
    gaussian = mech.get("gaussian", 1.0, delta=1e-5, **continuous)  # draws normals, not one uniform per value
    draw = lambda t, n, rng: gaussian.perturb(np.full(n, t), rng)  # noqa: E731
    assert not replays_exactly(gaussian._sample, draw, SCALAR_INPUTS)
    assert build_subject(gaussian).producible is None


# --- sound mechanisms pass, with power; broken ones fail -----------------------------------------
@pytest.mark.parametrize(("name", "epsilon"), [("grr", 4.0), ("oue", 4.0), ("duchi", 4.0), ("grr", 0.5), ("oue", 0.5)])
def test_discrete_mechanisms_pass_with_a_tight_event(name, epsilon):
    """The power check: at eps = 4 with 10^6 draws, eps_lower > 0.8 eps (OUE's event is
    'true bit 1, other bit 0', with likelihood ratio e^eps)."""
    samples = 1_000_000 if epsilon == 4.0 else SAMPLES
    result = audit(name, epsilon, samples=samples, seed=7)
    assert result.verdict == "pass"
    assert result.epsilon_lower > 0.8 * epsilon
    assert result.epsilon_lower <= epsilon


def test_laplace_with_half_the_required_scale_fails_on_real_valued_events():
    """Laplace built for eps = 2 (scale 1) audited against the claim eps = 1 (which needs scale 2),
    with the default sampler and only real-valued events: the law itself is refuted."""
    half_scale = dataclasses.replace(build_subject(mech.get("laplace", 2.0)), epsilon=1.0)
    result = run_audit(half_scale, SAMPLES, seed=8, families=REAL_VALUED)
    assert result.verdict == "fail"
    assert result.epsilon_lower > 1.5  # its real guarantee is eps = 2


@pytest.mark.parametrize(("values", "probability", "samples"), [(1, 1e-3, 400_000), (4, 2e-3, 1_000_000)])
def test_point_masses_near_the_input_fail_on_exact_outputs(values, probability, samples):
    """The safe Laplace at eps = 1 that also releases, with probability `probability`, one of the
    `values` grid outputs t, t -+ 1/J, ... next to its input (uniformly): at each of them the ratio
    is (probability/values + (1 - probability) m(y|x)) / ((1 - probability) m(y|x')) > e^2.2 (m the
    exact mass), hidden from the threshold, likelihood-ratio and bit-pattern events (each < 1
    here), not from the exact-outputs event (a single value, or a set of 4, chosen on the
    selection half)."""
    laplace = mech.get("laplace", 1.0)
    step = 1.0 / laplace.safe_sampler.grid_steps
    inward = [np.arange(values) * step, -np.arange(values) * step]  # from t = -1 up, from t = +1 down

    def draw(which, n, rng):
        t = SCALAR_INPUTS[which]
        reports = laplace.perturb(np.full(n, t), rng)
        released = rng.random(n) < probability
        reports[released] = t + inward[which][rng.integers(0, values, np.count_nonzero(released))]
        return reports

    masses = [np.exp(laplace.log_density(-1.0 + inward[0], t)) for t in SCALAR_INPUTS]
    true_ratio = (probability / values + (1 - probability) * masses[0]) / ((1 - probability) * masses[1])
    assert np.log(true_ratio).min() > 2.2
    broken = dataclasses.replace(build_subject(laplace), draw=draw, producible=None)
    result = run_audit(broken, samples, seed=0)
    assert result.verdict == "fail"
    assert result.event.startswith("exact-outputs") and f"({values} exact outputs)" in result.event
    assert result.epsilon_lower > 1.5
    others = [row["epsilon_lower"] for row in result.events if row["family"] != "exact-outputs"]
    assert max(others) < 1.0  # only the new family sees it


@pytest.mark.parametrize("name", [*mech.available(), "histogram"])
def test_safe_samplers_pass_every_event(name):
    """Every floating-point-safe sampler passes the whole audit (floating-point events included)."""
    entry = "laplace" if name == "histogram" else name
    delta = 1e-5 if mech.get_class(entry).approximate else None
    result = audit(name, 1.0, delta, sampler="safe", samples=SAMPLES, seed=9)
    assert result.sampler == "safe"
    assert result.verdict == "pass", result.event


# --- vectors: nearest-centre and norm events -----------------------------------------------------
@pytest.mark.parametrize(
    ("families", "epsilon", "delta", "dims"),
    [
        (("nearest-centre",), 1.0, 1e-3, 10),
        (("norm-ball-x", "norm-ball-x'"), 2.0, 1e-3, 2),
        (None, 1.0, 1e-5, 10),
    ],
)
def test_vector_gaussian_passes_with_its_noise_and_fails_with_half(families, epsilon, delta, dims):
    sigma = analytic_sigma(epsilon, delta, 1.0)
    sound = run_audit(gaussian_vector_subject(epsilon, delta, dims), SAMPLES, seed=10, families=families)
    broken = run_audit(
        gaussian_vector_subject(epsilon, delta, dims, sigma=sigma / 2), SAMPLES, seed=10, families=families
    )
    assert sound.verdict == "pass"
    assert broken.verdict == "fail"
    assert broken.options["calibrated_sigma"] == pytest.approx(sigma)


def test_a_plugged_in_subject_with_an_output_only_one_input_emits_fails_the_table_event():
    """The plug-in interface: a subject is its sampler on two inputs plus its claim. Here x emits
    0..9 and x' only 0..8; the table of x' outputs exposes the 10% of x outputs x' never emits."""
    subject = AuditSubject(
        name="leaky-uniform",
        epsilon=1.0,
        delta=0.0,
        sampler="test",
        inputs=("x", "x'"),
        draw=lambda which, n, rng: rng.integers(0, 10 - which, size=n).astype(float),
    )
    result = run_audit(subject, samples=20_000, seed=15, families=("outputs-table",))
    assert result.verdict == "fail"
    assert result.events[0]["hits_denominator"] == 0
    sound = dataclasses.replace(
        subject, name="uniform", epsilon=0.1, draw=lambda which, n, rng: rng.integers(0, 10, size=n).astype(float)
    )
    assert run_audit(sound, samples=20_000, seed=15).verdict == "pass"


def test_histogram_encoding_uses_the_vector_events():
    result = audit(
        "histogram", 1.0, samples=20_000, seed=11, families=("projection", "nearest-centre", "likelihood-ratio")
    )
    assert [row["family"] for row in result.events] == ["projection", "nearest-centre", "likelihood-ratio"]
    assert result.verdict == "pass"


# --- interface -----------------------------------------------------------------------------------
def test_same_seed_same_result_and_another_seed_other_draws():
    first, again = (audit("piecewise", 2.0, samples=20_000, seed=12, families=REAL_VALUED) for _ in range(2))
    other = audit("piecewise", 2.0, samples=20_000, seed=13, families=REAL_VALUED)
    assert first == again
    assert first.events != other.events


def test_result_names_claim_sampler_and_event():
    result = audit("square-wave", 2.0, samples=20_000, seed=14, estimator="debiased", families=REAL_VALUED)
    row = result.to_dict()
    assert row["mechanism"] == "square-wave[estimator=debiased]"
    assert (row["claimed_epsilon"], row["claimed_delta"], row["samples"]) == (2.0, 0.0, 20_000)
    assert row["verdict"] in ("pass", "fail") and row["event"] and row["sampler"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (dict(mechanism="laplace", epsilon=-1.0), "epsilon"),
        (dict(mechanism="laplace", epsilon=float("nan")), "epsilon"),
        (dict(mechanism="nope", epsilon=1.0), "unknown mechanism"),
        (dict(mechanism="laplace", epsilon=1.0, delta=1e-5), "takes no delta"),
        (dict(mechanism="gaussian", epsilon=1.0), "delta"),
        (dict(mechanism="laplace", epsilon=1.0, samples=10), "samples"),
        (dict(mechanism="laplace", epsilon=1.0, confidence=1.0), "confidence"),
        (dict(mechanism="grr", epsilon=1.0, sampler="continuous"), "sampler"),
        (dict(mechanism="laplace", epsilon=1.0, families=("nearest-centre",)), "do not apply"),
    ],
)
def test_bad_input_is_one_clear_error(arguments, message):
    arguments = dict(arguments)
    with pytest.raises(LDPValueError, match=message):
        audit(arguments.pop("mechanism"), arguments.pop("epsilon"), **arguments)

"""Apple's count mean sketch (`cms`), symmetric unary encoding (`sue`) and the oracles' usual aliases:
exact laws (enumerated), the sketch's server step against the per-user contributions, the exact
variance against Monte Carlo, and `ldpfed audit` at eps 1 and 4 with a half-eps variant that fails."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import ldpfed.frequency as frequency
from ldpfed.audit import audit, build_subject, run_audit, subjects
from ldpfed.frequency.categorical import oracle_kind
from ldpfed.frequency.sketches import residue_moments

SAMPLES = 200_000  # per input, as tests/test_frequency_oracles_audit.py
SMALL = {"cms": {"hashes": 16, "columns": 32}, "sue": {}}  # a sketch small enough to audit quickly


def _cms_outputs(oracle):
    return np.array(
        [[j, *bits] for j in range(oracle.hashes) for bits in itertools.product((0, 1), repeat=oracle.columns)]
    )


def _sue_outputs(oracle):
    return np.array(list(itertools.product((0, 1), repeat=oracle.k)))


@pytest.mark.parametrize("epsilon", [0.5, 3.0])
@pytest.mark.parametrize(
    "name, options, outputs_of",
    [("cms", {"hashes": 3, "columns": 4, "seed": 2}, _cms_outputs), ("sue", {}, _sue_outputs)],
)
def test_enumerated_laws_sum_to_one_and_their_worst_ratio_is_e_eps(name, options, outputs_of, epsilon):
    oracle = frequency.get(name, epsilon, 5, **options)
    outputs = outputs_of(oracle)
    logs = np.array([oracle.log_probability(outputs, c) for c in range(5)])
    np.testing.assert_allclose(np.exp(logs).sum(axis=1), 1.0, rtol=1e-12)
    worst = max(np.max(logs[a] - logs[b]) for a in range(5) for b in range(5))
    assert worst <= epsilon + 1e-12 and worst == pytest.approx(epsilon, rel=1e-9)


def test_sampled_cms_reports_follow_log_probability():
    """The frequency of each of the 3 x 2^4 outputs of category 1 over 200,000 draws against its
    exact probability: a chi-square below its 99.9% quantile (47 cells: 82.7)."""
    oracle = frequency.get("cms", 1.0, 5, hashes=3, columns=4, seed=2)
    outputs = _cms_outputs(oracle)
    reports = oracle.perturb(np.full(200_000, 1), np.random.default_rng(4))
    codes = reports[:, 0] * 16 + reports[:, 1:] @ (1 << np.arange(3, -1, -1))
    observed = np.bincount(codes, minlength=48)
    expected = 200_000 * np.exp(oracle.log_probability(outputs, 1))
    assert np.sum((observed - expected) ** 2 / expected) < 82.7


def test_cms_sketch_equals_the_sum_of_contributions():
    oracle = frequency.get("cms", 2.0, 300, hashes=8, columns=64, seed=3)
    reports = oracle.perturb(np.random.default_rng(12).integers(0, 300, 4000), np.random.default_rng(13))
    np.testing.assert_allclose(oracle.estimate(reports), oracle.contributions(reports).mean(axis=0), atol=1e-10)


def test_cms_variance_over_noise_and_hash_draws_within_three_standard_errors():
    """R = 3000 collections of n = 300 users (100 each in categories 0-2 of 16), each with a fresh public
    hash seed (the variance is over the client's noise and the hash draw), s = 4 hashes into m = 8
    columns at eps 2 (the collision term is a large share). The sample variance of R near-Gaussian
    estimates has SE = V sqrt(2 / (R - 1)); a populated and an empty category each within 3 SE, and
    the collision term is needed (the noise term alone is more than 3 SE off)."""
    users = np.repeat(np.arange(3), 100)
    rng = np.random.default_rng(5)
    sketches = [frequency.get("cms", 2.0, 16, hashes=4, columns=8, seed=r) for r in range(3000)]
    estimates = np.array([sketch.estimate(sketch.perturb(users, rng)) for sketch in sketches])
    f = np.bincount(users, minlength=16) / users.size
    oracle = frequency.get("cms", 2.0, 16, hashes=4, columns=8)
    expected = oracle.variance(f, users.size)
    for d in (0, 10):
        se = expected[d] * np.sqrt(2 / (len(estimates) - 1))
        assert abs(estimates[:, d].var(ddof=1) - expected[d]) <= 3 * se, d
        assert abs(estimates[:, d].mean() - f[d]) <= 3 * np.sqrt(expected[d] / len(estimates))
    flip = oracle._flip
    kappa, _ = residue_moments(8)
    noise_only = flip * (1 - flip) / (1 - 2 * flip) ** 2 / users.size / (1 - kappa) ** 2
    assert abs(estimates[:, 10].var(ddof=1) - noise_only) > 3 * expected[10] * np.sqrt(2 / 2999)


def test_sue_variance_within_three_standard_errors():
    """SUE is a counting oracle (Wang et al. Theorem 2 with p = e^(eps/2)/(e^(eps/2) + 1), q = 1 - p):
    R = 2000 collections of 200 users, SE as above."""
    oracle = frequency.get("sue", 1.0, 4)
    users = np.repeat([0, 1], 100)
    rng = np.random.default_rng(6)
    estimates = np.array([oracle.estimate(oracle.perturb(users, rng)) for _ in range(2000)])
    expected = oracle.variance(np.array([0.5, 0.5, 0.0, 0.0]), 200)
    se = expected * np.sqrt(2 / 1999)
    assert np.all(np.abs(estimates.var(axis=0, ddof=1) - expected) <= 3 * se)


@pytest.mark.parametrize("name", ["cms", "sue"])
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_new_oracles_pass_the_audit(name, epsilon):
    result = audit(name, epsilon, samples=SAMPLES, seed=21, **SMALL[name])
    assert result.verdict == "pass", result.event
    assert result.epsilon_lower > 0.8 * epsilon


@pytest.mark.parametrize("name", ["cms", "sue"])
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_a_variant_calibrated_at_twice_the_budget_fails(name, epsilon):
    """Built for 2 eps, claiming eps (half the privacy it claims): refuted."""
    broken = dataclasses.replace(build_subject(frequency.get(name, 2 * epsilon, 4, **SMALL[name])), epsilon=epsilon)
    result = run_audit(broken, SAMPLES, seed=22)
    assert result.verdict == "fail"
    assert result.epsilon_lower > epsilon


def test_aliases_name_the_same_oracles():
    for alias, name in {"hr": "hadamard", "SS": "subset-selection", "de": "grr", "l_sue": "rappor"}.items():
        assert frequency.get_class(alias) is frequency.get_class(name)
        assert oracle_kind(alias) == name
        assert alias.lower().replace("_", "-") in subjects.available()
    assert frequency.get("k-subset", 1.0, 8).name == "subset-selection"
    assert "cms" in frequency.available() and "sue" in frequency.available()


def test_the_audit_projection_keeps_the_log_ratio_and_class():
    """A report's projection (j and its bits at h_j(0), h_j(1)) gives log P(r | 0) - log P(r | 1) and
    the class exactly as the full report does; an audit of the default 1,024-column sketch draws in
    chunks of projections."""
    oracle = frequency.get("cms", 1.5, 6, hashes=8, columns=4, seed=1)  # many collisions h_j(0) = h_j(1)
    reports = oracle.perturb(np.random.default_rng(7).integers(0, 6, 3000), np.random.default_rng(8))
    projected = oracle.audit_projection(reports)
    full = oracle.log_probability(reports, 0) - oracle.log_probability(reports, 1)
    np.testing.assert_allclose(oracle.projected_log_ratio(projected), full, atol=1e-12)
    np.testing.assert_array_equal(oracle.projected_classes(projected), oracle.audit_classes(reports))
    assert (oracle.projected_classes(projected) == 4).any()
    result = audit("cms", 1.0, samples=20_000, seed=3)
    assert result.verdict == "pass" and result.options["columns"] == 1024

"""The in-run audit's verdict, and its power at the mechanism level: a Gaussian mechanism whose noise
is secretly halved is flagged, the sound one is not.

Setting (the one the federated audit is sized on): m = 1,000 canaries, each inserted by a fair
secret coin (~500 seen) into one Gaussian mechanism in d = 10^4 (sum of the inserted unit directions
+ N(0, sigma^2 I)), sigma calibrated for sensitivity 1 at accounted eps = 2, delta = 1e-5. Scores
are the canaries' cosines with the output. The one-run bound and the cosine lower limit each take
97.5%, so a sound run is flagged with probability <= 5% by either. Measured on 10 seeds: the sound
run's cosine estimate has median 2.35 (>= half its accounted 2), its lower limit at most 1.90 and its
one-run bound at most 0.73; with halved noise (true eps 4.4) the lower limit is at least 3.61 and the
one-run bound at most 1.66 (the one-run bound needs far more canaries to see a Gaussian mechanism's
eps: with r = 1,000 guesses, even all right certify only 5.8).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ldpfed.audit.canaries import (
    CosineEstimate,
    canary_cosines,
    canary_directions,
    final_model_estimate,
    final_model_lower_limit,
    inclusion_coins,
)
from ldpfed.audit.in_run import CanaryRecord, canary_audit
from ldpfed.audit.one_run import OneRunBound, one_run_audit
from ldpfed.audit.verdict import audit_verdict
from ldpfed.mechanisms.gaussian import analytic_sigma
from ldpfed.validation import LDPValueError

ACCOUNTED, DELTA, DIMENSION, CANARIES = 2.0, 1e-5, 10_000, 1000


def test_lines_read_like_the_console():
    bound = OneRunBound(1.31, 0.95, 0.0, 1000, 1000, 700, 500, 500)
    verdict = audit_verdict(4.0, lower_bound=bound)
    assert verdict.lines == ["accounted 4.0; empirical lower bound 1.3 (95%)"]
    assert not verdict.failed and not verdict.flagged
    failed = audit_verdict(1.0, lower_bound=bound)
    assert failed.failed and failed.flagged
    assert failed.lines[1].startswith("FAILED: the empirical lower bound 1.3 (95%) exceeds the accounted eps 1.0")
    with pytest.raises(LDPValueError):
        audit_verdict(0.0)
    with pytest.raises(LDPValueError):
        audit_verdict(1.0, estimate_lower=0.5)


@pytest.fixture(scope="module")
def directions():
    return canary_directions(np.random.SeedSequence(2026), range(CANARIES), DIMENSION)


def _run(seed: int, noise_scale: float, directions: np.ndarray):
    """One mechanism run: fresh coins and noise per seed (one canary design for all seeds)."""
    coins_seed, noise_seed = np.random.SeedSequence(seed).spawn(2)
    coins = inclusion_coins(np.random.default_rng(coins_seed), CANARIES)
    sigma = noise_scale * analytic_sigma(ACCOUNTED, DELTA, 1.0)
    noise = np.random.default_rng(noise_seed).standard_normal(DIMENSION)
    cosines = canary_cosines(directions, directions[coins].sum(axis=0) + sigma * noise)
    seen = cosines[coins]
    return audit_verdict(
        ACCOUNTED,
        lower_bound=one_run_audit(cosines, coins, delta=DELTA, confidence=0.975),
        estimate=final_model_estimate(seen, DIMENSION, DELTA, unseen=CANARIES - seen.size),
        estimate_lower=final_model_lower_limit(seen, DIMENSION, DELTA, 0.975),
        estimate_confidence=0.975,
    )


def test_sound_mechanism_is_not_flagged_and_its_estimate_reaches_half_the_accounting(directions):
    verdicts = [_run(seed, 1.0, directions) for seed in range(20)]
    assert sum(verdict.flagged for verdict in verdicts) <= 1
    assert np.median([verdict.estimate.epsilon for verdict in verdicts]) >= ACCOUNTED / 2


def test_halved_noise_is_flagged(directions):
    verdicts = [_run(seed, 0.5, directions) for seed in range(100, 110)]
    assert all(verdict.flagged for verdict in verdicts)
    assert any("SUSPECT" in line for line in verdicts[0].lines)


def test_full_line_with_the_cosine_estimate():
    estimate = CosineEstimate(3.94, 1e-5, "final model", 0.03, 0.01, 0.0, 0.01, 500, 500, 10_000)
    bound = OneRunBound(1.31, 0.95, 0.0, 1000, 1000, 700, 500, 500)
    verdict = audit_verdict(4.0, bound, estimate, estimate_lower=3.12, estimate_confidence=0.95)
    line = "accounted 4.0; empirical lower bound 1.3 (95%); cosine estimate 3.9 (95% lower limit 3.1)"
    assert verdict.lines == [line]
    assert json.loads(json.dumps(verdict.to_dict()))["cosine"]["epsilon"] == 3.94


def _federated_gaussian(record: CanaryRecord, rounds: int, noise_scale: float, seed: int):
    """A toy run: every round, each inserted canary adds its unit direction, the server adds
    N(0, sigma^2 I); sigma is calibrated so that `rounds` compositions cost ACCOUNTED at DELTA
    (Gaussian mechanism composed: sigma_total = sigma / sqrt(rounds))."""
    directions, coins = record.directions(), np.asarray(record.coins)
    sigma = noise_scale * analytic_sigma(ACCOUNTED, DELTA, 1.0) * np.sqrt(rounds)
    noise = np.random.default_rng(seed).standard_normal((rounds, record.dimension))
    return directions[coins].sum(axis=0) + sigma * noise  # (rounds, d): each round's aggregate


@pytest.mark.parametrize(("noise_scale", "flagged"), [(1.0, False), (0.5, True)])
def test_canary_audit_of_a_run_black_and_white_box(noise_scale, flagged):
    root, coins_seed = np.random.SeedSequence(5).spawn(2)
    coins = inclusion_coins(np.random.default_rng(coins_seed), 600)
    record = CanaryRecord.create(root, range(600), coins, 5000)
    rounds = _federated_gaussian(record, 4, noise_scale, seed=1)
    black = canary_audit(ACCOUNTED, record, delta=DELTA, final_delta=rounds.sum(axis=0))
    assert black.flagged == flagged and black.estimate.threat_model == "final model"
    white = canary_audit(ACCOUNTED, record, delta=DELTA, round_deltas=rounds)
    assert white.estimate.threat_model == "all iterates" and white.estimate_lower is None
    assert white.lower_bound.confidence == 0.95 and black.lower_bound.confidence == 0.975
    kept = np.full(600, -1.0)
    for step in rounds:  # the running maximum a run keeps instead of the deltas
        kept = np.maximum(kept, canary_cosines(record.directions(), step))
    streamed = canary_audit(ACCOUNTED, record, delta=DELTA, max_cosines=kept)
    assert streamed.estimate.epsilon == pytest.approx(white.estimate.epsilon, rel=1e-9)
    assert streamed.lower_bound == white.lower_bound
    with pytest.raises(LDPValueError):
        canary_audit(ACCOUNTED, record, delta=DELTA)

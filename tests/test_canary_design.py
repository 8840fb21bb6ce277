"""The canaries' design (ldpfed.protocols.canaries): who is a canary, what the world hands it, its
update, and the local audit's two-sided estimate and its lower confidence limit."""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.audit.canaries import epsilon_two_gaussians
from ldpfed.config import Config
from ldpfed.protocols import canaries, seeds
from ldpfed.protocols.session import World
from ldpfed.tasks import validated


def _config(**options) -> Config:
    return validated(Config().with_options({"task": "train", "clients": 5, "canaries": 7, **options}))


def test_the_federation_counts_the_canaries_and_the_user_config_comes_back():
    config = _config()
    federation = canaries.expanded(config)
    assert federation.federation.clients == 12 and canaries.real_clients(federation) == 5
    assert canaries.expanded(federation) is federation  # expanding twice is expanding once
    assert canaries.user_config(federation) == config and canaries.real_clients(config) == 5
    assert canaries.canary_ids(federation) == list(range(5, 12))
    assert canaries.expanded(_config(canaries=0)).federation.clients == 5


def test_the_world_wraps_only_the_canaries_secrets_with_one_design():
    world = World.from_config(_config(), noise_seed=3)
    assert set(world.secrets) == set(range(12))
    wrapped = [world.secrets[pid] for pid in range(5, 12)]
    assert all(isinstance(secret, canaries.CanarySecret) for secret in wrapped)
    assert not any(isinstance(world.secrets[pid], canaries.CanarySecret) for pid in range(5))
    assert len({secret.design for secret in wrapped}) == 1 and len({secret.noise for secret in wrapped}) == 7
    # the design is a child of the noise root, not of the run seed: another root, other coins and directions
    assert wrapped[0].design == seeds.canary_secret(3) != seeds.canary_secret(4)
    assert world.canaries.ids == list(range(5, 12))


def test_a_canary_update_is_beyond_the_clip_along_its_direction_or_against_it():
    design = canaries.CanaryDesign(secret=11, first=5, count=40)
    updates = design.updates(design.ids, 300, clip=0.5, left_out=-1.0)
    directions = design.record(300).directions()
    norms = np.linalg.norm(updates, axis=1)
    assert np.allclose(norms, canaries.CANARY_SCALE * 0.5 * np.sqrt(300))
    signs = np.einsum("ij,ij->i", updates, directions) / norms
    assert np.allclose(signs, np.where(design.coins, 1.0, -1.0))
    dropped = design.updates(design.ids, 300, clip=0.5, left_out=0.0)
    assert np.all(dropped[~design.coins] == 0.0)


def test_two_sided_estimate_and_its_lower_limit_cover_the_truth():
    # 20 draws of 150 + 150 Gaussian scores at mu = 1.5 (one std): the 97.5% limit exceeds the true
    # eps at most 2.5% of the time (Binomial(20, 0.025): 3 or more misses have probability 0.014)
    # and stays below the point estimate; the estimate's median within its spread (mu's standard
    # error sqrt(2/150) = 0.12, i.e. eps +-0.5 around 6.3 at delta 1e-5) of the truth.
    delta, std, mu = 1e-5, 0.05, 1.5
    truth = epsilon_two_gaussians(0.0, 1.0, mu, 1.0, delta)
    coins = np.arange(300) < 150
    misses, estimates = 0, []
    for seed in range(20):
        scores = np.random.default_rng(seed).normal(0.0, std, 300) + np.where(coins, mu * std / 2, -mu * std / 2)
        estimate = canaries.replacement_estimate(scores, coins, 300, delta).epsilon
        limit = canaries.replacement_lower_limit(scores, coins, delta, 0.975)
        assert limit <= estimate
        misses += limit > truth
        estimates.append(estimate)
    assert misses <= 2
    assert abs(np.median(estimates) - truth) < 1.0


def test_the_verdict_needs_both_sides():
    with pytest.raises(Exception, match="at least 2"):
        canaries.replacement_verdict(4.0, np.zeros(5), np.array([1, 0, 0, 0, 0], dtype=bool), 10, 1e-5)

"""Many clients' noise streams at once (ldpfed.samplers.streams) draw exactly what each client's
own numpy Generator draws: the same PCG64 state, words, uniforms and reports."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import ldpfed.mechanisms as mechanisms
from ldpfed.samplers.streams import StreamKeys


def client_secrets(count: int, seed: int = 0) -> list[int]:
    """Secrets of every length up to 128 bits (fewer 32-bit words change SeedSequence's padding),
    0, and one beyond 128 bits (seeded through numpy)."""
    rng = np.random.default_rng(seed)
    drawn = [int.from_bytes(rng.bytes(16), "little") >> int(rng.integers(0, 128)) for _ in range(count)]
    return [*drawn, 0, 1, 2**32, (1 << 130) + 12345]


@pytest.mark.parametrize("spawn_key", [(0, 1, 0), (0, 3_000_000_000, 7), (1, 2**40)])
def test_states_equal_numpy_seedsequence_pcg64(spawn_key):
    values = client_secrets(200)
    streams = StreamKeys(values).streams(spawn_key)
    for row, secret in enumerate(values):
        state = np.random.default_rng(np.random.SeedSequence(secret, spawn_key=spawn_key)).bit_generator.state["state"]
        low, high, inc_low, inc_high = (int(word) for word in streams.states[row])
        assert (low | high << 64, inc_low | inc_high << 64) == (state["state"], state["inc"])


def test_uniforms_then_reports_continue_each_clients_stream():
    """Row i's uniforms and then its reports are the Generator's random(k) and then its
    perturb(values), in that order (the mean task's mask, then its reports)."""
    values = client_secrets(40, seed=1)
    keys = StreamKeys(values)
    streams = keys.take(np.arange(10, 30)).streams((0, 5, 0))
    mechanism = mechanisms.get("laplace", 1.0)
    inputs = np.random.default_rng(2).uniform(-1, 1, (20, 7))
    uniforms = streams.uniforms(6)
    reports = mechanism.perturb_streams(inputs, streams)
    for row, secret in enumerate(values[10:30]):
        rng = np.random.default_rng(np.random.SeedSequence(secret, spawn_key=(0, 5, 0)))
        assert np.array_equal(rng.random(6), uniforms[row])
        assert np.array_equal(mechanism.perturb(inputs[row], rng), reports[row])


def test_samplers_without_a_kernel_continue_the_streams_too():
    """Duchi's sampler has no compiled pass: each row is drawn from a Generator in its state."""
    values = client_secrets(5, seed=3)
    streams = StreamKeys(values).streams((0, 1, 0))
    mechanism = mechanisms.get("duchi", 1.0)
    inputs = np.random.default_rng(4).uniform(-1, 1, (len(values), 3))
    reports = mechanism.perturb_streams(inputs, streams)
    after = streams.uniforms(1)
    for row, secret in enumerate(values):
        rng = np.random.default_rng(np.random.SeedSequence(secret, spawn_key=(0, 1, 0)))
        assert np.array_equal(mechanism.perturb(inputs[row], rng), reports[row])
        assert rng.random() == after[row, 0]


def test_fresh_os_entropy_secrets_too():
    values = [secrets.randbits(128) for _ in range(50)]
    streams = StreamKeys(values).streams((0, 9, 0))
    first = streams.uniforms(1)[:, 0]
    expected = [np.random.default_rng(np.random.SeedSequence(s, spawn_key=(0, 9, 0))).random() for s in values]
    assert np.array_equal(first, expected)

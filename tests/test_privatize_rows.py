"""Batched privatization (spec: scale.md): `privatize_rows(updates, rngs, broadcast)`
privatizes a node's (clients, d) block with one generator per client and must equal, bit for bit,
privatizing each client's row alone with its generator, for every privatizer kind. Each client's
generator is its own stream (secret, NOISE, round), so the equality is what makes a client's noise
independent of the clients it is batched with.

The rows are drawn to cross the clipping bounds (some rows inside, some clipped) and to have
different norms, so a batched step that mixed rows (a wrong reshape of the m-of-d masks, a norm or
a rotation taken over the block, the generators' draws interleaved in another order) changes them.
"""

from __future__ import annotations

import numpy as np
import pytest

import ldpfed.mechanisms as mechanisms
from ldpfed.directional.privatizer import REFERENCE, ROTATION_SEED, DirectionalPrivatizer
from ldpfed.gradient_noise import available as gradient_noises
from ldpfed.training.noise_privatizer import NoisePrivatizer
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError

CLIENTS, DIMS, CLIP = 5, 24, 0.5


def block(dims: int = DIMS, clients: int = CLIENTS) -> np.ndarray:
    rng = np.random.default_rng(11)
    return rng.normal(size=(clients, dims)) * np.geomspace(0.01, 2.0, clients)[:, None]


def generators(count: int, salt: int = 0) -> list[np.random.Generator]:
    return [np.random.default_rng([salt, k]) for k in range(count)]


def row_by_row(privatizer, updates, broadcast=None) -> np.ndarray:
    """The reference: each row alone, with the same generators (fresh ones, same seeds)."""
    rows = []
    for row, rng in zip(updates, generators(len(updates))):
        if isinstance(privatizer, DirectionalPrivatizer):
            broadcast = broadcast or {}
            rows.append(
                privatizer.privatize(
                    row, rng, reference=broadcast.get(REFERENCE), rotation_seed=broadcast.get(ROTATION_SEED)
                )
            )
        else:
            rows.append(privatizer.privatize(row, rng))
    return np.stack(rows)


def assert_rows_match(privatizer, updates, broadcast=None):
    batched = privatizer.privatize_rows(updates, generators(len(updates)), broadcast)
    np.testing.assert_array_equal(batched, row_by_row(privatizer, updates, broadcast))
    return batched


# ---- per-coordinate mechanisms (ldpfed.training.UpdatePrivatizer), m-of-d included ---------------
@pytest.mark.parametrize("mechanism", mechanisms.available())
@pytest.mark.parametrize("report_dims", [None, 3, DIMS])
def test_numeric_mechanisms_batched_equal_row_by_row(mechanism, report_dims):
    delta = 1e-5 if mechanisms.get_class(mechanism).approximate else None
    privatizer = UpdatePrivatizer(mechanism, 8.0, CLIP, delta=delta, report_dims=report_dims)
    batched = assert_rows_match(privatizer, block())
    m = privatizer.dims_reported(DIMS)
    assert np.all(np.count_nonzero(batched, axis=1) <= m)  # each row reports its own m coordinates
    if m < DIMS:  # the clients' coordinate samples differ (each from its own generator)
        assert len({tuple(np.flatnonzero(row)) for row in batched}) > 1


@pytest.mark.parametrize("options", [{"sampler": "continuous"}, {"estimator": "debiased"}])
def test_numeric_mechanism_options_batched_equal_row_by_row(options):
    name = "square-wave" if "estimator" in options else "piecewise"
    assert_rows_match(UpdatePrivatizer(name, 2.0, CLIP, report_dims=4, **options), block())


def test_blocks_longer_than_a_sampling_block_and_no_noise():
    """d beyond the samplers' cache block (16384 values per call) and mechanism none."""
    assert_rows_match(UpdatePrivatizer("laplace", 2.0, CLIP, report_dims=20000), block(20000, 2))
    none = UpdatePrivatizer("none", None, CLIP)
    np.testing.assert_array_equal(none.privatize_rows(block(), generators(CLIENTS)), np.clip(block(), -CLIP, CLIP))


# ---- gradient noises (ldpfed.gradient_noise) ---------------------------------------------------
@pytest.mark.parametrize("name", gradient_noises())
def test_gradient_noises_batched_equal_row_by_row(name):
    privatizer = NoisePrivatizer(name, epsilon=4.0, delta=1e-5, clip=CLIP)
    assert_rows_match(privatizer, block())


def test_inid_continuous_sampler_and_layers_batched_equal_row_by_row():
    privatizer = NoisePrivatizer("inid-laplace", epsilon=4.0, clip=CLIP, layer_sizes=[10, 14], sampler="continuous")
    assert_rows_match(privatizer, block())


# ---- LDPVec (ldpfed.directional) ---------------------------------------------------------------
LDPVEC_CASES = [
    ("laplace", {}),
    ("piecewise", {"magnitude": "normalize", "window": "centred", "beta": 0.5}),
    ("gaussian", {"rotation": "hadamard"}),  # the safe Gaussian angles (one vector release)
    ("gaussian", {"sampler": "continuous"}),
    ("duchi", {"magnitude": "exact-unsafe"}),
]


@pytest.mark.float_portable
@pytest.mark.parametrize("base, options", LDPVEC_CASES)
def test_ldpvec_batched_equals_row_by_row(base, options):
    delta = 1e-5 if base == "gaussian" else None
    privatizer = DirectionalPrivatizer(base, 8.0, CLIP, delta, **options)
    broadcast = {REFERENCE: np.linspace(-1.0, 1.0, DIMS), ROTATION_SEED: np.array([7, 1, 2, 3], dtype=np.uint32)}
    assert_rows_match(privatizer, block(), broadcast)


def test_bad_generators_are_refused():
    privatizer = UpdatePrivatizer("laplace", 2.0, CLIP)
    with pytest.raises(LDPValueError, match="one generator per client"):
        privatizer.privatize_rows(block(), generators(CLIENTS - 1))
    with pytest.raises(TypeError, match="Generator"):
        privatizer.privatize_rows(block(), [0] * CLIENTS)
    with pytest.raises(LDPValueError, match="rotation seed"):
        DirectionalPrivatizer("laplace", 2.0, CLIP, rotation="hadamard").privatize_rows(
            block(), generators(CLIENTS), {}
        )


def test_mechanism_perturb_rows_draws_each_row_from_its_generator():
    """The base class's default: row i is perturb(values[i], rngs[i]); reordering the rows with
    their generators reorders the output."""
    mechanism = mechanisms.get("piecewise", 1.0)
    values = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    out = mechanism.perturb_rows(values, generators(3))
    for i, rng in enumerate(generators(3)):
        np.testing.assert_array_equal(out[i], mechanism.perturb(values[i], rng))
    swapped = mechanism.perturb_rows(values[::-1], generators(3)[::-1])
    np.testing.assert_array_equal(swapped, out[::-1])

"""The sketches' public hash functions (hcms, cms) are drawn per run from a public hash index: the
run's data seed, which client and server both hold, never the clients' noise secrets (so the index
the server learns lets it redraw no client's noise, and the hash draw the variance averages over is
fresh in every run)."""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.config import Config
from ldpfed.frequency.categorical import AttributeOracles, takes_hash_seed
from ldpfed.protocols import seeds
from ldpfed.protocols.frequency import client_from_config, public_hash_seed, server_from_config
from ldpfed.tasks import validated


def _config(mechanism: str, seed: int) -> Config:
    options = {"task": "frequency", "engine": "local", "clients": 2, "users": 200, "dims": 1, "categories": "16"}
    return validated(Config().with_options({**options, "mechanism": mechanism, "seed": seed}))


@pytest.mark.parametrize("mechanism", ["hcms", "cms"])
def test_client_and_server_share_the_runs_public_hash_index(mechanism):
    config = _config(mechanism, 4)
    data_seed = seeds.data_seed(4)
    server = server_from_config(config, data_seed)
    clients = [client_from_config(config, pid, data_seed, secret) for pid, secret in seeds.client_secrets(9, 2).items()]
    index = public_hash_seed(data_seed)
    assert server.oracles.oracles[0].seed == index
    assert all(client.oracles.oracles[0].seed == index for client in clients)
    assert server.oracles.describe()["per_attribute"]["seed"] == index  # recorded: it is public
    other = server_from_config(_config(mechanism, 5), seeds.data_seed(5)).oracles.oracles[0]
    assert other.seed != index and not np.array_equal(other.coefficients, server.oracles.oracles[0].coefficients)


def test_the_index_is_a_function_of_the_public_data_seed_alone():
    """Deterministic in the data seed (both halves derive it), 64 bits, and distinct from the data's
    own stream (spawned under its own key)."""
    data_seed = seeds.data_seed(7)
    assert public_hash_seed(data_seed) == public_hash_seed(data_seed)
    assert 0 <= public_hash_seed(data_seed) < 2**64
    assert public_hash_seed(data_seed) != int(np.random.default_rng(data_seed).integers(0, 2**63))


def test_only_the_sketches_take_it():
    assert takes_hash_seed("hcms") and takes_hash_seed("cms")
    assert not takes_hash_seed("grr") and not takes_hash_seed("laplace")
    built = AttributeOracles.build("olh", 1.0, [8], hash_seed=123)  # ignored: OLH's hash seeds are the users'
    assert built.oracles[0].name == "olh"
    assert AttributeOracles.build("cms", 1.0, [8], hash_seed=123).oracles[0].seed == 123
    for histogram in ("laplace", "piecewise"):  # histogram encodings are built with the index too, ignoring it
        assert AttributeOracles.build(histogram, 1.0, [8], hash_seed=123).name == histogram

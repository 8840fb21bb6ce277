"""Every random stream of a simulation, derived from the one `--seed` (spec: federated.md,
reproducibility).

Streams are keyed by purpose, Flower partition id and round through
`np.random.SeedSequence(seed, spawn_key=(purpose, ...))`; Flower's random node ids never enter,
so the same seed gives the same data, partition, client sampling and noise whatever the
scheduling of clients on Ray workers.
"""

from __future__ import annotations

import numpy as np

DATA = 0  # synthetic tuples / federated partition
CLIENT_NOISE = 1  # a client's local randomizer in a round: (CLIENT_NOISE, partition_id, round)
SAMPLING = 2  # the server's client sampling in a round: (SAMPLING, round)
LOCAL_TRAINING = 3  # a client's minibatch order in a round: (LOCAL_TRAINING, partition_id, round)
MODEL_INIT = 4  # the initial global model


def stream(seed: int, purpose: int, *keys: int) -> np.random.Generator:
    """The generator for one purpose (and partition id / round)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(purpose, *keys)))


def integer_seed(seed: int, purpose: int, *keys: int) -> int:
    """A 32-bit integer seed for libraries that take one (torch), from the same stream."""
    return int(np.random.SeedSequence(seed, spawn_key=(purpose, *keys)).generate_state(1)[0])

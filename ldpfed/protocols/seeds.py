"""Who draws which randomness (spec: federated.md, "Who knows the noise"; reproducibility).

The harness of a simulation plays the world, not the server: from the run seed it spawns
- the data seed (synthetic data, the partition of the users or samples over clients),
- the server's seed (client sampling, model initialisation, evaluation: the server's own choices),
- one secret per client (partition id): the client's noise, report mask and minibatch order.
The server receives its own seed and the data seed only, never the run seed or a secret, so it
cannot re-draw a client's noise; the same run seed still reproduces a run exactly.
`fresh_secret()` is OS entropy (`--fresh-noise`, and a deployment node without a seed).

Streams are `SeedSequence(seed, spawn_key=(purpose, *keys))`, keyed by purpose, round and (for
the server) nothing of Flower's random node ids, so scheduling never changes a result.
"""

from __future__ import annotations

import numpy as np

# children of the run seed
DATA, SERVER, CLIENTS = 0, 1, 2
# purposes under a client's secret: (purpose, round)
NOISE, MINIBATCHES = 0, 1
# purposes under the server's seed (ROTATION: LDPVec's public Hadamard signs, round-keyed)
SAMPLING, MODEL_INIT, ROTATION = 0, 1, 2


def _entropy(seed_sequence: np.random.SeedSequence) -> int:
    """A 128-bit integer seed drawn from `seed_sequence`."""
    words = seed_sequence.generate_state(4, dtype=np.uint32)
    return int(sum(int(word) << (32 * i) for i, word in enumerate(words)))


def data_seed(run_seed: int) -> int:
    return _entropy(np.random.SeedSequence(run_seed, spawn_key=(DATA,)))


def server_seed(run_seed: int) -> int:
    return _entropy(np.random.SeedSequence(run_seed, spawn_key=(SERVER,)))


def client_secrets(run_seed: int, clients: int) -> dict[int, int]:
    """{partition id: 128-bit secret}; handed to the nodes outside the protocol."""
    return {pid: _entropy(np.random.SeedSequence(run_seed, spawn_key=(CLIENTS, pid))) for pid in range(clients)}


def fresh_secret() -> int:
    """OS entropy (128 bits)."""
    return int(np.random.SeedSequence().entropy)


def stream(seed: int, purpose: int, *keys: int) -> np.random.SeedSequence:
    """The seed sequence of one purpose (and round / client) under `seed`."""
    return np.random.SeedSequence(seed, spawn_key=(purpose, *keys))


def rng(seed: int, purpose: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng(stream(seed, purpose, *keys))


def torch_seed(seed: int, purpose: int, *keys: int) -> int:
    """A 32-bit seed for torch.Generator from the same stream."""
    return int(stream(seed, purpose, *keys).generate_state(1)[0])

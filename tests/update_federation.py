"""A small synthetic federation of fixed clean updates for the update-aggregation tests: K clients,
d coordinates, clipping bound C, FedAvg weights from uneven sample counts, and R independent
privatizations of the same updates (one SeedSequence.spawn stream per repetition)."""

from __future__ import annotations

import numpy as np

import ldpfed.mechanisms as registry
from ldpfed.training.privatize import UpdatePrivatizer

CLIENTS, DIMS, CLIP = 50, 200, 0.5
DELTA = 1e-5


def clean_updates(seed: int = 0, clients: int = CLIENTS, dims: int = DIMS, identical: bool = False) -> np.ndarray:
    """(clients, dims) updates around per-coordinate centres; about a fifth of the values lie
    beyond [-C, C], so clipping is exercised. `identical`: every client sends the same row."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-0.6, 0.6, dims)
    spread = rng.uniform(0.01, 0.3, dims)
    rows = 1 if identical else clients
    updates = centres + spread * rng.standard_normal((rows, dims))
    return np.broadcast_to(updates, (clients, dims)).copy()


def sample_counts(seed: int = 0, clients: int = CLIENTS) -> np.ndarray:
    return np.random.default_rng(seed + 1).integers(20, 200, clients).astype(float)


def privatizer(name: str, epsilon: float = 2.0, report_dims: int | None = None) -> UpdatePrivatizer:
    delta = DELTA if name != "none" and registry.get_class(name).approximate else None
    return UpdatePrivatizer(name, epsilon, CLIP, delta=delta, report_dims=report_dims)


def repeated_privatizations(privatizer: UpdatePrivatizer, updates: np.ndarray, reps: int, seed: int):
    """Yield R independent privatized batches (K, d) of the same updates."""
    for stream in np.random.SeedSequence(seed).spawn(reps):
        yield privatizer.privatize(updates, np.random.default_rng(stream))

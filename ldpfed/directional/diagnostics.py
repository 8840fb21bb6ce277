"""Diagnostics of directional noise (spec: directional.md, last section): how much of the clean
direction survives, and how the output's energy is spread over the coordinates.

Both need the clean update, so in a federation they are node-side simulation diagnostics,
never sent to the server (federated.md, Who knows the noise).
"""

from __future__ import annotations

import math

import numpy as np


def cosine(privatized, clean) -> np.ndarray:
    """Cosine between each row of `privatized` and of `clean` (0 where either row is zero)."""
    a, b = np.atleast_2d(privatized), np.atleast_2d(clean)
    dot = np.einsum("ij,ij->i", a, b)
    norms = np.sqrt(np.einsum("ij,ij->i", a, a) * np.einsum("ij,ij->i", b, b))
    return np.where(norms > 0, dot / np.where(norms > 0, norms, 1.0), 0.0)


def leading_energy_share(vectors, fraction: float = 0.01) -> np.ndarray:
    """Share of each row's squared norm in its first ceil(fraction * d) coordinates (1% by default;
    `fraction` of the energy for a vector spread evenly)."""
    x = np.atleast_2d(vectors)
    head = max(1, math.ceil(fraction * x.shape[-1]))
    total = np.einsum("ij,ij->i", x, x)
    first = np.einsum("ij,ij->i", x[:, :head], x[:, :head])
    return np.where(total > 0, first / np.where(total > 0, total, 1.0), 0.0)

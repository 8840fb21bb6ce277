"""LDPVec as a federated client's update privatizer (spec: directional.md, LDPVec; federated.md,
Federated LDP-SGD and "Who knows the noise").

The same interface as `UpdatePrivatizer` and `NoisePrivatizer` (ldpfed.training, the `Privatizer` protocol)
(`privatize(update, rng, ...)`, `clip_only(update)`, the round's ledger event), so the training
protocol can swap it in. Two inputs of a round are PUBLIC and come from the server's broadcast,
because clients are stateless across rounds under Flower:
- `reference`: the direction the centred windows are centred on, the previous global step (every
  client applies it anyway; zeros before the first step: windows in the middle of the ranges);
- `rotation_seed`: the seed of the round's Hadamard signs, drawn from the server's seed. The
  rotation is data-independent pre-processing, not noise, so the server may know it.
The noise comes only from the `rng` the client passes (its secret stream).

There is no per-coordinate noise model of LDPVec (the angle noise multiplies along the
coordinates, directional.md, last section), so `per_coordinate_noise` is NaN and the
re-calibrating aggregators are refused (config: mean or fedavg only).
"""

from __future__ import annotations

import numpy as np

from ldpfed.directional.ldpvec import LDPVec
from ldpfed.validation import LDPValueError

REFERENCE, ROTATION_SEED = "reference", "rotation-seed"  # names of the public inputs in a broadcast


class DirectionalPrivatizer:
    """Clip a flat update to L2 norm C and perturb it with LDPVec at the client's per-round (eps, delta)."""

    per_value_noise_model = False  # no per-coordinate noise model: the angles' noise mixes coordinates

    def __init__(
        self,
        base: str,
        epsilon: float,
        clip: float,
        delta: float | None = None,
        *,
        beta: float = 1.0,
        window: str = "fixed",
        magnitude: str = "split",
        rotation: str = "none",
        **options,
    ) -> None:
        self.ldpvec = LDPVec(
            base,
            epsilon,
            clip,
            delta=delta,
            beta=beta,
            window=window,
            magnitude=magnitude,
            rotation=rotation,
            options=options,
        )
        self.mechanism = self.ldpvec.name  # the ledger's label
        self.epsilon, self.delta, self.clip = self.ldpvec.epsilon, self.ldpvec.delta, self.ldpvec.clip

    @property
    def private(self) -> bool:
        return self.ldpvec.private

    def public_inputs(self) -> tuple[str, ...]:
        """The broadcast entries this privatizer needs each round."""
        return ((REFERENCE,) if self.ldpvec.window == "centred" else ()) + (
            (ROTATION_SEED,) if self.ldpvec.rotation == "hadamard" else ()
        )

    def clip_only(self, update) -> np.ndarray:
        """The clipped, noise-free update: scaled to L2 norm <= C (the diagnostics' clean value)."""
        array = np.asarray(update, dtype=np.float64)
        return self.ldpvec.clip_updates(array).reshape(array.shape)

    def privatize(self, update, rng: np.random.Generator, *, reference=None, rotation_seed=None) -> np.ndarray:
        """LDPVec of one update (d,) or a batch (clients, d), with the round's public inputs."""
        array = np.asarray(update, dtype=np.float64)
        reference, seed = self._public(reference, rotation_seed)
        return self.ldpvec.perturb(array, rng, reference=reference, rotation_seed=seed).reshape(array.shape)

    def privatize_rows(self, updates, rngs, broadcast: dict | None = None) -> np.ndarray:
        """Row k privatized with its own generator `rngs[k]`: bit for bit `privatize(updates[k],
        rngs[k], ...)` (spec: scale.md), with the round's public inputs from the `broadcast`."""
        broadcast = broadcast or {}
        reference, seed = self._public(broadcast.get(REFERENCE), broadcast.get(ROTATION_SEED))
        return self.ldpvec.perturb_rows(
            np.asarray(updates, dtype=np.float64), list(rngs), reference=reference, rotation_seed=seed
        )

    def _public(self, reference, rotation_seed) -> tuple[np.ndarray | None, list[int] | None]:
        """The round's public inputs as LDPVec takes them (the reference only for centred windows)."""
        if self.ldpvec.rotation == "hadamard" and rotation_seed is None:
            raise LDPValueError("rotation hadamard needs the round's public rotation seed (broadcast by the server)")
        seed = None if rotation_seed is None else [int(word) for word in np.ravel(rotation_seed)]
        reference = (
            None if self.ldpvec.window != "centred" or reference is None else np.asarray(reference, dtype=np.float64)
        )
        return reference, seed

    def per_coordinate_noise(self, dims: int) -> tuple[np.ndarray, np.ndarray]:
        """No per-coordinate noise model exists for LDPVec: NaN (the round's prediction is NaN)."""
        return np.full(int(dims), np.nan), np.full(int(dims), np.nan)

    def event(self, dims: int):
        """One round's privacy event: (eps, delta) by basic composition of the magnitude and angle
        parts, or not private (exact-unsafe). Checks the per-angle budgets for d = `dims` now."""
        self.ldpvec.budget(dims)
        return self.ldpvec.round_event(dims)

    def describe(self, dims: int | None = None) -> dict:
        return self.ldpvec.describe(dims)

"""A client's update privatized by a gradient noise (spec: gradient-noise.md; federated.md,
Federated LDP-SGD): L2 clipping (each layer to its C_l, or the whole update to C), then the noise.

Local DP: any two clipped updates are neighbours, so the sensitivity is the diameter 2 C_l of each
layer's ball (2 C for one block): the i.n.i.d. profile is D_i = 2 C_l / sqrt(d_l), R1SMG and
product noise use D = 2C, PLRV-O is searched for one release (q = 1) with the shift 2C. (A
central trainer adding noise to a sum of per-example gradients uses the noises directly, with the
add/remove sensitivity C.) The noise is calibrated once per update size d (`noise(d)`), so the
privatizer can be built before the model (as `UpdatePrivatizer` is, ldpfed.training.privatize).
"""

from __future__ import annotations

import numpy as np

from ldpfed.gradient_noise.base import GradientNoise, check_updates
from ldpfed.gradient_noise.calibrate import calibrate, get_class
from ldpfed.gradient_noise.profile import clip_layers, layer_profile
from ldpfed.training.privatize import round_record
from ldpfed.validation import LDPValueError, check_epsilon, check_positive, check_positive_int


class NoisePrivatizer:
    """Clip in L2 (per layer with `layer_sizes`) and add `name` calibrated to (epsilon, delta) at
    the local sensitivity; unbiased (the noise has mean 0)."""

    per_value_noise_model = False  # a vector noise: its moments do not depend on the coordinate's value

    def __init__(
        self,
        name: str,
        *,
        epsilon: float,
        delta: float | None = None,
        clip: float = 1.0,
        layer_sizes=None,
        layer_clips=None,
        k: float | None = None,
        dims: int | None = None,
        sampler: str | None = None,
    ) -> None:
        self.noise_class = get_class(name)  # what the noise says of itself (profile, guarantee, samplers)
        key = self.noise_class.name
        self.mechanism, self.epsilon, self.delta, self.k = key, check_epsilon(epsilon), delta, k
        self.sampler = sampler  # None: the noise's default (safe for the i.n.i.d. noises)
        self.clip = check_positive(clip, "clip")
        self.sizes = None if layer_sizes is None else [check_positive_int(s, "layer size") for s in layer_sizes]
        if layer_clips is not None and self.sizes is None:
            raise LDPValueError("layer clips need layer sizes")
        self.clips = None if layer_clips is None else [check_positive(c, "layer clip") for c in layer_clips]
        if self.clips is not None and len(self.clips) != len(self.sizes):
            raise LDPValueError("give one clip per layer")
        if self.sizes is not None and len(self.sizes) > 1 and not self.noise_class.takes_profile:
            raise LDPValueError(f"per-layer clipping is for the i.n.i.d. noises; {key} clips the whole update")
        self._noises: dict[int, GradientNoise] = {}
        if dims is not None:
            self.noise(dims)  # calibrate (and validate) now

    def layers(self, dims: int) -> tuple[list[int], np.ndarray]:
        """(layer sizes, layer clips) for an update of `dims` coordinates."""
        sizes = [int(dims)] if self.sizes is None else self.sizes
        if sum(sizes) != dims:
            raise LDPValueError(f"layer sizes {sizes} do not add up to the update's {dims} coordinates")
        clips = [self.clip] * len(sizes) if self.clips is None else self.clips
        return sizes, np.asarray(clips, dtype=float)

    def noise(self, dims: int) -> GradientNoise:
        """The noise calibrated for updates of `dims` coordinates (cached)."""
        dims = check_positive_int(dims, "dims")
        if dims not in self._noises:
            sizes, clips = self.layers(dims)
            if self.noise_class.takes_profile:
                noise = calibrate(
                    self.mechanism,
                    epsilon=self.epsilon,
                    delta=self.delta,
                    profile=layer_profile(2.0 * clips, sizes),
                    sampler=self.sampler,
                )
            else:
                noise = calibrate(
                    self.mechanism,
                    epsilon=self.epsilon,
                    delta=self.delta,
                    dims=dims,
                    clip=2.0 * clips[0],
                    k=self.k,
                    sampler=self.sampler,
                )
            self._noises[dims] = noise
        return self._noises[dims]

    @property
    def private(self) -> bool:
        """False for the noises whose published guarantee does not hold (`guarantee_holds`)."""
        return self.noise_class.guarantee_holds

    def clip_only(self, update) -> np.ndarray:
        """Each layer's block scaled down to L2 norm <= C_l (a vector (d,) or a batch (clients, d))."""
        array = check_updates(update)
        sizes, clips = self.layers(array.shape[-1])
        return clip_layers(array, sizes, clips).reshape(array.shape)

    def privatize(self, update, rng: np.random.Generator) -> np.ndarray:
        clipped = self.clip_only(update)
        return self.noise(clipped.shape[-1]).perturb(clipped, rng)

    def privatize_rows(self, updates, rngs, broadcast: dict | None = None) -> np.ndarray:
        """Row k privatized with its own generator `rngs[k]`: bit for bit `privatize(updates[k],
        rngs[k])` (spec: scale.md); the clipping runs over the block. `broadcast`: unused here."""
        clipped = self.clip_only(updates)
        if clipped.ndim != 2:
            raise LDPValueError(f"privatize_rows needs a (clients, d) block, got shape {clipped.shape}")
        return self.noise(clipped.shape[-1]).perturb_rows(clipped, list(rngs))

    def per_coordinate_noise(self, dims: int) -> tuple[np.ndarray, np.ndarray]:
        """(mean, variance) of the added noise per coordinate (unbiased: mean 0; a safe sampler's
        variance at the worst input, its rounding counted as g^2 / 4)."""
        return np.zeros(int(dims)), self.noise(dims).coordinate_variance()

    def noise_moments(self, clipped_update) -> tuple[np.ndarray, np.ndarray]:
        """Per-coordinate (mean, variance) of privatize(u) - clip(u), shaped like u: exact, except for
        PLRV-O's safe sampler, whose rounding variance is taken at the worst input (g^2 / 4, ~1e-8
        of the noise variance)."""
        clipped = check_updates(clipped_update)
        return np.zeros_like(clipped), self.noise(clipped.shape[-1]).release_variance(clipped)

    def event(self, dims: int):
        """One round's privacy event (not private for R1SMG and product noise)."""
        return self.noise(dims).event()

    def describe(self, dims: int | None = None) -> dict:
        record = round_record(self, "L2 per layer" if self.sizes and len(self.sizes) > 1 else "L2")
        record.update(
            sensitivity="2 C_l (local DP: any two clipped updates)",
            sampler=self.sampler or self.noise_class.samplers[0],
        )
        if dims is not None:
            record["noise"] = self.noise(dims).describe()
        return record

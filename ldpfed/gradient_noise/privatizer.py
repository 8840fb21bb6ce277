"""A client's update privatized by a gradient noise (spec: gradient-noise.md; federated.md,
Federated LDP-SGD): L2 clipping (each layer to its C_l, or the whole update to C), then the noise.

Local DP: any two clipped updates are neighbours, so the sensitivity is the diameter 2 C_l of each
layer's ball (2 C for one block): the i.n.i.d. profile is D_i = 2 C_l / sqrt(d_l), R1SMG and
product noise use D = 2C, PLRV-O is searched for one release (q = 1) with the shift 2C. (A
central trainer adding noise to a sum of per-example gradients uses the noises directly, with the
add/remove sensitivity C.)
"""

from __future__ import annotations

import numpy as np

from ldpfed.gradient_noise.base import GradientNoise, check_rng, check_updates
from ldpfed.gradient_noise.calibrate import NAMES, calibrate
from ldpfed.gradient_noise.profile import clip_layers, layer_profile
from ldpfed.validation import LDPValueError, check_positive, check_positive_int


class NoisePrivatizer:
    """Clip per layer in L2 and add `name` calibrated to (epsilon, delta) at the LDP sensitivity."""

    def __init__(self, name: str, *, epsilon: float, dims: int, delta: float | None = None, clip: float = 1.0,
                 layer_sizes=None, layer_clips=None, k: float | None = None) -> None:
        key = str(name).strip().lower().replace("_", "-")
        if key not in NAMES:
            raise LDPValueError(f"unknown gradient noise {name!r}; available: {', '.join(NAMES)}")
        self.mechanism = key
        dims = check_positive_int(dims, "dims")
        sizes = [dims] if layer_sizes is None else [check_positive_int(s, "layer size") for s in layer_sizes]
        if sum(sizes) != dims:
            raise LDPValueError(f"layer sizes {sizes} do not add up to dims = {dims}")
        clip = check_positive(clip, "clip")
        clips = [clip] * len(sizes) if layer_clips is None else [check_positive(c, "layer clip") for c in layer_clips]
        if len(clips) != len(sizes):
            raise LDPValueError("give one clip per layer")
        if len(sizes) > 1 and key not in ("inid-gaussian", "inid-laplace"):
            raise LDPValueError(f"per-layer clipping is for the i.n.i.d. noises; {key} clips the whole update")
        self.sizes, self.clips, self.dims = sizes, np.asarray(clips), dims
        if key in ("inid-gaussian", "inid-laplace"):
            self.noise: GradientNoise = calibrate(key, epsilon=epsilon, delta=delta,
                                                  profile=layer_profile(2.0 * self.clips, sizes))
        else:
            self.noise = calibrate(key, epsilon=epsilon, delta=delta, dims=dims, clip=2.0 * clips[0], k=k)

    @property
    def private(self) -> bool:
        return self.noise.guarantee_holds

    def clip_only(self, update) -> np.ndarray:
        """Each layer's block scaled down to L2 norm <= C_l (a vector (d,) or a batch (clients, d))."""
        array = check_updates(update, self.dims)
        return clip_layers(array, self.sizes, self.clips).reshape(array.shape)

    def privatize(self, update, rng: np.random.Generator) -> np.ndarray:
        return self.noise.perturb(self.clip_only(update), check_rng(rng))

    def per_coordinate_noise(self, dims: int) -> tuple[np.ndarray, np.ndarray]:
        """(mean, variance) of the added noise per coordinate (unbiased: mean 0)."""
        if int(dims) != self.dims:
            raise LDPValueError(f"calibrated for {self.dims} coordinates, asked for {dims}")
        return np.zeros(self.dims), self.noise.coordinate_variance()

    def event(self):
        """One round's privacy event (not private for R1SMG and product noise)."""
        return self.noise.event()

    def describe(self) -> dict:
        return {"mechanism": self.mechanism, "clipping": "L2 per layer" if len(self.sizes) > 1 else "L2",
                "layer_sizes": self.sizes, "layer_clips": self.clips.tolist(), "sensitivity": "2 C_l (local DP)",
                **{key: value for key, value in self.noise.describe().items() if key != "name"}}

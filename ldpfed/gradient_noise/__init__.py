"""Gradient noises from the literature, with their calibration and their claims (spec:
gradient-noise.md): i.n.i.d. Gaussian and Laplace (sound), R1SMG and product noise (published
guarantee does not hold: charged as not private), PLRV-O (sound with the joint accountant).

    >>> import numpy as np
    >>> from ldpfed.gradient_noise import calibrate
    >>> noise = calibrate("inid-gaussian", epsilon=1.0, delta=1e-5, profile=np.full(10, 0.1))
    >>> noisy = noise.perturb(np.zeros((4, 10)), np.random.default_rng(0))
"""

from __future__ import annotations

from ldpfed.gradient_noise.base import GUARANTEE_FAILS, GradientNoise
from ldpfed.gradient_noise.calibrate import available, calibrate, get, get_class, guarantee_fails
from ldpfed.gradient_noise.inid_gaussian import InidGaussian, optimal_eta
from ldpfed.gradient_noise.inid_laplace import InidLaplace
from ldpfed.gradient_noise.plrvo import PLRVO
from ldpfed.gradient_noise.product_noise import ProductNoise
from ldpfed.gradient_noise.profile import layer_profile, parse_layers, read_profile
from ldpfed.gradient_noise.r1smg import R1SMG

__all__ = [
    "GUARANTEE_FAILS",
    "PLRVO",
    "R1SMG",
    "GradientNoise",
    "InidGaussian",
    "InidLaplace",
    "ProductNoise",
    "available",
    "calibrate",
    "get",
    "get_class",
    "guarantee_fails",
    "layer_profile",
    "optimal_eta",
    "parse_layers",
    "read_profile",
]


def listing() -> list[dict]:
    """One row per noise: name, whether its published guarantee holds, its samplers (default first)."""
    return [
        {
            "name": name,
            "guarantee_holds": cls.guarantee_holds,
            "status": "sound" if cls.guarantee_holds else GUARANTEE_FAILS,
            "sampler": cls.samplers[0],
            "samplers": list(cls.samplers),
            "floating_point_safe": cls.samplers[0] == "safe",
        }
        for name, cls in ((name, get_class(name)) for name in available())
    ]

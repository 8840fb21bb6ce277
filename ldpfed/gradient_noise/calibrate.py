"""Build a gradient noise by name from a privacy target (what `ldpfed calibrate` prints).

The sensitivity comes from a profile (i.n.i.d. noises: D_i per coordinate; default: one layer of
`dims` coordinates clipped to `clip`, D_i = clip / sqrt(dims)) or from `clip` (R1SMG, product
noise: D = clip; PLRV-O: clip C per example).
"""

from __future__ import annotations

from ldpfed.accounting.plrvo import search_parameters
from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.gradient_noise.inid_gaussian import InidGaussian
from ldpfed.gradient_noise.inid_laplace import InidLaplace
from ldpfed.gradient_noise.plrvo import PLRVO
from ldpfed.gradient_noise.product_noise import ProductNoise
from ldpfed.gradient_noise.profile import check_profile, layer_profile
from ldpfed.gradient_noise.r1smg import R1SMG
from ldpfed.registry import Registry
from ldpfed.samplers.plrvo_safe import SafeLaw
from ldpfed.validation import LDPValueError, canonical_name, check_positive_int

_REGISTRY: Registry[type[GradientNoise]] = Registry(
    "gradient noise", (InidGaussian, InidLaplace, R1SMG, ProductNoise, PLRVO)
)
available = _REGISTRY.available
get_class = _REGISTRY.get_class


def guarantee_fails(name: str) -> bool:
    """Is `name` a gradient noise whose published guarantee does not hold (charged as not private)?"""
    return name in _REGISTRY and not get_class(name).guarantee_holds


def calibrate(
    name: str,
    *,
    epsilon: float,
    delta: float | None = None,
    dims: int | None = None,
    clip: float = 1.0,
    k: float | None = None,
    profile=None,
    sample_rate: float = 1.0,
    steps: int = 1,
    sampler: str | None = None,
) -> GradientNoise:
    """The noise `name` calibrated to (epsilon, delta); PLRV-O searched for (k, theta) at epsilon
    after `steps` steps at `sample_rate` (joint accountant). `sampler`: "safe" or "continuous"
    (default: the noise's default, safe where it has one)."""
    cls = get_class(name)
    key = cls.name
    if k is not None and key != "product-noise":
        raise LDPValueError(f"--k is a parameter of product-noise, not of {key}")
    if sampler is not None and canonical_name(sampler) not in cls.samplers:
        raise LDPValueError(f"{key} has the sampler(s) {', '.join(cls.samplers)}, got {sampler!r}")
    options = {} if sampler is None else {"sampler": canonical_name(sampler)}
    if cls.takes_profile:
        if profile is None:
            if dims is None:
                raise LDPValueError(f"{key} needs a sensitivity profile or --dims")
            profile = layer_profile([clip], [check_positive_int(dims, "dims")])
        profile = check_profile(profile)
        if dims is not None and int(dims) != profile.size:
            raise LDPValueError(f"--dims {dims} differs from the profile's {profile.size} coordinates")
        if key == "inid-gaussian":
            if delta is None:
                raise LDPValueError("inid-gaussian needs delta in (0, 1)")
            return InidGaussian(profile, epsilon=epsilon, delta=delta, **options)
        return InidLaplace(profile, epsilon=epsilon, delta=delta, **options)
    if dims is None:
        raise LDPValueError(f"{key} needs --dims (the number of coordinates M)")
    if key == "r1smg":
        if delta is None:
            raise LDPValueError("r1smg needs delta in (0, 1)")
        return R1SMG(dims, epsilon=epsilon, delta=delta, sensitivity=clip)
    if key == "product-noise":
        return ProductNoise(dims, epsilon=epsilon, delta=delta, k=k, sensitivity=clip)
    delta = 1e-5 if delta is None else delta
    dims = check_positive_int(dims, "dims")
    safe = options.get("sampler", PLRVO.samplers[0]) == "safe"
    law = SafeLaw.for_params(dims) if safe else None
    found = search_parameters(epsilon, clip, dims, sample_rate, steps, delta, law=law)
    return PLRVO(
        dims, k=found.k, theta=found.theta, clip=clip, sample_rate=sample_rate, steps=steps, delta=delta, **options
    )


get = calibrate  # the family's constructor: a gradient noise is built from its privacy target

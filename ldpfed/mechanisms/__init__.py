"""Scalar LDP randomizers on [-1, 1] and their registry (spec: mechanisms.md).

>>> import numpy as np, ldpfed.mechanisms as mech
>>> pm = mech.get("piecewise", epsilon=1.0)
>>> reports = pm.perturb(np.zeros(5), np.random.default_rng(0))
>>> float(pm.variance(0.0))  # 3.6821...
"""

from __future__ import annotations

import itertools
from dataclasses import fields

from ldpfed.mechanisms.base import Mechanism
from ldpfed.mechanisms.duchi import Duchi
from ldpfed.mechanisms.gaussian import Gaussian
from ldpfed.mechanisms.hybrid import Hybrid
from ldpfed.mechanisms.laplace import Laplace
from ldpfed.mechanisms.piecewise import Piecewise
from ldpfed.mechanisms.square_wave import SquareWave
from ldpfed.registry import Registry
from ldpfed.validation import LDPValueError

_REGISTRY: Registry[type[Mechanism]] = Registry("mechanism", (Laplace, Piecewise, SquareWave, Duchi, Hybrid, Gaussian))
available = _REGISTRY.available
get_class = _REGISTRY.get_class


def variants() -> list[tuple[str, dict]]:
    """Every (name, options) combination of the registered mechanisms' choice options, e.g.
    ("square-wave", {"estimator": "raw"}) and ("square-wave", {"estimator": "debiased"})."""
    combinations = []
    for name in available():
        cls = get_class(name)
        keys = list(cls.option_choices)
        for values in itertools.product(*(cls.option_choices[key] for key in keys)):
            combinations.append((name, dict(zip(keys, values))))
    return combinations


def get(name: str | Mechanism, epsilon: float | None = None, delta: float | None = None, **options) -> Mechanism:
    """Construct the mechanism `name` with budget `epsilon` per value (and `delta` if approximate).

    A Mechanism instance passes through unchanged (so APIs accept either a name or an object).
    """
    if isinstance(name, Mechanism):
        return name
    cls = get_class(name)
    key = cls.name
    allowed = {f.name for f in fields(cls)} - {"epsilon", "delta"}
    unknown = set(options) - allowed
    if unknown:
        raise LDPValueError(f"{key} does not take option(s) {sorted(unknown)}; allowed: {sorted(allowed) or 'none'}")
    if epsilon is None:
        raise LDPValueError("epsilon is required")
    return cls(epsilon=epsilon, delta=delta, **options)


__all__ = ["Mechanism", "available", "get", "get_class", "variants"]

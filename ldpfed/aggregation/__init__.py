"""Server-side aggregators that re-calibrate the plain mean, and their registry
(spec: recalibration.md).

    >>> import numpy as np, ldpfed.aggregation as agg
    >>> from ldpfed.aggregation.deviation import DeviationModel
    >>> model = DeviationModel(delta=np.zeros(3), sigma=np.full(3, 0.5), source="plug-in")
    >>> result = agg.get("hdr4me", alpha=0.95)(np.array([0.9, 0.1, -0.4]), model)
    >>> result.estimate, result.record["l2_reference"]

Names: mean, l1, l2, hdr4me (HDR4ME*), james-stein, and for the frequency task only simplex (alias
norm-sub) and Wang et al.'s consistency family base-pos, norm, norm-mul, norm-cut, mle-apx, power,
power-ns (`consistency`), and ibu (`IterativeBayesianUpdate`), which needs each attribute's channel
(p, q): the frequency server builds it with its counting oracles' channels (`needs_channel`).
`plugin_deviation(sums, mechanism)` builds the deviation model from the reports alone.
"""

from __future__ import annotations

from dataclasses import fields

from ldpfed.aggregation.base import DEFAULT_ALPHA, L2_REFERENCES, Aggregator, Recalibrated
from ldpfed.aggregation.consistency import CONSISTENCY_AGGREGATORS
from ldpfed.aggregation.hdr4me import HDR4MEStar, mixture_weights
from ldpfed.aggregation.ibu import IterativeBayesianUpdate
from ldpfed.aggregation.james_stein import JamesStein
from ldpfed.aggregation.l1 import SoftThreshold, soft_threshold
from ldpfed.aggregation.l2 import Shrink, l2_weight, shrink
from ldpfed.aggregation.mean import PlainMean
from ldpfed.aggregation.plugin import plugin_bias, plugin_deviation, worst_case_variance
from ldpfed.aggregation.simplex import SimplexProjection
from ldpfed.registry import Registry
from ldpfed.validation import LDPValueError, canonical_name

_REGISTRY: Registry[type[Aggregator]] = Registry(
    "aggregator",
    (
        PlainMean,
        SoftThreshold,
        Shrink,
        HDR4MEStar,
        JamesStein,
        SimplexProjection,
        *CONSISTENCY_AGGREGATORS,
        IterativeBayesianUpdate,
    ),
)
_ALIASES = {
    "none": "mean",
    "hdr4me*": "hdr4me",
    "hdr4mestar": "hdr4me",
    "js": "james-stein",
    "base": "mean",
    "norm-sub": "simplex",
}


def available(task: str | None = None) -> list[str]:
    """Names accepted by `get`, in a stable order; with `task`, those that apply to it."""
    return _REGISTRY.where(lambda cls: task is None or task in cls.tasks)


def get_class(name: str) -> type[Aggregator]:
    """The aggregator class registered under `name` (or one of its aliases)."""
    key = canonical_name(name)
    return _REGISTRY.get_class(_ALIASES.get(key, key))


def check_names(names, task: str) -> list[str]:
    """The canonical names of `names` (duplicates dropped, order kept); each must apply to `task`."""
    resolved = [get_class(name).name for name in names]
    wrong = [name for name in resolved if task not in get_class(name).tasks]
    if wrong:
        raise LDPValueError(f"aggregator {wrong[0]} does not apply to the {task} task; available: {available(task)}")
    return list(dict.fromkeys(resolved))


def accepted_options(name: str) -> set[str]:
    """The option names the aggregator `name` takes (alpha, l2_reference, ...)."""
    return {f.name for f in fields(get_class(name))}


def get(name: str | Aggregator, **options) -> Aggregator:
    """Construct the aggregator `name` with its options; an Aggregator instance passes through."""
    if isinstance(name, Aggregator):
        return name
    cls = get_class(name)
    unknown = set(options) - accepted_options(name)
    if unknown:
        raise LDPValueError(
            f"aggregator {cls.name} does not take option(s) {sorted(unknown)}; "
            f"allowed: {sorted(accepted_options(name)) or 'none'}"
        )
    return cls(**options)


def get_many(names, **shared_options) -> list[Aggregator]:
    """One aggregator per name, each given only the shared options it accepts (e.g. alpha)."""
    aggregators = []
    for name in names:
        accepted = accepted_options(name)
        aggregators.append(get(name, **{k: v for k, v in shared_options.items() if k in accepted}))
    return aggregators


__all__ = [
    "DEFAULT_ALPHA",
    "L2_REFERENCES",
    "Aggregator",
    "HDR4MEStar",
    "IterativeBayesianUpdate",
    "JamesStein",
    "PlainMean",
    "Recalibrated",
    "Shrink",
    "SimplexProjection",
    "SoftThreshold",
    "accepted_options",
    "available",
    "check_names",
    "get",
    "get_class",
    "get_many",
    "l2_weight",
    "mixture_weights",
    "plugin_bias",
    "plugin_deviation",
    "shrink",
    "soft_threshold",
    "worst_case_variance",
]

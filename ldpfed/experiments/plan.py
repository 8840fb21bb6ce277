"""What every repeated experiment shares (mean and frequency estimation): the budgets, the
aggregators, the repetitions and their seed, the deviation model, one definition of each option,
validated once here at the boundary."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields

import numpy as np

import ldpfed.aggregation as aggregation
from ldpfed.aggregation.base import check_alpha, check_l2_reference
from ldpfed.aggregation.deviation import DEVIATION_SOURCES
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int


@dataclass(frozen=True)
class ExperimentPlan:
    """`epsilons`: the budgets compared (per user); `aggregators`: their names for `task`;
    `report_dims`: m (None: all); `delta`: for approximate mechanisms only; `deviation`: plug-in
    or model; `alpha`, `l2_reference`: the aggregators' options; `repeats` collections per
    configuration, all from `seed` (common random numbers: a row of a grid equals the run of that
    configuration alone); `chunk_users` per chunk (None: ~2^20 values); `progress()` after each
    repetition."""

    epsilons: tuple[float, ...]
    aggregators: tuple[str, ...]
    report_dims: int | None = None
    delta: float | None = None
    deviation: str = "plug-in"
    alpha: float = aggregation.DEFAULT_ALPHA
    l2_reference: str = "bound"
    repeats: int = 5
    seed: int = 0
    chunk_users: int | None = None
    progress: Callable[[], None] | None = None

    @classmethod
    def build(
        cls, task: str, epsilons: float | Iterable[float], default_aggregators: Sequence[str], **options
    ) -> ExperimentPlan:
        """The plan of a `task` experiment from keyword options (the fields above), each checked."""
        known = {f.name for f in fields(cls)} - {"epsilons"}
        unknown = set(options) - known
        if unknown:
            raise LDPValueError(f"unknown experiment option(s) {sorted(unknown)}; allowed: {sorted(known)}")
        if options.get("aggregators") is None:
            options["aggregators"] = default_aggregators
        budgets = np.atleast_1d(np.asarray(epsilons, dtype=object)).tolist()
        deviation = options.get("deviation", cls.deviation)
        if deviation not in DEVIATION_SOURCES:
            raise LDPValueError(f"deviation must be one of {DEVIATION_SOURCES}, got {deviation!r}")
        check_l2_reference(options.get("l2_reference", cls.l2_reference))
        chunk_users = options.get("chunk_users")
        report_dims = options.get("report_dims")
        return cls(
            epsilons=tuple(check_epsilon(e, "epsilons") for e in budgets),
            aggregators=tuple(aggregation.check_names(options.pop("aggregators"), task)),
            report_dims=None if report_dims is None else check_positive_int(report_dims, "report_dims"),
            delta=options.get("delta"),
            deviation=deviation,
            alpha=check_alpha(options.get("alpha", cls.alpha)),
            l2_reference=options.get("l2_reference", cls.l2_reference),
            repeats=check_positive_int(options.get("repeats", cls.repeats), "repeats"),
            seed=check_positive_int(options.get("seed", cls.seed), "seed", minimum=0),
            chunk_users=None if chunk_users is None else check_positive_int(chunk_users, "chunk_users"),
            progress=options.get("progress"),
        )

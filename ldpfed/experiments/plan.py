"""What every repeated experiment shares (mean and frequency estimation): the budgets, the
aggregators, the repetitions and their seed, the deviation model, one definition of each option,
validated once here at the boundary."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

import ldpfed.aggregation as aggregation
from ldpfed.aggregation.base import check_alpha, check_l2_reference
from ldpfed.aggregation.deviation import DEVIATION_SOURCES
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int

if TYPE_CHECKING:
    import pandas as pd

# The options every experiment's config records (beside its own data and sizes).
RECORDED_OPTIONS = ("delta", "deviation", "alpha", "l2_reference", "repeats", "seed")


@dataclass(frozen=True)
class ExperimentPlan:
    """`epsilons`: the budgets compared (per user); `aggregators`: their names for `task`;
    `report_dims`: m (None: all); `delta`: for approximate mechanisms only; `deviation`: plug-in
    or model; `alpha`, `l2_reference`: the aggregators' options; `repeats` collections per
    configuration, all from `seed` (common random numbers: a row of a grid equals the run of that
    configuration alone); `chunk_users` per chunk (None: ~2^20 values); `progress()` after each
    repetition. `study_rounds` T (None: no studies): each T consecutive repetitions are the rounds of
    one study, whose final estimate is the average of their estimates (`study_errors`); `repeats`
    is then a multiple of T."""

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
    study_rounds: int | None = None

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
        repeats = check_positive_int(options.get("repeats", cls.repeats), "repeats")
        study_rounds = options.get("study_rounds")
        if study_rounds is not None:
            study_rounds = check_positive_int(study_rounds, "study_rounds")
            if repeats % study_rounds:
                raise LDPValueError(
                    f"repeats {repeats} is not a multiple of the study's {study_rounds} rounds "
                    "(each study's final estimate averages its rounds' repetitions)"
                )
        return cls(
            epsilons=tuple(check_epsilon(e, "epsilons") for e in budgets),
            aggregators=tuple(aggregation.check_names(options.pop("aggregators"), task)),
            report_dims=None if report_dims is None else check_positive_int(report_dims, "report_dims"),
            delta=options.get("delta"),
            deviation=deviation,
            alpha=check_alpha(options.get("alpha", cls.alpha)),
            l2_reference=options.get("l2_reference", cls.l2_reference),
            repeats=repeats,
            seed=check_positive_int(options.get("seed", cls.seed), "seed", minimum=0),
            chunk_users=None if chunk_users is None else check_positive_int(chunk_users, "chunk_users"),
            progress=options.get("progress"),
            study_rounds=study_rounds,
        )

    def record(self) -> dict:
        """{option: value} of the RECORDED_OPTIONS."""
        return {name: getattr(self, name) for name in RECORDED_OPTIONS}


def study_errors(estimates: np.ndarray, truth: np.ndarray, rounds: int) -> np.ndarray:
    """The squared error (mean over coordinates) of each study's final estimate: `estimates`
    (repeats, D) of independent rounds, consecutive blocks of `rounds` of them one study each,
    averaged per study."""
    repeats, size = estimates.shape
    finals = estimates.reshape(repeats // rounds, rounds, size).mean(axis=1)
    return np.mean((finals - truth) ** 2, axis=1)


def summarize_studies(rows: list[dict], keys: list[str]) -> pd.DataFrame:
    """Per configuration (`keys`): `studies`, `mse_final` (the mean over studies of the final
    estimate's squared error), `mse_final_std`, `mse_final_se`."""
    import pandas as pd  # lazily, as in ldpfed.experiments.mean

    grouped = pd.DataFrame(rows).groupby(keys, sort=False)["mse_final"]
    frame = grouped.agg(studies="count", mse_final="mean", mse_final_std="std").reset_index()
    frame["mse_final_std"] = frame["mse_final_std"].fillna(0.0)  # one study: no spread measured
    frame["mse_final_se"] = frame["mse_final_std"] / np.sqrt(frame["studies"])
    return frame


def joined_config(results: Sequence) -> dict:
    """The first result's config with every result's mechanisms, epsilons and (first) delta."""
    config = dict(results[0].config)
    config["mechanisms"] = [m for r in results for m in r.config["mechanisms"]]
    config["epsilons"] = list(dict.fromkeys(e for r in results for e in r.config["epsilons"]))
    config["delta"] = next((r.config["delta"] for r in results if r.config["delta"] is not None), None)
    return config

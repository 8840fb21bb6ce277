"""Comparisons from a total budget (`compare --budget`), shared by the mean and frequency tasks:
one plan per group of mechanisms the total gives the same per-round (eps, delta), the summary rows'
budget and T-round study keys, the table's final columns, the title and the figure. Kept apart from
ldpfed.cli.common, which every command loads: the planners load dp-accounting and scipy.stats."""

from __future__ import annotations

import numpy as np

from ldpfed.experiments.plan import ExperimentPlan
from ldpfed.planning.run import BudgetGroup, StudyBudget

BUDGET_KEYS = ("total_epsilon", "total_delta", "rounds", "accountant", "delta_per_round", "epsilon_spent")
STUDY_KEYS = ("studies", "mse_final", "mse_final_std", "predicted_mse_final")


def study_plans(
    task: str, study: StudyBudget, groups: list[BudgetGroup], aggregators: tuple, shared: dict
) -> list[ExperimentPlan]:
    """One plan per group of mechanisms that the total gives the same per-round (eps, delta), its
    repetitions measured as T-round studies; `shared`: the options common to the plans."""
    return [
        ExperimentPlan.build(task, [group.epsilon], aggregators, delta=group.delta, study_rounds=study.rounds, **shared)
        for group in groups
    ]


def study_keys(row: dict) -> dict:
    """A summary row's planned settings and T-round studies (none without --budget), JSON-ready."""
    keys = {}
    for key in (key for key in (*BUDGET_KEYS, *STUDY_KEYS) if key in row):
        value = row[key]
        if key == "accountant":
            keys[key] = value
        elif key in ("rounds", "studies"):
            keys[key] = int(value)
        else:
            keys[key] = _finite(value)
    return keys


FINAL_COLUMNS = ("final mean ± se", "predicted final")


def budget_title(budget: dict) -> str:
    """The total, its rounds and accountant, and how the final estimates were measured."""
    delta = f", {budget['delta']:g}" if budget["delta"] else ""
    return (
        f"total ({budget['epsilon']:g}{delta}) per client over T = {budget['rounds']} rounds ({budget['accountant']}); "
        f"final: the average of T rounds, measured over {budget['studies']} T-round study(ies)"
    )


def final_cells(row) -> list[str]:
    """The plain mean's spent eps, its T-round final MSE measured (± standard error) and predicted."""
    if row is None:
        return ["-"] * (1 + len(FINAL_COLUMNS))
    spent = _finite(row.epsilon_spent)
    spent = "-" if spent is None else f"{spent:.7g}"
    return [spent, f"{row.mse_final:.3g} ±{row.mse_final_se:.2g}", f"{row.predicted_mse_final:.3g}"]


def _finite(value) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def budget_figure(summary, labels: list[str], budget: dict):
    """A total budget's comparison: per mechanism (`labels`, one per summary row, at its per-round
    eps), each aggregator's MSE of one round (circles) and of the T-round final estimate (squares),
    standard errors as bars, the plain mean's predictions as black bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = summary.assign(label=labels)
    names = list(dict.fromkeys(frame["label"]))
    aggregators = list(dict.fromkeys(frame["aggregator"]))
    width = 0.8 / max(1, len(aggregators))
    figure, axis = plt.subplots(figsize=(max(6.0, 1.8 * len(names) + 2), 4.5))
    for a, aggregator in enumerate(aggregators):
        rows = frame[frame["aggregator"] == aggregator].set_index("label").reindex(names)
        x = np.arange(len(names)) - 0.4 + (a + 0.5) * width
        colour = f"C{a}"
        axis.errorbar(x - width / 4, rows["mse"], yerr=rows["mse_se"], fmt="o", color=colour, ms=4, capsize=2)
        axis.errorbar(
            x + width / 4, rows["mse_final"], yerr=rows["mse_final_se"], fmt="s", color=colour, ms=4, capsize=2
        )
        axis.plot([], [], "o", color=colour, label=aggregator)
        if aggregator == "mean":
            axis.plot(x - width / 4, rows["predicted_mse"], "_", color="black", ms=14, mew=2)
            axis.plot(x + width / 4, rows["predicted_mse_final"], "_", color="black", ms=14, mew=2)
    axis.plot([], [], "o", color="grey", label="one round")
    axis.plot([], [], "s", color="grey", label=f"final (average of T = {budget['rounds']})")
    axis.plot([], [], "_", color="black", ms=14, mew=2, label="predicted (plain mean)")
    axis.set_xticks(np.arange(len(names)), names)
    axis.set_yscale("log")
    axis.set_ylabel("MSE (bars: standard error)")
    delta = f", {budget['delta']:g}" if budget["delta"] else ""
    axis.set_title(
        f"Total ({budget['epsilon']:g}{delta}) per client over T = {budget['rounds']} rounds ({budget['accountant']})"
    )
    axis.grid(True, axis="y", which="both", alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    return figure

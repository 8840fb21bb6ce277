"""Running a plan: `ldpfed simulate --budget EPS[,DELTA] --rounds T --accountant A` and `ldpfed compare
--budget ...` take the plan's per-round settings (ldpfed.planning.calibration); simulate holds every
client to the total, compare measures T-round studies (`budget_groups`, `study_repeats`).

The run's config gets the per-round epsilon (and delta) that the total allows over T rounds (a client
is assumed to take part in every round; training: on the event the run's privatizer records,
ldpfed.planning.train) and the total as its budget (max-epsilon,
max-delta), so that the run's ledger stops a client before it could exceed the total; with the
plan's per-round figure none has to stop. `budget` is then cleared: config.toml records the
per-round settings and the budget the run used, which replay it as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ldpfed.accounting import create_accountant
from ldpfed.config import Config
from ldpfed.planning.calibration import RoundBudget, TotalBudget, calibrate_round
from ldpfed.validation import LDPValueError, check_positive_int

if TYPE_CHECKING:
    import pandas as pd

# options a total budget decides: giving one of them with --budget is a contradiction
PLANNED_OPTIONS = ("epsilon", "delta", "max_epsilon", "max_delta")


def planned_config(
    config: Config, flags: dict | None, calibrate: Callable[[TotalBudget], RoundBudget]
) -> tuple[Config, RoundBudget | None]:
    """(config with the plan's per-round settings and budget, the round budget), or (config, None)
    without a total budget. `flags`: the command-line options given (None: not given); `calibrate`:
    the per-round budget a total allows over the run's rounds (the task's, `Task.round_budget`).
    The result's task-independent options are checked (`ldpfed.tasks.planned_config` checks all)."""
    privacy = config.privacy
    if not privacy.budget:
        return config, None
    given = sorted("--" + name.replace("_", "-") for name in PLANNED_OPTIONS if (flags or {}).get(name) is not None)
    if given or privacy.max_epsilon:
        shown = ", ".join(given) or "max-epsilon"
        raise LDPValueError(f"--budget sets the per-round epsilon, delta and the max-epsilon budget: drop {shown}")
    total = TotalBudget.parse(privacy.budget)
    round_budget = calibrate(total)
    planned = replace(
        privacy,
        epsilon=round_budget.epsilon,
        delta=round_budget.delta or 0.0,
        max_epsilon=total.epsilon,
        max_delta=total.delta,
        budget="",
    )
    return replace(config, privacy=planned).validated(), round_budget


def plan_report(round_budget: RoundBudget, summary: dict) -> dict:
    """The summary's `plan`: the plan's settings and its prediction beside what the run measured."""
    return {
        **round_budget.to_dict(),
        "predicted_mse_round": summary.get("predicted_mse_plain_mean"),
        "measured_mse_round": summary.get("mean_mse_over_rounds"),
        "epsilon_spent_max_per_client": summary.get("epsilon_spent_max_per_client"),
        # training: the aggregate noise measured over its CLT prediction (ldpfed.analysis.round_noise)
        "noise_measured_over_predicted": summary.get("noise_measured_over_predicted"),
    }


@dataclass(frozen=True)
class BudgetGroup:
    """Mechanisms that a total allows the same per-round (eps, delta): they run as one experiment."""

    epsilon: float
    delta: float | None
    budgets: tuple[RoundBudget, ...]
    names: tuple[str, ...]  # the mechanisms' names as given

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return tuple(budget.mechanism for budget in self.budgets)


def budget_groups(mechanisms: list[str], total: TotalBudget, rounds: int, accountant: str) -> list[BudgetGroup]:
    """Each mechanism's per-round budget (`calibrate_round`), grouped by (eps, delta) in the order
    given: the pure mechanisms share one per-round eps under an accountant, an approximate one (the
    Gaussian) has its own through its delta. An unknown name, a budget no accountant can hold or an
    approximate mechanism without the total's delta fails here, before any work."""
    groups: dict[tuple, list[tuple[str, RoundBudget]]] = {}
    for name in mechanisms:
        budget = calibrate_round(name, total, rounds, accountant)
        groups.setdefault((budget.epsilon, budget.delta), []).append((name, budget))
    return [
        BudgetGroup(epsilon, delta, tuple(b for _, b in members), tuple(n for n, _ in members))
        for (epsilon, delta), members in groups.items()
    ]


DEFAULT_STUDY_ACCOUNTANT = "pld"  # as `ldpfed plan`


@dataclass(frozen=True)
class StudyBudget:
    """A comparison's total budget: every client's (eps, delta) over a study of `rounds` rounds,
    composed by `accountant` (compare --budget EPS[,DELTA] --rounds T [--accountant A])."""

    total: TotalBudget
    rounds: int
    accountant: str = DEFAULT_STUDY_ACCOUNTANT

    @classmethod
    def parse(cls, budget: str, rounds: int | None, accountant: str | None) -> StudyBudget:
        total = TotalBudget.parse(budget)
        if rounds is None:
            raise LDPValueError("--budget needs --rounds T, the rounds of the study that the total covers")
        rounds = check_positive_int(rounds, "--rounds")
        return cls(total, rounds, create_accountant(accountant or DEFAULT_STUDY_ACCOUNTANT).name)

    def text(self) -> str:
        return f"--budget {self.total.text()} over {self.rounds} rounds ({self.accountant})"

    def groups(self, mechanisms: list[str]) -> list[BudgetGroup]:
        return budget_groups(mechanisms, self.total, self.rounds, self.accountant)

    def describe(self, groups: list[BudgetGroup], repeats: int) -> dict:
        """The `budget` record of a comparison's config: the total, the rounds, the accountant, each
        group's per-round setting and how the T-round studies were measured."""
        return {
            "epsilon": self.total.epsilon,
            "delta": self.total.delta,
            "rounds": self.rounds,
            "accountant": self.accountant,
            "per_round": [
                {
                    "mechanisms": list(g.mechanisms),
                    "epsilon_per_round": g.epsilon,
                    "delta_per_round": g.delta,
                    "calibration": {"method": g.budgets[0].method, "tolerance": g.budgets[0].tolerance},
                }
                for g in groups
            ],
            "studies": repeats // self.rounds,
            "final_estimate": f"each study is {self.rounds} consecutive repetitions (independent rounds of the "
            "same data); its final estimate is their average, mse_final its squared error averaged over the "
            "studies, predicted_mse_final = mean_j(delta_j^2 + sigma_j^2 / T)",
        }


def budget_columns(budget: RoundBudget) -> dict:
    """A comparison row's planned settings: the total, the rounds, the per-round delta and the total
    the T rounds spend under the chosen accountant (the run's budget check, `spent_within`)."""
    spent = budget.spent.get(budget.accountant)
    return {
        "total_epsilon": budget.total.epsilon,
        "total_delta": budget.total.delta,
        "rounds": budget.rounds,
        "accountant": budget.accountant,
        "delta_per_round": budget.delta,
        "epsilon_spent": None if spent is None else spent.epsilon,
    }


def with_budget_columns(summary: pd.DataFrame, groups: list[BudgetGroup]) -> pd.DataFrame:
    """A comparison's summary with each row's planned settings (`budget_columns`), by mechanism."""
    import pandas as pd  # lazily: a Flower node imports this module (`flower_run_config`), never the tables

    columns = pd.DataFrame([{"mechanism": b.mechanism, **budget_columns(b)} for g in groups for b in g.budgets])
    return summary.merge(columns, on="mechanism", how="left", sort=False)


def study_repeats(repeats: int | None, rounds: int, default: int) -> int:
    """Repetitions that make whole T-round studies: the given count, which must be a multiple of T,
    or (None) the smallest multiple of T that is at least the task's `default`."""
    if repeats is None:
        return rounds * math.ceil(default / rounds)
    if repeats < 1 or repeats % rounds:
        raise LDPValueError(
            f"--repeats {repeats} with --budget over --rounds {rounds}: give a multiple of {rounds} "
            "(each run of T repetitions is one study, whose final estimate averages them)"
        )
    return repeats

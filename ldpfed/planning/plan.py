"""A plan for the mean task: from a client's total budget, every candidate (mechanism, m) with its
per-round budget and the error to expect, ranked, the best marked (`ldpfed plan`; analysis.md,
CLT predictor; docs/decisions.md, Privacy accounting: "Planning from a total budget").

For each candidate the per-round budget comes from `calibration.calibrate_round`; the error from
ldpfed's CLT predictor (`ldpfed.analysis.predict`, the same figure as `ldpfed predict` at that
per-round eps) on the users who report in a round:

- mse_round_mean: one round's MSE of the plain mean (the predictor's MSE);
- mse_round_<aggregator>: one round's MSE of a re-calibrating aggregator (HDR4ME* by default),
  under the same normal model (`ldpfed.analysis.frequency.recalibrated_mse`: Gauss–Hermite, exact
  for the element-wise aggregators under that model);
- mse_final: the MSE of the final estimate, the average of the T rounds' plain means. The rounds
  are independent collections of the same data, so the average's deviation in dimension j has the
  same mean delta_j and variance sigma_j^2 / T: MSE = (1/d) sum_j (delta_j^2 + sigma_j^2 / T);
- mse_one_collection: the alternative of spending the whole budget in one collection (T = 1,
  every user), for comparison.

Rows are ranked by mse_final; `valid` says whether the normal model of a round holds
(the predictor's Berry–Esseen and no-report checks). Candidates whose per-value budget a
mechanism does not take are left out with the reason.

Every task's plan is `ranked_plan` of the task's side (`PlanTask`): `MeanTask` here, the frequency
task's in `ldpfed.planning.frequency`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

import ldpfed.aggregation as aggregation
import ldpfed.mechanisms as registry
from ldpfed.accounting import ACCOUNTANTS
from ldpfed.analysis import predict
from ldpfed.analysis.frequency import recalibrated_mse
from ldpfed.analysis.moments import ColumnMoments
from ldpfed.planning.calibration import RoundBudget, TotalBudget, calibrate_round, check_round, rounds_taken
from ldpfed.validation import LDPValueError, canonical_name, check_positive_int, check_report_dims

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_AGGREGATORS = ("hdr4me",)
CURVE_ROUNDS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
CURVE_ACCOUNTANTS = ("basic", "pld")
ESTIMATES = {"mean": "means", "frequency": "frequency estimates"}


@dataclass(frozen=True)
class PlanRow:
    budget: RoundBudget
    report_dims: int
    users_per_round: int
    mse_round_mean: float
    mse_round_aggregators: dict
    mse_final: float
    mse_one_collection: float
    berry_esseen: float
    warning: str | None

    def to_dict(self) -> dict:
        b = self.budget
        row = {
            "mechanism": b.mechanism,
            "report_dims": self.report_dims,
            "epsilon_per_round": b.epsilon,
            "epsilon_per_value": b.epsilon / self.report_dims,
            "delta_per_round": b.delta,
            "rounds": b.rounds,
            "rounds_taken_per_client": b.taken,
            "users_per_round": self.users_per_round,
            "accountant": b.accountant,
        }
        for name in ACCOUNTANTS:
            spent = b.spent.get(name)
            row[f"total_epsilon_{name}"] = None if spent is None else spent.epsilon
        row["mse_round_mean"] = self.mse_round_mean
        row.update({f"mse_round_{name}": value for name, value in self.mse_round_aggregators.items()})
        row.update(
            {
                "mse_final": self.mse_final,
                "mse_one_collection": self.mse_one_collection,
                "berry_esseen": self.berry_esseen,
                "valid": self.warning is None,
            }
        )
        return row


class RankedPlan:
    """What every task's plan shares: rows ranked best first, the table, and the guarantee's
    coverage of participation (fields `rows`, `rounds`, `cap`, `participation`, `total`)."""

    @property
    def best(self):
        return self.rows[0]

    def frame(self) -> pd.DataFrame:
        import pandas as pd  # lazily: a Flower node imports this module (ldpfed.planning.run), never the tables

        frame = pd.DataFrame([row.to_dict() for row in self.rows])
        frame.insert(0, "rank", np.arange(1, len(self.rows) + 1))
        frame["recommended"] = frame["rank"] == 1
        return frame

    def coverage(self) -> str:
        """Whom the total covers: a client in every round, unless the federation caps participation."""
        taken = self.best.budget.taken
        if self.cap is not None and taken < self.rounds:
            return (
                f"every client, each taking part in at most {taken} of the {self.rounds} rounds (the federation's cap)"
            )
        at = f" at participation {self.participation:g}" if self.participation < 1 else ""
        return f"every client, even one that takes part in all {self.rounds} rounds (worst case{at})"


@dataclass(frozen=True)
class Plan(RankedPlan):
    total: TotalBudget
    rounds: int
    accountant: str
    participation: float
    cap: int | None
    users: int
    dims: int
    data: str
    rows: list[PlanRow]
    excluded: list[dict] = field(default_factory=list)
    task: str = "mean"
    details: dict = field(default_factory=dict)  # task-specific facts for the summary (e.g. categories)

    def guarantee(self) -> str:
        delta = f", {self.total.delta:g}" if self.total.delta else ""
        return (
            f"({self.total.epsilon:g}{delta})-LDP per client under replace-one (any two inputs of a client), "
            f"by the {self.accountant} accountant, for {self.coverage()}; client sampling gives no amplification "
            "under local DP (each report protects its client on its own and the server sees who reported)"
        )

    def summary(self) -> dict:
        best = self.best.to_dict()
        return {
            "task": self.task,
            "budget": {"epsilon": self.total.epsilon, "delta": self.total.delta},
            "rounds": self.rounds,
            "accountant": self.accountant,
            "participation": self.participation,
            "rounds_cap": self.cap,
            "users": self.users,
            "dims": self.dims,
            "data": self.data,
            "guarantee": self.guarantee(),
            **self.details,
            "combining_rounds": f"the final estimate is the average of the T rounds' plain {ESTIMATES[self.task]} "
            "(mse_final = mean_j(delta_j^2 + sigma_j^2 / T)); mse_one_collection spends the whole budget in one round",
            "calibration": {"method": self.best.budget.method, "tolerance": self.best.budget.tolerance},
            "recommended": best,
            "rows": [row.to_dict() for row in self.rows],
            "excluded": self.excluded,
        }


def parse_report_dims(report_dims) -> int | str | None:
    """--report-dims as given: None (d), "auto" or a number m >= 1 (m <= d is checked on the data)."""
    if report_dims is None or canonical_name(report_dims) == "auto":
        return None if report_dims is None else "auto"
    try:
        m = int(str(report_dims))
    except ValueError:
        raise LDPValueError(f"--report-dims must be a number m or auto, got {report_dims!r}") from None
    return check_positive_int(m, "--report-dims")


def candidate_report_dims(dims: int, report_dims) -> list[int]:
    """The m to try: the given one, d when None, or with 'auto' 1, 2, 4, ... below d and d."""
    m = parse_report_dims(report_dims)
    if m is None:
        return [dims]
    if m == "auto":
        powers = [2**k for k in range(int(math.log2(dims)) + 1) if 2**k < dims]
        return powers + [dims]
    return [check_report_dims(m, dims)]


def check_options(task, total: TotalBudget, rounds: int, cap, mechanisms, report_dims, accountant, participation):
    """What `ranked_plan` on `task` (a `PlanTask` class) checks that needs no data, checked before
    any data are read or generated: the rounds, the participation, the form of m, and each
    candidate's name, delta and accountant (`calibration.check_round`)."""
    taken = rounds_taken(rounds, cap)
    participation_rate(participation)
    parse_report_dims(report_dims)
    for name in task.names(total, mechanisms):
        check_round(name, total, taken, accountant)


def users_per_round(users: int, participation: float) -> int:
    """The users who report in a round at the share `participation` (at least 2)."""
    return max(2, round(participation * users))


def admitted_mechanisms(total: TotalBudget) -> list[str]:
    """Every registered randomizer; the approximate ones only when the total has a delta."""
    return [name for name in registry.available() if total.delta > 0 or not registry.get_class(name).approximate]


class PlanTask(Protocol):
    """A task's side of a plan (`ranked_plan`): its data, `users` x `dims` named `data`, its
    candidates and each candidate's predicted errors."""

    name: str  # the task
    kind: str  # what a candidate is ("mechanism", "oracle"), for the error when none fits
    users: int
    dims: int
    data: str
    details: dict  # task-specific facts for the summary (e.g. categories)

    @staticmethod
    def names(total: TotalBudget, given: list[str] | None) -> list[str]:
        """The candidates: the `given` names as the registry spells them, or (None) the default
        (no data needed: a plan checks them first)."""

    def per_round(self, participation: float):
        """The data a round's prediction sees: every user's, or (participation < 1) a round's users."""

    def row(self, budget: RoundBudget, m: int, per_round, aggregators, total: TotalBudget) -> PlanRow:
        """One candidate's predicted errors (module docstring)."""


class MeanTask:
    """The mean task's side of a plan: the users' tuples as their column moments."""

    name, kind = "mean", "mechanism"

    def __init__(self, moments: ColumnMoments, data: str = "") -> None:
        self.moments, self.data, self.details = moments, data, {}
        self.users, self.dims = moments.users, moments.dims

    @staticmethod
    def names(total: TotalBudget, given: list[str] | None) -> list[str]:
        """Every randomizer the total admits when none is given (`admitted_mechanisms`)."""
        if given is not None:
            return [registry.get_class(name).name for name in given]
        return admitted_mechanisms(total)

    def per_round(self, participation: float) -> ColumnMoments:
        if participation == 1.0:
            return self.moments
        return self.moments.summary().with_users(users_per_round(self.users, participation))

    def row(self, budget: RoundBudget, m: int, per_round, aggregators, total: TotalBudget) -> PlanRow:
        moments, users, dims = self.moments, per_round.users, self.dims
        prediction = predict(budget.mechanism, budget.epsilon, users, dims, m, per_round, delta=budget.delta)
        truth = np.broadcast_to(moments.mean, (dims,))
        model = prediction.deviation_model()
        recalibrated = {a.name: recalibrated_mse(a, truth, model) for a in aggregators}
        final = prediction.mse_of_average(budget.rounds)
        delta = total.delta if budget.delta is not None else None
        once = predict(budget.mechanism, total.epsilon, moments.users, dims, m, moments, delta=delta)
        return PlanRow(
            budget,
            m,
            users,
            prediction.mse,
            recalibrated,
            final,
            once.mse,
            prediction.berry_esseen.max,
            prediction.normal_approximation_warning,
        )


def ranked_plan(
    task: PlanTask,
    total: TotalBudget,
    rounds: int,
    *,
    mechanisms: list[str] | None = None,
    report_dims=None,
    accountant: str = "basic",
    participation: float = 1.0,
    cap: int | None = None,
    aggregators=DEFAULT_AGGREGATORS,
    progress=None,
) -> Plan:
    """Every (name, m) candidate of `task` with its per-round budget and predicted errors, ranked
    by mse_final: `mechanisms` (None: the task's default), m from `report_dims`
    (`candidate_report_dims`), the per-round budgets from `calibration.calibrate_round`.
    `progress(text=None)` is called once per candidate (`ranked_candidates`)."""
    rounds = check_positive_int(rounds, "--rounds")
    participation = participation_rate(participation)
    names = task.names(total, mechanisms)
    aggregators = [aggregation.get(name) for name in aggregators]
    ms = candidate_report_dims(task.dims, report_dims)
    per_round = task.per_round(participation)

    def row(budget: RoundBudget, m: int) -> PlanRow:
        return task.row(budget, m, per_round, aggregators, total)

    rows, excluded = ranked_candidates(names, ms, total, rounds, accountant, cap, row, task.kind, progress)
    return Plan(
        total,
        rounds,
        rows[0].budget.accountant,
        participation,
        cap,
        task.users,
        task.dims,
        task.data,
        rows,
        excluded,
        task=task.name,
        details=task.details,
    )


def make_plan(moments: ColumnMoments, total: TotalBudget, rounds: int, *, data: str = "", **options) -> Plan:
    """Every (mechanism, m) candidate with its per-round budget and predicted errors, ranked
    (`options`: those of `ranked_plan`)."""
    return ranked_plan(MeanTask(moments, data), total, rounds, **options)


def ranked_candidates(names, ms, total: TotalBudget, rounds: int, accountant: str, cap, row, kind: str, progress=None):
    """(rows ranked by mse_final, excluded candidates): each name's per-round budget from the total,
    `row(budget, m)` for every m; a candidate whose row cannot be made is excluded with its reason,
    and none left is an LDPValueError naming the first reasons. `progress(text=None)` after each
    candidate: its name and m when it has a row (an excluded one adds no line before the error)."""
    advance = progress or (lambda text=None: None)
    rows, excluded = [], []
    for name in names:
        budget = calibrate_round(name, total, rounds, accountant, cap)
        for m in ms:
            try:
                rows.append(row(budget, m))
            except LDPValueError as error:
                excluded.append({"mechanism": budget.mechanism, "report_dims": m, "reason": str(error)})
                advance()
                continue
            advance(f"{budget.mechanism} m={m}")
    if not rows:
        reasons = "; ".join(f"{e['mechanism']} m={e['report_dims']}: {e['reason']}" for e in excluded[:3])
        raise LDPValueError(f"no {kind} can run within ({total.text()}) over {rounds} rounds: {reasons}")
    rows.sort(key=lambda candidate: candidate.mse_final)
    return rows, excluded


def participation_rate(value) -> float:
    try:
        q = float(value)
    except (TypeError, ValueError):
        q = math.nan
    if not 0.0 < q <= 1.0:
        raise LDPValueError(f"--participation must be in (0, 1], got {value!r}")
    return q


def mse_against_rounds(
    moments: ColumnMoments | None,
    total: TotalBudget,
    mechanisms: list[str],
    report_dims: dict,
    rounds_grid=CURVE_ROUNDS,
    accountants=CURVE_ACCOUNTANTS,
    row_of=None,
    progress=None,
) -> pd.DataFrame:
    """Predicted mse_final against T at the fixed total, per mechanism (its m in `report_dims`) and
    accountant: the shape differs between basic and pld composition. `row_of(budget, m)`: the plan
    row of another task (default: the mean task on `moments`). `progress(text)` after each
    (mechanism, accountant) curve."""
    import pandas as pd

    advance = progress or (lambda text=None: None)
    if row_of is None:
        task = MeanTask(moments)

        def row_of(budget, m):
            return task.row(budget, m, moments, [], total)

    records = []
    for name in mechanisms:
        for accountant in accountants:
            for rounds in rounds_grid:
                try:
                    budget = calibrate_round(name, total, rounds, accountant)
                    row = row_of(budget, report_dims[name])
                except LDPValueError:
                    continue
                records.append(
                    {
                        "mechanism": name,
                        "report_dims": report_dims[name],
                        "accountant": accountant,
                        "rounds": rounds,
                        "epsilon_per_round": budget.epsilon,
                        "mse_round_mean": row.mse_round_mean,
                        "mse_final": row.mse_final,
                    }
                )
            advance(f"{name} under {accountant}, T = {rounds_grid[0]} to {rounds_grid[-1]}")
    return pd.DataFrame(records)


def curve_figure(curve: pd.DataFrame, total: TotalBudget, marked_rounds: int):
    """Predicted MSE of the final estimate against T, one colour per mechanism, basic dashed, pld solid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    styles = {"basic": "--", "advanced": ":", "pld": "-", "rdp": "-."}
    for index, (name, group) in enumerate(curve.groupby("mechanism", sort=False)):
        colour = f"C{index}"
        for accountant, line in group.groupby("accountant", sort=False):
            m = int(line["report_dims"].iloc[0])
            axis.plot(
                line["rounds"],
                line["mse_final"],
                styles.get(accountant, "-"),
                color=colour,
                marker="o",
                ms=3,
                label=f"{name} (m={m}), {accountant}",
            )
    axis.axvline(marked_rounds, color="grey", lw=0.8, alpha=0.6)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("rounds T (each client takes part in every round)")
    axis.set_ylabel("predicted MSE of the average of the T rounds")
    delta = f", delta {total.delta:g}" if total.delta else ""
    axis.set_title(f"Total budget eps {total.epsilon:g}{delta} per client: basic (dashed) vs pld (solid)")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    return figure

"""A plan for the frequency task: from a client's total budget, every candidate (oracle, m) with its
per-round budget and the error to expect, ranked (`ldpfed plan --task frequency`; analysis.md, CLT
predictor applied to one-hot entries; docs/decisions.md, Privacy accounting: "Planning from a total
budget").

The candidates are the frequency oracles GRR and OUE and the histogram encoding of every scalar
randomizer (the approximate ones only with a delta in the budget), each with m of the d attributes
reported per user. The per-round budget is `calibration.calibrate_round`'s (a frequency run records
the same generic eps-DP round as a mean run); the error is `ldpfed.analysis.frequency`'s prediction
per (attribute, category) entry on the users who report in a round, in squared frequency units:

- mse_round_mean: one round's MSE of the plain frequency estimates (`predict_frequency`, the figure
  of `ldpfed predict --task frequency` at that per-round eps);
- mse_round_<aggregator>: one round's MSE of a re-calibrating aggregator (HDR4ME* by default) under
  the same normal model (`recalibrated_mse`);
- mse_final: the average of the T rounds' plain estimates, mean_e(bias_e^2 + variance_e / T);
- mse_one_collection: the whole budget spent in one collection.

Validity: the largest Lyapunov (non-identical summands) Berry–Esseen bound over the entries, from
each entry's per-report variance and third absolute central moment at the expected reports n m / d
(`berry_esseen`), and the chance that an attribute gets no report.
"""

from __future__ import annotations

import numpy as np

from ldpfed.analysis.berry_esseen import POOR_NORMAL_APPROXIMATION, bound_from_moments
from ldpfed.analysis.frequency import FrequencyPrediction, predict_frequency, recalibrated_mse
from ldpfed.data.categorical import CategoricalData
from ldpfed.frequency.categorical import COUNTING_ORACLES, AttributeOracles
from ldpfed.frequency.oracles import HistogramEncoding
from ldpfed.planning.calibration import RoundBudget, TotalBudget
from ldpfed.planning.plan import Plan, PlanRow, admitted_mechanisms, ranked_plan, users_per_round


def entry_third_moments(oracles: AttributeOracles) -> tuple[np.ndarray, np.ndarray]:
    """(rho_in, rho_out) per entry: E|c - E c|^3 of one user's contribution when the entry is her
    category (bit 1) or not (bit 0). Counting oracles: a scaled Bernoulli (p or q); histogram
    encoding: the per-entry randomizer's third moment at +1 / -1, scaled by 1 / (2 (1 + b1))^3."""

    def bernoulli(pi: float) -> float:
        return pi * (1.0 - pi) * (pi**2 + (1.0 - pi) ** 2)

    rho_in, rho_out = [], []
    for oracle in oracles.oracles:
        if isinstance(oracle, HistogramEncoding):
            _, b1 = oracle.entry.bias_coefficients
            scale = (2.0 * (1.0 + b1)) ** 3
            at = np.asarray(oracle.entry.third_abs_central_moment(np.array([1.0, -1.0])), dtype=float) / scale
            one, zero = float(at[0]), float(at[1])
        else:
            width = abs(oracle.p - oracle.q) ** 3
            one, zero = bernoulli(oracle.p) / width, bernoulli(oracle.q) / width
        rho_in.append(np.full(oracle.k, one))
        rho_out.append(np.full(oracle.k, zero))
    return np.concatenate(rho_in), np.concatenate(rho_out)


def frequency_validity(prediction: FrequencyPrediction) -> tuple[float, str | None]:
    """(largest Berry–Esseen bound over the entries, a warning or None) (module docstring)."""
    oracles, f, users = prediction.oracles, prediction.frequencies, prediction.users
    v_in, v_out = oracles.entry_variances()
    rho_in, rho_out = entry_third_moments(oracles)
    reports = users * oracles.report_dims / oracles.attributes
    bound = bound_from_moments(f * v_in + (1 - f) * v_out, f * rho_in + (1 - f) * rho_out, reports, "exact")
    largest = bound.max_non_identical
    reasons = []
    if largest > POOR_NORMAL_APPROXIMATION:
        reasons.append(f"Berry–Esseen bound {largest:.3g} > {POOR_NORMAL_APPROXIMATION:g}")
    if prediction.no_report_probability > POOR_NORMAL_APPROXIMATION / 10:
        reasons.append(f"P(no report of an attribute) {prediction.no_report_probability:.3g}")
    warning = None if not reasons else "normal approximation poor (" + "; ".join(reasons) + ")"
    return largest, warning


class FrequencyTask:
    """The frequency task's side of a plan (`plan.ranked_plan`): the users' categorical tuples
    (`ldpfed.data.categorical`); a candidate is an oracle."""

    name, kind = "frequency", "oracle"

    def __init__(self, table: CategoricalData) -> None:
        self.table, self.truth = table, table.frequencies()
        self.users, self.dims, self.data = table.users, table.attributes, table.source
        self.details = {
            "categories": table.categories.tolist(),
            "entries": int(self.truth.size),
            "error_unit": "squared frequency",
        }

    @staticmethod
    def names(total: TotalBudget, given: list[str] | None) -> list[str]:
        """GRR, OUE and every scalar randomizer histogram-encoded (approximate ones only with a delta)."""
        if given is not None:
            return list(given)
        return [*COUNTING_ORACLES, *admitted_mechanisms(total)]

    def per_round(self, participation: float) -> int:
        return self.users if participation == 1.0 else users_per_round(self.users, participation)

    def row(self, budget: RoundBudget, m: int, per_round: int, aggregators, total: TotalBudget) -> PlanRow:
        categories, truth = self.table.categories, self.truth
        oracles = AttributeOracles.build(budget.mechanism, budget.epsilon, categories, m, budget.delta)
        prediction = predict_frequency(oracles, truth, per_round)
        model = prediction.deviation_model()
        recalibrated = {a.name: recalibrated_mse(a, truth, model) for a in aggregators}
        final = prediction.mse_of_average(budget.rounds)
        whole = total.delta if budget.delta is not None else None
        whole_budget = AttributeOracles.build(budget.mechanism, total.epsilon, categories, m, whole)
        once = predict_frequency(whole_budget, truth, self.users)
        largest, warning = frequency_validity(prediction)
        return PlanRow(budget, m, per_round, prediction.mse, recalibrated, final, once.mse, largest, warning)


def make_frequency_plan(table, total: TotalBudget, rounds: int, **options) -> Plan:
    """Every (oracle, m) candidate for the categorical data `table` (`ldpfed.data.categorical`),
    ranked by mse_final (`options`: those of `plan.ranked_plan`)."""
    return ranked_plan(FrequencyTask(table), total, rounds, **options)


def frequency_curve_row(table, total: TotalBudget):
    """`row_of(budget, m)` for `plan.mse_against_rounds` on the frequency task."""
    task = FrequencyTask(table)

    def row_of(budget: RoundBudget, m: int) -> PlanRow:
        return task.row(budget, m, task.users, [], total)

    return row_of

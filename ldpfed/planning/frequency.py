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
from ldpfed.frequency.categorical import COUNTING_ORACLES, LONGITUDINAL_ORACLES, AttributeOracles
from ldpfed.frequency.oracles import HistogramEncoding
from ldpfed.frequency.oracles import resolve as resolve_oracle
from ldpfed.planning.calibration import RoundBudget, TotalBudget
from ldpfed.planning.plan import Plan, PlanRow, admitted_mechanisms, ranked_plan, users_per_round
from ldpfed.protocols import seeds
from ldpfed.protocols.frequency import FrequencyClient, FrequencyServer


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
            return [resolve_oracle(name) for name in given]  # an oracle's alias (hr, krr, ...) is its name
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
    ranked by mse_final (`options`: those of `plan.ranked_plan`); its summary adds memoized against
    fresh collection at the same total (`memoized_versus_fresh`) where the total is pure."""
    task = FrequencyTask(table)
    if not total.delta:  # the longitudinal oracles are pure
        m = options.get("report_dims")
        m = m if isinstance(m, int) else None  # "auto" or all: every attribute
        task.details = {**task.details, "memoized_versus_fresh": memoized_versus_fresh(table, total.epsilon, rounds, m)}
    return ranked_plan(task, total, rounds, **options)


def frequency_curve_row(table, total: TotalBudget):
    """`row_of(budget, m)` for `plan.mse_against_rounds` on the frequency task."""
    task = FrequencyTask(table)

    def row_of(budget: RoundBudget, m: int) -> PlanRow:
        return task.row(budget, m, task.users, [], total)

    return row_of


FRESH_ORACLES = ("grr", "oue", "olh")  # the one-round oracles shown beside the memoized ones


def memoized_mse(oracles: AttributeOracles, frequencies: np.ndarray, users: int, rounds: int) -> float:
    """Predicted MSE (mean over entries) of the average of `rounds` rounds of a memoized collection:
    the r = n m / d users who report attribute j (memoized: the same users every round) contribute
    `variance_of_average` (the permanent report's share does not average away), plus the sampling of
    those r among n users, f (1 - f) (1 / r - 1 / n), which does not average away either."""
    reporters = max(1, round(users * oracles.report_dims / oracles.attributes))
    parts = []
    for oracle, start, stop in zip(oracles.oracles, oracles.offsets[:-1], oracles.offsets[1:]):
        f = frequencies[start:stop]
        sampling = f * (1.0 - f) * (1.0 / reporters - 1.0 / users)
        parts.append(oracle.variance_of_average(f, reporters, rounds) + sampling)
    return float(np.mean(np.concatenate(parts)))


def memoized_versus_fresh(table, epsilon: float, rounds: int, report_dims: int | None = None) -> list[dict]:
    """At one budget eps per client over T rounds, ranked by the predicted MSE of the T-round average:
    - memoized: each longitudinal oracle at eps_inf = eps, charged once (its permanent report), with
      eps_1 = eps_inf / 2 against an observer of one round;
    - fresh: GRR, OUE, OLH randomized anew every round at eps / T (basic composition over T rounds),
      eps / T against an observer of one round.
    Against the server over all T rounds both spend eps per client (for a value that stays fixed)."""
    truth, users = table.frequencies(), table.users
    m = table.attributes if report_dims is None else report_dims
    rows = []
    for name in LONGITUDINAL_ORACLES:
        oracles = AttributeOracles.build(name, epsilon, table.categories, m)
        rows.append(_collection_row(oracles, rounds, memoized_mse(oracles, truth, users, rounds)))
    for name in FRESH_ORACLES:
        oracles = AttributeOracles.build(name, epsilon / rounds, table.categories, m)
        mse = predict_frequency(oracles, truth, users).mse_of_average(rounds)
        rows.append(_collection_row(oracles, rounds, mse))
    rows = sorted(rows, key=lambda row: row["mse_of_average"])
    return [{"rounds": rounds, "report_dims": m, **row} for row in rows]


def _collection_row(oracles: AttributeOracles, rounds: int, mse: float) -> dict:
    memoized = oracles.memoized
    return {
        "collection": "memoized" if memoized else "fresh",
        "oracle": oracles.kind,
        "epsilon_per_round": None if memoized else oracles.epsilon,
        "epsilon_against_one_round": float(oracles.epsilon_1 if memoized else oracles.epsilon),
        "epsilon_against_all_rounds": float(oracles.epsilon if memoized else oracles.epsilon * rounds),
        "mse_of_average": mse,
    }


def measure_memoized_versus_fresh(table, rows: list[dict], studies: int, seed: int) -> list[dict]:
    """`rows` (`memoized_versus_fresh`) with the measured MSE of the T-round average: `studies`
    studies, each one client holding every user with its own secret (spawned from `seed`), its T
    rounds through the frequency task's client and server halves (a memoized oracle from one memo per
    study), the plain estimates averaged; mean and standard error over the studies."""
    truth, secrets = table.frequencies(), seeds.client_secrets(seed, studies)
    measured = []
    for row in rows:
        epsilon = row["epsilon_against_all_rounds"] if row["collection"] == "memoized" else row["epsilon_per_round"]
        oracles = AttributeOracles.build(row["oracle"], epsilon, table.categories, row["report_dims"])
        errors = [_study_error(table.codes, oracles, secrets[study], row["rounds"], truth) for study in range(studies)]
        spread = float(np.std(errors, ddof=1) / np.sqrt(studies)) if studies > 1 else float("nan")
        measured.append({**row, "measured_mse_of_average": float(np.mean(errors)), "measured_se": spread})
    return measured


def _study_error(codes, oracles: AttributeOracles, secret: int, rounds: int, truth: np.ndarray) -> float:
    """Squared error (mean over entries) of the average of `rounds` rounds' plain estimates."""
    client, server = FrequencyClient(codes, oracles, secret), FrequencyServer(oracles, 1, ["mean"])
    total = np.zeros(truth.size)
    for server_round in range(1, rounds + 1):
        server.configure_round(server_round)
        reply, _ = client.reply(server_round, {})
        server.aggregate(server_round, {0: reply}, {})
        total += server.outcome.f_hat
    return float(np.mean((total / rounds - truth) ** 2))

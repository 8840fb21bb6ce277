"""Equal guarantees across trust models (spec: trust-models.md; docs/decisions.md, Trust models:
"Comparing trust models at one total budget").

Given a client's total (eps, delta) over T rounds, what each trust model may spend per round so
that its guarantee against its adversary (ldpfed.accounting.trust) is that total:

- local: the per-round eps of the local randomizer (`calibrate_round`: the same calibration as
  `ldpfed plan` and `simulate --budget`), the total holding against the server;
- shuffle: the largest eps0 whose T shuffled rounds, each (eps(eps0, n, delta_r), delta_r) with
  delta_r = delta / (2T), compose within the total under the accountant; eps0 is capped by the
  bound's condition (eps0 <= log(n / (16 log(2/delta_r)))), and where the cap binds the run spends
  less than the total (`spent` says how much);
- central: the total is the run's budget (`--max-epsilon`, `--max-delta`), to which the noise
  multiplier is calibrated (ldpfed.accounting.central);
- secagg: the same, the budget to which the clients' discrete Gaussian shares are calibrated at
  every client's share summed (ldpfed.accounting.ddgauss); a round with dropouts spends more.
What each setting predicts before a run: ldpfed.planning.trust_plan (`ldpfed plan --trust`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpfed.accounting import create_accountant
from ldpfed.accounting.shuffle import minimum_reports, shuffled_epsilon
from ldpfed.accounting.trust import get_class, shuffle_round_delta
from ldpfed.planning.calibration import TotalBudget, calibrate_round
from ldpfed.validation import LDPValueError

BISECTION_STEPS = 30  # eps0 to within its bracket * 2^-30 (below: the total is never exceeded)


@dataclass(frozen=True)
class TrustSetting:
    """One trust model's settings for a total budget: the simulate options that realize it and the
    total it spends against its adversary (as `accountant` states it)."""

    trust: str
    total: TotalBudget
    rounds: int
    options: dict
    epsilon_per_round: float | None  # the local randomizer's (local, shuffle); None: central
    spent_epsilon: float
    accountant: str
    note: str = ""

    def to_dict(self) -> dict:
        return {
            "trust": self.trust,
            "total_epsilon": self.total.epsilon,
            "total_delta": self.total.delta,
            "rounds": self.rounds,
            "local_epsilon_per_round": self.epsilon_per_round,
            "spent_epsilon": self.spent_epsilon,
            "accountant": self.accountant,
            "note": self.note,
        }


def _shuffled_total(epsilon0: float, reports: int, round_delta: float, rounds: int, accountant: str, delta: float):
    event = shuffled_epsilon(epsilon0, reports, round_delta).event()
    return create_accountant(accountant).compose(event, rounds).spent_within(delta)


def largest_shuffle_epsilon0(reports: int, round_delta: float) -> float:
    """The largest eps0 inside the bound's condition for n = `reports` (from below)."""
    room = reports / (16.0 * math.log(2.0 / round_delta))
    if room <= 1.0:
        raise LDPValueError(
            f"--trust shuffle: {reports} reports per round are below the bound's minimum "
            f"({minimum_reports(1e-9, round_delta)} at any eps0)"
        )
    epsilon0 = math.log(room) * (1 - 1e-9)
    while minimum_reports(epsilon0, round_delta) > reports:
        epsilon0 *= 1 - 1e-6
    return epsilon0


def shuffle_setting(total: TotalBudget, rounds: int, reports: int, accountant: str = "pld") -> TrustSetting:
    """The largest eps0 (within the bound's condition) whose `rounds` shuffled rounds of `reports`
    reports compose within `total` (module docstring)."""
    if total.delta <= 0:
        raise LDPValueError("--trust shuffle's guarantee is (eps, delta): give the total's delta > 0")
    round_delta = shuffle_round_delta(total.delta, rounds)
    cap = largest_shuffle_epsilon0(reports, round_delta)

    def spent(epsilon0: float) -> float:
        return _shuffled_total(epsilon0, reports, round_delta, rounds, accountant, total.delta).epsilon

    at_cap = spent(cap)
    if at_cap <= total.epsilon:
        note = f"eps0 capped by the bound's condition (n = {reports}): spends {at_cap:.4g} of {total.epsilon:g}"
        return TrustSetting("shuffle", total, rounds, {"epsilon": cap}, cap, at_cap, accountant, note)
    low, high = 0.0, cap
    for _ in range(BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if middle > 0 and spent(middle) <= total.epsilon:
            low = middle
        else:
            high = middle
    if low <= 0:
        raise LDPValueError(f"--trust shuffle: no eps0 fits the total ({total.text()}) over {rounds} rounds")
    return TrustSetting("shuffle", total, rounds, {"epsilon": low}, low, spent(low), accountant)


def equal_budget(
    trust: str,
    total: TotalBudget,
    rounds: int,
    *,
    mechanism: str = "laplace",
    reports: int | None = None,
    accountant: str = "pld",
) -> TrustSetting:
    """The settings of `trust` that spend `total` per client over `rounds` rounds."""
    model = get_class(trust)
    if model.name == "local":
        budget = calibrate_round(mechanism, total, rounds, accountant)
        spent = budget.spent[budget.accountant]
        return TrustSetting(
            "local", total, rounds, {"epsilon": budget.epsilon}, budget.epsilon, spent.epsilon, budget.accountant
        )
    if model.name == "shuffle":
        if reports is None:
            raise LDPValueError("--trust shuffle needs the number of reports per round (users)")
        return shuffle_setting(total, rounds, reports, accountant)
    if total.delta <= 0:
        raise LDPValueError(f"--trust {model.name}'s guarantee is (eps, delta): give the total's delta > 0")
    options = {"max_epsilon": total.epsilon, "max_delta": total.delta}
    note = "planned at every client's share summed; dropouts spend more" if model.name == "secagg" else ""
    return TrustSetting(model.name, total, rounds, options, None, total.epsilon, "rdp", note)


def worst_case_variance(mechanism) -> float:
    """max over values t in [-1, 1] of a scalar mechanism's noise variance V(t) = v0 + v1 t + v2 t^2."""
    v0, v1, v2 = mechanism.variance_coefficients
    ends = [-1.0, 1.0] + ([min(1.0, max(-1.0, -v1 / (2.0 * v2)))] if v2 != 0 else [])
    return float(max(v0 + t * (v1 + v2 * t) for t in ends))


def report_noise(mechanism, users: int, dims: int, report_dims: int) -> tuple[float, float]:
    """The mean task's noise: (sd on each reported value, sd on the mean estimate of a dimension).
    Each dimension's estimate averages the users * m / d values reported for it; worst case over
    the values in [-1, 1] (Laplace's is the same at every value)."""
    variance = worst_case_variance(mechanism)
    return math.sqrt(variance), math.sqrt(variance * dims / (users * report_dims))


def update_noise(privatizer, dims: int, weights) -> tuple[float, float]:
    """Local training's noise: (sd added to each reported coordinate, in the update's units before
    the server's d/m rescaling; sd per coordinate of the weighted mean of the privatized updates).

    The second is sqrt(sum_k p_k^2 v) with v the privatizer's own per-coordinate noise variance of
    a privatized update (`per_coordinate_noise`: the m-of-d mask and the d/m scale included, worst
    case over coordinate values in [-C, C]) and p_k the clients' aggregation weights."""
    p = np.asarray(weights, dtype=float)
    p = p / p.sum()
    variance = float(np.mean(privatizer.per_coordinate_noise(dims)[1]))
    added = privatizer.clip * math.sqrt(worst_case_variance(privatizer.per_value_mechanism(dims)))
    return added, math.sqrt(variance * float(np.sum(p**2)))

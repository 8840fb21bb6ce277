"""Running a plan: `ldpfed simulate --budget EPS[,DELTA] --rounds T --accountant A` takes the plan's
per-round settings (ldpfed.planning.calibration) and holds every client to the total.

The run's config gets the per-round epsilon (and delta) that the total allows over T rounds (a client
is assumed to take part in every round; training: on the event the run's privatizer records,
ldpfed.planning.train) and the total as its budget (max-epsilon,
max-delta), so that the run's ledger stops a client before it could exceed the total; with the
plan's per-round figure none has to stop. `budget` is then cleared: config.toml records the
per-round settings and the budget the run used, which replay it as they are.
"""

from __future__ import annotations

from dataclasses import replace

from ldpfed.config import Config
from ldpfed.planning.calibration import RoundBudget, TotalBudget, calibrate_round
from ldpfed.planning.train import PLRVO, calibrate_train_round, update_dims
from ldpfed.validation import LDPValueError

# options a total budget decides: giving one of them with --budget is a contradiction
PLANNED_OPTIONS = ("epsilon", "delta", "max_epsilon", "max_delta")


def planned_config(config: Config, flags: dict | None = None) -> tuple[Config, RoundBudget | None]:
    """(config with the plan's per-round settings and budget, the round budget), or (config, None)
    without a total budget. `flags`: the command-line options given (None: not given)."""
    privacy = config.privacy
    if not privacy.budget:
        return config, None
    given = sorted("--" + name.replace("_", "-") for name in PLANNED_OPTIONS if (flags or {}).get(name) is not None)
    if given or privacy.max_epsilon:
        shown = ", ".join(given) or "max-epsilon"
        raise LDPValueError(f"--budget sets the per-round epsilon, delta and the max-epsilon budget: drop {shown}")
    total = TotalBudget.parse(privacy.budget)
    if config.run.task == "train":
        if privacy.mechanism == PLRVO:
            raise LDPValueError(
                "plrvo is calibrated over the T rounds by its own accountant (ldpfed plan --task train), and a run "
                "calibrates it per round: give its per-round --epsilon instead of --budget"
            )
        round_budget = calibrate_train_round(config, total, config.run.rounds, update_dims(config))
        if round_budget.accountant != privacy.accountant:
            raise LDPValueError(
                f"the {privacy.accountant} accountant cannot account a {privacy.mechanism} round: "
                f"give --accountant {round_budget.accountant}"
            )
    else:
        round_budget = calibrate_round(privacy.mechanism, total, config.run.rounds, privacy.accountant)
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

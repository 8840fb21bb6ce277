"""Planning from a total privacy budget: the per-round settings and the error to expect
(`ldpfed plan`; docs/decisions.md, Privacy accounting: "Planning from a total budget").

    >>> from ldpfed.planning import TotalBudget, calibrate_round
    >>> calibrate_round("laplace", TotalBudget(4.0), rounds=10, accountant="basic").epsilon
    0.4

Modules: calibration (the per-round budget a total allows under basic, advanced, rdp or pld),
plan (the candidates ranked by predicted error, the recommendation, MSE against the rounds).
"""

from ldpfed.planning.calibration import (
    RELATIVE_TOLERANCE,
    RoundBudget,
    TotalBudget,
    calibrate_round,
    ledger_accountant,
    round_cost,
    rounds_taken,
    spent_by_accountant,
)

__all__ = [
    "RELATIVE_TOLERANCE",
    "ledger_accountant",
    "RoundBudget",
    "TotalBudget",
    "calibrate_round",
    "round_cost",
    "rounds_taken",
    "spent_by_accountant",
]

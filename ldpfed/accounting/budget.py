"""A per-client privacy budget for a run (`ldpfed simulate --max-epsilon`; spec: federated.md,
Accounting per client): before each round, the clients whose total would exceed the budget with
that round's cost stop taking part, so a run never spends more than it states.

The budget, the accountant and each round's event depend only on the run's public configuration,
never on data, so the server may apply them without learning anything about a client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dp_accounting import dp_event

from ldpfed.accounting.accountants import DEFAULT_DELTA_TARGET, create_accountant, not_private_reasons
from ldpfed.accounting.ledger import PrivacyLedger
from ldpfed.validation import LDPValueError, check_fraction


@dataclass(frozen=True)
class Budget:
    """At most `max_epsilon` per client under `accountant` (reported at `delta_target`)."""

    max_epsilon: float
    accountant: str = "basic"
    delta_target: float = DEFAULT_DELTA_TARGET

    def __post_init__(self) -> None:
        try:
            budget = float(self.max_epsilon)
        except (TypeError, ValueError):
            budget = math.nan
        if not (budget > 0 and math.isfinite(budget)):
            raise LDPValueError(f"max-epsilon must be a finite number > 0, got {self.max_epsilon!r}")
        object.__setattr__(self, "max_epsilon", budget)
        object.__setattr__(self, "accountant", create_accountant(self.accountant).name)
        object.__setattr__(self, "delta_target", check_fraction(self.delta_target, "delta_target"))

    def check(self, event: dp_event.DpEvent) -> None:
        """Fail before a run starts if its round event cannot be held to this budget."""
        reasons = not_private_reasons([event])
        if reasons:
            raise LDPValueError(f"a privacy budget needs a private mechanism; here: {reasons[0]}")
        reason = create_accountant(self.accountant).unsupported(event)
        if reason is not None:
            raise LDPValueError(reason)
        first = create_accountant(self.accountant).compose(event).get_epsilon(self.delta_target)
        if first > self.max_epsilon:
            raise LDPValueError(
                f"max-epsilon {self.max_epsilon:g} is below one round's cost ({first:.4g} by the {self.accountant} accountant)"
            )

    def admit(self, ledger: PrivacyLedger, clients, event: dp_event.DpEvent) -> tuple[list, list]:
        """(clients that take part in a round costing `event`, clients stopped by the budget)."""
        return ledger.split_by_budget(clients, event, self.max_epsilon, self.accountant, self.delta_target)

    def record(self) -> dict:
        return {"max_epsilon": self.max_epsilon, "accountant": self.accountant, "delta_target": self.delta_target}

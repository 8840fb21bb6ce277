"""A per-client privacy budget for a run (`ldpfed simulate --max-epsilon [--max-delta]`; spec:
federated.md, Accounting per client): a budget is a pair (max_epsilon, max_delta). Before each
round, the clients whose total would exceed either with that round's cost stop taking part, so a
run never spends more than it states.

How each accountant's total meets the delta (`Accountant.spent_within`): rdp and pld report eps at
delta = max_delta; basic's delta is the sum of the rounds' deltas, which must stay <= max_delta
(a Gaussian round of delta 1e-3 uses up 1e-3 every time); advanced takes its slack delta' from what
max_delta leaves after the rounds' sum. max_delta defaults to the delta every figure of a run is
reported at (DEFAULT_DELTA_TARGET, 1e-5).

The budget, the accountant and each round's event depend only on the run's public configuration,
never on data, so the server may apply them without learning anything about a client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ldpfed.accounting.accountants import DEFAULT_DELTA_TARGET, Spent, create_accountant, not_private_reasons
from ldpfed.accounting.ledger import PrivacyLedger
from ldpfed.accounting.library import dp_event
from ldpfed.validation import LDPValueError


def _check_open_fraction(value, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not 0.0 < number < 1.0:
        raise LDPValueError(f"{name} must be a number in (0, 1), got {value!r}")
    return number


@dataclass(frozen=True)
class Budget:
    """At most (`max_epsilon`, `max_delta`) per client under `accountant`."""

    max_epsilon: float
    accountant: str = "basic"
    max_delta: float = DEFAULT_DELTA_TARGET

    def __post_init__(self) -> None:
        try:
            budget = float(self.max_epsilon)
        except (TypeError, ValueError):
            budget = math.nan
        if not (budget > 0 and math.isfinite(budget)):
            raise LDPValueError(f"max-epsilon must be a finite number > 0, got {self.max_epsilon!r}")
        object.__setattr__(self, "max_epsilon", budget)
        object.__setattr__(self, "accountant", create_accountant(self.accountant).name)
        object.__setattr__(self, "max_delta", _check_open_fraction(self.max_delta, "max-delta"))

    def check(self, event: dp_event.DpEvent) -> None:
        """Fail before a run starts if its round event cannot be held to this budget."""
        reasons = not_private_reasons([event])
        if reasons:
            raise LDPValueError(f"a privacy budget needs a private mechanism; here: {reasons[0]}")
        reason = create_accountant(self.accountant).unsupported(event)
        if reason is not None:
            raise LDPValueError(reason)
        first = create_accountant(self.accountant).compose(event).spent_within(self.max_delta)
        if first.delta > self.max_delta:
            raise LDPValueError(
                f"max-delta {self.max_delta:g} is below one round's delta ({first.delta:.4g} by the "
                f"{self.accountant} accountant); give a larger max-delta, or use the rdp or pld accountant"
            )
        if first.epsilon > self.max_epsilon:
            raise LDPValueError(
                f"max-epsilon {self.max_epsilon:g} is below one round's cost ({first.epsilon:.4g} by the "
                f"{self.accountant} accountant at delta {self.max_delta:g})"
            )

    def affords(self, ledger: PrivacyLedger, client, event: dp_event.DpEvent) -> bool:
        """Would `client`'s total, with one more round costing `event`, stay within the budget:
        eps <= max_epsilon AND delta <= max_delta? A not-private event is never affordable; an
        event the accountant cannot account raises."""
        spent = ledger.spent_within(client, self.accountant, self.max_delta, extra=event)
        return spent.private and spent.epsilon <= self.max_epsilon and spent.delta <= self.max_delta

    def admit(self, ledger: PrivacyLedger, clients, event: dp_event.DpEvent) -> tuple[list, list]:
        """(clients that take part in a round costing `event`, clients stopped by the budget): a run
        then never spends more than the budget."""
        taking_part, stopped = [], []
        for client in clients:
            (taking_part if self.affords(ledger, client, event) else stopped).append(client)
        return taking_part, stopped

    def can_continue(self, ledger: PrivacyLedger, clients, event: dp_event.DpEvent) -> bool:
        """Can any of `clients` afford one more round costing `event`?"""
        return any(self.affords(ledger, client, event) for client in clients)

    def max_spent(self, ledger: PrivacyLedger) -> Spent:
        """The largest total of any client, as the budget sees it (`Accountant.spent_within`)."""
        return ledger.max_spent(self.accountant, self.max_delta, within=True)

    def record(self) -> dict:
        return {"max_epsilon": self.max_epsilon, "max_delta": self.max_delta, "accountant": self.accountant}

"""Privacy accounting: events as data, swappable accountants, a per-client ledger (spec:
gradient-noise.md, Accounting across rounds; federated.md, Accounting per client).

    >>> from ldpfed.accounting import Budget, PrivacyLedger, pure_round
    >>> ledger = PrivacyLedger()
    >>> for r in range(100):
    ...     ledger.record_event("client-0", r, pure_round(0.1))
    >>> round(ledger.spent("client-0", "pld").epsilon, 3)  # basic composition: 10.0
    4.307
    >>> Budget(5.0, accountant="pld").affords(ledger, "client-0", pure_round(0.1))
    True
"""

from ldpfed.accounting.accountants import (
    ACCOUNTANTS,
    DEFAULT_DELTA_TARGET,
    Accountant,
    Spent,
    advanced_composition,
    create_accountant,
)
from ldpfed.accounting.budget import Budget
from ldpfed.accounting.events import (
    CalibratedDpEvent,
    DiscreteGaussianDpEvent,
    DiscreteGaussianVectorDpEvent,
    EpsilonDeltaDpEvent,
    GaussianDpEvent,
    NotPrivateDpEvent,
    PlrvoDpEvent,
    PoissonSampledDpEvent,
    SelfComposedDpEvent,
    describe_event,
    event_from_dict,
    event_to_dict,
    gaussian_mechanism_event,
    gaussian_round,
    not_private,
    pure_round,
    register_round_event,
    round_epsilon,
    round_event,
)
from ldpfed.accounting.ledger import LedgerEntry, PrivacyLedger, legacy_event

__all__ = [
    "ACCOUNTANTS",
    "DEFAULT_DELTA_TARGET",
    "Accountant",
    "Budget",
    "CalibratedDpEvent",
    "EpsilonDeltaDpEvent",
    "DiscreteGaussianDpEvent",
    "DiscreteGaussianVectorDpEvent",
    "GaussianDpEvent",
    "LedgerEntry",
    "NotPrivateDpEvent",
    "PlrvoDpEvent",
    "PoissonSampledDpEvent",
    "PrivacyLedger",
    "SelfComposedDpEvent",
    "Spent",
    "advanced_composition",
    "create_accountant",
    "describe_event",
    "event_from_dict",
    "event_to_dict",
    "gaussian_mechanism_event",
    "gaussian_round",
    "not_private",
    "pure_round",
    "legacy_event",
    "register_round_event",
    "round_epsilon",
    "round_event",
]

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

Each name is loaded from its module when it is first read (PEP 562, `_HOMES`): a process that only
builds events (a Flower node) imports `events`, never the accountants with dp-accounting's PLD and
RDP code and scipy.stats behind them (about 1.5 s of a process' start).
"""

from __future__ import annotations

import importlib
import importlib.util

# {module of ldpfed.accounting: the names it exports here}
_EXPORTS = {
    "accountants": (
        "ACCOUNTANTS",
        "Accountant",
        "Spent",
        "advanced_composition",
        "create_accountant",
    ),
    "budget": ("Budget",),
    "events": (
        "CalibratedDpEvent",
        "DiscreteGaussianDpEvent",
        "DiscreteGaussianVectorDpEvent",
        "EpsilonDeltaDpEvent",
        "GaussianDpEvent",
        "NotPrivateDpEvent",
        "PlrvoDpEvent",
        "PoissonSampledDpEvent",
        "SelfComposedDpEvent",
        "describe_event",
        "event_from_dict",
        "event_to_dict",
        "gaussian_mechanism_event",
        "gaussian_round",
        "legacy_event",
        "not_private",
        "pure_round",
        "register_round_event",
        "round_epsilon",
        "round_event",
    ),
    "ledger": ("LedgerEntry", "PrivacyLedger", "read_entries"),
    "names": ("DEFAULT_DELTA_TARGET",),
}
_HOMES = {name: module for module, names in _EXPORTS.items() for name in names}  # name -> its module

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    """An exported name, loaded from its module on first use and kept in this module's namespace;
    or a submodule not imported yet (`ldpfed.accounting.trust`), imported now."""
    module = _HOMES.get(name)
    if module is None:
        if importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

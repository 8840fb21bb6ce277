"""The accountants' names and the default delta, for checking options without loading the
accountants (ldpfed.accounting.accountants imports dp-accounting's PLD and RDP code and
scipy.stats: about 1.5 s of a process' start that a config check or a Flower node never needs).

tests/test_lean_imports.py fails if these drift from the accountants' registry.
"""

from __future__ import annotations

from ldpfed.registry import Registry

ACCOUNTANT_NAMES = ("basic", "advanced", "rdp", "pld")  # ldpfed.accounting.accountants.available()
DEFAULT_DELTA_TARGET = 1e-5  # the delta at which epsilon spent is reported when no budget gives one

_NAMES: Registry[str] = Registry("accountant", {name: name for name in ACCOUNTANT_NAMES})


def check_accountant(name: str) -> str:
    """The accountant's registered name for `name` (case, spaces and "_" do not matter); an unknown
    name fails listing the known ones, as `create_accountant` does."""
    return _NAMES.get_class(name)

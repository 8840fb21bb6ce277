"""One shape for every family of named things (mechanisms, frequency oracles, gradient noises,
aggregators, audit subjects): `available()`, `get_class(name)`, and each family's own `get(name, ...)`.

Names are matched after `canonical_name` (case, spaces and "_" for "-" do not matter); an unknown
name fails with the list of known ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

from ldpfed.validation import LDPValueError, canonical_name

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries of one `kind`, by name, in registration order."""

    def __init__(self, kind: str, entries: Iterable[T] | Mapping[str, T]):
        self.kind = kind
        if isinstance(entries, Mapping):
            self._entries = {canonical_name(name): entry for name, entry in entries.items()}
        else:
            self._entries = {canonical_name(entry.name): entry for entry in entries}

    def available(self) -> list[str]:
        """Names accepted by `get_class`, in a stable order."""
        return list(self._entries)

    def get_class(self, name) -> T:
        """The entry registered under `name`; an unknown name fails listing the known ones."""
        key = canonical_name(name)
        if key not in self._entries:
            raise LDPValueError(f"unknown {self.kind} {name!r}; available: {', '.join(self._entries)}")
        return self._entries[key]

    def where(self, predicate) -> list[str]:
        """Names of the entries for which `predicate(entry)` holds (e.g. the guarantees that fail)."""
        return [name for name, entry in self._entries.items() if predicate(entry)]

    def __contains__(self, name) -> bool:
        return canonical_name(name) in self._entries

    def entries(self) -> list[T]:
        """The entries, in registration order."""
        return list(self._entries.values())

"""The one-way layout: simulations -> clients/server -> ldpfed.

Parses every module's imports (top level and inside functions) with `ast`:
- `ldpfed` imports none of flwr, ray, clients, server, simulations;
- `clients` and `server` never import `simulations`;
- nothing outside `simulations` imports it (the CLI reaches it through entry points only).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "ldpfed": {"flwr", "ray", "clients", "server", "simulations"},
    "clients": {"simulations"},
    "server": {"simulations"},
    "benchmarks": set(),
}


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """(top-level package, line) of every import in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update((alias.name.split(".")[0], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
    return found


def wrong_way_imports(package: str, forbidden: set[str]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, line in sorted(imported_packages(path))
        if name in forbidden
    ]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_wrong_way_import(package):
    assert wrong_way_imports(package, FORBIDDEN[package]) == []


def test_the_check_catches_a_wrong_way_import(tmp_path, monkeypatch):
    """The check can fail: a module of ldpfed that imports Flower inside a function is found."""
    package = tmp_path / "ldpfed"
    package.mkdir()
    (package / "bad.py").write_text("def f():\n    from flwr.app import Message\n    import simulations.cli\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert wrong_way_imports("ldpfed", FORBIDDEN["ldpfed"]) == [
        "ldpfed/bad.py:2 imports flwr",
        "ldpfed/bad.py:3 imports simulations",
    ]

"""The one-way layout: simulations -> clients/server -> ldpfed, and inside ldpfed a floor order.

Parses every module's imports (top level and inside functions) with `ast`:
- `ldpfed` imports none of flwr, ray, clients, server, simulations;
- `clients` and `server` never import `simulations`;
- nothing outside `simulations` imports it (the CLI reaches it through entry points only);
- inside `ldpfed`, each package (or top-level module) imports only itself and the floors below it
  (`FLOORS`, bottom first), so there is no import circle between packages, and none between modules;
- no `ldpfed` module is imported inside a function body (heavy third-party packages such as torch,
  matplotlib and numba may be: `ldpfed.training` imports torch in the functions that use it, so
  importing the train protocol on a mean or frequency node loads no torch).

`python tests/test_layering.py` prints the import graph's figures (modules, packages, arrows,
arrows against the floor order, circles, in-function imports).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "ldpfed": {"flwr", "ray", "clients", "server", "simulations"},
    "clients": {"simulations"},
    "server": {"simulations"},
    "benchmarks": set(),
}
# ldpfed's packages and top-level modules, bottom floor first; one floor may hold several that do
# not import each other.
FLOORS = (
    ("validation",),
    ("registry", "outputs"),
    ("samplers", "data"),
    ("mechanisms",),
    ("frequency", "accounting"),
    ("gradient_noise",),
    ("directional", "training"),
    ("aggregation",),
    ("analysis",),
    ("audit", "config"),
    ("protocols",),
    ("experiments", "planning"),
    ("cli",),
)


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


# --- inside ldpfed ---------------------------------------------------------------------------------
def ldpfed_modules(root: Path) -> dict[str, Path]:
    """{dotted module name: path} of every module under root/ldpfed."""
    modules = {}
    for path in sorted((root / "ldpfed").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _targets(node, modules: dict[str, Path]) -> list[str]:
    """The ldpfed modules an import statement loads (for `from a import b`: a.b if it is a module, else a)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level == 0 and node.module:
        names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names]
    else:
        names = []
    return [name for name in dict.fromkeys(names) if name in modules]


def import_graph(root: Path) -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """(top-level edges module -> modules, imports not at a module's top level (module, line, target))."""
    modules = ldpfed_modules(root)
    edges, lazy = defaultdict(set), []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        top_level = set()
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                top_level.add(id(node))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            inside_function = id(node) not in top_level and node.col_offset > 0
            for target in _targets(node, modules):
                if target == name:
                    continue
                if inside_function:
                    lazy.append((name, node.lineno, target))
                else:
                    edges[name].add(target)
    return edges, lazy


def room(module: str) -> str:
    """The package (or top-level module) of ldpfed a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor_of(name: str) -> int:
    for level, names in enumerate(FLOORS):
        if name in names:
            return level
    raise KeyError(f"{name} has no floor in FLOORS: give it one")


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    """Imports from a package to one on a higher floor (or to one with no floor)."""
    found = []
    for module, targets in sorted(edges.items()):
        source = room(module)
        if source == "__init__":
            continue
        for target in sorted(targets):
            if room(target) == source:
                continue
            try:
                if floor_of(room(target)) >= floor_of(source) and room(target) != source:
                    found.append(f"{module} imports {target} (floor {room(target)} is not below {source})")
            except KeyError as missing:
                found.append(str(missing))
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    nodes = sorted(set(edges) | {t for targets in edges.values() for t in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter[0]
                    counter[0] += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def function_level_imports(root: Path) -> list[str]:
    _, lazy = import_graph(root)
    return [f"{module}:{line} imports {target} inside a function" for module, line, target in lazy]


def _with_lazy(edges: dict[str, set[str]], lazy) -> dict[str, set[str]]:
    merged = defaultdict(set, {module: set(targets) for module, targets in edges.items()})
    for module, _, target in lazy:
        merged[module].add(target)
    return merged


def figures(root: Path) -> dict:
    edges, lazy = import_graph(root)
    rooms = {room(m) for m in ldpfed_modules(root)} - {"__init__"}
    arrows = {(room(a), room(b)) for a, targets in edges.items() for b in targets if room(a) != room(b)}
    arrows = {(a, b) for a, b in arrows if a != "__init__"}
    return {
        "modules": len(ldpfed_modules(root)),
        "packages and top-level modules": len(rooms),
        "arrows between them": len(arrows),
        "arrows against the floor order": len(upward_imports(edges)),
        "import circles (modules)": len(circles(edges)),
        "import circles counting in-function imports": len(circles(_with_lazy(edges, lazy))),
        "in-function ldpfed imports": len(lazy),
    }


# --- tests -----------------------------------------------------------------------------------------
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


def test_every_package_has_a_floor_and_imports_only_below_it():
    edges, _ = import_graph(ROOT)
    assert upward_imports(edges) == []


def test_no_import_circle_between_modules():
    edges, _ = import_graph(ROOT)
    assert circles(edges) == []


def test_no_ldpfed_import_inside_a_function():
    assert function_level_imports(ROOT) == []


def test_the_floor_checks_can_fail(tmp_path):
    """A tree with an upward import, a circle and in-function imports is caught on all three (an
    ldpfed module imported in a function is refused even when it loads torch)."""
    tree = tmp_path / "ldpfed"
    for package in ("mechanisms", "accounting", "training"):
        (tree / package).mkdir(parents=True)
        (tree / package / "__init__.py").write_text("")
    (tree / "__init__.py").write_text("")
    (tree / "mechanisms" / "a.py").write_text("from ldpfed.accounting import b\n")
    (tree / "accounting" / "b.py").write_text("def f():\n    from ldpfed.mechanisms import c\n")
    (tree / "mechanisms" / "c.py").write_text("from ldpfed.mechanisms import d\n")
    (tree / "mechanisms" / "d.py").write_text("import ldpfed.mechanisms.c\n")
    (tree / "training" / "models.py").write_text("import torch\n")
    (tree / "accounting" / "e.py").write_text("def f():\n    import ldpfed.training.models\n")
    edges, _ = import_graph(tmp_path)
    assert upward_imports(edges) == [
        "ldpfed.mechanisms.a imports ldpfed.accounting.b (floor accounting is not below mechanisms)"
    ]
    assert circles(edges) == [["ldpfed.mechanisms.c", "ldpfed.mechanisms.d"]]
    assert function_level_imports(tmp_path) == [
        "ldpfed.accounting.b:2 imports ldpfed.mechanisms.c inside a function",
        "ldpfed.accounting.e:2 imports ldpfed.training.models inside a function",
    ]


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    for key, value in figures(root).items():
        print(f"{key}: {value}")

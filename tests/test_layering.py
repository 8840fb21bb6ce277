"""The one-way layout of the repository, and inside ldpfed a floor order.

The top-level packages, bottom first (`TIERS`): ldpfed < wire < clients, server < simulations <
scripts < benchmarks. A module imports only its own package and packages on lower tiers; the two
packages of one tier (Flower's client and server halves) never import each other. `ldpfed` imports
neither Flower (flwr, flwr-datasets) nor Ray (`THIRD_PARTY`); `wire` (the message keys and record
codecs both Flower halves share) may import Flower. `tests/` and `.ci/` are outside the order: they
exercise everything. Every other folder that holds Python code must be on a tier.

The arrows, all read with `ast` (nothing is imported):
- `import a.b` and `from a.b import c` (a.b.c when it is a module), at top level or in a function;
- relative imports, resolved against the importing module's package (`from . import x`,
  `from ..mod import y`); in a script folder without `__init__.py` (benchmarks/), an import of a
  sibling file is one of that folder (Python puts the folder on `sys.path` when it runs a script);
- `importlib.import_module(...)` and `__import__(...)` of a string literal, or of a module-level
  name bound to one (a relative name resolved against `package=`);
- pyproject.toml's entry points. A group named in a package's namespace (`ldpfed.commands`,
  `ldpfed.compare_tasks`) is that package's plugin interface, read with `entry_points(group=...)`:
  each entry in it is an arrow from the package that provides the object to the package that reads
  the group (`simulations.cli` registers itself with `ldpfed`), so it must point down the order like
  an import. The reader's later call into the provider is the inversion point, not an upward
  import: the reader names only its own group, never the provider. Such a group must be read by its
  package (a string constant equal to the group's name), or its entries are dead. The other tables
  (`[project.scripts]`, i.e. console_scripts, and `[tool.flwr.app.components]`) are read by programs
  outside the repository (the shell, Flower): arrows into the repository, not between its packages.
  Every entry's target must exist: its module, and the object's name at that module's top level.

Inside `ldpfed`, each package (or top-level module) imports only itself and the floors below it
(`FLOORS`, bottom first), so there is no import circle between packages; there is none between
modules anywhere; and no `ldpfed` module is imported inside a function body (heavy third-party
packages such as torch, matplotlib and numba may be: `ldpfed.training` imports torch in the
functions that use it, so importing the train protocol on a mean or frequency node loads no torch).

`python tests/test_layering.py [ROOT]` prints the import graph's figures.
"""

from __future__ import annotations

import ast
import functools
import sys
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The repository's top-level packages, bottom tier first; one tier may hold packages that never
# import each other. A package named here that does not exist yet is skipped.
TIERS = (("ldpfed",), ("wire",), ("clients", "server"), ("simulations",), ("scripts",), ("benchmarks",))
PACKAGES = tuple(package for tier in TIERS for package in tier)
TIER = {package: level for level, tier in enumerate(TIERS) for package in tier}
OUTSIDE = ("tests",)  # folders that may import anything (hidden ones such as .ci/ are not scanned)
THIRD_PARTY = {"ldpfed": {"flwr", "flwr_datasets", "ray"}}  # third-party packages a package never imports
# Sideways arrows that the `wire` package removes (the Flower server half reads the client half's
# message keys and record codec today); each must still exist, so the list only shrinks.
PENDING: frozenset[tuple[str, str]] = frozenset()
# ldpfed's packages and top-level modules, bottom floor first; one floor may hold several that do
# not import each other.
FLOORS = (
    ("validation", "manifest"),
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
    ("tasks",),
    ("cli",),
)
VERBS = {"import": "imports", "relative": "imports (relative)", "importlib": "imports by name"}


@dataclass(frozen=True)
class Arrow:
    """One import: `source` (a module of the repository) loads `target` (dotted; a module of the
    repository when it is one, else the name as written)."""

    source: str
    path: str
    line: int
    target: str
    how: str  # import, relative or importlib
    in_function: bool

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {VERBS[self.how]} {self.target}"


def top(module: str) -> str:
    return module.split(".")[0]


# --- reading the modules ---------------------------------------------------------------------------
def python_modules(root: Path) -> dict[str, Path]:
    """{dotted module name: path} of every module of the packages on a tier (a package's
    `__init__.py` is the package's name)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def unplaced_folders(root: Path) -> list[str]:
    """Top-level folders holding Python code that are on no tier and not outside the order."""
    return sorted(
        folder.name
        for folder in root.iterdir()
        if folder.is_dir()
        and not folder.name.startswith(".")
        and folder.name not in PACKAGES + OUTSIDE
        and any(folder.rglob("*.py"))
    )


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _module_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to a string literal (`MODULE = "a.b"`)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found[target] = value.value
    return found


class _Imports(ast.NodeVisitor):
    """Import statements and import calls of one module, each with whether it runs in a function."""

    def __init__(self):
        self.depth, self.found = 0, []

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _statement(self, node):
        self.found.append((node, self.depth > 0))
        self.generic_visit(node)

    visit_Import = visit_ImportFrom = visit_Call = _statement


def _relative(package: list[str], level: int, name: str | None) -> str | None:
    """`from {'.' * level}{name} import ...` in `package` (None: beyond the top-level package)."""
    if level - 1 >= len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _called_name(node: ast.Call, constants: dict[str, str], package: list[str]) -> str | None:
    """The module an `import_module(...)` / `__import__(...)` call loads, when it is a literal."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in ("import_module", "__import__") or not node.args:
        return None
    argument = node.args[0]
    if isinstance(argument, ast.Constant):
        name = argument.value
    else:
        name = constants.get(argument.id) if isinstance(argument, ast.Name) else None
    if not isinstance(name, str):
        return None
    if not name.startswith("."):
        return name
    anchor = next((k.value for k in node.keywords if k.arg == "package"), node.args[1] if len(node.args) > 1 else None)
    if not (isinstance(anchor, ast.Constant) and isinstance(anchor.value, str)):
        return None
    level = len(name) - len(name.lstrip("."))
    return _relative(anchor.value.split("."), level, name.lstrip(".") or None)


def _module_arrows(name: str, path: Path, root: Path, modules: dict[str, Path]) -> list[Arrow]:
    tree = _parsed(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    script_folder = not (path.parent / "__init__.py").exists()
    constants, visitor, found = _module_constants(tree), _Imports(), []
    visitor.visit(tree)
    for node, in_function in visitor.found:
        if isinstance(node, ast.Call):
            targets, how = [_called_name(node, constants, package)], "importlib"
        elif isinstance(node, ast.Import):
            targets, how = [alias.name for alias in node.names], "import"
        else:
            how = "relative" if node.level else "import"
            base = _relative(package, node.level, node.module) if node.level else node.module
            # `from a import b` loads a.b when it is a module, else a (b is a name inside a)
            targets = (
                []
                if base is None
                else [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            )
        for target in dict.fromkeys(t for t in targets if t):
            if script_folder and how == "import" and _sibling(path.parent, top(target)):
                target = ".".join(path.parent.relative_to(root).parts + (target,))
            if target != name:
                found.append(Arrow(name, str(path.relative_to(root)), node.lineno, target, how, in_function))
    return found


def _sibling(folder: Path, name: str) -> bool:
    return (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()


@functools.cache
def arrows(root: Path) -> tuple[Arrow, ...]:
    """Every import of every module of the repository's packages, third-party ones included."""
    modules = python_modules(root)
    return tuple(arrow for name, path in modules.items() for arrow in _module_arrows(name, path, root, modules))


# --- between the repository's packages -------------------------------------------------------------
def wrong_way_imports(root: Path, package: str | None = None, pending: frozenset = frozenset()) -> list[str]:
    """Imports of a forbidden third-party package, or of a package on the same or a higher tier
    (but the (source module, target module) arrows in `pending`)."""
    found = []
    for arrow in arrows(root):
        source, target = top(arrow.source), top(arrow.target)
        if package not in (None, source) or (arrow.source, arrow.target) in pending:
            continue
        if target in THIRD_PARTY.get(source, ()):
            found.append(f"{arrow} ({source} never imports {target})")
        elif target in TIER and target != source and TIER[target] >= TIER[source]:
            found.append(f"{arrow} ({target} is not below {source})")
    return sorted(found)


@dataclass(frozen=True)
class EntryPoint:
    group: str
    name: str
    target: str  # module:object

    @property
    def module(self) -> str:
        return self.target.partition(":")[0].strip()

    @property
    def reader(self) -> str | None:
        """The package whose plugin interface the group is (None: read outside the repository)."""
        return top(self.group) if top(self.group) in PACKAGES else None

    def __str__(self) -> str:
        return f"entry point {self.group}:{self.name} = {self.target}"


def entry_points(root: Path) -> list[EntryPoint]:
    """pyproject.toml's entry points: [project.scripts], [project.gui-scripts],
    [project.entry-points.*] and Flower's [tool.flwr.app.components]."""
    path = root / "pyproject.toml"
    config = tomllib.loads(path.read_text()) if path.exists() else {}
    project = config.get("project", {})
    tables = {
        "console_scripts": project.get("scripts", {}),
        "gui_scripts": project.get("gui-scripts", {}),
        **project.get("entry-points", {}),
        "flwr.app.components": config.get("tool", {}).get("flwr", {}).get("app", {}).get("components", {}),
    }
    return [EntryPoint(group, name, target) for group, table in tables.items() for name, target in table.items()]


def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in _parsed(path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@functools.cache
def _string_constants(root: Path, package: str) -> frozenset[str]:
    return frozenset(
        node.value
        for name, path in python_modules(root).items()
        if top(name) == package
        for node in ast.walk(_parsed(path))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def entry_point_problems(root: Path) -> list[str]:
    """Entry points whose target is missing, whose group its package never reads, or whose
    provider is not above the package that reads the group."""
    modules, found = python_modules(root), []
    for entry in entry_points(root):
        attribute = entry.target.partition(":")[2].strip().split(".")[0]
        if entry.module not in modules:
            found.append(f"{entry}: no module {entry.module} in the repository")
        elif attribute and attribute not in _top_level_names(modules[entry.module]):
            found.append(f"{entry}: {entry.module} defines no {attribute}")
        reader, provider = entry.reader, top(entry.module)
        if reader is None:
            continue
        if entry.group not in _string_constants(root, reader):
            found.append(f"{entry}: no module of {reader} reads the group")
        if provider != reader and not (provider in TIER and TIER[provider] > TIER[reader]):
            found.append(f"{entry}: {provider} plugs into {reader}, which is not below it")
    return found


# --- inside ldpfed ---------------------------------------------------------------------------------
def import_graph(root: Path) -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """ldpfed's arrows between its modules: (top-level edges module -> modules, imports inside a
    function (module, line, target))."""
    modules = python_modules(root)
    edges, lazy = defaultdict(set), []
    for arrow in arrows(root):
        if top(arrow.source) != "ldpfed" or top(arrow.target) != "ldpfed" or arrow.target not in modules:
            continue
        if arrow.in_function:
            lazy.append((arrow.source, arrow.line, arrow.target))
        else:
            edges[arrow.source].add(arrow.target)
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
                if floor_of(room(target)) >= floor_of(source):
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


def repository_graph(root: Path) -> dict[str, set[str]]:
    """Top-level arrows between the modules of the repository (what runs when a module loads)."""
    modules, edges = python_modules(root), defaultdict(set)
    for arrow in arrows(root):
        if not arrow.in_function and arrow.target in modules:
            edges[arrow.source].add(arrow.target)
    return edges


def function_level_imports(root: Path) -> list[str]:
    _, lazy = import_graph(root)
    return [f"{module}:{line} imports {target} inside a function" for module, line, target in lazy]


def _with_lazy(edges: dict[str, set[str]], lazy) -> dict[str, set[str]]:
    merged = defaultdict(set, {module: set(targets) for module, targets in edges.items()})
    for module, _, target in lazy:
        merged[module].add(target)
    return merged


# --- figures ---------------------------------------------------------------------------------------
def repository_figures(root: Path) -> dict:
    modules = python_modules(root)
    first_party = [a for a in arrows(root) if top(a.target) in PACKAGES]
    between = [a for a in first_party if top(a.source) != top(a.target)]
    entries = entry_points(root)
    return {
        "modules per package": ", ".join(
            f"{p} {sum(top(m) == p for m in modules)}" if (root / p).is_dir() else f"{p} -" for p in PACKAGES
        ),
        "arrows between packages (pairs)": len({(top(a.source), top(a.target)) for a in between}),
        "arrows between packages (module pairs)": len({(a.source, a.target) for a in between}),
        "arrows against the package order": len(wrong_way_imports(root)),
        "of which pending (PENDING)": len(wrong_way_imports(root)) - len(wrong_way_imports(root, pending=PENDING)),
        "relative imports": sum(a.how == "relative" for a in first_party),
        "imports by name (importlib) of the repository's modules": sum(a.how == "importlib" for a in first_party),
        "entry points read outside the repository": sum(e.reader is None for e in entries),
        "entry points read by a package (inversion points)": sum(e.reader is not None for e in entries),
        "entry point problems": len(entry_point_problems(root)),
        "import circles between the repository's modules": len(circles(repository_graph(root))),
        "folders with Python code on no tier": len(unplaced_folders(root)),
    }


def figures(root: Path) -> dict:
    """ldpfed's floors."""
    edges, lazy = import_graph(root)
    modules = [m for m in python_modules(root) if top(m) == "ldpfed"]
    rooms = {room(m) for m in modules} - {"__init__"}
    arrows_between = {(room(a), room(b)) for a, targets in edges.items() for b in targets if room(a) != room(b)}
    arrows_between = {(a, b) for a, b in arrows_between if a != "__init__"}
    return {
        "modules": len(modules),
        "packages and top-level modules": len(rooms),
        "arrows between them": len(arrows_between),
        "arrows against the floor order": len(upward_imports(edges)),
        "import circles (modules)": len(circles(edges)),
        "import circles counting in-function imports": len(circles(_with_lazy(edges, lazy))),
        "in-function ldpfed imports": len(lazy),
    }


# --- tests: the repository -------------------------------------------------------------------------
@pytest.mark.parametrize("package", PACKAGES)
def test_no_wrong_way_import(package):
    assert wrong_way_imports(ROOT, package, PENDING) == []


def test_each_pending_arrow_still_exists():
    """An arrow removed from the code leaves PENDING too, so no exception outlives its reason."""
    assert PENDING <= {(arrow.source, arrow.target) for arrow in arrows(ROOT)}


def test_every_folder_with_python_code_is_placed():
    assert unplaced_folders(ROOT) == []


def test_entry_points_exist_and_point_down():
    assert entry_point_problems(ROOT) == []


def test_every_package_has_a_floor_and_imports_only_below_it():
    edges, _ = import_graph(ROOT)
    assert upward_imports(edges) == []


def test_no_import_circle_between_modules():
    assert circles(repository_graph(ROOT)) == []


def test_no_ldpfed_import_inside_a_function():
    assert function_level_imports(ROOT) == []


# --- tests: each check can fail --------------------------------------------------------------------
def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_check_catches_a_wrong_way_import(tmp_path):
    """A module of ldpfed that imports Flower and simulations inside a function is found."""
    root = _tree(
        tmp_path, {"ldpfed/bad.py": "def f():\n    from flwr.app import Message\n    import simulations.cli\n"}
    )
    assert wrong_way_imports(root) == [
        "ldpfed/bad.py:2 imports flwr.app (ldpfed never imports flwr)",
        "ldpfed/bad.py:3 imports simulations.cli (simulations is not below ldpfed)",
    ]


def test_the_order_checks_can_fail(tmp_path):
    """Upward, sideways and importlib arrows between packages are caught; relative imports, sibling
    scripts and wire's Flower import are resolved and allowed; a new folder must be placed."""
    root = _tree(
        tmp_path,
        {
            "ldpfed/__init__.py": "",
            "wire/__init__.py": "import flwr\nfrom ldpfed import x\n",
            "wire/codec.py": "from server import strategy\n",
            "clients/__init__.py": "",
            "clients/app.py": "import server.strategy\nfrom wire import codec\n",
            "server/__init__.py": "",
            "server/strategy.py": "from . import helpers\nfrom .helpers import f\n",
            "server/helpers.py": "import importlib\n\ndef f():\n    importlib.import_module('simulations.run')\n",
            "simulations/__init__.py": "",
            "simulations/federation.py": "NAME = 'scripts.page'\n__import__(NAME)\n",
            "scripts/__init__.py": "",
            "scripts/page.py": "from ..simulations import federation\nfrom . import helper\n",
            "scripts/helper.py": "import simulations.federation\n",
            "benchmarks/bench.py": "import plain_app\nfrom scripts import page\n",
            "benchmarks/plain_app.py": "import clients.app\n",
            "tools/x.py": "",
        },
    )
    assert wrong_way_imports(root) == [
        "clients/app.py:1 imports server.strategy (server is not below clients)",
        "server/helpers.py:4 imports by name simulations.run (simulations is not below server)",
        "simulations/federation.py:2 imports by name scripts.page (scripts is not below simulations)",
        "wire/codec.py:1 imports server.strategy (server is not below wire)",
    ]
    resolved = {(a.source, a.target, a.how) for a in arrows(root)}
    assert {
        ("server.strategy", "server.helpers", "relative"),
        ("scripts.page", "scripts.helper", "relative"),
        ("benchmarks.bench", "benchmarks.plain_app", "import"),
    } <= resolved
    assert not any(a.source == "scripts.page" and top(a.target) == "simulations" for a in arrows(root))  # beyond
    assert unplaced_folders(root) == ["tools"]


def test_the_entry_point_checks_can_fail(tmp_path):
    """An entry point from a lower package into a higher one's group, one between siblings, one to
    a missing module or object and one in a group its package never reads are caught."""
    pyproject = """
[project.scripts]
tool = "ldpfed.cli:main"

[project.entry-points."ldpfed.commands"]
good = "simulations.cli:register"
gone = "scripts.moved:register"
nameless = "simulations.cli:nothing"

[project.entry-points."simulations.engines"]
low = "ldpfed.engine:make"

[project.entry-points."server.hooks"]
side = "clients.app:hook"

[tool.flwr.app.components]
serverapp = "server.app:app"
"""
    root = _tree(
        tmp_path,
        {
            "pyproject.toml": pyproject,
            "ldpfed/__init__.py": "",
            "ldpfed/cli.py": "GROUP = 'ldpfed.commands'\n\ndef main(): ...\n",
            "ldpfed/engine.py": "def make(): ...\n",
            "clients/app.py": "def hook(): ...\n",
            "server/app.py": "app = object()\n",
            "simulations/__init__.py": "ENGINES = 'simulations.engines'\n",
            "simulations/cli.py": "def register(app): ...\n",
        },
    )
    assert entry_point_problems(root) == [
        "entry point ldpfed.commands:gone = scripts.moved:register: no module scripts.moved in the repository",
        "entry point ldpfed.commands:nameless = simulations.cli:nothing: simulations.cli defines no nothing",
        "entry point simulations.engines:low = ldpfed.engine:make: ldpfed plugs into simulations, which is not "
        "below it",
        "entry point server.hooks:side = clients.app:hook: no module of server reads the group",
        "entry point server.hooks:side = clients.app:hook: clients plugs into server, which is not below it",
    ]


def test_the_floor_checks_can_fail(tmp_path):
    """A tree with upward imports (plain, relative and by name), a circle and in-function imports is
    caught on all three (an ldpfed module imported in a function is refused even when it loads torch)."""
    tree = tmp_path / "ldpfed"
    for package in ("mechanisms", "accounting", "training"):
        (tree / package).mkdir(parents=True)
        (tree / package / "__init__.py").write_text("")
    (tree / "__init__.py").write_text("")
    (tree / "mechanisms" / "a.py").write_text("from ldpfed.accounting import b\n")
    (tree / "accounting" / "b.py").write_text("def f():\n    from ldpfed.mechanisms import c\n")
    (tree / "mechanisms" / "c.py").write_text("from ldpfed.mechanisms import d\n")
    (tree / "mechanisms" / "d.py").write_text("import ldpfed.mechanisms.c\n")
    (tree / "mechanisms" / "f.py").write_text("from ..accounting import b\n")
    (tree / "mechanisms" / "g.py").write_text(
        "import importlib\n\nMODELS = 'ldpfed.training.models'\nimportlib.import_module(MODELS)\n"
    )
    (tree / "mechanisms" / "h.py").write_text(
        "from importlib import import_module\nimport_module('.b', 'ldpfed.accounting')\n"
    )
    (tree / "training" / "models.py").write_text("import torch\n")
    (tree / "accounting" / "e.py").write_text("def f():\n    import ldpfed.training.models\n")
    edges, _ = import_graph(tmp_path)
    assert upward_imports(edges) == [
        "ldpfed.mechanisms.a imports ldpfed.accounting.b (floor accounting is not below mechanisms)",
        "ldpfed.mechanisms.f imports ldpfed.accounting.b (floor accounting is not below mechanisms)",
        "ldpfed.mechanisms.g imports ldpfed.training.models (floor training is not below mechanisms)",
        "ldpfed.mechanisms.h imports ldpfed.accounting.b (floor accounting is not below mechanisms)",
    ]
    assert circles(edges) == [["ldpfed.mechanisms.c", "ldpfed.mechanisms.d"]]
    assert function_level_imports(tmp_path) == [
        "ldpfed.accounting.b:2 imports ldpfed.mechanisms.c inside a function",
        "ldpfed.accounting.e:2 imports ldpfed.training.models inside a function",
    ]


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    for key, value in {**figures(root), **repository_figures(root)}.items():
        print(f"{key}: {value}")

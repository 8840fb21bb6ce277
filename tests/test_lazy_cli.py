"""`ldpfed` imports a command's module (and with it the command's dependencies) only when that
command is looked up: `ldpfed --version` loads none of the heavy libraries, one command loads no
other command, and the listing (`ldpfed --help`, typo suggestions) still names every command.

Each check runs the CLI in a fresh interpreter and reads its `sys.modules` (what was imported, not
how long it took: timings live in benchmarks/bench_startup.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "scipy.stats", "dp_accounting", "pandas", "torch", "flwr", "ray")
CORE = ("account", "audit", "calibrate", "compare", "mechanisms", "plan", "plot", "predict")
PROBE = """
import json, sys
from ldpfed.cli.main import app
try:
    app(sys.argv[1:], prog_name="ldpfed")
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def run(*args: str) -> tuple[int, set[str], str, str]:
    """Exit code, modules loaded, stdout and stderr of `ldpfed ARGS` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300)
    *errors, report = done.stderr.strip().splitlines()
    loaded = json.loads(report)
    return loaded["code"], set(loaded["modules"]), done.stdout, "\n".join(errors)


def test_version_loads_no_command_and_no_heavy_library():
    code, modules, out, _ = run("--version")
    assert code == 0 and out.startswith("ldpfed ")
    assert [name for name in HEAVY if name in modules] == []
    assert [name for name in modules if name.startswith(("ldpfed.cli.", "simulations"))] == ["ldpfed.cli.main"]


def test_one_command_loads_its_own_module_only():
    code, modules, out, _ = run("mechanisms", "--help")
    assert code == 0 and "mechanisms" in out
    assert "ldpfed.cli.mechanisms" in modules
    others = [f"ldpfed.cli.{name}" for name in CORE if name != "mechanisms"]
    assert [name for name in others if name in modules] == []
    assert [name for name in ("simulations", "flwr", "ray") if name in modules] == []


@pytest.mark.parametrize("typo,meant", [("acount", "account"), ("simulat", "simulate")])
def test_an_unknown_command_is_refused_with_a_suggestion_without_loading_commands(typo, meant):
    code, modules, _, errors = run(typo)
    assert code == 2 and f"No such command '{typo}'. Did you mean '{meant}'?" in errors
    assert errors.count("Did you mean") == 1  # click suggests; typer's second suggestion is off
    assert [name for name in modules if name.startswith(("ldpfed.cli.", "simulations"))] == ["ldpfed.cli.main"]


def test_the_listing_names_every_core_and_plugin_command():
    from importlib.metadata import entry_points

    import typer

    from ldpfed.cli.main import app

    group = typer.main.get_command(app)
    plugins = [point.name for point in entry_points(group="ldpfed.commands")]
    assert list(group.commands) == [*CORE, *plugins]
    # every name builds a command of that name, and the listing from the lazy table is the same
    # as the built one
    assert {name: command.name for name, command in group.commands.items()} == {name: name for name in group.commands}
    assert "simulate" in plugins

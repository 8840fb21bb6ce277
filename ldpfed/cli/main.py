"""`ldpfed` entry point: one sub-command per module of ldpfed.cli, plus plugin commands.

Commands that need Flower (`simulate`) live outside the core library (in `simulations/`) and
register through the `ldpfed.commands` entry-point group, so `ldpfed` never imports Flower or the
apps built on it: dependencies point one way, from the apps to the library.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

app = typer.Typer(
    name="ldpfed",
    help="Local differential privacy in federated settings: simulate, predict, recalibrate, compare.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Local differential privacy in federated settings."""


def _register_plugins() -> None:
    """Each `ldpfed.commands` entry point is a function taking the typer app and adding commands."""
    for entry_point in entry_points(group="ldpfed.commands"):
        entry_point.load()(app)


# Each sub-command module registers itself on `app` when imported.
from ldpfed.cli import mechanisms  # noqa: E402,F401
from ldpfed.cli import audit  # noqa: E402,F401

from ldpfed.cli import compare  # noqa: E402,F401
from ldpfed.cli import predict  # noqa: E402,F401

_register_plugins()

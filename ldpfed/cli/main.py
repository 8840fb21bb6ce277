"""`ldpfed` entry point: one sub-command per module of ldpfed.cli."""

from __future__ import annotations

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


# Each sub-command module registers itself on `app` when imported.
from ldpfed.cli import mechanisms  # noqa: E402,F401

"""`ldpfed` entry point: one sub-command per module of ldpfed.cli, plus plugin commands.

Commands that need Flower (`simulate`) live outside the core library (in `simulations/`) and
register through the `ldpfed.commands` entry-point group, so `ldpfed` never imports Flower or the
apps built on it: dependencies point one way, from the apps to the library.

Usage errors that click finds before a command runs (a missing or unknown option, a value that is
not a number) are printed like the commands' own errors: one line `error: ...` on stderr, exit
code 2 (`OneLineErrors`).
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points, version

import click
import typer
from typer.core import TyperGroup

from ldpfed.cli import account, audit, calibrate, compare, mechanisms, plan, predict
from ldpfed.cli.common import error_console


class OneLineErrors(TyperGroup):
    """The root command group, printing click's usage errors as one line (exit code 2)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as error:
            click.echo(error.ctx.get_help() if error.ctx else str(error), err=True)
            sys.exit(error.exit_code)
        except click.ClickException as error:
            command = error.ctx.command_path if getattr(error, "ctx", None) else "ldpfed"
            message = " ".join(error.format_message().split())
            error_console.print(
                f"error: {message} (see {command} --help)", highlight=False, markup=False, soft_wrap=True
            )
            sys.exit(error.exit_code)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="ldpfed",
    cls=OneLineErrors,
    help="Local differential privacy in federated settings: simulate, predict, recalibrate, compare.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"ldpfed {version('ldpfed')}")
        raise typer.Exit()


@app.callback()
def _root(
    _version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print ldpfed's version and exit."
    ),
) -> None:
    """Local differential privacy in federated settings."""


def _register_commands() -> None:
    """Every command module has `register(app)`; so has each `ldpfed.commands` entry point (the
    commands that need Flower, which the core library never imports)."""
    for module in (account, audit, calibrate, compare, mechanisms, plan, predict):
        module.register(app)
    for entry_point in entry_points(group="ldpfed.commands"):
        entry_point.load()(app)


_register_commands()

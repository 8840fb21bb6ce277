"""`ldpfed` entry point: one sub-command per module of ldpfed.cli, plus plugin commands.

Commands that need Flower (`simulate`) live outside the core library (in `simulations/`) and
register through the `ldpfed.commands` entry-point group, so `ldpfed` never imports Flower or the
apps built on it: dependencies point one way, from the apps to the library.

A command's module is imported only when that command is looked up (it runs, its `--help` is asked,
or `ldpfed --help` lists every command): each module pulls in its own dependencies (scipy,
dp-accounting, pandas, the planners), so `ldpfed --version` or one command never pays for all
(`LazyCommands`). The core commands are named here, the plugins by their entry points' names.

Usage errors that click finds before a command runs (a missing or unknown option, a value that is
not a number) are printed like the commands' own errors: one line `error: ...` on stderr, exit
code 2 (`OneLineErrors`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, MutableMapping
from importlib.metadata import EntryPoint, entry_points, version

import click
import typer
from typer.core import TyperGroup

import ldpfed.manifest as manifest

PLUGIN_GROUP = "ldpfed.commands"
# The core commands in listing order, each the name of its module in ldpfed.cli (which has
# `register(app)`, like a plugin entry point).
CORE_COMMANDS = ("account", "audit", "calibrate", "compare", "mechanisms", "plan", "plot", "predict")


def _registrars() -> dict[str, EntryPoint]:
    """{command name: entry point of its `register(app)`}: the core commands, then the plugins."""
    core = {name: EntryPoint(name, f"ldpfed.cli.{name}:register", PLUGIN_GROUP) for name in CORE_COMMANDS}
    return core | {point.name: point for point in entry_points(group=PLUGIN_GROUP) if point.name not in core}


class LazyCommands(MutableMapping):
    """A group's {name: click command} that builds a command when it is first read: its module is
    imported and its `register` run on a scratch Typer app then. Names (iteration, `in`, typo
    suggestions) come from `_registrars` without importing any command; the plugins' names are read
    from the package metadata only when a name outside the core is asked for."""

    def __init__(self, app: typer.Typer, markup_mode):
        self._app, self._markup_mode = app, markup_mode
        self._built: dict[str, click.Command] = {}
        self._plugins: dict[str, EntryPoint] | None = None

    def _registrars(self) -> dict[str, EntryPoint]:
        if self._plugins is None:
            self._plugins = _registrars()
        return self._plugins

    def _build(self, name: str) -> None:
        scratch = typer.Typer()
        self._registrars()[name].load()(scratch)
        for info in scratch.registered_commands:
            command = typer.main.get_command_from_info(
                info, pretty_exceptions_short=self._app.pretty_exceptions_short, rich_markup_mode=self._markup_mode
            )
            self._built.setdefault(command.name, command)

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built and name in self:
            self._build(name)
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in CORE_COMMANDS or name in self._registrars()

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*CORE_COMMANDS, *self._registrars(), *self._built]))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]


class OneLineErrors(TyperGroup):
    """The root command group: its commands built on first use (`LazyCommands`), click's usage
    errors printed as one line (exit code 2)."""

    def __init__(self, **attrs):
        super().__init__(**attrs)
        self.commands = LazyCommands(app, self.rich_markup_mode)

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
            _print_error(f"error: {message} (see {command} --help)")
            sys.exit(error.exit_code)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def _print_error(line: str) -> None:
    """One whole line on stderr through rich, as the commands print theirs (ldpfed.cli.common's
    error console), without importing the commands' common module on the way out."""
    from rich.console import Console

    Console(stderr=True).print(line, highlight=False, markup=False, soft_wrap=True)


app = typer.Typer(
    name="ldpfed",
    cls=OneLineErrors,
    help="Local differential privacy in federated settings: simulate, predict, recalibrate, compare.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    suggest_commands=False,  # click already suggests the closest command; typer would repeat it
)


def _show_version(context: typer.Context, value: bool) -> None:
    """--version: ldpfed's version; with --verbose also what an output directory's manifest records
    (ldpfed.manifest: versions, commit, numpy's SIMD level, torch, Python, OS)."""
    if value:
        typer.echo(f"ldpfed {version('ldpfed')}")
        if context.params.get("verbose"):
            typer.echo(manifest.describe(manifest.environment(load_torch=True)))
        raise typer.Exit()


@app.callback()
def _root(
    # eager, so that it is read before --version's callback runs, in either order on the command line
    verbose: bool = typer.Option(
        False, "--verbose", is_eager=True, help="With --version: also the environment a run's manifest records."
    ),
    _version: bool = typer.Option(False, "--version", callback=_show_version, help="Print ldpfed's version and exit."),
) -> None:
    """Local differential privacy in federated settings."""

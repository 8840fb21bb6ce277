"""`ldpfed plot DIR`: draw a run's plot.png from its files (metrics.csv, config.toml), the figure
`simulate` draws at its end unless run with --no-plot (ldpfed.protocols.recorder.plot_run)."""

from __future__ import annotations

from pathlib import Path

import typer

from ldpfed.cli.common import OUTPUTS_EPILOG, console, handle_errors
from ldpfed.protocols.recorder import plot_run  # matplotlib is imported when the figure is drawn


@handle_errors
def plot(
    run_dir: Path = typer.Argument(..., help="The output directory of a `simulate` run (its --out)."),
) -> None:
    """Draw a run's plot.png from its metrics.csv and config.toml (e.g. after `simulate --no-plot`)."""
    console.print(f"wrote {plot_run(run_dir)}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("plot", epilog=OUTPUTS_EPILOG)(plot)

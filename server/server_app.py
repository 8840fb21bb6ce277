"""Flower ServerApp: runs the rounds of an ldpfed simulation (simulations.federation).

Under `flwr run .` the options come from `[tool.flwr.app.config]` and `--run-config`
(`context.run_config`); `ldpfed simulate` builds its own ServerApp with `make_server_app` around
the already-resolved options and a per-round callback for its progress display.

Training replies may carry the SIMULATION-ONLY field `measurement.clipped_update` (the client's
noise-free clipped update, see clients/client_app.py): the server uses it only for the measured
vs predicted noise metrics, never in the aggregate; a deployment must not have it.
"""

from typing import Callable

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from simulations.config import SimulationConfig, from_mapping
from simulations.federation import run_rounds


def make_server_app(config: SimulationConfig, on_round: Callable | None = None, result: dict | None = None) -> ServerApp:
    """A ServerApp that runs `config`; the summary is stored in `result["summary"]`."""
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        summary = run_rounds(grid, config, on_round)
        if result is not None:
            result["summary"] = summary

    return server_app


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = from_mapping(dict(context.run_config), source="run config").validated()
    summary = run_rounds(grid, config)
    print(f"ldpfed simulate: {summary}")

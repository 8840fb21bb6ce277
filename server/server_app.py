"""Flower ServerApp: `LDPStrategy` (server/strategy.py) around an ldpfed server half.

`ldpfed simulate` builds its own ServerApp with `make_server_app` around a server half that the
harness made with the server's seed and the data seed only (never the run seed or a client's
secret), plus the harness's per-round callback. Under `flwr run .` the options come from
`[tool.flwr.app.config]` and `--run-config` (`context.run_config`, read once); the server derives
its seed and the data seed from `run.seed`, while the nodes draw their own noise (client_app.py).
"""

from __future__ import annotations

from typing import Callable

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from ldpfed.config import from_flat
from ldpfed.protocols import seeds
from ldpfed.protocols.session import Session, server_half
from server.strategy import LDPStrategy, flower_fedavg


def make_server_app(half, clients: int, rounds: int, on_round: Callable[[int, dict], None]) -> ServerApp:
    """A ServerApp running `half` for `rounds` rounds over `clients` partitions."""
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        LDPStrategy(half, clients, on_round).run(grid, rounds)

    return server_app


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    config = from_flat(dict(context.run_config), source="run config").validated()
    data_seed = seeds.data_seed(config.run.seed)
    half = server_half(config, data_seed, seeds.server_seed(config.run.seed), flower_fedavg)
    session = Session(config, half, data_seed, engine="flower")
    LDPStrategy(half, config.federation.clients, lambda r, metrics: session.after_round(r, metrics, {})).run(
        grid, config.run.rounds)
    print(f"ldpfed: {session.finish()}")

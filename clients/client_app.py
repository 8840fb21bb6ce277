"""Flower ClientApp: a thin adapter around ldpfed's client halves (ldpfed.protocols).

A node holds one partition (Flower's `partition-id` in the node config). It reads the options once
(`make_client_app`'s config in `ldpfed simulate`; the run config under `flwr run`) and builds its
client half with its secret, which never comes from the server:
- `ldpfed simulate`: the harness hands each node its secret inside the ClientApp it builds
  (`make_client_app(..., secrets)`), outside the run config and the messages;
- `flwr run` / real SuperNodes: the node config's `noise-seed` if set, else OS entropy.
Messages carry only the round number and the broadcast arrays. Diagnostics (clean values) are
written to `diagnostics_dir` (the run's local output) when the harness gives one, never sent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from clients.records import read_round, reply_record
from ldpfed.config import Config, from_flat
from ldpfed.protocols import seeds
from ldpfed.protocols.session import client_half

QUERY = "query"


def partition_id(context: Context) -> int:
    return int(context.node_config["partition-id"])


def diagnostics_path(directory: str | Path, server_round: int, pid: int) -> Path:
    return Path(directory) / f"round-{server_round:05d}-client-{pid}.npz"


def write_diagnostics(directory: str | Path, server_round: int, pid: int, values: dict) -> None:
    path = diagnostics_path(directory, server_round, pid)
    temporary = path.with_name(f".{path.name}")  # hidden until complete: the harness globs "round-*"
    np.savez(temporary, **{key: np.asarray(value) for key, value in values.items()})
    temporary.replace(path)


def make_client_app(config: Config, data_seed: int, secrets: dict[int, int] | None,
                    diagnostics_dir: str | None = None) -> ClientApp:
    """The ClientApp of `ldpfed simulate`: options and secrets given by the harness."""
    app = ClientApp()
    halves: dict[int, object] = {}

    def half(pid: int):
        if pid not in halves:
            secret = seeds.fresh_secret() if secrets is None else secrets[pid]
            halves[pid] = client_half(config, pid, data_seed, secret)
        return halves[pid]

    @app.query()
    def query(message: Message, context: Context) -> Message:
        return Message(partition_record(partition_id(context)), reply_to=message)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        pid = partition_id(context)
        server_round, broadcast = read_round(message.content)
        reply, diagnostics = half(pid).reply(server_round, broadcast)
        if diagnostics_dir and diagnostics:
            write_diagnostics(diagnostics_dir, server_round, pid, diagnostics)
        return Message(reply_record(reply), reply_to=message)

    return app


def partition_record(pid: int) -> RecordDict:
    return RecordDict({"partition": MetricRecord({"partition-id": int(pid)})})


# ---- `flwr run .`: options from the run config, secret from the node -------------------------
app = ClientApp()
_deployed: dict[tuple, object] = {}


def _deployed_half(context: Context):
    """Built once per run and node: data seed from the run config, secret from the node config
    (`noise-seed`) or OS entropy."""
    key = (context.run_id, partition_id(context))
    if key not in _deployed:
        config = from_flat(dict(context.run_config), source="run config").validated()
        node_seed = context.node_config.get("noise-seed")
        secret = seeds.fresh_secret() if node_seed is None else int(node_seed)
        _deployed[key] = client_half(config, partition_id(context), seeds.data_seed(config.run.seed), secret)
    return _deployed[key]


@app.query()
def deployed_query(message: Message, context: Context) -> Message:
    return Message(partition_record(partition_id(context)), reply_to=message)


@app.train()
def deployed_train(message: Message, context: Context) -> Message:
    server_round, broadcast = read_round(message.content)
    reply, _ = _deployed_half(context).reply(server_round, broadcast)
    return Message(reply_record(reply), reply_to=message)

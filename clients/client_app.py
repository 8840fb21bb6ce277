"""Flower ClientApp: a thin adapter around ldpfed's node halves (ldpfed.protocols.node_halves).

A Flower node hosts a cohort of simulated clients: node `partition-id` of `num-partitions`
(Flower's node config) holds the contiguous block `ldpfed.protocols.nodes.hosted(...)` of the
federation's `clients` partition ids, and answers one message per round for its sampled clients
(listed in the message) with their replies stacked and each failed client's reason. It reads the
options once (`make_client_app`'s config in `ldpfed simulate`; the run config under `flwr run`) and
builds its node half with its clients' secrets, which never come from the server:
- `ldpfed simulate`: the harness hands each node its clients' secrets inside the ClientApp it
  builds (`make_client_app(..., secrets)`), outside the run config and the messages: as the noise
  root they spawn from (`seeds.SpawnedSecrets`, a few bytes however many clients; each node
  spawns its own block), every node of a simulation being the harness's, which holds the root;
- `flwr run` / real SuperNodes: the node config's `noise-seed` if set (the secret of a node's one
  client; a node of several spawns one per client, `seeds.client_secrets`), else OS entropy.
Messages carry only the round number, the broadcast arrays and the sampled partition ids.
Diagnostics (clean values) are written to `diagnostics_dir` (the run's local output) when the
harness gives one, one file per node and round, never sent.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.node_halves import node_half  # not ldpfed.tasks: a node imports its protocols only
from ldpfed.protocols.nodes import hosted
from wire.records import node_reply_record, partition_record, read_node_round


def hosted_partitions(context: Context, clients: int) -> list[int]:
    """The partition ids this node hosts (node `partition-id` of `num-partitions`)."""
    node = int(context.node_config["partition-id"])
    nodes = int(context.node_config.get("num-partitions", clients))
    return hosted(node, nodes, clients)


def answer_query(message: Message, context: Context, clients: int) -> Message:
    """The reply to `query`: the partition ids this node hosts."""
    return Message(partition_record(hosted_partitions(context, clients)), reply_to=message)


def answering_app(clients: int, mods: list | None = None) -> ClientApp:
    """A ClientApp (with Flower's `mods`) that answers the server's `query` with the partition ids
    its node hosts; every harness's ClientApp starts from one and adds its own handlers."""
    app = ClientApp(mods=mods or [])

    @app.query()
    def query(message: Message, context: Context) -> Message:
        return answer_query(message, context, clients)

    return app


def diagnostics_path(directory: str | Path, server_round: int, node: int) -> Path:
    return Path(directory) / f"round-{server_round:05d}-node-{node}.npz"


def write_diagnostics(directory: str | Path, server_round: int, node: int, diagnostics: dict[int, dict]) -> None:
    """One file per node and round: `ids` and each diagnostic stacked over those clients."""
    path = diagnostics_path(directory, server_round, node)
    temporary = path.with_name(f".{path.name}")  # hidden until complete: the harness globs "round-*"
    pids = sorted(diagnostics)
    values = {key: np.stack([np.asarray(diagnostics[pid][key]) for pid in pids]) for key in diagnostics[pids[0]]}
    np.savez(temporary, ids=np.asarray(pids, dtype=np.int64), **values)
    temporary.replace(path)


def read_diagnostics(path: str | Path) -> dict[int, dict]:
    """{partition id: diagnostics} of a file written by `write_diagnostics`."""
    with np.load(path) as stored:
        values = {key: stored[key] for key in stored.files}  # each access of an npz entry reads it again
    ids = values.pop("ids")
    return {int(pid): {key: rows[row] for key, rows in values.items()} for row, pid in enumerate(ids)}


# Node halves (under central trust: clients) built in this worker process, by (app token, node or
# partition id). Flower's simulation hands each message a fresh cloudpickle copy of the ClientApp,
# and a closure pickled by value carries copies of the module globals it names: the cache must be
# reached through `built_node`, a module-level function pickled by reference, so every copy of the
# app finds this process's one dict. Only the latest app's (run's) entries are kept.
_built: dict[tuple[str, int], object] = {}


def built_node(token: str, node: int, build) -> tuple[object, bool]:
    """(the node half of (`token`, `node`) in this process, built by `build()` on first use;
    whether this call built it)."""
    key = (token, node)
    if key in _built:
        return _built[key], False
    for other in [other for other in _built if other[0] != token]:
        del _built[other]
    _built[key] = build()
    return _built[key], True


def make_client_app(
    config: Config, data_seed: int, secrets: dict[int, int] | None, diagnostics_dir: str | None = None
) -> ClientApp:
    """The ClientApp of `ldpfed simulate`: options and secrets given by the harness."""
    app = answering_app(config.federation.clients)
    token = uuid.uuid4().hex

    def half(context: Context):
        def build():
            pids = hosted_partitions(context, config.federation.clients)
            if secrets is None:
                node_secrets = {pid: seeds.fresh_secret() for pid in pids}
            elif hasattr(secrets, "restricted"):  # ClientSecrets: the node's block of their words, no int per client
                node_secrets = secrets.restricted(pids)
            else:
                node_secrets = {pid: secrets[pid] for pid in pids}
            return node_half(config, pids, data_seed, node_secrets)

        return built_node(token, int(context.node_config["partition-id"]), build)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        server_round, broadcast, pids = read_node_round(message.content)
        node, built = half(context)
        answer = node.reply(server_round, broadcast, pids)
        if diagnostics_dir and any(answer.diagnostics.values()):
            write_diagnostics(
                diagnostics_dir, server_round, int(context.node_config["partition-id"]), answer.diagnostics
            )
        return Message(node_reply_record(answer, built), reply_to=message)

    return app


# ---- `flwr run .`: options from the run config, secrets from the node ------------------------
app = ClientApp()


def _run_config(context: Context) -> Config:
    # lazily: planning a total budget loads dp_accounting's PLD and RDP (with scipy.stats and
    # scipy.signal, 1.5 s of imports) and pandas, which a node of `ldpfed simulate` never needs
    from ldpfed.tasks import flower_run_config

    return flower_run_config(dict(context.run_config))


def _deployed_half(context: Context):
    """(node half, built now?): built once per run and node in a process that answers several
    messages (Flower's simulation runtime under `flwr run`; a SuperNode starts a process per
    message, which builds anew). Data seed from the run config, the clients' secrets spawned from
    the node config's `noise-seed`, or OS entropy."""

    def build():
        config = _run_config(context)
        clients = config.federation.clients
        pids = hosted_partitions(context, clients)
        node_seed = context.node_config.get("noise-seed")
        if node_seed is None:
            secrets = {pid: seeds.fresh_secret() for pid in pids}
        elif len(pids) == 1:  # a node of one client: the node's seed is its client's secret
            secrets = {pids[0]: int(node_seed)}
        else:  # one secret per hosted client, spawned from the node's seed
            spawned = seeds.client_secrets(int(node_seed), clients)
            secrets = {pid: spawned[pid] for pid in pids}
        return node_half(config, pids, seeds.data_seed(config.run.seed), secrets)

    return built_node(f"run-{context.run_id}", int(context.node_config["partition-id"]), build)


@app.query()
def deployed_query(message: Message, context: Context) -> Message:
    return answer_query(message, context, _run_config(context).federation.clients)


@app.train()
def deployed_train(message: Message, context: Context) -> Message:
    server_round, broadcast, pids = read_node_round(message.content)
    node, built = _deployed_half(context)
    answer = node.reply(server_round, broadcast, pids)
    return Message(node_reply_record(answer, built), reply_to=message)

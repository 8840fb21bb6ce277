"""ClientApp of the central trust model: a node answers `query` with the partitions it hosts and
`train` with the local model of the one client a message names (ldpfed.protocols.central). With
client-side clipping Flower's own `fixedclipping_mod` clips the reply."""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import fixedclipping_mod

from clients.client_app import hosted_partitions, partition_record
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.central import CentralClient

_clients: dict[tuple[int, int], CentralClient] = {}


def make_central_client_app(config: Config, data_seed: int, secrets: dict[int, int] | None) -> ClientApp:
    mods = [fixedclipping_mod] if config.privacy.clipping_side == "client" else []
    app = ClientApp(mods=mods)

    @app.query()
    def query(message: Message, context: Context) -> Message:
        return Message(partition_record(hosted_partitions(context, config.federation.clients)), reply_to=message)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        settings = message.content["config"]
        pid, server_round = int(settings["partition-id"]), int(settings["server-round"])
        key = (id(secrets), pid)
        if key not in _clients:
            _clients[key] = CentralClient(config, pid, data_seed, secrets[pid] if secrets else seeds.fresh_secret())
        weights = message.content["arrays"].to_numpy_ndarrays()
        model, examples = _clients[key].train(weights, server_round)
        content = RecordDict({"arrays": ArrayRecord(model), "metrics": MetricRecord({"num-examples": examples})})
        return Message(content, reply_to=message)

    return app

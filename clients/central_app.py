"""ClientApp of the central trust model: a node answers `query` with the partitions it hosts and
`train` with the local model of the one client a message names (ldpfed.protocols.central). With
client-side clipping Flower's own `fixedclipping_mod` clips the reply."""

from __future__ import annotations

import uuid

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import fixedclipping_mod

from clients.client_app import answering_app, built_node
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.central import CentralClient
from wire.records import central_reply, read_central_request


def make_central_client_app(config: Config, data_seed: int, secrets: dict[int, int] | None) -> ClientApp:
    mods = [fixedclipping_mod] if config.privacy.clipping_side == "client" else []
    app = answering_app(config.federation.clients, mods)
    token = uuid.uuid4().hex  # this run's clients in the worker's one cache (`built_node`)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        weights, pid, server_round = read_central_request(message.content)

        def build() -> CentralClient:
            return CentralClient(config, pid, data_seed, secrets[pid] if secrets else seeds.fresh_secret())

        client, _ = built_node(token, pid, build)
        model, examples = client.train(weights, server_round)
        return Message(central_reply(model, examples), reply_to=message)

    return app

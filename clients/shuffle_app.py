"""ClientApp of the shuffle trust model: a node answers `query` with the partitions it hosts and
`train` with the reports of the clients a message lists, stacked, each client's users randomizing
with the client's own secret stream exactly as under the local model (ldpfed.protocols.shuffle).
The reply goes to the shuffler (server/shuffle.py), never to the server half."""

from __future__ import annotations

import numpy as np
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from clients.client_app import answering_app
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.shuffle import client_reports
from wire.records import read_shuffle_request, reports_record


def make_shuffle_client_app(config: Config, data_seed: int, secrets: dict[int, int] | None) -> ClientApp:
    app = answering_app(config.federation.clients)
    fresh: dict[int, int] = {}  # --fresh-noise: each client's OS entropy, drawn once on this node

    def secret(pid: int) -> int:
        if secrets is not None:
            return secrets[pid]
        return fresh.setdefault(pid, seeds.fresh_secret())

    @app.train()
    def train(message: Message, context: Context) -> Message:
        server_round, pids = read_shuffle_request(message.content)
        reports = np.concatenate([client_reports(config, pid, data_seed, secret(pid), server_round) for pid in pids])
        return Message(reports_record(reports), reply_to=message)

    return app

"""A plain Flower FedAvg app: the baseline `benchmarks/bench_simulate.py` times ldpfed against.

Stock Flower only: a ClientApp that trains the same model on the same partition with the same
local steps, and a ServerApp running `flwr.serverapp.strategy.FedAvg` with central evaluation on
the same test set (as ldpfed's server does every round). No sampling by seed, no failure records,
no files, no clipping or noise.
"""

from __future__ import annotations

import time

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from ldpfed.training.local import evaluate, train_local
from ldpfed.training.models import build_model


def _data(config):
    from ldpfed.protocols.train import federated_data

    return federated_data(config, 0)


def make_apps(config, round_times: list) -> tuple[ServerApp, ClientApp]:
    """(server, client) for the ldpfed config (task train); round end times go to `round_times`."""
    training = config.training
    client_app = ClientApp()

    @client_app.train()
    def train(message: Message, context: Context) -> Message:
        data = _data(config)
        X, y = data.client(int(context.node_config["partition-id"]))
        model = build_model(training.model, data.input_shape, data.num_classes, seed=0)
        model.load_state_dict(message.content["arrays"].to_torch_state_dict())
        train_local(
            model,
            X,
            y,
            steps=training.local_steps,
            lr=training.lr,
            batch_size=training.batch_size,
            seed=int(message.content["config"]["server-round"]),
        )
        reply = RecordDict(
            {
                "arrays": ArrayRecord(model.state_dict()),
                "metrics": MetricRecord({"num-examples": int(y.size)}),
            }
        )
        return Message(reply, reply_to=message)

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        data = _data(config)
        model = build_model(training.model, data.input_shape, data.num_classes, seed=0)
        clients = config.federation.clients
        strategy = FedAvg(
            fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=clients, min_available_nodes=clients
        )

        def central_evaluation(server_round: int, arrays: ArrayRecord) -> MetricRecord:
            model.load_state_dict(arrays.to_torch_state_dict())
            loss, accuracy = evaluate(model, *data.test)
            round_times.append(time.perf_counter())
            return MetricRecord({"loss": loss, "accuracy": accuracy})

        strategy.start(
            grid,
            ArrayRecord(model.state_dict()),
            num_rounds=config.run.rounds,
            train_config=ConfigRecord({}),
            evaluate_fn=central_evaluation,
        )

    return server_app, client_app

"""Plain Flower apps, the baselines ldpfed's benchmarks time it against.

`make_apps`: a plain Flower FedAvg app (`benchmarks/bench_simulate.py`). Stock Flower only: a
ClientApp that trains the same model on the same partition with the same local steps, and a
ServerApp running `flwr.serverapp.strategy.FedAvg` with central evaluation on the same test set (as
ldpfed's server does every round). No sampling by seed, no failure records, no files, no clipping
or noise.

`make_echo_apps`: Flower's own floor per round (`benchmarks/bench_flower_engine.py --floor`): a
ServerApp that sends every node an empty message each round through Flower's grid
(`send_and_receive`) and a ClientApp that answers it with an empty message: what a round costs
when its messages carry nothing and nobody computes.
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


def make_echo_apps(
    nodes: int, rounds: int, round_times: list, pull_interval: float | None = None
) -> tuple[ServerApp, ClientApp]:
    """(server, client): once all `nodes` nodes are up, each of `rounds` rounds one empty message
    to every node and its empty reply; `round_times` gets each round's seconds from push to the
    last reply. `pull_interval`: the grid's seconds between pulls (None: Flower's default)."""
    client_app = ClientApp()

    @client_app.train()
    def echo(message: Message, context: Context) -> Message:
        return Message(RecordDict(), reply_to=message)

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        if pull_interval is not None:
            grid.pull_interval = pull_interval
        while len(ids := list(grid.get_node_ids())) < nodes:
            time.sleep(0.05)
        for server_round in range(1, rounds + 1):
            started = time.perf_counter()
            messages = [
                Message(RecordDict(), dst_node_id=node, message_type="train", group_id=str(server_round))
                for node in ids
            ]
            replies = list(grid.send_and_receive(messages))
            assert len(replies) == len(ids) and not any(reply.has_error() for reply in replies)
            round_times.append(time.perf_counter() - started)

    return server_app, client_app

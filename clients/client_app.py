"""Flower ClientApp: a client holds one partition (Flower's `partition-id`) of the users or data.

`query` tells the server this node's partition id; `train` runs the client's part of a round.

SIMULATION-ONLY channel (training, `measure-noise` = 1, the default in simulation): besides its
privatized update, a client also returns its clipped, noise-free update on the separate field
`measurement.clipped_update` (simulations.train_task.MEASUREMENT_FIELD), so that the server can
measure the aggregate noise against its CLT prediction. The server never aggregates it. A real
deployment must not have this field (it sends the update in the clear): set `measure-noise = 0`.
"""

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from simulations.client import partition_reply, train_reply

app = ClientApp()


def _partition_id(context: Context) -> int:
    return int(context.node_config["partition-id"])


@app.query()
def query(message: Message, context: Context) -> Message:
    return Message(partition_reply(_partition_id(context)), reply_to=message)


@app.train()
def train(message: Message, context: Context) -> Message:
    return Message(train_reply(message.content, _partition_id(context)), reply_to=message)

"""Flower's simulation runtime hands the server's messages to the nodes promptly.

Flower's simulation runtime (flwr 1.42, `flwr.server.superlink.fleet.vce.vce_api`) moves the
messages the ServerApp pushed to the nodes' queue in a loop that asks the in-memory link state for
one message per node and then waits 0.1 s (`add_messages_to_queue`). Every round therefore waits
up to 0.1 s before any node starts: measured here, a round in which nothing is computed or sent
takes 0.10 s under Flower against 0.02 s on the local engine, more than a whole local round of
10^5 clients (0.07-0.11 s). `prompt_pickup` runs the same loop with a wait that grows with the
number of nodes (`pickup_interval`): each pass asks the link state once per node, and each ask scans
the stored messages, so few nodes (a cohort run's default is one per core) poll every few
milliseconds, while a federation of one node per client keeps Flower's 0.1 s.

The same runtime's node workers and reply injector wait for their next message with a 1 s
timeout between looks at the stop event, so a run's end waits up to a second after its last round
(0.8-1.8 s measured from the last round to the runtime's return, of a 15 s default job). Within
the same block the runtime's queues are `PromptQueue`s, whose timed waits last at most
`STOP_WAIT`: a message still wakes a waiting loop at once, and the loops see the stop within 50 ms.

Each loop is replaced only where Flower's own loops are the ones read here (their sources'
SHA-256 in `AUDITED` and `AUDITED_STOP`); any other Flower version keeps its loops untouched, and
the run is just slower.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import threading
from queue import Queue

STOCK_INTERVAL = 0.1
"""Flower's wait between passes (seconds)."""

PER_NODE_INTERVAL = 0.0025
"""The wait per node asked in a pass (seconds): 2 nodes wait 5 ms, 40 nodes or more Flower's 0.1 s."""

AUDITED = frozenset({"953f4bd41a931a7779a4a670ab17b633f6e20b08a0128535328674466419777a"})
"""SHA-256 of `add_messages_to_queue`'s source in the Flower releases whose loop was read: 1.42.0."""


STOP_WAIT = 0.05
"""The longest timed wait of the runtime's queue loops within `prompt_pickup` (seconds)."""

AUDITED_STOP = frozenset(
    {
        "60f308688ba34fb5bc942ac68c1d97be61b2010e8d4c3983833f646c5c038157",  # worker, 1.42.0
        "3622eb5bfcd9cd1a4cef3b1d5b8250a07af41a9439ea0379e0459d62e6fa5b35",  # put_message_into_state, 1.42.0
    }
)
"""SHA-256 of the runtime's loops whose timed `get` only bounds a look at the stop event (an
`Empty` goes back to the loop's test): the node worker and the reply injector, Flower 1.42.0."""


class PromptQueue(Queue):
    """A queue whose timed `get` waits at most `STOP_WAIT` seconds before it raises `Empty` (a
    message arriving meanwhile is returned at once, as by any queue)."""

    def get(self, block: bool = True, timeout: float | None = None):
        if block and timeout is not None:
            timeout = min(timeout, STOP_WAIT)
        return super().get(block, timeout)


def pickup_interval(nodes: int) -> float:
    """The wait between passes for a federation of `nodes` Flower nodes (module docstring)."""
    return min(STOCK_INTERVAL, PER_NODE_INTERVAL * max(int(nodes), 1))


def audited(loop, digests: frozenset = AUDITED) -> bool:
    """Whether `loop` is one of Flower's loops as read here (its source's digest in `digests`;
    default: the pick-up loop's)."""
    try:
        source = inspect.getsource(loop)
    except (OSError, TypeError):
        return False
    return hashlib.sha256(source.encode()).hexdigest() in digests


def pickup_loop(interval: float):
    """Flower's `add_messages_to_queue`, pass for pass, waiting `interval` seconds between passes."""

    def add_messages_to_queue(state, queue: Queue, nodes_mapping, f_stop: threading.Event) -> None:
        while not f_stop.is_set():
            for node_id in nodes_mapping.keys():
                for message in state.get_message_ins(node_id=node_id, limit=1):
                    queue.put(message)
            f_stop.wait(interval)

    return add_messages_to_queue


@contextlib.contextmanager
def prompt_pickup(nodes: int):
    """Within the block, Flower's simulation runtime picks up pushed messages every
    `pickup_interval(nodes)` seconds and its queue loops see their stop within `STOP_WAIT`; yields
    whether the pick-up loop was replaced (only audited loops are)."""
    import flwr.server.superlink.fleet.vce.vce_api as vce_api

    stock, queue = getattr(vce_api, "add_messages_to_queue", None), getattr(vce_api, "Queue", None)
    loops = (getattr(vce_api, "worker", None), getattr(vce_api, "put_message_into_state", None))
    prompt_stop = queue is Queue and all(loop is not None and audited(loop, AUDITED_STOP) for loop in loops)
    replaced = stock is not None and audited(stock)
    if replaced:
        vce_api.add_messages_to_queue = pickup_loop(pickup_interval(nodes))
    if prompt_stop:
        vce_api.Queue = PromptQueue
    try:
        yield replaced
    finally:
        if replaced:
            vce_api.add_messages_to_queue = stock
        if prompt_stop:
            vce_api.Queue = queue

"""Flower's pick-up loop replaced by the same loop with a shorter wait, and its queue loops' timed
waits shortened (simulations.flower_pickup)."""

from __future__ import annotations

import threading
from queue import Queue

import flwr
import flwr.server.superlink.fleet.vce.vce_api as vce_api
import pytest

from simulations.flower_pickup import (
    AUDITED_STOP,
    STOCK_INTERVAL,
    STOP_WAIT,
    PromptQueue,
    audited,
    pickup_interval,
    pickup_loop,
    prompt_pickup,
)


class DrainingState:
    """A link state holding messages per node, handing at most `limit` per ask, in order; it sets
    `stop` once asked with nothing left, so a loop ends after the pass that found it empty."""

    def __init__(self, messages: dict[int, list[str]], stop: threading.Event):
        self.messages = {node: list(queue) for node, queue in messages.items()}
        self.stop = stop

    def get_message_ins(self, node_id: int, limit: int | None) -> list[str]:
        if not any(self.messages.values()):
            self.stop.set()
        queue = self.messages[node_id]
        taken, self.messages[node_id] = queue[:limit], queue[limit:]
        return taken


class WaitLog(threading.Event):
    """An event that records each wait's timeout."""

    def __init__(self):
        super().__init__()
        self.waits = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return super().wait(0)


def _delivered(loop, messages: dict[int, list[str]]) -> tuple[list[str], list[float]]:
    stop, queue = WaitLog(), Queue()
    loop(DrainingState(messages, stop), queue, dict.fromkeys(messages), stop)
    return [queue.get_nowait() for _ in range(queue.qsize())], stop.waits


def test_the_interval_grows_with_the_nodes_up_to_flowers():
    assert pickup_interval(2) == pytest.approx(0.005)
    assert pickup_interval(0) == pickup_interval(1) < pickup_interval(2) < pickup_interval(20)
    assert pickup_interval(40) == pickup_interval(10_000) == STOCK_INTERVAL


def test_the_loop_delivers_what_flowers_delivers_in_the_same_order():
    """Same messages, same order (one per node per pass), the same passes; only the wait differs."""
    messages = {7: ["a1", "a2", "a3"], 9: ["b1"], 11: []}
    stock, stock_waits = _delivered(vce_api.add_messages_to_queue, messages)
    prompt, prompt_waits = _delivered(pickup_loop(0.001), messages)
    assert prompt == stock == ["a1", "b1", "a2", "a3"]
    assert stock_waits == [STOCK_INTERVAL] * 3 and prompt_waits == [0.001] * 3


def test_flowers_loop_is_replaced_within_the_block_and_restored():
    stock = vce_api.add_messages_to_queue
    assert audited(stock) or flwr.__version__ != "1.42.0"
    with prompt_pickup(2) as replaced:
        assert replaced == audited(stock)
        assert (vce_api.add_messages_to_queue is not stock) == replaced
    assert vce_api.add_messages_to_queue is stock


def test_a_loop_not_read_here_is_left_alone(monkeypatch):
    def other_loop(state, queue, nodes_mapping, f_stop):
        f_stop.wait(0.1)

    monkeypatch.setattr(vce_api, "add_messages_to_queue", other_loop)
    assert not audited(other_loop)
    with prompt_pickup(2) as replaced:
        assert not replaced and vce_api.add_messages_to_queue is other_loop
    assert vce_api.add_messages_to_queue is other_loop


def test_flowers_worker_ends_within_the_short_wait_once_stopped_and_still_processes_messages():
    """Flower's own node worker on a PromptQueue: a message put while it waits is processed; once
    the stop is set, the worker returns within a few STOP_WAITs (Flower's 1 s timeout otherwise)."""
    import time

    assert audited(vce_api.worker, AUDITED_STOP) or flwr.__version__ != "1.42.0"
    inbox, outbox, stop, processed = PromptQueue(), PromptQueue(), threading.Event(), []

    class Backend:
        def process_message(self, message, context):
            processed.append(message)
            return None, context

    class Store:
        def retrieve_context(self, run_id):
            return {}

        def update_context(self, run_id, context):
            pass

    class Metadata:
        dst_node_id, run_id = 0, 1

    class Message:
        metadata = Metadata()

    class Metrics:
        def add_clientapp_runtime(self, seconds):
            pass

    worker = threading.Thread(target=vce_api.worker, args=(inbox, outbox, {0: Store()}, Backend(), stop, Metrics()))
    worker.start()
    message = Message()
    inbox.put(message)
    deadline = time.monotonic() + 60
    while not processed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert processed == [message] and worker.is_alive()  # waiting for the next message
    stopped = time.monotonic()
    stop.set()
    worker.join(60)
    assert not worker.is_alive()
    # at most one STOP_WAIT left in the wait the stop found, plus scheduling on a busy machine
    assert time.monotonic() - stopped < 0.9


def test_a_prompt_queue_waits_at_most_the_stop_wait_and_returns_a_message_at_once():
    import time
    from queue import Empty

    queue = PromptQueue()
    started = time.monotonic()
    with pytest.raises(Empty):
        queue.get(timeout=30.0)
    assert STOP_WAIT <= time.monotonic() - started < 10.0  # not the 30 s asked for
    threading.Timer(0.01, queue.put, ("m",)).start()
    assert queue.get(timeout=30.0) == "m"


def test_flowers_queues_are_prompt_within_the_block_only_where_its_loops_were_read(monkeypatch):
    with prompt_pickup(2):
        assert (vce_api.Queue is PromptQueue) == (flwr.__version__ == "1.42.0")
    assert vce_api.Queue is Queue

    def other_worker(*args):
        pass

    monkeypatch.setattr(vce_api, "worker", other_worker)
    with prompt_pickup(2):
        assert vce_api.Queue is Queue

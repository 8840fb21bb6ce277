"""What `ldpfed simulate` shows before its first round under Flower, which on a loaded machine can
take minutes: Ray up, the nodes up (their answer to the partition query), round 1 sent and its
nodes that replied (simulations.progress.RoundProgress, fed by server.strategy.StoppableGrid's
`watch`). The real run's lines are checked by tests/test_simulate_stop.py (the Flower cases)."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

import simulations.progress as shown
from ldpfed.config import Config
from server.strategy import Replies, StoppableGrid
from simulations.progress import RoundProgress


def message(node: int, kind: str = "train", group: str = "1") -> SimpleNamespace:
    """What the grid reads of a message: its addressee, type and group (the round)."""
    return SimpleNamespace(metadata=SimpleNamespace(dst_node_id=node, message_type=kind, group_id=group))


class ScriptedGrid:
    """Pushing gives each message an id (as a grid's push does); each pull delivers the replies of
    the next list of node ids in `arrivals`."""

    def __init__(self, arrivals: list[list[int]]) -> None:
        self.arrivals = list(arrivals)

    def push_messages(self, messages) -> list[str]:
        for item in messages:
            item.metadata.message_id = f"to-{item.metadata.dst_node_id}"
        return [item.metadata.message_id for item in messages]

    def pull_messages(self, message_ids) -> list[SimpleNamespace]:
        nodes = self.arrivals.pop(0) if self.arrivals else []
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=f"to-{node}")) for node in nodes]


def test_the_grid_reports_where_a_batch_of_replies_stands_after_every_pull():
    seen: list[Replies] = []
    grid = StoppableGrid(ScriptedGrid([[], [12], [], [11]]), watch=seen.append, interval=0.0)
    replies = grid.send_and_receive([message(11), message(12)])
    assert sorted(reply.metadata.reply_to_message_id for reply in replies) == ["to-11", "to-12"]
    assert [(r.kind, r.server_round, r.sent, r.waiting) for r in seen] == [
        ("train", 1, 2, (11, 12)),
        ("train", 1, 2, (11,)),
        ("train", 1, 2, (11,)),
        ("train", 1, 2, ()),
    ]
    assert len({r.pushed_at for r in seen}) == 1 and [r.seconds for r in seen] == sorted(r.seconds for r in seen)
    assert [r.arrived for r in seen] == [0, 1, 1, 2]


def lines(stream: io.StringIO) -> list[str]:
    """The lines written, without their seconds."""
    return [re.sub(r" \(\d+\.\d s\)$", "", line) for line in stream.getvalue().splitlines() if line]


def test_off_a_terminal_each_start_up_step_is_a_line_of_its_own(monkeypatch):
    """A log gets Ray up, the nodes as they come up (at most a line a second, but the last node's),
    round 1 sent and its nodes as they reply; nothing for the query before a node answers, nor for
    later rounds (their own lines say it all)."""
    stream = io.StringIO()
    progress = RoundProgress(Config().with_options({"run.task": "train", "federation.clients": 4}))
    progress.start(stream)
    progress.ray_up(3)
    query = [Replies("query", 0, 3, waiting, seconds, 1.0) for waiting, seconds in [((1, 2, 3), 0.0), ((2, 3), 0.1)]]
    query += [Replies("query", 0, 3, (3,), 0.2, 1.0), Replies("query", 0, 3, (), 0.3, 1.0)]
    round_1 = [Replies("train", 1, 3, waiting, 0.1, 2.0) for waiting in [(1, 2, 3), (1, 2, 3), (2, 3), ()]]
    for replies in query:
        progress.replies(replies)
    monkeypatch.setattr(shown, "STEP_SECONDS", 0.0)  # round 1's replies come seconds apart
    for replies in [*round_1, Replies("train", 2, 3, (1, 2, 3), 0.0, 3.0)]:
        progress.replies(replies)
    progress.stop()
    prefix = "flower train: 4 clients: "
    assert lines(stream) == [
        prefix + "starting Ray...",
        prefix + "Ray up; starting 3 nodes...",
        prefix + "1 of 3 nodes up",  # the second node, within the second, is left out
        prefix + "3 of 3 nodes up",
        prefix + "round 1 started on 3 nodes",
        prefix + "round 1: 1 of 3 nodes replied",
    ]


def test_one_node_is_one_node():
    stream = io.StringIO()
    progress = RoundProgress(Config())
    progress.start(stream)
    progress.ray_up(1)
    progress.replies(Replies("query", 0, 1, (), 0.5, 1.0))
    progress.replies(Replies("train", 1, 1, (4,), 0.0, 2.0))
    assert lines(stream)[1:] == [
        "flower mean: 10 clients: Ray up; starting 1 node...",
        "flower mean: 10 clients: 1 of 1 node up",
        "flower mean: 10 clients: round 1 started on 1 node",
    ]

"""A node's reply in its compact wire form (wire/records.py: `packed`, squares not sent) reads back
bit for bit what the node's clients reply one by one, in fewer bytes."""

from __future__ import annotations

import io

import numpy as np
import pytest
from helpers import assert_same

from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.nodes import NodeReply, Replies
from ldpfed.tasks.run import node_half
from wire.records import FORMS, SQUARES, node_reply_record, packed, read_node_reply, unpacked


def bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


@pytest.mark.parametrize(
    "array, form",
    [
        (np.arange(5, 105), "range"),
        (np.broadcast_to(1.0, (500, 3)), "fill"),  # a broadcast count: one value, no pass over it
        (np.full((4, 3), -0.0), "fill"),
        (np.array([0.0, -0.0, 3.0]), ""),  # -0.0 is no integer code: it would come back as 0.0
        (np.array([1.0, 2.0, 300.0]), "ints"),
        (np.array([[3, 1], [2, 7]]), "ints"),
        (np.array([2.0**60, 1.0]), ""),  # no narrower integer dtype
        (np.array([0.5, 1.0]), ""),
        (np.array([np.nan, 1.0]), ""),
        (np.array([True, False]), ""),
        (np.zeros(0), ""),
        (np.arange(12.0).reshape(3, 4).T, ""),  # not C-ordered: as it is (a copy)
        (np.array(2.5), "fill"),
    ],
)
def test_a_packed_array_reads_back_bit_for_bit(array, form):
    sent, chosen = packed(array)
    back = unpacked(sent, chosen)
    assert chosen == form
    assert back.dtype == array.dtype and back.shape == array.shape and bits(back) == bits(array)
    np.load(io.BytesIO(sent.data), allow_pickle=False)  # every form is a valid .npy (Flower's Array.numpy)


def test_an_array_flower_encoded_reads_as_flower_reads_it_without_a_copy():
    from flwr.app import Array

    rows = np.random.default_rng(0).normal(size=(6, 3))
    sent, _ = packed(rows)
    assert np.array_equal(unpacked(Array(rows)), rows) and np.array_equal(sent.numpy(), rows)
    assert not unpacked(sent).flags.owndata  # a view of the bytes received


def round_trip(answer: NodeReply) -> NodeReply:
    record = node_reply_record(answer)
    replies, failures = read_node_reply(record)
    return NodeReply(replies, failures, {}, {})


@pytest.mark.parametrize(
    "options, squares, count_form, users_form",
    [
        ({"users": 20}, True, "fill", "fill"),  # one user each, every value reported: counts all 1
        ({"users": 20, "report-dims": 2, "fail-clients": "3,12"}, True, "ints", "fill"),  # counts 0/1 per entry
        ({"users": 50}, False, "ints", "ints"),  # two or three users: total_sq sent
    ],
)
def test_a_mean_node_reply_reads_back_what_its_clients_reply_alone(options, squares, count_form, users_form):
    values = {"task": "mean", "engine": "local", "clients": 20, "dims": 5, "mechanism": "laplace", **options}
    config = Config().with_options(values).validated()
    pids = list(range(2, 17))
    node = node_half(config, pids, seeds.data_seed(0), seeds.client_secrets(11, 20).restricted(pids))
    for server_round, asked in [(1, range(2, 17)), (2, pids[::3])]:
        answer = node.reply(server_round, {}, asked)
        assert_same(round_trip(answer), node.one_by_one(server_round, {}, list(asked)))
    record = node_reply_record(node.reply(3, {}, range(2, 17)))
    assert ("total_sq" not in record.array_records) is squares and (SQUARES in record.config_records) is squares
    forms = dict(record[FORMS])
    assert forms["count/0"] == count_form and forms["metrics/users"] == users_form
    assert forms["client-ids/0"] == ("ints" if "fail-clients" in options else "range")  # 3, 12 missing
    assert "total/0" not in forms  # the noisy totals go as they are


@pytest.mark.parametrize("options", [{"mechanism": "laplace"}, {"mechanism": "oue", "report-dims": 1}])
def test_a_frequency_node_reply_reads_back_what_its_clients_reply_alone(options):
    values = {"task": "frequency", "engine": "local", "users": 20, "clients": 20, "dims": 2, "categories": "3,4"}
    config = Config().with_options({**values, **options}).validated()
    pids = list(range(2, 17))
    node = node_half(config, pids, seeds.data_seed(0), seeds.client_secrets(5, 20).restricted(pids))
    answer = node.reply(1, {}, range(2, 17))
    assert_same(round_trip(answer), node.one_by_one(1, {}, list(range(2, 17))))
    assert "total_sq" not in node_reply_record(answer).array_records


def test_a_reply_of_one_user_clients_is_a_third_of_its_columns():
    """10^3 clients x 10 dims: the noisy totals (8 bytes each) and little else."""
    config = Config().with_options({"task": "mean", "users": 1000, "clients": 1000, "dims": 10}).validated()
    pids = list(range(1000))
    node = node_half(config, pids, seeds.data_seed(0), seeds.client_secrets(3, 1000))
    record = node_reply_record(node.reply(1, {}, range(1000)))
    sent = sum(len(array.data) for value in record.array_records.values() for array in value.values())
    assert 1000 * 10 * 8 <= sent < 1000 * 10 * 8 + 4096


def test_nodes_replying_in_any_order_join_without_copying_their_blocks():
    rng = np.random.default_rng(2)
    blocks = [rng.normal(size=(3, 2)), rng.normal(size=(4, 2))]
    parts = [Replies(np.arange(3 + i) + 3 * i, {"users": np.ones(3 + i, int)}, {"t": blocks[i]}) for i in range(2)]
    joined = Replies.joined(parts[::-1])
    assert list(joined) == list(range(7)) and joined._blocks is not None  # kept per node
    expected = np.zeros(2)
    for row in np.concatenate(blocks):
        expected = expected + row
    assert np.array_equal(joined.total("t", 2), expected)


@pytest.mark.parametrize("partitions", [range(40, 90), [3, 4, 5, 6], [5, 2, 9], [7], []])
def test_a_round_request_lists_a_nodes_partitions_or_their_range(partitions):
    from wire.records import PARTITION_RANGE, node_round_record, read_node_round

    record = node_round_record(4, {"x": np.arange(3.0)}, partitions)
    server_round, broadcast, read = read_node_round(record)
    assert server_round == 4 and list(read) == list(partitions) and np.array_equal(broadcast["x"], np.arange(3.0))
    consecutive = len(partitions) > 1 and list(partitions) == list(range(partitions[0], partitions[-1] + 1))
    assert (PARTITION_RANGE in record["config"]) is consecutive and isinstance(read, range) is consecutive


def test_the_strategy_groups_a_rounds_partitions_by_node_as_a_loop_over_them_would():
    from server.strategy import LDPStrategy

    rng = np.random.default_rng(4)
    strategy = LDPStrategy(None, clients=30)
    strategy.nodes = {pid: [2**63 + 5, 17, 9][pid % 3] for pid in range(30)}  # Flower's node ids: any 64 bits
    for partitions in (range(30), rng.permutation(30)[:11].tolist(), []):
        expected: dict[int, list[int]] = {}
        for pid in partitions:
            expected.setdefault(strategy.nodes[pid], []).append(pid)
        grouped = strategy._grouped(partitions)
        assert {node: pids.tolist() for node, pids in grouped.items()} == expected
        assert strategy._hosts(partitions) == set(expected)

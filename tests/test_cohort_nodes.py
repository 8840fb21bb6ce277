"""Cohort nodes (spec: scale.md): K nodes host the N clients and train each round's
sampled clients at once, and every client's result depends on its own streams only.

Tolerances: for the same chunk size the per-client results are bit-identical for any K (each
client's rows of the batched kernels do not depend on the other rows here); across chunk sizes,
and against the per-client `train_local`, the float32 training differs by rounding only. The
updates are sums of E steps of lr * gradient with |gradient| <= ~1 per coordinate: a few float32
ulps of the weights (|w| <~ 1, ulp 6e-8) per step, so 1e-5 for E <= 10 is a rounding bound that a
wrong minibatch (a change of order lr * |gradient| ~ 1e-2) cannot meet.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from ldpfed.cli.main import app
from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.nodes import Layout, NodeReply, NodeSet, default_nodes, hosted, local_round
from ldpfed.protocols.session import World
from ldpfed.protocols.train import federated_data, new_model
from ldpfed.tasks import node_half, server_half, validated
from ldpfed.validation import LDPValueError

CLIENTS = 6
ROUNDING = 1e-5
runner = CliRunner()


NOISE_SEED = 3  # runs compared with each other get the same noise root, so the same noise


def train_config(**options) -> Config:
    base = {
        "task": "train",
        "clients": CLIENTS,
        "rounds": 2,
        "engine": "local",
        "seed": 3,
        "local-steps": 5,
        "mechanism": "laplace",
        "epsilon": 4.0,
        "partition": "dirichlet",
        "fraction": 0.7,
    }
    return validated(Config().with_options({**base, **options}))


def per_client_run(config: Config, nodes: int) -> dict:
    """{(round, pid): (privatized update, clean update)} of a local run with `nodes` nodes."""
    world = World.from_config(config, NOISE_SEED)
    half = server_half(config, world.data, world.server)
    node_set = NodeSet(
        Layout(config.federation.clients, nodes),
        lambda pids: node_half(config, pids, world.data, world.secrets_of(pids)),
    )
    noisy, clean = {}, {}
    original = half.aggregate

    def aggregate(server_round, replies, failures):
        noisy.update({(server_round, pid): reply.arrays["update"] for pid, reply in replies.items()})
        return original(server_round, replies, failures)

    half.aggregate = aggregate
    for server_round in (1, 2):
        local_round(half, node_set, server_round, lambda r, pid, values: clean.__setitem__((r, pid), values["clean"]))
    assert noisy.keys() == clean.keys()
    return {key: (noisy[key], clean[key]) for key in noisy}


# ---- placement ---------------------------------------------------------------------------------
def test_nodes_host_contiguous_blocks_covering_every_client_once():
    for clients, nodes in [(10, 3), (7, 7), (5, 1), (1000, 16)]:
        blocks = [hosted(node, nodes, clients) for node in range(nodes)]
        assert sorted(pid for block in blocks for pid in block) == list(range(clients))
        assert all(block == list(range(block[0], block[-1] + 1)) for block in blocks)
        layout = Layout(clients, nodes)
        sampled = sorted(np.random.default_rng(0).choice(clients, size=clients // 2, replace=False).tolist())
        groups = layout.group(sampled)
        assert all(set(pids) <= set(blocks[node]) for node, pids in groups.items())
        assert sorted(pid for pids in groups.values() for pid in pids) == sampled
    assert default_nodes(1000, 2) == 2 and default_nodes(3, 16) == 3


# ---- same per-client results for any K and any chunking ----------------------------------------
@pytest.mark.parametrize("task", ["train", "train-cnn", "mean"])
def test_per_client_results_do_not_depend_on_the_nodes(task):
    """train-cnn: a client alone in its chunk (nodes with one sampled client) trains beside a copy of
    itself, since torch's batched conv gradient rounds differently for a batch of one (fails by
    ~4e-8 without the copy)."""
    if task == "train-cnn":
        config = train_config(**{"chunk-clients": 2, "model": "cnn", "data": "digits", "mechanism": "none"})
    elif task == "train":
        config = train_config(**{"chunk-clients": 2})
    else:
        options = {"task": "mean", "clients": CLIENTS, "users": 120, "rounds": 2, "engine": "local", "seed": 3}
        config = validated(Config().with_options(options))
    runs = {
        nodes: per_client_run(config, nodes) if task.startswith("train") else _mean_replies(config, nodes)
        for nodes in (1, 2, CLIENTS)
    }
    assert runs[1].keys() == runs[2].keys() == runs[CLIENTS].keys() and runs[1]
    for key, values in runs[1].items():
        for nodes in (2, CLIENTS):
            for mine, theirs in zip(values, runs[nodes][key]):
                np.testing.assert_array_equal(mine, theirs)  # bit-identical (same chunk size)


def _mean_replies(config: Config, nodes: int) -> dict:
    world = World.from_config(config, NOISE_SEED)
    half = server_half(config, world.data, world.server)
    node_set = NodeSet(Layout(CLIENTS, nodes), lambda pids: node_half(config, pids, world.data, world.secrets_of(pids)))
    seen = {}
    original = half.aggregate

    def aggregate(server_round, replies, failures):
        seen.update({(server_round, pid): [reply.arrays["total"]] for pid, reply in replies.items()})
        return original(server_round, replies, failures)

    half.aggregate = aggregate
    for server_round in (1, 2):
        local_round(half, node_set, server_round)
    return seen


def test_other_chunk_sizes_differ_by_float32_rounding_only():
    runs = {chunk: per_client_run(train_config(**{"chunk-clients": chunk, "mechanism": "none"}), 2) for chunk in (1, 4)}
    differences = [np.max(np.abs(runs[1][key][1] - runs[4][key][1])) for key in runs[1]]
    assert 0 < len(differences) and max(differences) <= ROUNDING


@pytest.mark.float_portable
@pytest.mark.parametrize("model", ["cnn", "logreg"])
def test_a_client_trains_alike_alone_and_in_any_chunk(model):
    """CohortTrainer: client 1's parameters after 3 steps are the same bits alone, in a chunk of
    two and in a chunk of four, at the session's torch thread count (the portability run tries 1
    and 2). Alone it failed by ~1e-8 (CNN at 1 thread; every model at 2 threads): torch's batched
    gradient takes another kernel for a batch of one."""
    import torch

    from ldpfed.training.cohort import CohortTrainer, batch_plan
    from ldpfed.training.models import build_model

    shape = (1, 4, 4)
    network = build_model(model, shape, 10, seed=0)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 12, *shape, generator=generator)
    y = torch.randint(0, 10, (4, 12), generator=generator)
    start = [p.detach() for p in network.parameters()]
    trainer = CohortTrainer(network, torch.device("cpu"))
    index, weight = batch_plan([12] * 4, [11, 12, 13, 14], 3, 8, 8)
    runs = {}
    for chunk in ([1], [0, 1], [0, 1, 2, 3]):
        rows = torch.tensor(chunk)
        trained, _ = trainer.train(start, x, y, rows, index[rows], weight[rows], 0.3)
        runs[len(chunk)] = [p[chunk.index(1)] for p in trained]
    for size in (2, 4):
        assert all(torch.equal(mine, theirs) for mine, theirs in zip(runs[1], runs[size])), size
    assert any(not torch.equal(p, q) for p, q in zip(runs[1], start))  # it did train


def test_a_padded_chunk_returns_its_own_clients_results():
    """A trainer of chunk width 4 (the GPU's padding, forced here on the CPU) computes a short
    chunk at width 4 with copies of its first client and returns its own clients' rows: the same
    bits as those clients in a full chunk of four."""
    import torch

    from ldpfed.training.cohort import CohortTrainer, batch_plan
    from ldpfed.training.models import build_model

    shape = (1, 4, 4)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 12, *shape, generator=generator)
    y = torch.randint(0, 10, (4, 12), generator=generator)
    network = build_model("mlp", shape, 10, seed=0)
    start = [p.detach() for p in network.parameters()]
    index, weight = batch_plan([12] * 4, [11, 12, 13, 14], 3, 8, 8)
    full, full_losses = CohortTrainer(network, torch.device("cpu")).train(
        start, x, y, torch.arange(4), index, weight, 0.3
    )
    padded = CohortTrainer(network, torch.device("cpu"))
    padded.pad_to = 4
    rows = torch.tensor([2, 3])
    trained, losses = padded.train(start, x, y, rows, index[rows], weight[rows], 0.3)
    assert [p.shape[0] for p in trained] == [2] * len(trained) and losses.shape == (2, 3)
    assert all(torch.equal(mine, theirs[2:]) for mine, theirs in zip(trained, full))
    assert torch.equal(losses, full_losses[2:])


def train_local_update(
    config: Config, world: World, data, pid: int, server_round: int, model_seed: int, batch_size: int
):
    """Client pid's update by the per-client `train_local`: 5 steps of lr 0.1 from the model of
    `model_seed`, minibatches from the client's stream of `server_round`, on one thread."""
    from ldpfed.training.local import single_thread, train_local
    from ldpfed.training.parameters import flatten, get_weights

    model = new_model(config, world.data, model_seed)
    start = flatten(get_weights(model))
    with single_thread():
        train_local(
            model,
            *data.client(pid),
            steps=5,
            lr=0.1,
            batch_size=batch_size,
            seed=seeds.torch_seed(world.secret(pid), seeds.MINIBATCHES, server_round),
        )
    return flatten(get_weights(model)) - start


def test_a_cohort_client_takes_the_steps_of_train_local():
    """The batched steps are train_local's steps: same minibatch order (the client's stream),
    same SGD, per client (a shuffled order or a wrong padding weight fails by ~1e-2)."""
    from ldpfed.training.parameters import flatten, get_weights

    config = train_config(**{"mechanism": "none", "coordinate-clip": 10.0, "batch-size": 16, "partition": "iid"})
    world = World.from_config(config)
    pids = [0, 2, 5]
    node = node_half(config, pids, world.data, world.secrets_of(pids))
    start = flatten(get_weights(new_model(config, world.data, 7)))
    answer = node.reply(4, {"global": start}, pids)
    data = federated_data(config, world.data)
    for pid in pids:
        expected = train_local_update(config, world, data, pid, server_round=4, model_seed=7, batch_size=16)
        assert np.max(np.abs(answer.replies[pid].arrays["update"] - expected)) <= ROUNDING
        assert np.max(np.abs(expected)) > 100 * ROUNDING  # the clients did move


def test_clients_smaller_than_a_batch_train_on_their_own_rows():
    """A client with n_k < batch-size uses batches of n_k (padding rows weigh 0), as train_local."""
    from ldpfed.training.parameters import flatten, get_weights

    options = {"clients": 600, "mechanism": "none", "coordinate-clip": 10.0, "partition": "iid", "batch-size": 32}
    config = train_config(**options)
    world = World.from_config(config)
    data = federated_data(config, world.data)
    small = [pid for pid in range(600) if data.client_sizes[pid] < 3][:2]
    assert small
    node = node_half(config, small, world.data, world.secrets_of(small))
    start = flatten(get_weights(new_model(config, world.data, 1)))
    answer = node.reply(1, {"global": start}, small)
    for pid in small:
        expected = train_local_update(config, world, data, pid, server_round=1, model_seed=1, batch_size=32)
        assert np.max(np.abs(answer.replies[pid].arrays["update"] - expected)) <= ROUNDING


# ---- failures: a client, not its node ----------------------------------------------------------
def test_a_failing_client_fails_alone_and_its_node_replies_for_the_others():
    config = train_config(**{"fail-clients": "1", "fraction": 1.0})
    world = World.from_config(config)
    pids = [0, 1, 2]
    node = node_half(config, pids, world.data, world.secrets_of(pids))
    start = flatten_start(config, world)
    answer = node.reply(1, {"global": start}, pids)
    assert sorted(answer.replies) == [0, 2]
    assert list(answer.failures) == [1] and "InjectedFailure" in answer.failures[1]


def flatten_start(config, world):
    from ldpfed.training.parameters import flatten, get_weights

    return flatten(get_weights(new_model(config, world.data)))


def test_a_node_reply_record_round_trips_per_client_replies_and_failures():
    from ldpfed.protocols.base import ClientReply
    from wire.records import node_reply_record, read_node_reply

    rows = np.random.default_rng(0).normal(size=(2, 5))
    answer = NodeReply(
        {
            4: ClientReply({"update": rows[0]}, {"num-examples": 7}),
            9: ClientReply({"update": rows[1]}, {"num-examples": 3}),
        },
        {5: "InjectedFailure: x"},
    )
    replies, failures = read_node_reply(node_reply_record(answer))
    assert failures == {5: "InjectedFailure: x"}
    assert sorted(replies) == [4, 9]
    np.testing.assert_array_equal(replies[9].arrays["update"], rows[1])
    assert replies[4].metrics["num-examples"] == 7
    empty_replies, empty_failures = read_node_reply(node_reply_record(NodeReply({}, {1: "e"})))
    assert empty_replies == {} and empty_failures == {1: "e"}


def test_a_batched_nodes_columns_make_the_record_its_clients_replies_make():
    """A node that answers with columns (`Replies`) sends the same record as its clients' replies
    one by one would, and the server reads columns back (no object per client on either side)."""
    from ldpfed.protocols.base import ClientReply
    from ldpfed.protocols.nodes import Replies
    from wire.records import node_reply_record, read_node_reply

    rows, users = np.random.default_rng(1).normal(size=(3, 2, 4)), np.array([5, 6, 7])
    columns = Replies([2, 5, 8], {"users": users}, {"sum": rows})
    one_by_one = {pid: ClientReply({"sum": rows[i]}, {"users": int(users[i])}) for i, pid in enumerate([2, 5, 8])}
    record, reference = node_reply_record(NodeReply(columns, {})), node_reply_record(NodeReply(one_by_one, {}))
    assert dict(record["metrics"]) == dict(reference["metrics"])
    for name in ("client-ids", "sum"):
        np.testing.assert_array_equal(record[name].to_numpy_ndarrays()[0], reference[name].to_numpy_ndarrays()[0])
    replies, _ = read_node_reply(record)
    assert isinstance(replies, Replies) and list(replies) == [2, 5, 8]
    np.testing.assert_array_equal(replies.arrays["sum"], rows)
    assert replies[5].metrics == {"users": 6} and np.array_equal(replies[8].arrays["sum"], rows[2])
    # a node whose clients all failed replies with no columns; the round's joined replies keep the others'
    nobody, _ = read_node_reply(node_reply_record(NodeReply({}, {1: "InjectedFailure: x"})))
    both = Replies.joined([nobody, replies])
    assert list(both) == [2, 5, 8] and both[2].metrics == {"users": 5}


# ---- devices -----------------------------------------------------------------------------------
@pytest.fixture
def no_gpu(monkeypatch):
    """A machine without CUDA, also where the tests run on one (the checks need no real GPU)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_device_auto_is_cpu_without_a_gpu_and_cuda_without_one_is_refused(no_gpu):
    from ldpfed.training.cohort import resolve_device

    assert resolve_device("auto").type == "cpu"
    with pytest.raises(LDPValueError, match="cuda"):
        resolve_device("cuda")


@pytest.mark.parametrize(
    "flags",
    [
        ["--device", "cuda"],
        ["--gpus-per-node", "0.5"],
        ["--device", "tpu"],
        ["--nodes", "11"],
        ["--chunk-clients", "-1"],
    ],
)
def test_bad_device_and_node_options_are_one_line_and_exit_2(tmp_path, flags, no_gpu):
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["simulate", "--task", "train", "--engine", "local", "--clients", "10", "--out", str(out), *flags]
    )
    assert result.exit_code == 2, result.output
    assert "error" in result.output.lower() and "Traceback" not in result.output
    assert not out.exists() or not any(out.iterdir())


def test_chunk_size_is_bounded_by_the_memory_budget():
    from ldpfed.training.cohort import chunk_size

    config = train_config(model="cnn")
    model = new_model(config, World.from_config(config).data)
    shape = federated_data(config, World.from_config(config).data).input_shape
    small, large = chunk_size(model, shape, 32, budget=2**20), chunk_size(model, shape, 32, budget=2**30)
    assert 1 <= small < large


# ---- under Flower ------------------------------------------------------------------------------
@pytest.mark.slow  # a Ray federation: tens of seconds
def test_flower_runs_with_1_and_n_nodes_agree():
    """Flower with N nodes (one client each) gives the local engine's run with 1 node, key for key:
    the local engine runs the same node halves without Flower and its results do not depend on K
    (tests above), so a client mapped to the wrong Flower node, lost or run twice shows up here.
    Flower with 2 nodes equals the local engine in test_node_reply_sum.py (train, summed replies),
    test_client_app_cache.py (mean) and test_train_aggregation.py (train, as many nodes as CPUs)."""
    from simulations.federation import run

    options = {"rounds": 1, "fail-clients": "4"}
    local = run(train_config(nodes=1, **options), noise_seed=NOISE_SEED)
    summary = run(train_config(engine="flower", nodes=CLIENTS, **options), noise_seed=NOISE_SEED)
    assert summary["engine"] == "flower"
    for key in ("final_loss", "mean_measured_squared_distance", "clients_replied_total", "failure_reasons"):
        assert summary[key] == local[key], key
    assert local["clients_replied_total"] >= 3


def test_a_client_whose_privatization_fails_fails_alone_and_the_others_keep_their_noise():
    """The node privatizes a chunk in one batched call; when it raises (here: for client 1's
    generator), each row is privatized again alone from a fresh generator of its stream, so the
    other clients' replies are bit for bit those of a run without the failure."""
    config = train_config(**{"fraction": 1.0, "chunk-clients": 3})
    world = World.from_config(config)
    pids = [0, 1, 2]
    start = flatten_start(config, world)
    expected = node_half(config, pids, world.data, world.secrets_of(pids)).reply(1, {"global": start}, pids)
    node = node_half(config, pids, world.data, world.secrets_of(pids))
    poisoned = seeds.rng(world.secret(1), seeds.NOISE, 1).bit_generator.state
    honest = node.privatizer

    class Failing:
        def __getattr__(self, name):
            return getattr(honest, name)

        def privatize_rows(self, updates, rngs, broadcast=None):
            if any(rng.bit_generator.state == poisoned for rng in rngs):
                raise RuntimeError("privatization of client 1 failed")
            return honest.privatize_rows(updates, rngs, broadcast)

    node.privatizer = Failing()
    answer = node.reply(1, {"global": start}, pids)
    assert list(answer.failures) == [1] and "privatization of client 1 failed" in answer.failures[1]
    assert sorted(answer.replies) == [0, 2]
    for pid in (0, 2):
        np.testing.assert_array_equal(answer.replies[pid].arrays["update"], expected.replies[pid].arrays["update"])


def test_privatization_blocks_do_not_change_a_clients_noise(monkeypatch):
    """A chunk is privatized in calls of at most PRIVATIZE_BLOCK values; one row per call gives
    every client the same reply bit for bit (each row from its own generator)."""
    import ldpfed.protocols.train as train

    config = train_config(**{"fraction": 1.0, "chunk-clients": 5, "mechanism": "piecewise", "report-dims": 7})
    world = World.from_config(config)
    pids = [0, 1, 2, 3, 4]
    start = flatten_start(config, world)
    whole = node_half(config, pids, world.data, world.secrets_of(pids)).reply(1, {"global": start}, pids)
    monkeypatch.setattr(train, "PRIVATIZE_BLOCK", 1)
    rows = node_half(config, pids, world.data, world.secrets_of(pids)).reply(1, {"global": start}, pids)
    assert sorted(rows.replies) == pids
    for pid in pids:
        np.testing.assert_array_equal(rows.replies[pid].arrays["update"], whole.replies[pid].arrays["update"])

"""A tuple round at scale without an object per client: the clients' secrets spawned in one compiled
pass (numpy's SeedSequence, bit for bit), a mean node's clients built from columns replying what
each client replies alone, several nodes' replies added up client after client without joining
them, and the harness's diagnostics computed once per run equal to those computed afresh."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from helpers import assert_same

from ldpfed.analysis import predict
from ldpfed.config import Config
from ldpfed.protocols import diagnostics, mean, seeds
from ldpfed.protocols.nodes import Layout, Replies
from ldpfed.samplers.streams import StreamKeys, spawned_words
from ldpfed.tasks.run import node_half

ROOTS = [0, 1, 2**32 + 3, 2**127 + 99, (1 << 200) + 7]  # one word, two, four, beyond the pool


def numpy_entropy(root: int, pid: int) -> int:
    """The secret as `seeds._entropy` drew it, one SeedSequence per client."""
    words = np.random.SeedSequence(root, spawn_key=(seeds.CLIENTS, pid)).generate_state(4)
    return sum(int(word) << (32 * i) for i, word in enumerate(words))


@pytest.mark.parametrize("root", ROOTS)
def test_spawned_words_are_numpy_seedsequence_children(root):
    keys = np.array([[2, 0], [2, 1], [7, 2**32 - 1], [0, 12345]], dtype=np.uint32)
    expected = [np.random.SeedSequence(root, spawn_key=tuple(int(w) for w in key)).generate_state(6) for key in keys]
    assert np.array_equal(spawned_words(root, keys, 6), np.array(expected))


def test_client_secrets_equal_one_seedsequence_per_client():
    secrets = seeds.client_secrets(2**127 + 99, 40)
    assert len(secrets) == 40 and list(secrets) == list(range(40))
    assert dict(secrets) == {pid: numpy_entropy(2**127 + 99, pid) for pid in range(40)}
    part = secrets.restricted([31, 5, 7])
    assert list(part) == [5, 7, 31] and part[31] == secrets[31] and 6 not in part and 7 in part
    with pytest.raises(KeyError):
        part[6]
    assert dict(pickle.loads(pickle.dumps(part))) == dict(part)
    keys = StreamKeys.from_words(secrets.words_of([3, 9]))  # the words premix as the ints do
    assert np.array_equal(keys.mixers, StreamKeys([secrets[3], secrets[9]]).mixers)
    fresh = seeds.ClientSecrets.fresh(range(3))
    assert len(set(fresh.values())) == 3 and all(0 <= value < 2**128 for value in fresh.values())


def test_spawned_secrets_pickle_as_their_root_and_spawn_a_block_alone():
    """The ClientApp carrying the secrets is pickled with every message: the secrets travel as the
    root and the count (bytes independent of the clients), and a node's block is that of the
    whole federation, spawned without the rest."""
    root = 2**127 + 99
    whole = seeds.client_secrets(root, 100_000)
    assert len(pickle.dumps(whole)) < 256
    block = pickle.loads(pickle.dumps(whole)).restricted(range(99_990, 100_000))
    assert dict(block) == {pid: numpy_entropy(root, pid) for pid in range(99_990, 100_000)}
    assert np.array_equal(seeds.client_secrets(root, 100_000).words[99_990:], block.words)
    assert whole[12] == numpy_entropy(root, 12) and 100_000 not in whole and -1 not in whole


@pytest.mark.parametrize("partitions", [range(0), range(5), range(3, 40, 7), [4, 1, 9], np.array([2, 3])])
def test_id_array_makes_the_ids_numpy_makes(partitions):
    ids = seeds.id_array(partitions)
    assert ids.dtype == np.int64 and np.array_equal(ids, np.asarray(list(partitions), dtype=np.int64))


def mean_config(**options) -> Config:
    values = {"task": "mean", "engine": "local", "users": 50, "clients": 20, "dims": 5, "mechanism": "laplace"}
    return Config().with_options({**values, **options}).validated()


@pytest.mark.parametrize("options", [{"report-dims": 2, "fail-clients": "3,12"}, {"node-reply": "sum"}])
def test_a_node_built_from_columns_replies_what_each_client_replies_alone(options):
    """20 clients of 2-3 users (two cohort sizes), ids 2..16 on the node; the whole block as a
    range (a round without a budget), a subset, and secrets as a dict instead of words."""
    config = mean_config(**options)
    data_seed, pids = seeds.data_seed(0), list(range(2, 17))
    secrets = seeds.client_secrets(11, 20).restricted(pids)
    node = node_half(config, pids, data_seed, secrets)
    from_dict = node_half(config, pids, data_seed, dict(secrets))
    assert node._batch is not None and from_dict._batch is not None
    for server_round, asked in [(1, range(2, 17)), (2, pids[::3])]:
        slow = node.one_by_one(server_round, {}, list(asked))
        assert_same(node.reply(server_round, {}, asked), slow)
        assert_same(from_dict.reply(server_round, {}, list(asked)), slow)


@pytest.mark.parametrize(
    "options",
    [
        {"mechanism": "laplace"},  # every attribute reported: the histogram encoding's one-call path
        {"mechanism": "laplace", "report-dims": 1, "fail-clients": "4"},
        {"mechanism": "oue", "node-reply": "sum"},
    ],
)
def test_a_frequency_node_built_from_columns_replies_what_each_client_replies_alone(options):
    """The frequency task's batch from columns (`FrequencyClients.of_config`) against each client's
    own half replying alone, bit for bit."""
    values = {"task": "frequency", "engine": "local", "users": 50, "clients": 20, "dims": 2, "categories": "3,4"}
    config = Config().with_options({**values, **options}).validated()
    data_seed, pids = seeds.data_seed(0), list(range(2, 17))
    node = node_half(config, pids, data_seed, seeds.client_secrets(5, 20).restricted(pids))
    assert node._batch is not None
    for server_round, asked in [(1, range(2, 17)), (2, pids[::3])]:
        assert_same(node.reply(server_round, {}, asked), node.one_by_one(server_round, {}, list(asked)))


@pytest.mark.parametrize("width", [1, 3])
def test_replies_of_several_nodes_add_up_client_after_client(width):
    rng = np.random.default_rng(width)
    sizes = [4, 0, 7, 1]
    starts = np.cumsum([0, *sizes])
    blocks = [rng.standard_normal((size, width)) * np.exp(5 * rng.standard_normal((size, 1))) for size in sizes]
    parts = [
        Replies(np.arange(starts[i], starts[i + 1]), {"users": np.ones(size, int)}, {"t": blocks[i]})
        for i, size in enumerate(sizes)
    ]
    replies = Replies.joined(parts)
    expected = np.zeros(width)
    for row in np.concatenate(blocks):  # the server adding the replies one by one
        expected = expected + row
    assert np.array_equal(replies.total("t", width), expected)
    assert np.array_equal(replies.arrays["t"], np.concatenate(blocks))  # joined when read
    assert np.array_equal(replies[5].arrays["t"], blocks[2][1]) and replies.total("t", width).shape == (width,)


def test_a_plan_of_every_client_gives_each_node_its_block():
    layout = Layout(10, 3)
    fast, slow = layout.group(range(10)), layout.group(list(range(10)))
    assert {node: list(pids) for node, pids in fast.items()} == slow
    assert layout.group(range(4)) == layout.group([0, 1, 2, 3])  # not every client: lists


def fresh_mean_figures(outcome, data, config) -> dict:
    """The diagnostics as computed before they were kept per run: the replying users' rows joined,
    their truth, and the prediction from their values."""
    rows = np.concatenate(
        [mean.cohort(config.data.users, config.federation.clients, pid) for pid in outcome.partitions]
    )
    values, m = data[rows], config.privacy.report_dims or config.data.dims
    prediction = predict(
        config.privacy.mechanism,
        config.privacy.epsilon,
        len(rows),
        config.data.dims,
        m,
        values,
        counts=outcome.sums.count,
    )
    truth = values.mean(axis=0)
    return {
        "mse": float(np.mean((outcome.estimates[config.aggregation.aggregator] - truth) ** 2)),
        "mse_plain_mean": float(np.mean((outcome.theta_hat - truth) ** 2)),
        "predicted_mse": float(prediction.mse),
        "predicted_noise": float(np.mean(prediction.deviation_model().sigma ** 2)),
    }


@pytest.mark.parametrize("m", [3, 5])  # m = d: the same report counts every round (the prediction kept)
def test_diagnostics_kept_per_run_equal_fresh_ones(m):
    """Every client, then some failing, then every client twice (the second round's prediction
    kept from the first): each round's figures equal those computed afresh (no figure of another
    set of users carried over)."""
    config = mean_config(**{"report-dims": m})
    data_seed = seeds.data_seed(0)
    data, cohorts = mean.tuples(config, data_seed), mean.Cohorts(50, 20)
    secrets = seeds.client_secrets(3, 20)
    for server_round, failing in enumerate(["", "1,4,19", "", ""], start=1):
        failed = config if not failing else mean_config(**{"report-dims": m, "fail-clients": failing})
        server = mean.server_from_config(failed)
        node = node_half(failed, range(20), data_seed, secrets)
        answer = node.reply(server_round, {}, range(20))
        server.configure_round(server_round)
        server.aggregate(server_round, answer.replies, answer.failures)
        assert diagnostics.mean_round(server.outcome, data, cohorts, failed) == fresh_mean_figures(
            server.outcome, data, failed
        )


def test_streams_seeded_again_in_place_equal_fresh_ones():
    keys = StreamKeys.from_words(seeds.client_secrets(9, 30).words)
    spent = keys.streams((0, 1, 0))
    spent.uniforms(3)  # drawn from, as a round does
    again = keys.streams((0, 2, 0), into=spent)
    assert again is spent and np.array_equal(again.states, keys.streams((0, 2, 0)).states)
    assert np.array_equal(again.uniforms(2), keys.streams((0, 2, 0)).uniforms(2))
    assert keys.streams((0, 2, 0), into=keys.take(np.arange(5)).streams((0, 1, 0))) is not spent  # other rows: new

"""A node's tuple clients answering together (one batched pass, ldpfed.protocols.mean.BatchedClients)
reply bit for bit what each client replies alone: the same streams drawn in the same order, the
same additions; the server's view (replies as columns, the round record, the ledger) is the same."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same

from ldpfed.accounting import pure_round
from ldpfed.frequency.categorical import AttributeOracles
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.protocols.frequency import FrequencyClient
from ldpfed.protocols.mean import MeanClient, MeanServer, cohort_rows
from ldpfed.protocols.nodes import ClientsNode, Replies, joined


def mean_halves(name: str, users: int, clients: int, dims: int, m: int, seed: int = 0) -> list[MeanClient]:
    rng = np.random.default_rng(seed)
    data = rng.uniform(-1, 1, (users, dims))
    mechanism = per_value_mechanism(name, 2.0, m)
    blocks = np.array_split(np.arange(users), clients)
    secret = rng.integers(0, 2**62, clients)
    return [MeanClient(data[b], mechanism, m, int(secret[i]), fail=i == 1) for i, b in enumerate(blocks)]


@pytest.mark.parametrize(
    "name, users, clients, dims, m",
    [
        ("laplace", 40, 40, 5, 2),  # one user per client, m < d
        ("laplace", 23, 7, 4, 4),  # 3-4 users per client (two cohort sizes), m = d
        ("piecewise", 50, 9, 6, 3),
        ("duchi", 12, 4, 3, 1),  # no compiled sampler: each row from a Generator in its state
    ],
)
@pytest.mark.parametrize("summing", [False, True])
def test_mean_clients_together_equal_each_alone(name, users, clients, dims, m, summing):
    halves = mean_halves(name, users, clients, dims, m)
    node = ClientsNode(halves.__getitem__, summing=summing)
    pids = list(range(clients))
    batch = node.batched(pids)
    assert batch is not None
    for server_round in (1, 2):
        assert_same(batch.reply(server_round, {}, pids, summing), node.one_by_one(server_round, {}, pids))
    subset = pids[::2]  # a sampled round asks for some clients only
    assert_same(batch.reply(3, {}, subset, summing), node.one_by_one(3, {}, subset))


@pytest.mark.parametrize(
    "name, categories, m", [("oue", [3, 4, 2], 2), ("laplace", [3, 3], 2), ("piecewise", [2, 5], 2)]
)
def test_frequency_clients_together_equal_each_alone(name, categories, m):
    rng = np.random.default_rng(1)
    users, clients = 30, 8
    codes = np.stack([rng.integers(0, k, users) for k in categories], axis=1)
    oracles = AttributeOracles.build(name, 2.0, categories, m)
    blocks = np.array_split(np.arange(users), clients)
    secrets = rng.integers(0, 2**62, clients)
    halves = [FrequencyClient(codes[b], oracles, int(secrets[i]), fail=i == 2) for i, b in enumerate(blocks)]
    node = ClientsNode(halves.__getitem__)
    pids = list(range(clients))
    assert_same(node.batched(pids).reply(4, {}, pids, False), node.one_by_one(4, {}, pids))


def test_grr_clients_answer_one_by_one():
    oracles = AttributeOracles.build("grr", 2.0, [3, 3], 1)
    halves = [FrequencyClient(np.zeros((2, 2), dtype=int), oracles, i) for i in range(3)]
    assert ClientsNode(halves.__getitem__).batched([0, 1, 2]) is None


def test_the_server_sees_the_same_round_from_columns_as_from_replies():
    """The server's aggregate of the batched node's columns equals that of per-client replies:
    the same estimate bit for bit, the same round record and the same ledger."""
    halves = mean_halves("laplace", 60, 12, 4, 2, seed=3)
    node = ClientsNode(halves.__getitem__)
    pids = list(range(12))
    fast, slow = node.batched(pids).reply(1, {}, pids, False), node.one_by_one(1, {}, pids)
    assert isinstance(fast.replies, Replies)
    records, outcomes, ledgers = [], [], []
    for replies in (joined([fast.replies]), dict(slow.replies)):
        server = MeanServer(halves[0].mechanism, 4, 12, ["mean"], round_event=pure_round(2.0), mechanism_name="laplace")
        server.configure_round(1)
        records.append(server.aggregate(1, replies, dict(fast.failures)))
        outcomes.append(server.outcome)
        ledgers.append(server.ledger.totals_csv())
    assert records[0] == records[1] and records[0]["failed_partitions"] == "1"
    assert np.array_equal(outcomes[0].theta_hat, outcomes[1].theta_hat)
    assert outcomes[0].partitions == outcomes[1].partitions
    assert ledgers[0] == ledgers[1]


def test_cohort_rows_are_the_cohorts_joined():
    from ldpfed.protocols.mean import cohort

    for users, clients in [(10, 3), (1000, 7), (7, 7)]:
        pids = [0, 2, clients - 1]
        expected = np.concatenate([cohort(users, clients, pid) for pid in pids])
        assert np.array_equal(cohort_rows(users, clients, pids), expected)

"""`node-reply sum` (spec: scale.md, Design): a train node replies with its clients'
count-weighted sum of privatized updates and each client's count; the server adds the nodes' sums.
Where the protocol allows it (aggregator mean or fedavg) the run must equal the per-client replies'
run up to the float rounding of the summation order; elsewhere it is refused (exit 2).

Tolerance. Both modes train and privatize every client identically (the same streams; the nodes'
work does not depend on the reply mode), and differ only in how sum_k n_k u_k / sum_k n_k is
added up: one dot product over the clients, or per node over its chunks and then over the nodes.
Each is a sum of at most N terms, so each differs from the exact mean by at most N u max_k |u_k|
(u = 2^-53), and the global weights of the two runs by at most 2 N u max|u_k| per round plus the
rounding of w + step (u |w|). `model_tolerance` is that bound with a factor 4 of room: about
1e-15, far below any effect of a wrong weighting, a lost or doubled client (~ 1/N of an update,
here >= 1e-4). The next round trains from the float32 cast of the weights; a difference of 1e-15
changes a float32 rounding with probability ~ 1e-15 / 6e-8 per coordinate, so the runs' later
rounds agree to the same bound in practice. Summary numbers (losses, accuracies, distances)
are compared to rtol 1e-9.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import ldpfed

from ldpfed.config import Config
from ldpfed.protocols.nodes import Layout, NodeSet, local_round
from ldpfed.protocols.session import World
from ldpfed.tasks import node_half, server_half, validated
from ldpfed.validation import LDPValueError
from tests.conftest import run_collecting_rows

CLIENTS, NODES, ROUNDS = 6, 2, 3
SUMMARY_KEYS = (
    "final_loss",
    "final_accuracy",
    "best_accuracy",
    "mean_measured_squared_distance",
    "mean_predicted_squared_distance",
    "mean_applied_squared_distance",
    "mean_cosine_to_clean",
    "mean_leading_energy_share",
    "noise_measured_over_predicted",
    "epsilon_spent_max_per_client",
)
NOISE_SEED = 5  # both runs of a comparison get the same noise root, so the same noise
EXACT_KEYS = ("clients_replied_total", "clients_failed_total", "failure_reasons", "rounds_finished")


def train_config(reply: str, **options) -> Config:
    base = {
        "task": "train",
        "clients": CLIENTS,
        "nodes": NODES,
        "rounds": ROUNDS,
        "engine": "local",
        "seed": 5,
        "local-steps": 3,
        "mechanism": "laplace",
        "epsilon": 4.0,
        "fraction": 0.7,
        "partition": "dirichlet",
        "chunk-clients": 2,
        "fail-clients": "4",
        "max-epsilon": 8.0,
        "node-reply": reply,
    }
    return validated(Config().with_options({**base, **options}))


def global_model(config: Config) -> tuple[np.ndarray, float, dict]:
    """(final global weights, largest |privatized update| seen, per-client ledger totals) of a local run."""
    world = World.from_config(config, NOISE_SEED)
    half = server_half(config, world.data, world.server)
    nodes = NodeSet(Layout(CLIENTS, NODES), lambda pids: node_half(config, pids, world.data, world.secrets_of(pids)))
    largest = 0.0
    for server_round in range(1, ROUNDS + 1):
        local_round(half, nodes, server_round)
        if half.outcome is not None and half.outcome.updates is not None:
            largest = max(largest, float(np.max(np.abs(half.outcome.updates))))
    spent = {pid: half.ledger.spent(pid).epsilon for pid in range(CLIENTS)}
    return half.weights, largest, spent


def model_tolerance(weights: np.ndarray, largest_update: float) -> float:
    """4 x (2 N u max|u| + u max|w|) per round (module docstring)."""
    u = 2.0**-53
    return 4.0 * ROUNDS * (2 * CLIENTS * u * largest_update + u * float(np.max(np.abs(weights))))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"aggregator": "fedavg", "mechanism": "piecewise", "report-dims": 5},
        {"aggregator": "fedavg", "mechanism": "inid-gaussian", "delta": 1e-5, "max-epsilon": 0.0, "accountant": "rdp"},
        {"perturbation": "ldpvec", "mechanism": "duchi", "max-epsilon": 0.0},
    ],
)
def test_sum_replies_give_the_per_client_replies_global_model(options):
    clients_weights, largest, clients_spent = global_model(train_config("clients", **options))
    sum_weights, _, sum_spent = global_model(train_config("sum", **options))
    tolerance = model_tolerance(clients_weights, largest)
    difference = float(np.max(np.abs(sum_weights - clients_weights)))
    assert difference <= tolerance, (difference, tolerance)
    assert largest > 1e9 * tolerance  # the clients' updates are far above the bound: it is not vacuous
    assert sum_spent == clients_spent  # the per-client ledger is unchanged


def test_sum_replies_give_the_per_client_replies_summary_local_engine():
    (clients_summary, clients_rows), (sum_summary, sum_rows) = (
        run_collecting_rows(train_config(reply), noise_seed=NOISE_SEED) for reply in ("clients", "sum")
    )
    assert_same_run(clients_summary, sum_summary)
    assert clients_summary["clients_failed_total"] >= 1  # the failing client failed alone
    for column in (
        "cosine_to_clean",
        "leading_energy_share",
        "measured_squared_distance",
        "train_loss",
        "predicted_noise",
    ):
        np.testing.assert_allclose(sum_rows[column], clients_rows[column], rtol=1e-9, err_msg=column)
    assert "clients_stopped_by_budget" in sum_rows and sum_rows["clients_stopped_by_budget"].sum() > 0
    np.testing.assert_array_equal(sum_rows["clients_stopped_by_budget"], clients_rows["clients_stopped_by_budget"])
    # the re-calibration's deviation model needs each client's update: not computed from sums
    assert sum_rows["deviation_variance_trace"].isna().all() and clients_rows["deviation_variance_trace"].notna().any()


def assert_same_run(expected: dict, actual: dict) -> None:
    for key in EXACT_KEYS:
        assert actual[key] == expected[key], key
    for key in SUMMARY_KEYS:
        if expected[key] is None:
            assert actual[key] is None, key
        else:
            assert math.isclose(actual[key], expected[key], rel_tol=1e-9), (key, actual[key], expected[key])


@pytest.mark.parametrize(
    "task, options",
    [("mean", {"aggregator": "hdr4me", "users": 600, "dims": 4}), ("frequency", {"users": 600, "dims": 2})],
)
def test_tuple_task_sum_replies_give_the_per_client_replies_summary(task, options):
    """The tuple tasks: a node adds up its clients' report sums (any aggregator: the server only
    ever adds them); the same estimates to rtol 1e-9 (sums of <= N rounded terms, reordered)."""
    runs = {}
    for reply in ("clients", "sum"):
        config = (
            Config()
            .with_options(
                {
                    "task": task,
                    "clients": CLIENTS,
                    "nodes": NODES,
                    "rounds": 2,
                    "engine": "local",
                    "seed": 5,
                    "epsilon": 1.0,
                    "fail-clients": "4",
                    "max-epsilon": 1.5,
                    "node-reply": reply,
                    **options,
                }
            )
            .validated()
        )
        runs[reply] = run_collecting_rows(config, noise_seed=NOISE_SEED)
    (clients_summary, clients_rows), (sum_summary, sum_rows) = runs["clients"], runs["sum"]
    for key in EXACT_KEYS + ("epsilon_spent_max_per_client",):
        assert sum_summary[key] == clients_summary[key], key
    assert clients_summary["clients_failed_total"] >= 1 and sum_rows["clients_stopped_by_budget"].sum() > 0
    for column in ("mse", "mse_plain_mean", "predicted_mse", "users_reported"):
        np.testing.assert_allclose(sum_rows[column], clients_rows[column], rtol=1e-9, err_msg=column)


def test_a_summing_node_sends_no_clients_update():
    """What leaves a summing node: its clients' ids and counts, its failures, and one d-vector, the
    count-weighted sum of the privatized updates it would otherwise send (equal up to the
    summation's rounding: 2 k u sum_k |n_k u_k| per coordinate for k clients)."""
    from ldpfed.protocols.train import new_model
    from ldpfed.training.parameters import flatten, get_weights
    from wire.records import node_reply_record, read_node_reply, read_node_sum

    pids, answers = [0, 1, 2, 3], {}
    for reply in ("clients", "sum"):
        config = train_config(reply, **{"fail-clients": "1"})
        world = World.from_config(config, NOISE_SEED)
        node = node_half(config, pids, world.data, world.secrets_of(pids))
        answers[reply] = node_reply_record(
            node.reply(1, {"global": flatten(get_weights(new_model(config, world.data)))}, pids)
        )
    per_client, _ = read_node_reply(answers["clients"])
    replies, failures = read_node_reply(answers["sum"])
    assert sorted(replies) == [0, 2, 3] and list(failures) == [1] and "InjectedFailure" in failures[1]
    assert all(reply.arrays == {} for reply in replies.values())
    assert set(answers["sum"].array_records) == {"client-ids", "summed", "metrics"}  # metrics: columns
    assert set(answers["sum"]["metrics"]) == {"num-examples"}  # the clients' counts, no update of any client
    counts = {pid: reply.metrics["num-examples"] for pid, reply in replies.items()}
    assert counts == {pid: reply.metrics["num-examples"] for pid, reply in per_client.items()}
    terms = np.stack([counts[pid] * per_client[pid].arrays["update"] for pid in sorted(counts)])
    bound = 2 * len(counts) * 2.0**-53 * np.abs(terms).sum(axis=0)
    assert np.all(np.abs(read_node_sum(answers["sum"])["update"] - terms.sum(axis=0)) <= bound)
    assert read_node_sum(answers["clients"]) == {}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"aggregator": "hdr4me"}, "node-reply sum needs --aggregator mean or fedavg"),
        ({"aggregator": "james-stein"}, "re-calibrates"),
        ({"node-reply": "rows"}, "node-reply"),
    ],
)
def test_sum_is_refused_where_the_server_needs_each_client(options, message):
    with pytest.raises(LDPValueError, match=message):
        train_config("sum", **options)


def test_cli_refuses_sum_with_a_recalibrating_aggregator_in_one_line(tmp_path):
    out = tmp_path / "run"
    result = ldpfed("simulate --task train --engine local --clients 4 --aggregator hdr4me --node-reply sum --out", out)
    assert result.exit_code == 2, result.output
    assert "node-reply sum needs --aggregator mean or fedavg" in result.output and "Traceback" not in result.output
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow  # two Ray federations: about a minute and a half
def test_sum_replies_give_the_per_client_replies_summary_under_flower():
    """Flower: the summed reply travels as a record of its own (wire/records.py) and the
    strategy hands the nodes' sums to the server half; train and the mean task. Each Flower run
    with summed replies is compared with the local engine's run with per-client replies: the local
    engine runs the same halves (the tests above equate its two reply modes; the Flower tests of
    test_train_aggregation and test_cohort_nodes equate the engines), so a sum lost, doubled or
    misrouted by Flower's records changes the model and the distances far beyond rtol 1e-9."""
    from simulations.federation import run

    clients_summary = run(train_config("clients", rounds=2), noise_seed=NOISE_SEED)
    sum_summary = run(train_config("sum", engine="flower", rounds=2), noise_seed=NOISE_SEED)
    assert_same_run(clients_summary, sum_summary)
    assert sum_summary["engine"] == "flower" and clients_summary["engine"] == "local"
    mean = {
        "task": "mean",
        "clients": CLIENTS,
        "nodes": NODES,
        "rounds": 2,
        "seed": 5,
        "users": 300,
        "dims": 3,
        "aggregator": "hdr4me",
        "fail-clients": "4",
    }
    clients_summary, sum_summary = (
        run(validated(Config().with_options({**mean, "engine": engine, "node-reply": reply})), noise_seed=NOISE_SEED)
        for engine, reply in (("local", "clients"), ("flower", "sum"))
    )
    for key in EXACT_KEYS:
        assert sum_summary[key] == clients_summary[key], key
    for key in ("final_mse", "final_mse_plain_mean", "mean_mse_over_rounds"):
        assert math.isclose(sum_summary[key], clients_summary[key], rel_tol=1e-9), key


# ---- reply size (wire/records.py) -----------------------------------------------------------
def big_answer(clients: int = 4, dims: int = 8192):
    from ldpfed.protocols.base import ClientReply
    from ldpfed.protocols.nodes import NodeReply

    rows = np.random.default_rng(0).normal(size=(clients, dims))
    return NodeReply(
        {pid: ClientReply({"update": rows[pid]}, {"num-examples": 5}) for pid in range(clients)},
        {clients: "InjectedFailure: x"},
    )


def test_a_reply_beyond_the_message_limit_travels_in_chunks_below_it(monkeypatch):
    """With an artificial limit of 64 KiB and Flower's chunks at 16 KiB, a 256 KiB reply passes,
    and every object Flower actually sends for it (its deflated objects) is within the limit."""
    import flwr.app.message.array as flower_array
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    import wire.records as records

    monkeypatch.setattr(records, "MESSAGE_LIMIT", 64 * 1024)
    monkeypatch.setattr(flower_array, "FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE", 16 * 1024)
    record = records.node_reply_record(big_answer())
    sent = [len(item.deflate()) for item in get_all_nested_objects(record).values()]
    assert 4 * 8192 * 8 >= 4 * records.MESSAGE_LIMIT  # the reply is 4x the limit
    assert max(sent) <= records.MESSAGE_LIMIT
    assert records.largest_object_bytes(record) <= max(sent) <= records.largest_object_bytes(record) + 256  # headers


def test_a_reply_object_beyond_the_message_limit_fails_in_one_line_naming_the_fixes(monkeypatch):
    """A chunk size beyond the limit (as without Flower's chunking): the node fails before sending."""
    import flwr.app.message.array as flower_array

    import wire.records as records

    monkeypatch.setattr(records, "MESSAGE_LIMIT", 64 * 1024)
    monkeypatch.setattr(flower_array, "FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE", 1024 * 1024)
    with pytest.raises(records.ReplyTooLarge, match=r"--nodes.*--node-reply sum") as raised:
        records.node_reply_record(big_answer())
    assert "\n" not in str(raised.value)
    records.node_reply_record(big_answer(dims=512))  # 4 KiB a row: within the limit

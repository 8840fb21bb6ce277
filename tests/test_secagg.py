"""--trust secagg: SecAgg+ over the distributed discrete Gaussian (ldpfed.protocols.secagg,
clients/secagg_app.py, server/secagg.py, simulations/secagg.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from clients.secagg_app import SecAggNode
from ldpfed.cli.main import app
from ldpfed.planning.calibration import TotalBudget
from ldpfed.planning.trust import equal_budget
from ldpfed.protocols import seeds
from ldpfed.protocols.ddgauss import DistributedDiscreteGaussian
from ldpfed.protocols.mean import bound, tuples
from ldpfed.protocols.secagg import cohort_means, degree, mask, mean_clip, neighbours, plan_for, threshold
from ldpfed.tasks import resolve
from ldpfed.validation import LDPValueError
from server.secagg import SecAggAborted, SecAggRound, run_round
from wire.records import MASKED, read_secagg, secagg_reply

SECRETS = {pid: 1000 + pid for pid in range(12)}
FLAGS = {"trust": "secagg", "clients": 12, "users": 240, "dims": 6, "max_epsilon": 4.0, "rounds": 1}


def _simulated(tmp_path, args: str) -> dict:
    """The summary.json of `ldpfed simulate <args> --out tmp_path/o`, which must exit 0."""
    result = CliRunner().invoke(app, ["simulate", *args.split(), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "o" / "summary.json").read_text())


def _config(clients: int = 12, fail: str = ""):
    return bound(resolve(None, {**FLAGS, "clients": clients, "fail_clients": fail}), seeds.data_seed(0))


def _round(config, nodes: int = 3, secrets=None):
    """One protocol round over `nodes` nodes through the wire records (as the local engine runs it)."""
    secrets = SECRETS if secrets is None else secrets
    data_seed = seeds.data_seed(0)
    plan = plan_for(config, config.data.dims, mean_clip(config.data.dims), seeds.server_seed(0))
    clients = config.federation.clients
    hosts = {node: list(range(node, clients, nodes)) for node in range(nodes)}
    sides = {node: (SecAggNode(config, plan, data_seed, secrets), {}) for node in hosts}
    seen = []

    def exchange(stage, requests):
        replies = {}
        for node, request in requests.items():
            side, state = sides[node]
            replies[node] = secagg_reply(*side.answer(stage, read_secagg(request), state))
            seen.append(replies[node])
        return replies

    secagg = SecAggRound(plan, 1, list(range(clients)))
    return plan, secagg, run_round(secagg, hosts, exchange), seen


def _encodings(config, plan, pids):
    """Each client's own encoding, computed apart from the protocol (its generator from its secret)."""
    values = tuples(config, seeds.data_seed(0))
    vectors = cohort_means(values, config.data.users, config.federation.clients, pids)
    rngs = [seeds.rng(SECRETS[pid], seeds.NOISE, 1) for pid in pids]
    return plan.ddg.encode_each(vectors, plan.rotation_seed(1), rngs)


@pytest.mark.parametrize("fail", ["", "3,7"])
def test_the_unmasked_sum_is_exactly_the_survivors_modular_sum(fail):
    config = _config(fail=fail)
    plan, _, result, _ = _round(config)
    dropped = sorted(int(pid) for pid in fail.split(",") if pid)
    survivors = [pid for pid in range(12) if pid not in dropped]
    assert result.survivors == survivors and result.dropped == dropped
    expected = plan.ddg.aggregate(_encodings(config, plan, survivors))
    np.testing.assert_array_equal(result.modular_sum, expected)


def seeded_mask_entropy(monkeypatch, seed: int) -> None:
    """The entropy a client draws for its masks (its key pairs and its self mask b_u: OS entropy in a
    run) from a generator of `seed`, so that a statistical check of the masked rows is reproducible."""
    import types

    from cryptography.hazmat.primitives.asymmetric import ec

    import clients.secagg_app as secagg_app

    rng = np.random.default_rng(seed)

    def key_pair():
        private = ec.derive_private_key(1 + int.from_bytes(rng.bytes(40), "big"), ec.SECP384R1())  # below P-384's order
        return private, private.public_key()

    monkeypatch.setattr(secagg_app, "generate_key_pairs", key_pair)
    monkeypatch.setattr(secagg_app, "os", types.SimpleNamespace(urandom=rng.bytes))


def test_the_server_view_holds_masked_vectors_only(monkeypatch):
    """What reaches the server: masked rows, none equal to a client's encoding (chance m^-D per
    pair), spread uniformly over [0, m) although the encodings crowd near 0 and m (small sums
    wrapped): the mean of n D uniform values is m/2 with sd m / sqrt(12 n D); 5 sd. The masks are
    OS entropy (a client's secret) in a run; here they come from a seeded generator, so that these
    probabilistic bounds (failure below 1e-6 for OS entropy) are checked on a reproducible draw."""
    seeded_mask_entropy(monkeypatch, 3)
    config = _config()
    plan, secagg, result, seen = _round(config)
    masked = np.vstack(secagg.view)
    encodings = _encodings(config, plan, list(range(12)))
    m = plan.ddg.modulus
    for row in encodings:
        assert not np.any(np.all(masked == row, axis=1))
    assert abs(masked.mean() - m / 2) < 5 * m / np.sqrt(12 * masked.size)
    arrays = [name for record in seen for name in record.array_records]
    assert set(arrays) == {MASKED}  # the only arrays a node ever sends the server
    assert not np.array_equal(result.modular_sum, masked.sum(axis=0) % m)  # the masks do not cancel alone


def test_wraps_are_the_coordinates_whose_integer_sum_leaves_the_decoders_range():
    """Twelve clients' aligned vectors at 6 bits overflow [-32, 32) in some coordinates: the count is
    the coordinates whose sum, in Python integers, lies outside it; the decoder reads them wrongly."""
    ddg = DistributedDiscreteGaussian(dims=8, clip=1.0, gamma=0.02, local_stddev=0.02, bits=6)
    rngs = [np.random.default_rng(seed) for seed in range(12)]
    noisy = ddg.noisy_each(np.tile(np.linspace(-0.5, 0.5, 8), (12, 1)), 3, rngs)
    sums = [sum(int(value) for value in column) for column in noisy.T]
    outside = sum(not -32 <= total < 32 for total in sums)
    modular = ddg.aggregate(ddg.wrap(noisy))
    assert outside > 0 and ddg.wraps(modular, noisy.sum(axis=0)) == outside
    assert ddg.headroom(modular) <= 1.0


def test_a_rounding_that_cannot_meet_the_bound_sends_nothing():
    """The conditional rounding gives up with an error (the client's node fails the message and the
    round is accounted at the survivors), never with a vector above the accounted norm bound."""
    ddg = DistributedDiscreteGaussian(dims=8, clip=1.0, gamma=0.05, local_stddev=0.1, bits=16)
    ddg.__dict__["_squared_bound"] = 0  # no nonzero rounded vector fits
    with pytest.raises(LDPValueError, match="conditional rounding failed"):
        ddg.encode_each(np.full((2, 8), 0.3), 1, [np.random.default_rng(0), np.random.default_rng(1)])


def test_the_noise_comes_from_the_clients_secrets_not_from_what_the_server_knows():
    """Everything the server knows (run seed, config, rotation and graph seeds) fixed: the revealed
    sum changes with the clients' secrets and with nothing else (the masks and keys, fresh OS
    entropy in each round, cancel)."""
    config = _config()
    first = _round(config)[2].modular_sum
    np.testing.assert_array_equal(_round(config)[2].modular_sum, first)
    other = {pid: secret + 1 for pid, secret in SECRETS.items()}
    assert not np.array_equal(_round(config, secrets=other)[2].modular_sum, first)


def test_a_round_aborts_when_too_few_neighbours_survive():
    config = _config(clients=6, fail="0,1,2,3")
    with pytest.raises(SecAggAborted, match="threshold"):
        _round(config, nodes=2)


def test_the_graph_is_symmetric_and_masks_are_uniform_bits():
    graph = neighbours(range(50), 7)
    assert all(len(near) == degree(50) for near in graph.values())
    assert all(pid in graph[other] for pid, near in graph.items() for other in near)
    assert threshold(degree(50)) > degree(50) / 2
    values = mask(bytes(32), 4096, 12)
    assert values.min() >= 0 and values.max() < 2**12
    assert not np.array_equal(values, mask(bytes(31) + b"\x01", 4096, 12))


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"bits": 3}, "bits"),
        ({"rounds": 100_000, "max_epsilon": 0.01}, "rounds"),
        ({"fraction": 0.5}, "fraction"),
        ({"max_epsilon": 0.0}, "max-epsilon"),
    ],
)
def test_bad_input_is_refused(flags, message):
    with pytest.raises(LDPValueError, match=message):
        config = bound(resolve(None, {**FLAGS, **flags}), seeds.data_seed(0))
        plan_for(config, config.data.dims, mean_clip(config.data.dims), 0)


def test_simulate_exits_2_with_one_line_on_too_few_bits(tmp_path):
    args = ["simulate", "--task", "mean", "--trust", "secagg", "--engine", "local", "--clients", "8", "--bits", "3"]
    result = CliRunner().invoke(app, [*args, "--max-epsilon", "4", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "bits" in result.output and len(result.output.strip().splitlines()) == 1


def test_simulate_mean_local_with_a_dropout_accounts_the_survivors(tmp_path):
    args = "--task mean --trust secagg --engine local --clients 8 --rounds 2 --max-epsilon 4 --fail-clients 5 --json"
    summary = _simulated(tmp_path, args + " --noise-seed 1")  # a fixed noise root: no wrap is a draw's property
    # the modular clip is reported: no wrap at 16 bits (4 standard deviations of the sum fill the modulus)
    assert summary["modular_wraps_total"] == 0 and 0 < summary["largest_modular_headroom"] < 1
    assert summary["fewest_shares_accounted"] == 7 and summary["clients_dropped_total"] == 2
    assert summary["epsilon_spent_max_per_client"] > summary["planned_epsilon"]  # 7 shares: less noise than 8
    assert summary["bits_per_value"] == 16 and "zero-out" in summary["adjacency"]
    assert all(g["unit"].startswith("per client") for g in summary["guarantees"])
    assert summary["private_against_server"] is True


def test_flower_secagg_mean_with_a_node_dropping_mid_round(tmp_path):
    summary = _simulated(
        tmp_path, "--task mean --trust secagg --clients 6 --nodes 2 --rounds 1 --max-epsilon 4 --fail-clients 4"
    )
    assert summary["engine"] == "flower" and summary["fewest_shares_accounted"] == 5


def test_equal_budget_gives_secagg_the_total_as_its_budget():
    setting = equal_budget("secagg", TotalBudget(4.0, 1e-5), 5)
    assert setting.options == {"max_epsilon": 4.0, "max_delta": 1e-5} and "dropouts" in setting.note


def test_compare_trust_puts_secagg_beside_local_with_its_bits_per_value(tmp_path):
    args = "compare --trust local,secagg --users 2000 --dims 2 --clients 4 --rounds 2 --engine local --epsilons 4"
    result = CliRunner().invoke(app, [*args.split(), "--out", str(tmp_path / "cmp"), "--json"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "cmp" / "trust.csv").set_index("trust")
    assert frame.loc["secagg", "bits_per_value"] == 16 and frame.loc["local", "bits_per_value"] == 64
    assert frame.loc["secagg", "epsilon_spent_run"] <= 4.0 * (1 + 1e-9)
    assert frame.loc["secagg", "epsilon_against_server"] == frame.loc["secagg", "epsilon_spent_run"]


def test_compare_trust_rows_carry_the_runs_qualification(tmp_path):
    """compare's noise root is the run seed, which a server could enumerate: a row that says
    private against the server must carry the run's qualification (seeds.QUALIFIED), not claim more."""
    args = "compare --trust secagg --users 400 --dims 2 --clients 4 --rounds 1 --engine local --epsilons 4"
    result = CliRunner().invoke(app, [*args.split(), "--out", str(tmp_path / "cmp"), "--json"])
    assert result.exit_code == 0, result.output
    row = pd.read_csv(tmp_path / "cmp" / "trust.csv").iloc[0]
    assert bool(row["private_against_server"]) and row["privacy_qualification"] == seeds.QUALIFIED
    assert row["modular_wraps"] == 0 and 0 < row["modular_headroom"] < 1  # the modular clip, reported


def test_simulate_train_local_under_secagg(tmp_path):
    summary = _simulated(
        tmp_path, "--task train --trust secagg --engine local --clients 4 --rounds 1 --max-epsilon 8 --bits 20 --json"
    )
    assert summary["bits_per_value"] == 20 and summary["final_accuracy"] is not None
    assert summary["epsilon_spent_max_per_client"] <= 8 * (1 + 1e-9) and summary["private"]


@pytest.mark.slow  # a Flower federation (Ray) training a model
def test_flower_secagg_train_with_a_node_dropping_mid_round(tmp_path):
    summary = _simulated(
        tmp_path, "--task train --trust secagg --clients 6 --nodes 3 --rounds 1 --max-epsilon 8 --fail-clients 2,3"
    )
    assert summary["engine"] == "flower" and summary["fewest_shares_accounted"] == 4
    assert summary["clients_dropped_total"] == 2 and summary["spent_beyond_plan"] is True

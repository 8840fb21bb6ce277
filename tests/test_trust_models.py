"""Trust models (ldpfed.accounting.trust; spec: trust-models.md): the central path is Flower's wrapper and is
accounted as dp-accounting accounts it, the server half of the shuffle model sees only a shuffled
multiset, and bad trust options are refused with exit code 2."""

import dataclasses
import json
import os
import signal
import types

import numpy as np
import pandas as pd
import pytest
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
)
from typer.testing import CliRunner

import ldpfed.mechanisms as mechanisms
from ldpfed.accounting import DiscreteGaussianVectorDpEvent, create_accountant
from ldpfed.accounting.central import adaptive_effective_multiplier, calibrate_noise_multiplier, central_epsilon
from ldpfed.accounting.shuffle import check_conditions, shuffled_epsilon
from ldpfed.accounting.trust import get_class, shuffle_round_delta
from ldpfed.cli.main import app
from ldpfed.planning.calibration import TotalBudget
from ldpfed.planning.trust import equal_budget
from ldpfed.protocols.central import CentralServer
from ldpfed.protocols.recorder import output_dir
from ldpfed.protocols.shuffle import ShuffledBatch, ShuffledMeanServer, Shuffler, ShuffleRound
from ldpfed.tasks import resolve
from ldpfed.validation import LDPValueError
from server.central import CentralStrategy, central_strategy
from server.shuffle import ShuffleStrategy
from simulations.federation import Interrupted
from simulations.progress import QuietProgress
from simulations.trust import run_trust

runner = CliRunner()


def central_config(**options):
    return resolve(
        None, {"task": "train", "trust": "central", "max_epsilon": 3.0, "clients": 20, "rounds": 4, **options}
    )


@pytest.mark.parametrize(
    "clipping,side,wrapper",
    [
        ("fixed", "server", DifferentialPrivacyServerSideFixedClipping),
        ("fixed", "client", DifferentialPrivacyClientSideFixedClipping),
        ("adaptive", "server", DifferentialPrivacyServerSideAdaptiveClipping),
    ],
)
def test_central_strategy_is_flowers_wrapper_corrected_and_accounted_as_dp_accounting(clipping, side, wrapper):
    clients = 200 if clipping == "adaptive" else 20  # the count noise needs enough clients per round
    config = central_config(fraction=0.5, clipping=clipping, clipping_side=side, clip=1.0, clients=clients)
    server = CentralServer(config, 0, 1, 2)
    plan = server.plan
    strategy = central_strategy(server)
    assert isinstance(strategy, wrapper) and isinstance(strategy.strategy, CentralStrategy)
    assert type(strategy).aggregate_train is not wrapper.aggregate_train  # ldpfed's release, not Flower's
    assert strategy.num_sampled_clients == pytest.approx(0.5 * clients)
    if clipping == "adaptive":  # Flower's own split of the effective multiplier, centred count
        assert strategy.noise_multiplier == pytest.approx(plan.update_multiplier, rel=1e-9)
        assert adaptive_effective_multiplier(plan.update_multiplier, plan.count_stddev) == pytest.approx(
            plan.noise_multiplier, rel=1e-12
        )
    else:
        assert strategy.noise_multiplier == plan.noise_multiplier == plan.update_multiplier
    for r in range(1, 5):
        server.record_round(r, {"clip": 1.0})
    orders = [order for order in DEFAULT_RDP_ORDERS if order == int(order)]
    direct = RdpAccountant(orders)
    direct.compose(SelfComposedDpEvent(PoissonSampledDpEvent(0.5, GaussianDpEvent(plan.noise_multiplier)), 4))
    ledger = server.ledger.max_spent("rdp", 1e-5).epsilon
    assert abs(ledger - direct.get_epsilon(1e-5)) <= 1e-6  # the float slack is far below 1e-6 here
    assert ledger <= 3.0 and plan.record()["central_epsilon"] == pytest.approx(ledger, abs=1e-12)


def test_calibration_is_tight():
    def event(z):
        return DiscreteGaussianVectorDpEvent(z, sampling_prob=0.1)

    z = calibrate_noise_multiplier(2.0, 1e-5, 50, event)
    assert central_epsilon(event(z), 50, 1e-5) <= 2.0 < central_epsilon(event(z * (1 - 1e-5)), 50, 1e-5)


def test_shuffled_server_sees_only_the_multiset():
    reports = {pid: np.arange(pid * 10, pid * 10 + 10, dtype=float).reshape(5, 2) for pid in range(3)}
    batch = Shuffler(np.random.default_rng(3)).shuffle(reports)
    assert [field.name for field in dataclasses.fields(batch)] == ["reports"]  # no ids, no sizes per client
    pooled = np.concatenate([reports[pid] for pid in range(3)])
    assert sorted(map(tuple, batch.reports)) == sorted(map(tuple, pooled))
    assert not np.array_equal(batch.reports, pooled)  # the clients' order is gone
    config = resolve(None, {"trust": "shuffle", "users": 20_000, "dims": 2, "epsilon": 1.0, "clients": 3})
    server = ShuffledMeanServer(config)
    assert server.aggregate.__annotations__["batch"] in (ShuffledBatch, "ShuffledBatch")
    np.testing.assert_allclose(server.aggregate(1, batch), pooled.mean(axis=0))


@pytest.mark.parametrize(
    "args,message",
    [
        (["--task", "train", "--trust", "central", "--max-epsilon", "2", "--epsilon", "1"], "no meaning"),
        (["--task", "train", "--trust", "central"], "--max-epsilon"),
        (["--task", "train", "--trust", "central", "--max-epsilon", "nan"], "epsilon"),
        (["--trust", "central", "--max-epsilon", "2"], "--task train"),
        (["--trust", "shuffle", "--users", "1000", "--epsilon", "2"], "needs n >="),
        (["--trust", "shuffle", "--mechanism", "gaussian", "--delta", "1e-6", "--users", "50000"], "pure"),
        (["--trust", "secagg"], "--max-epsilon"),
        (["--trust", "nobody"], "local, shuffle, central, secagg"),
        (["--clipping", "adaptive"], "--trust central"),
        (["--task", "train", "--trust", "central", "--max-epsilon", "1", "--clipping", "adaptive"], "count noise"),
    ],
)
def test_bad_trust_options_exit_2_with_one_line(args, message, tmp_path):
    result = runner.invoke(app, ["simulate", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_shuffle_refuses_every_randomizer_that_is_not_pure(monkeypatch):
    """The amplification bound is for eps0-LDP randomizers: every approximate one is refused, as its
    class says it is (not a list of names), and so is no randomizer at all."""
    shuffle = {"trust": "shuffle", "users": 50_000, "dims": 2, "epsilon": 1.0}
    assert resolve(None, {**shuffle, "mechanism": "laplace"}).privacy.trust == "shuffle"
    with pytest.raises(LDPValueError, match="unknown mechanism 'none'"):
        resolve(None, {**shuffle, "mechanism": "none"})
    monkeypatch.setattr(mechanisms.get_class("laplace"), "approximate", True)
    with pytest.raises(LDPValueError, match="pure"):
        resolve(None, {**shuffle, "mechanism": "laplace"})


# ---- the shuffle model on the Flower engine, under a budget; stopping; equal budgets; compare --trust ----


class _Reply:
    """What `ShuffleStrategy.aggregate_train` reads of a Flower reply: its sender and its reports."""

    def __init__(self, node: int, reports: np.ndarray) -> None:
        self.metadata = types.SimpleNamespace(src_node_id=node)
        self.content = {"reports": types.SimpleNamespace(to_numpy_ndarrays=lambda: [reports])}

    def has_error(self) -> bool:
        return False


def test_the_flower_shufflers_batch_carries_no_node_client_or_order():
    config = resolve(None, {"trust": "shuffle", "users": 20_000, "dims": 2, "epsilon": 1.0, "clients": 4})
    handed = []
    strategy = ShuffleStrategy(ShuffleRound(config), Shuffler(np.random.default_rng(5)), 4, lambda *a: handed.append(a))
    strategy.planned = {7: [0, 1], 9: [2, 3]}
    blocks = {7: np.arange(40.0).reshape(20, 2), 9: np.arange(40.0, 80.0).reshape(20, 2)}
    strategy.aggregate_train(1, [_Reply(node, blocks[node]) for node in (7, 9)])
    ((server_round, batch, reported, stopped, failed),) = handed
    assert type(batch) is ShuffledBatch and [f.name for f in dataclasses.fields(batch)] == ["reports"]
    pooled = np.concatenate([blocks[7], blocks[9]])
    assert sorted(map(tuple, batch.reports)) == sorted(map(tuple, pooled))
    assert not np.array_equal(batch.reports, pooled)
    assert reported == [0, 1, 2, 3] and failed == []  # the shuffler's own record, for the ledgers


def test_shuffle_runs_stop_each_client_at_its_budget(tmp_path):
    # one shuffled round of 20,000 reports at eps0 = 1 costs 0.035; two fit 0.08 under pld, three do not
    config = resolve(
        None,
        {"trust": "shuffle", "users": 20_000, "dims": 2, "epsilon": 1.0, "clients": 4, "rounds": 3,
         "engine": "local", "max_epsilon": 0.08, "accountant": "pld"},
    )  # fmt: skip
    summary = run_trust(config, None, noise_seed=3)
    assert summary["rounds_finished"] == 3 and summary["clients_stopped_by_budget_total"] == 4
    assert 0.06 < summary["shuffled_epsilon_total"] <= 0.08 and summary["accountant"] == "pld"
    assert summary["private"] is True


def test_shuffle_budget_below_one_round_is_refused(tmp_path):
    args = ["--trust", "shuffle", "--users", "20000", "--epsilon", "1", "--max-epsilon", "0.01", "--accountant", "pld"]
    result = runner.invoke(app, ["simulate", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "below one round's cost" in result.output
    assert not (tmp_path / "out").exists()


def local_shuffle_config(out, rounds: int):
    return resolve(
        None,
        {"trust": "shuffle", "users": 20_000, "dims": 2, "epsilon": 1.0, "clients": 2, "rounds": rounds,
         "engine": "local", "out": str(out)},
    )  # fmt: skip


def test_ctrl_c_stops_a_shuffle_run_with_the_finished_rounds_written(tmp_path):
    config = local_shuffle_config(tmp_path / "out", rounds=4)

    class SigintAfterRound1(QuietProgress):
        def update(self, row):
            if row["round"] == 1:
                os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(Interrupted) as stopped:
        run_trust(config, output_dir(config), noise_seed=1, progress=SigintAfterRound1())
    assert stopped.value.exit_code == 130
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["interrupted"] is True and written["rounds_finished"] == 1 < written["rounds"]
    assert len(pd.read_csv(tmp_path / "out" / "metrics.csv")) == 1


@pytest.mark.parametrize("total", [1.0, 4.0])
def test_equal_budget_spends_the_total_under_each_trust_model(total):
    budget = TotalBudget(total, 1e-5)
    local = equal_budget("local", budget, 5)
    shuffle = equal_budget("shuffle", budget, 5, reports=20_000)
    for setting in (local, shuffle):
        assert setting.spent_epsilon <= total and setting.spent_epsilon >= total * (1 - 1e-4) or setting.note
    # the shuffle's composed total, recomputed from the bound
    delta_r = shuffle_round_delta(1e-5, 5)
    event = shuffled_epsilon(shuffle.epsilon_per_round, 20_000, delta_r).event()
    assert create_accountant("pld").compose(event, 5).spent_within(1e-5).epsilon <= total
    assert shuffle.epsilon_per_round > local.epsilon_per_round  # amplification buys a larger eps0
    assert equal_budget("central", budget, 5).options == {"max_epsilon": total, "max_delta": 1e-5}


def test_shuffle_eps0_is_capped_by_the_bounds_condition():
    setting = equal_budget("shuffle", TotalBudget(8.0, 1e-5), 5, reports=5_000)
    assert setting.note and setting.spent_epsilon < 8.0
    check_conditions(setting.epsilon_per_round, 5_000, shuffle_round_delta(1e-5, 5))  # inside: no error


def test_compare_trust_runs_local_and_shuffle_side_by_side(tmp_path):
    args = [
        "--trust",
        "local,shuffle",
        "--users",
        "5000",
        "--dims",
        "2",
        "--clients",
        "2",
        "--rounds",
        "2",
        "--engine",
        "local",
    ]
    result = runner.invoke(app, ["compare", *args, "--epsilons", "1,4", "--out", str(tmp_path / "cmp"), "--json"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "cmp" / "trust.csv")
    assert sorted(frame["trust"]) == ["local", "local", "shuffle", "shuffle"]
    assert (frame["epsilon_spent_run"] <= frame["total_epsilon"] * (1 + 1e-9)).all()
    assert (tmp_path / "cmp" / "trust.png").stat().st_size > 0
    by = frame.set_index(["total_epsilon", "trust"])
    for total in (1.0, 4.0):  # the same total buys the shuffled reports less noise
        assert by.loc[(total, "shuffle"), "noise_sd"] < by.loc[(total, "local"), "noise_sd"]
        # against the server's operator (the shuffler) only eps0's total holds: above the analyst's
        assert by.loc[(total, "shuffle"), "epsilon_against_server"] > by.loc[(total, "shuffle"), "epsilon_spent_run"]
        assert by.loc[(total, "local"), "epsilon_against_server"] == by.loc[(total, "local"), "epsilon_spent_run"]


def test_compare_trust_takes_the_datas_users_when_none_are_given(tmp_path):
    """The README's `compare --trust local,shuffle` without --users: the shuffle's n per round is the
    synthetic set's 10,000 users, not 0."""
    args = (
        "compare --trust local,shuffle --epsilons 1 --delta 1e-5 --rounds 1 --clients 2 --dims 2 --engine local".split()
    )
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "cmp" / "trust.csv")
    assert list(frame["trust"]) == ["local", "shuffle"] and frame["epsilon_spent_run"].notna().all()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--trust", "local,central"], "--task train"),
        (["--trust", "secagg", "--task", "frequency"], "--task"),
        (["--trust", "local,shuffle", "--aggregators", "l1"], "--aggregators"),
        (["--trust", "local,shuffle", "--epsilons", "1,-2"], "epsilon"),
        (["--trust", "local,shuffle", "--delta", "0"], "delta"),
    ],
)
def test_compare_trust_bad_input_exits_2_and_writes_nothing(args, message, tmp_path):
    result = runner.invoke(app, ["compare", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # two Flower federations of their own (Ray): tens of seconds each on a busy machine
def test_central_flower_runs_add_the_noise_their_columns_state_and_replay_from_the_noise_seed(monkeypatch, tmp_path):
    """Clients whose updates are zero (a learning rate far below the weights' ulp): each round's
    model change times q N is the noise alone, measured against metrics.csv's `noise_stddev_of_sum`;
    the same --seed and --noise-seed give the same models, bit for bit."""
    seen: dict[str, list] = {}
    evaluate = CentralServer.evaluate

    def spy(self, weights):
        seen.setdefault(self.config.output.out, []).append(np.concatenate([w.ravel() for w in weights]))
        return evaluate(self, weights)

    monkeypatch.setattr(CentralServer, "evaluate", spy)  # the server half runs in this process
    outs = [str(tmp_path / name) for name in ("a", "b")]
    for out in outs:
        config = central_config(clients=4, rounds=2, nodes=1, clip=1.0, fraction=1.0, lr=1e-300, out=out)
        summary = run_trust(config, output_dir(config), noise_seed=7)
    assert summary["flower_strategy"].startswith("CentralServerSideFixedClipping")
    assert summary["engine"] == "flower" and summary["rounds_finished"] == 2
    assert summary["private_against_server"] is False and summary["privacy_qualification"]
    assert summary["epsilon_spent_max_per_client"] <= 3.0 and summary["noise_seed"] == "user-chosen"
    first, second = seen[outs[0]], seen[outs[1]]
    assert all(np.array_equal(a, b) for a, b in zip(first, second))  # replayed exactly
    metrics = pd.read_csv(f"{outs[0]}/metrics.csv")
    dims = first[0].size
    for r in (1, 2):
        noise = summary["expected_clients"] * (first[r] - first[r - 1])
        expected = metrics.loc[r - 1, "noise_stddev_of_sum"]
        assert expected == pytest.approx(summary["noise_stddev_of_sum_per_unit_clip"] * metrics.loc[r - 1, "clip"])
        # float32 weights: the measured sd within 5 standard errors of the sample sd over d coordinates
        assert abs(np.std(noise) / expected - 1.0) < 5.0 / np.sqrt(2 * dims)
    written = {path.name for path in (tmp_path / "a").iterdir()}
    assert {"config.toml", "noise_secret", "metrics.csv", "privacy.csv", "privacy.json", "summary.json"} <= written


@pytest.mark.slow  # a Flower federation of its own (Ray)
def test_a_shuffle_run_under_flower_hands_the_server_half_batches_only(monkeypatch):
    seen = []
    original = ShuffledMeanServer.aggregate

    def spy(self, server_round, batch):
        seen.append(batch)
        return original(self, server_round, batch)

    monkeypatch.setattr(ShuffledMeanServer, "aggregate", spy)
    config = resolve(
        None, {"trust": "shuffle", "users": 20_000, "dims": 2, "epsilon": 1.0, "clients": 4, "rounds": 2, "nodes": 2}
    )
    summary = run_trust(config, None, noise_seed=2)
    assert summary["engine"] == "flower" and summary["rounds_finished"] == 2
    assert len(seen) == 2 and all(type(batch) is ShuffledBatch for batch in seen)
    assert all(batch.reports.shape == (20_000, 2) for batch in seen)


def test_every_run_says_which_party_gets_which_guarantee(tmp_path):
    """The shuffler runs inside the ServerApp (or the harness), so the party operating the server is
    the shuffler: against it the local eps0 holds, the amplified figure only against an analyst who
    sees the shuffled batches. Local runs hold against everyone; central against the released models."""
    from typer.testing import CliRunner

    args = "simulate --trust shuffle --engine local --users 20000 --dims 2 --clients 2 --rounds 2 --epsilon 1"
    result = CliRunner().invoke(app, [*args.split(), "--out", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["private_against_server"] is False
    server, analyst = summary["guarantees"]
    assert "operating the server" in server["party"] and "shuffler" in server["party"]
    assert server["epsilon"] == summary["local_epsilon_total_basic"] == 2.0 and server["delta"] is None
    assert "analyst" in analyst["party"] and analyst["epsilon"] == summary["shuffled_epsilon_total"] < 2.0
    assert analyst["epsilon"] == summary["epsilon_spent_max_per_client"]
    assert all(g["unit"].startswith("per user") for g in (server, analyst))
    assert "against the party operating the server" in result.output and "per user" in result.output
    privacy = json.loads((tmp_path / "s" / "privacy.json").read_text())
    assert privacy["private"] is True and privacy["noise_seed"] == "os-entropy"
    assert (tmp_path / "s" / "noise_secret").exists() and (tmp_path / "s" / "config.toml").exists()

    replayed = CliRunner().invoke(app, [*args.split(), "--noise-seed", "7", "--json", "--out", str(tmp_path / "r")])
    assert replayed.exit_code == 0, replayed.output
    replay = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert replay["noise_seed"] == "user-chosen" and replay["privacy_qualification"]

    local = CliRunner().invoke(app, ["simulate", "--engine", "local", "--rounds", "1", "--users", "200", "--json"])
    (everyone,) = json.loads(local.stdout)["guarantees"]
    assert "included" in everyone["party"] and everyone["epsilon"] is not None
    assert get_class("central").guarantees({"epsilon_spent_max_per_client": 3.0}, "train")[0]["epsilon"] is None


def test_every_trust_model_has_one_harness():
    from ldpfed.accounting.trust import available
    from simulations.trust import TRUST_RUNS

    assert set(TRUST_RUNS) | {"local"} == set(available())


def test_a_trust_run_stopped_before_its_first_round_ends_writes_a_summary_of_none(tmp_path):
    config = local_shuffle_config(tmp_path / "out", rounds=3)
    import simulations.trust as harness
    from simulations.stopping import Stopped

    save = harness.save_noise_root

    def save_then_interrupt(output, world):  # Ctrl-C once the run's first files are written: the stop
        save(output, world)  # request's handler raises Stopped in the main thread (simulations.stopping)
        raise Stopped(signal.SIGINT)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(harness, "save_noise_root", save_then_interrupt)
        with pytest.raises(Interrupted):
            run_trust(config, output_dir(config), noise_seed=1)
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["interrupted"] is True and written["rounds_finished"] == 0
    assert (tmp_path / "out" / "noise_secret").exists()

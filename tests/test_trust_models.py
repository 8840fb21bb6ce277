"""Trust models (ldpfed.accounting.trust; spec: trust-models.md): the central path is Flower's wrapper and is
accounted as dp-accounting accounts it, the server half of the shuffle model sees only a shuffled
multiset, and bad trust options are refused with exit code 2."""

import dataclasses

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
)
from flwr.supercore.differential_privacy import compute_stdv
from typer.testing import CliRunner

from ldpfed.accounting.central import ORDERS, adaptive_effective_multiplier, calibrate_noise_multiplier, central_epsilon
from ldpfed.cli.main import app
from ldpfed.config import resolve
from ldpfed.protocols.central import CentralServer, central_plan
from ldpfed.protocols.shuffle import ShuffledBatch, ShuffledMeanServer, Shuffler
from server.central import CentralStrategy, central_strategy

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
def test_central_strategy_is_flowers_wrapper_and_accounted_as_dp_accounting(clipping, side, wrapper):
    clients = 200 if clipping == "adaptive" else 20  # the count noise needs enough clients per round
    config = central_config(fraction=0.5, clipping=clipping, clipping_side=side, clip=1.0, clients=clients)
    plan = central_plan(config)
    server = CentralServer(config, 0, 1, plan)
    strategy, accounted = central_strategy(server, plan)
    assert type(strategy) is wrapper and isinstance(strategy.strategy, CentralStrategy)
    assert strategy.num_sampled_clients == pytest.approx(0.5 * clients)
    # the noise on the mean is Flower's own: z C / (q N), z what the wrapper holds
    assert compute_stdv(strategy.noise_multiplier, 1.0, strategy.num_sampled_clients) == pytest.approx(
        strategy.noise_multiplier * 1.0 / (0.5 * clients)
    )
    if clipping == "adaptive":
        assert accounted == pytest.approx(
            adaptive_effective_multiplier(strategy.noise_multiplier, strategy.clipped_count_stddev)
        )
    else:
        assert accounted == strategy.noise_multiplier
    assert accounted == pytest.approx(plan.noise_multiplier, rel=1e-9)
    for r in range(1, 5):
        server.record_round(r, accounted)
    direct = RdpAccountant(ORDERS)
    direct.compose(SelfComposedDpEvent(PoissonSampledDpEvent(0.5, GaussianDpEvent(accounted)), 4))
    ours = central_epsilon(0.5, accounted, 4, 1e-5)
    assert abs(ours - direct.get_epsilon(1e-5)) <= 1e-6
    assert ours <= 3.0
    # the ledger's rdp accountant composes the same events over dp-accounting's default (finer) orders
    ledger = server.ledger.max_spent("rdp", 1e-5).epsilon
    assert 0.99 * ours <= ledger <= ours


def test_calibration_is_tight():
    z = calibrate_noise_multiplier(2.0, 1e-5, 0.1, 50)
    assert central_epsilon(0.1, z, 50, 1e-5) <= 2.0 < central_epsilon(0.1, z * (1 - 1e-5), 50, 1e-5)


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
        (["--trust", "secagg"], "legacy"),
        (["--trust", "nobody"], "local, shuffle, central"),
        (["--clipping", "adaptive"], "--trust central"),
        (["--task", "train", "--trust", "central", "--max-epsilon", "1", "--clipping", "adaptive"], "count noise"),
    ],
)
def test_bad_trust_options_exit_2_with_one_line(args, message, tmp_path):
    result = runner.invoke(app, ["simulate", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()

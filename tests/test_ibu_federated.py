"""IBU as the frequency task's aggregator (`--aggregator ibu`): the server builds it with each
attribute's channel (p, q) of its oracles, and what a federation estimates is IBU applied directly
(the full-matrix update, `iterative_bayesian_update`) to the support counts of the very reports the
client drew from its stream."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_collecting_rows

import ldpfed.aggregation as aggregation
from ldpfed.aggregation.ibu import iterative_bayesian_update
from ldpfed.config import DEFAULT_DATA, Config
from ldpfed.data.categorical import read_categorical
from ldpfed.frequency.categorical import AttributeOracles
from ldpfed.protocols import seeds
from ldpfed.protocols.frequency import FrequencyClient, FrequencyServer
from ldpfed.tasks import validated
from ldpfed.validation import LDPValueError


def _direct_ibu(oracle, reports) -> np.ndarray:
    """IBU on the reports' normalized support counts with the full k x k channel q + (p - q) I."""
    counts = np.asarray(oracle.support_counts(reports), dtype=float)
    channel = oracle.q + (oracle.p - oracle.q) * np.eye(oracle.k)
    return iterative_bayesian_update(counts / counts.sum(), channel)


def _round_reports(oracle, codes, secret: int, server_round: int):
    """The reports of a one-attribute client in round r: chunk 0 of its stream (secret, NOISE, r)."""
    stream = seeds.stream(secret, seeds.NOISE, server_round)
    child = np.random.SeedSequence(stream.entropy, spawn_key=stream.spawn_key).spawn(1)[0]
    return oracle.perturb(codes, np.random.default_rng(child))


def test_ibu_in_simulate_is_ibu_on_the_same_reports():
    """One client, GRR over 8 categories at eps 0.5, 2 rounds: simulate's IBU MSE per round is the MSE of IBU
    applied directly to the counts of the reports replayed from the client's secret (to 1e-9: the
    same arithmetic up to the order of float additions)."""
    config = validated(
        Config().with_options(
            {
                "task": "frequency",
                "engine": "local",
                "clients": 1,
                "users": 500,
                "dims": 1,
                "categories": "8",
                "rounds": 2,
                "seed": 4,
                "epsilon": 0.5,
                "mechanism": "grr",
                "aggregator": "ibu",
            }
        )
    )
    summary, rows = run_collecting_rows(config, noise_seed=11)
    table = read_categorical(
        DEFAULT_DATA["frequency"],
        users=500,
        attributes=1,
        categories="8",
        rng=np.random.default_rng(seeds.data_seed(4)),
    )
    oracle = AttributeOracles.build("grr", 0.5, table.categories).oracles[0]
    secret = seeds.client_secrets(11, 1)[0]
    truth = table.frequencies()
    expected = [
        np.mean((_direct_ibu(oracle, _round_reports(oracle, table.codes[:, 0], secret, r)) - truth) ** 2)
        for r in (1, 2)
    ]
    np.testing.assert_allclose(rows["mse"], expected, rtol=1e-9)
    # IBU, not the plain estimate (which has negative entries here, so the MLE differs from it)
    assert not np.allclose(rows["mse"], rows["mse_plain_mean"])


@pytest.mark.parametrize("mechanism", ["olh", "subset-selection"])
def test_ibu_of_the_frequency_server_is_ibu_on_the_same_reports(mechanism):
    """The server halves with a counting oracle whose reports are not a category: IBU of the server is
    IBU on the reports' support counts (multi-freq-ldpy's reading for non-GRR oracles)."""
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 8, size=(400, 1))
    oracles = AttributeOracles.build(mechanism, 2.0, [8])
    client = FrequencyClient(codes, oracles, secret=12345)
    server = FrequencyServer(oracles, 1, ["ibu", "mean"])
    server.configure_round(1)
    reply, _ = client.reply(1, {})
    server.aggregate(1, {0: reply}, {})
    reports = _round_reports(oracles.oracles[0], codes[:, 0], 12345, 1)
    np.testing.assert_allclose(server.outcome.estimates["ibu"], _direct_ibu(oracles.oracles[0], reports), atol=1e-9)


def test_ibu_is_registered_and_refused_without_a_channel():
    assert "ibu" in aggregation.available("frequency") and "ibu" not in aggregation.available("mean")
    oracles = AttributeOracles.build("laplace", 1.0, [4, 3])
    with pytest.raises(LDPValueError, match="channel"):
        FrequencyServer(oracles, 1, ["ibu"])
    with pytest.raises(LDPValueError, match="channel"):
        validated(Config().with_options({"task": "frequency", "mechanism": "hcms", "aggregator": "ibu"}))
    two = AttributeOracles.build("oue", 1.0, [4, 3])
    assert FrequencyServer(two, 1, ["ibu"]).aggregators[0].channel == two.channels


def test_compare_ranks_ibu_beside_the_estimators_it_cannot_predict_entry_by_entry(tmp_path):
    """`compare --task frequency --aggregators mean,ibu,...` runs: IBU (not elementwise) is measured
    with no prediction (an empty bracket, NaN in summary.csv), the mean keeps its prediction."""
    import pandas as pd
    from typer.testing import CliRunner

    from ldpfed.cli.main import app

    out = tmp_path / "compare"
    arguments = ["compare", "--task", "frequency", "-m", "grr", "--epsilons", "1", "--users", "500"]
    arguments += ["--aggregators", "mean,ibu,power", "--repeats", "2", "--out", str(out)]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(out / "summary.csv")
    rows = summary.set_index("aggregator")
    assert {"mean", "ibu", "power"} <= set(rows.index)
    assert np.isfinite(rows.loc["mean", "predicted_mse"]) and np.isnan(rows.loc["ibu", "predicted_mse"])
    assert np.all(np.isfinite(rows["mse"])) and np.all(rows["mse"] > 0)

"""Re-calibrated aggregation in federated LDP-SGD: `ldpfed simulate --task train
--aggregator ...`, the per-round measured vs predicted aggregate noise, the local engine, and
`ldpfed compare --task train`.

Logic tests use the local engine (the same client and server functions, no Flower); one test runs
the train aggregator path under Flower (Ray) and checks that both engines give the same rounds.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import run_collecting_rows
from scipy.special import ndtr
from typer.testing import CliRunner

from ldpfed.aggregation.updates import aggregate_updates
from ldpfed.cli.main import app
from ldpfed.config import Config
from ldpfed.protocols.session import World
from ldpfed.tasks import client_half, server_half, validated
from ldpfed.validation import LDPValueError

runner = CliRunner()
AGGREGATORS = ("mean", "l1", "l2", "hdr4me", "james-stein")


def train_config(**options) -> Config:
    base = {
        "task": "train",
        "data": "digits",
        "model": "logreg",
        "clients": 6,
        "rounds": 3,
        "local-steps": 3,
        "mechanism": "laplace",
        "epsilon": 4.9,
        "engine": "local",
        "seed": 5,
    }
    return validated(Config().with_options({**base, **options}))


NOISE_SEED = 5  # runs and replies compared with each other get the same noise root, so the same noise


def server_of(config: Config):
    world = World.from_config(config, NOISE_SEED)
    return server_half(config, world.data, world.server)


def one_round_replies(config: Config):
    """The server half and the replies of round 1 (the client halves, in this process)."""
    world = World.from_config(config, NOISE_SEED)
    server = server_half(config, world.data, world.server)
    plan = server.configure_round(1)
    replies = {
        pid: client_half(config, pid, world.data, world.secret(pid)).reply(1, plan.broadcast)[0]
        for pid in plan.partitions
    }
    return server, replies


def run_rows(config: Config) -> tuple[dict, pd.DataFrame]:
    return run_collecting_rows(config, NOISE_SEED)


# ---- options ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, message",
    [
        ({"aggregator": "median"}, "aggregator must be one of mean, l1, l2, hdr4me, james-stein, fedavg"),
        ({"deviation": "oracle"}, "deviation must be one of plug-in, model"),
        ({"engine": "spark"}, "engine must be one of flower, local"),
        ({"diagnostics": 2}, "'diagnostics' must be a bool"),
    ],
)
def test_bad_train_options_are_clear_errors(options, message):
    with pytest.raises(LDPValueError, match=message):
        train_config(**options)


def test_fedavg_is_a_train_aggregator_only():
    with pytest.raises(LDPValueError, match="unknown aggregator"):
        validated(Config().with_options({"aggregator": "fedavg"}))


def test_simulate_unknown_aggregator_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["simulate", "--task", "train", "--aggregator", "median", "--out", str(out)])
    assert result.exit_code == 2 and "aggregator must be one of" in " ".join(result.output.split())
    assert not out.exists()


# ---- aggregation of one round's replies ------------------------------------------------------
def test_flower_fedavg_equals_the_weighted_mean_of_the_same_replies():
    from server.strategy import flower_fedavg

    server, replies = one_round_replies(train_config(clients=7))
    pids = sorted(replies)
    updates = np.stack([replies[pid].arrays["update"] for pid in pids])
    sizes = np.array([replies[pid].metrics["num-examples"] for pid in pids], dtype=float)
    flower = flower_fedavg(updates, sizes)
    ours = aggregate_updates(updates, sizes, "mean", privatizer=server.privatizer).estimate
    scale = np.max(np.abs(updates))
    np.testing.assert_allclose(flower, ours, rtol=0, atol=1e-14 * scale)
    assert not np.allclose(ours, 0)


def test_diagnostics_never_change_the_training():
    """The diagnostics (clean updates, losses) go to the harness, not the server: a run without
    them trains identically and only lacks the noise figures."""
    on_summary, on = run_rows(train_config(aggregator="l2"))
    off_summary, off = run_rows(train_config(aggregator="l2", diagnostics=False))
    np.testing.assert_array_equal(on["accuracy"], off["accuracy"])
    assert off["measured_squared_distance"].isna().all() and on["measured_squared_distance"].notna().all()
    assert off_summary["diagnostics"] is None and "never sent to the server" in on_summary["diagnostics"]
    assert on["train_loss"].notna().all() and off["train_loss"].isna().all()


# ---- predicted vs measured aggregate noise ---------------------------------------------------
def test_measured_aggregate_noise_agrees_with_the_exact_prediction():
    """Laplace at eps 4.9 with every coordinate reported (m = d = 650, eps/d each): the noise of
    client k in coordinate z is C*L_kz, L ~ Laplace(b = 2d/eps), independent of the update, so the
    aggregate noise X_z = sum_k p_k C L_kz and D = sum_z X_z^2 has E[D] = predicted and
        Var[D] = sum_z (E X_z^4 - (E X_z^2)^2),
        E X_z^4 = sum_k p_k^4 mu4 + 3 [(sum_k p_k^2 v)^2 - sum_k p_k^4 v^2],  v = 2 b^2 C^2, mu4 = 24 b^4 C^4.
    Over R rounds the mean of D_r / E[D_r] has sd sqrt(mean_r Var[D_r] / E[D_r]^2 / R); tolerance
    5 of those (derived, not estimated). The CLT z-score tail share is also near 5%: it is
    checked against 5% within 5 binomial standard errors plus 0.01 for the non-normality of a
    weighted sum of 10 Laplace variables (a CLT approximation, not an exact law).
    """
    config = train_config(clients=10, rounds=12, **{"report-dims": 650})
    summary, rows = run_rows(config)
    server = server_of(config)
    dims = server.weights.size
    assert dims == 650
    # V: the per-value variance of the default (safe, discrete) Laplace at eps/d, exact; its fourth
    # moment is taken as the continuous Laplace's 6 V^2 (only the tolerance uses it; the discrete
    # law's differs by O(1/J), J = 128 here).
    import ldpfed.mechanisms as mechanisms

    per_value = float(mechanisms.get("laplace", config.privacy.epsilon / dims).variance(0.0))
    v, mu4 = per_value * config.update_clip**2, 6.0 * per_value**2 * config.update_clip**4
    sizes = np.array([server.data.client(pid)[1].size for pid in range(config.federation.clients)], dtype=float)
    p = sizes / sizes.sum()
    second = np.sum(p**2) * v
    fourth = np.sum(p**4) * mu4 + 3.0 * (second**2 - np.sum(p**4) * v**2)
    relative_variance = dims * (fourth - second**2) / (dims * second) ** 2
    np.testing.assert_allclose(rows["predicted_squared_distance"], dims * second, rtol=1e-9)
    ratios = rows["noise_ratio"].to_numpy()
    tolerance = 5.0 * np.sqrt(relative_variance / ratios.size)
    assert 0.02 < tolerance < 0.15  # the test can fail: the tolerance is small
    assert abs(ratios.mean() - 1.0) <= tolerance
    coordinates = dims * ratios.size
    tail = rows["noise_z_beyond_1_96"].mean()
    expected = 2 * ndtr(-1.96)
    assert abs(tail - expected) <= 5 * np.sqrt(expected * (1 - expected) / coordinates) + 0.01
    assert summary["noise_measured_over_predicted"] == pytest.approx(
        rows["measured_squared_distance"].sum() / rows["predicted_squared_distance"].sum()
    )


def test_measured_noise_with_sampled_coordinates_agrees_on_average_over_rounds():
    """Wang's m (= 1 of 610 coordinates per client at eps 4.9) on FedProx synthetic data: each
    round's D is heavy-tailed (one huge coordinate per client) but E[D_r] is exactly the
    prediction, so the mean of D_r / E[D_r] over 60 independent rounds is within 5 standard errors
    (estimated from the rounds) of 1."""
    config = train_config(data="synthetic-fedprox", clients=20, rounds=60, **{"local-steps": 2})
    _, rows = run_rows(config)
    ratios = rows["noise_ratio"].to_numpy()
    assert np.all(np.isfinite(ratios))
    standard_error = ratios.std(ddof=1) / np.sqrt(ratios.size)
    assert abs(ratios.mean() - 1.0) <= 5 * standard_error
    assert standard_error < 0.2


# ---- noise-free runs -------------------------------------------------------------------------
def test_without_noise_and_model_deviation_every_aggregator_is_the_mean():
    """mechanism none, deviation model: sigma = 0 and delta = 0 exactly, so nothing is moved."""
    runs = {
        name: run_rows(train_config(mechanism="none", aggregator=name, deviation="model"))[1]
        for name in (*AGGREGATORS, "fedavg")
    }
    for name, rows in runs.items():
        np.testing.assert_allclose(rows["accuracy"], runs["mean"]["accuracy"], rtol=0, atol=0)
        np.testing.assert_allclose(rows["loss"], runs["mean"]["loss"], rtol=1e-12)
        if name != "fedavg":
            assert (rows["recalibration_shift_squared"] == 0).all()
            assert (rows["deviation_variance_trace"] == 0).all()
    assert (runs["mean"]["measured_squared_distance"] == 0).all()


def test_without_noise_plug_in_hdr4me_moves_the_mean_only_by_its_threshold_effect():
    """mechanism none, plug-in: sigma_z^2 = sum p^2 s_z^2 is the clean updates' spread. Clean
    updates lie in [-C, C], so s_z^2 <= C^2 / (1 - sum p^2) and sigma_z <= C / sqrt(K_eff - 1)
    (K_eff = 1 / sum p^2). HDR4ME* moves coordinate z only by its p2 + p3 = P(|N(0, sigma_z^2)| > C)
    <= 2 Phi(-sqrt(K_eff - 1)) share, towards 0, so per round
        ||hdr4me - mean||^2 <= (2 Phi(-sqrt(K_eff - 1)))^2 ||mean||^2.
    With 12 clients that factor is < 1e-3: the run's accuracy matches plain FedAvg."""
    config = train_config(mechanism="none", aggregator="hdr4me", clients=12)
    _, rows = run_rows(config)
    _, plain = run_rows(config.with_options({"aggregator": "mean"}))
    server = server_of(config)
    sizes = np.array([server.data.client(pid)[1].size for pid in range(config.federation.clients)], dtype=float)
    effective = 1.0 / np.sum((sizes / sizes.sum()) ** 2)
    factor = 2.0 * ndtr(-np.sqrt(effective - 1.0))
    assert factor < 1e-3
    shift, norm = rows["recalibration_shift_squared"], rows["clean_update_squared_norm"]
    assert (rows["deviation_variance_trace"] > 0).all()  # plug-in sigma is the clean spread, not 0
    assert (shift <= factor**2 * norm * (1 + 1e-9)).all()
    assert (rows["measured_squared_distance"] == 0).all()
    np.testing.assert_allclose(rows["accuracy"], plain["accuracy"], atol=1.5 / server.data.test[1].size)


def test_fedavg_and_mean_runs_are_equal_to_float_precision():
    _, mean = run_rows(train_config(aggregator="mean"))
    _, fedavg = run_rows(train_config(aggregator="fedavg"))
    np.testing.assert_allclose(fedavg["loss"], mean["loss"], rtol=1e-9)
    np.testing.assert_array_equal(fedavg["accuracy"], mean["accuracy"])


# ---- Flower ----------------------------------------------------------------------------------
@pytest.mark.slow  # a Ray federation (or flwr run) of its own: tens of seconds
def test_train_aggregator_under_flower_equals_the_local_engine(tmp_path):
    """One Flower federation (Ray, 4 clients, 2 CPUs) with HDR4ME* re-calibration and the noise
    measurement joined from the nodes' diagnostics files, through `ldpfed simulate`; the local
    engine on the same options gives exactly the same rounds (same secrets and server seed, same
    halves, client training on one torch thread in both engines)."""
    from conftest import ray_released

    out = tmp_path / "flower"
    args = [
        "simulate",
        "--task",
        "train",
        "--data",
        "digits",
        "--model",
        "logreg",
        "--clients",
        "4",
        "--rounds",
        "3",
        "--local-steps",
        "3",
        "--mechanism",
        "piecewise",
        "--epsilon",
        "4.9",
        "--aggregator",
        "hdr4me",
        "--cpus",
        "2",
        "--cpus-per-client",
        "1",
        "--seed",
        "2",
        "--noise-seed",
        "2",  # the same noise root on both engines: the same noise
        "--out",
        str(out),
        "--json",
    ]
    result = runner.invoke(app, args)
    assert ray_released()
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["engine"] == "flower" and summary["aggregator"] == "hdr4me"
    flower = pd.read_csv(out / "metrics.csv")
    local_out = tmp_path / "local"
    result = runner.invoke(app, [*args[:-3], "--engine", "local", "--out", str(local_out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["engine"] == "local"
    local = pd.read_csv(local_out / "metrics.csv")
    columns = [
        "loss",
        "accuracy",
        "train_loss",
        "predicted_squared_distance",
        "measured_squared_distance",
        "recalibration_shift_squared",
        "applied_squared_distance",
        "clients_replied",
    ]
    np.testing.assert_array_equal(flower[columns].to_numpy(float), local[columns].to_numpy(float))
    assert (flower["recalibration_shift_squared"] > 0).all()
    assert (flower["clients_replied"] == 4).all()


# ---- ldpfed compare --task train -------------------------------------------------------------
def test_compare_train_json_rows_and_files(tmp_path):
    out = tmp_path / "cmp"
    args = [
        "compare",
        "--task",
        "train",
        "--engine",
        "local",
        "--data",
        "digits",
        "--clients",
        "3",
        "--rounds",
        "2",
        "--local-steps",
        "2",
        "--mechanism",
        "laplace,none",
        "--epsilons",
        "4.9,15.3",
        "--aggregators",
        "mean,hdr4me,fedavg",
        "--repeats",
        "2",
        "--seed",
        "1",
        "--out",
        str(out),
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == (2 + 1) * 3  # laplace at two budgets, none once; three aggregators
    for row in rows:
        assert {"mechanism", "epsilon", "aggregator", "final_accuracy", "final_loss", "best_accuracy"} <= set(row)
        assert row["repeats"] == 2 and row["final_accuracy_std"] is not None
        assert row["best_accuracy"] >= row["final_accuracy"] - 1e-12
    assert {row["epsilon"] for row in rows if row["mechanism"] == "none"} == {None}
    by_key = {(r["mechanism"], r["epsilon"], r["aggregator"]): r for r in rows}
    for mechanism, epsilon in [("laplace", 4.9), ("laplace", 15.3), ("none", None)]:
        assert (
            by_key[(mechanism, epsilon, "fedavg")]["final_accuracy"]
            == by_key[(mechanism, epsilon, "mean")]["final_accuracy"]
        )
    for name in ("runs.csv", "rounds.csv", "summary.csv", "summary.json", "accuracy_per_round.png"):
        assert (out / name).stat().st_size > 0
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 2 * 9 and runs["seed"].nunique() == 2 and (runs["engine"] == "local").all()
    assert len(pd.read_csv(out / "rounds.csv")) == 2 * 9 * 2
    saved = json.loads((out / "summary.json").read_text())
    assert saved["rows"] == rows and saved["config"]["repeats"] == 2


def test_compare_train_defaults_to_the_flower_engine():
    from simulations.compare_train import resolve

    base, mechanisms, epsilons, aggregators, repeats, _ = resolve({"engine": None})
    assert base.run.engine == "flower" and base.run.task == "train"
    assert (mechanisms, epsilons, repeats) == (["laplace"], [1.5, 4.9, 15.3], 2)
    assert aggregators == list(AGGREGATORS)


def test_compare_mean_rejects_training_options(tmp_path):
    result = runner.invoke(app, ["compare", "--model", "cnn", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "--model do(es) not apply to --task mean" in " ".join(result.output.split())
    assert not (tmp_path / "x").exists()

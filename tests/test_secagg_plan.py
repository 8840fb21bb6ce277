"""`ldpfed plan --trust`: the trust models side by side at one total (eps, delta) per client, secagg's
distributed discrete Gaussian parameters from its accountant, the predicted error of each row, and
bad input in one line (exit 2)."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

import ldpfed.tasks as tasks
from ldpfed.accounting.ddgauss import DEFAULT_BETA, ddgauss_epsilon, ddgauss_params
from ldpfed.cli.main import app
from ldpfed.planning.calibration import TotalBudget
from ldpfed.planning.trust_plan import plan_trust
from ldpfed.protocols import seeds
from ldpfed.protocols.secagg import plan_for

runner = CliRunner()
MEAN_TASK = tasks.get("mean")
MEAN = ["plan", "--task", "mean", "--users", "2000", "--dims", "10", "--clients", "10", "--rounds", "3"]


def _mean_config(clients: int = 10, rounds: int = 3, bits: int = 16):
    from dataclasses import replace

    config = tasks.resolve(None, {"task": "mean", "users": 2000, "dims": 10, "clients": clients, "rounds": rounds})
    config = tasks.of(config).bind(config, seeds.data_seed(config.run.seed))
    return replace(config, privacy=replace(config.privacy, bits=bits))


def test_secagg_row_uses_the_accountants_parameters_and_predicts_the_noise_of_the_sum():
    """gamma and sigma are `ddgauss_params`' at the padded dimension (D = 16 for d = 10), clip
    sqrt(d), every client's share in every round; the spent eps is the accountant's for T rounds
    of N shares (within the total); the predicted MSE per coordinate is (sigma^2 + gamma^2/4) / N."""
    total = TotalBudget(2.0, 1e-5)
    (row,) = plan_trust(MEAN_TASK, _mean_config(bits=14), total, ["secagg"])
    reference = ddgauss_params(2.0, 1e-5, 10, 16, 14, math.sqrt(10), rounds=3)
    p = row.parameters
    assert (p["bits"], p["padded_dims"], p["shares_per_round"], p["beta"]) == (14, 16, 10, DEFAULT_BETA)
    assert p["gamma"] == pytest.approx(reference.gamma, rel=1e-9)
    assert p["local_stddev"] == pytest.approx(reference.local_stddev, rel=1e-9)
    assert row.error == pytest.approx((reference.local_stddev**2 + reference.gamma**2 / 4) / 10, rel=1e-9)
    assert row.noise_sd_on_mean == pytest.approx(reference.local_stddev / math.sqrt(10), rel=1e-9)
    assert row.spent == pytest.approx(ddgauss_epsilon(reference.event, 3, 1e-5), rel=1e-9)
    assert 2.0 * (1 - 1e-6) <= row.spent <= 2.0  # sigma is the smallest that meets the total
    assert row.bits_per_value == 14 and row.against_server == row.spent and row.unit == "per client"


def test_secagg_plan_is_the_encoder_simulate_runs():
    """plan --trust and simulate --trust secagg calibrate the same encoder (ldpfed.protocols.secagg.plan_for)."""
    from dataclasses import replace

    config = _mean_config()
    (row,) = plan_trust(MEAN_TASK, config, TotalBudget(4.0, 1e-5), ["secagg"])
    run = replace(config, privacy=replace(config.privacy, trust="secagg", max_epsilon=4.0, max_delta=1e-5))
    ddg = plan_for(run, 10, math.sqrt(10), server_seed=0).ddg
    assert (row.parameters["gamma"], row.parameters["local_stddev"]) == (ddg.gamma, ddg.local_stddev)


def test_fewer_bits_cost_more_noise_and_more_clients_less_error():
    """Fewer bits force a coarser grid: the rounding inflates the sensitivity and the share; the
    error falls as 1/N with more clients (same total per client)."""
    total = TotalBudget(2.0, 1e-5)
    coarse, fine = (plan_trust(MEAN_TASK, _mean_config(bits=b), total, ["secagg"])[0] for b in (8, 16))
    assert coarse.parameters["gamma"] > fine.parameters["gamma"] and coarse.error > fine.error
    many = plan_trust(MEAN_TASK, _mean_config(clients=40), total, ["secagg"])[0]
    assert many.error < fine.error / 3  # 4x the clients: about 1/4 the error


def test_local_row_spends_the_total_against_everyone_and_predicts_the_report_noise():
    """local: eps per report from the calibration of the total over T rounds; the sd on each
    dimension's mean is the report's sd over sqrt(users) (every user reports every dimension)."""
    (row,) = plan_trust(MEAN_TASK, _mean_config(), TotalBudget(2.0, 1e-5), ["local"])
    assert row.spent <= 2.0 and row.against_server == row.spent and row.unit.startswith("per user")
    assert row.noise_sd_on_mean == pytest.approx(row.noise_sd / math.sqrt(2000), rel=1e-12)
    assert row.error == pytest.approx(row.noise_sd_on_mean**2, rel=1e-12)
    assert row.bits_per_value == 64


def test_plan_trust_cli_prints_json_rows_with_secaggs_parameters():
    result = runner.invoke(app, [*MEAN, "--budget", "2,1e-5", "--trust", "local,secagg", "--bits", "12", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    rows = {row["trust"]: row for row in summary["rows"]}
    assert set(rows) == {"local", "secagg"}
    secagg = rows["secagg"]["parameters"]
    assert secagg["bits"] == 12 and secagg["gamma"] > 0 and secagg["local_stddev"] > 0 and secagg["beta"] < 1
    assert rows["secagg"]["bits_per_value"] == 12 and rows["local"]["bits_per_value"] == 64
    assert summary["compare"].startswith(
        "ldpfed compare --task mean --users 2000 --dims 10 --clients 10 --rounds 3 --trust local,secagg"
    )
    assert "--trust secagg --bits 12" in summary["simulate_secagg"]  # compare runs secagg at its default bits


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budget", "2,1e-5", "--trust", "secagg", "--bits", "2"], "bits = 2 is too few for the sum of 10 clients"),
        (["--budget", "2", "--trust", "secagg"], "secagg's guarantee is (eps, delta)"),
        (["--budget", "2,1e-5", "--trust", "central"], "--trust central applies to --task train"),
        (["--budget", "2,1e-5", "--trust", "local", "--bits", "12"], "--bits applies to plan --trust secagg"),
        (["--budget", "2,1e-5", "--bits", "12"], "--bits applies to plan --trust secagg"),
        (["--budget", "2,1e-5", "--trust", "secagg", "--participation", "0.5"], "--participation do(es) not apply"),
        (["--budget", "2,1e-5", "--trust", "nonesuch"], "nonesuch"),
        (["--budget", "2,1e-5", "--trust", "local", "--mechanism", "gaussian"], "one pure local mechanism"),
        (["--budget", "1e-4,1e-5", "--trust", "secagg", "--bits", "10"], "bits = 10 cannot hold the noise"),
    ],
    ids=["bits-too-few", "pure-total", "central-on-mean", "bits-without-secagg", "bits-without-trust",
         "participation", "unknown-model", "approximate-mechanism", "unaffordable"],
)  # fmt: skip
def test_plan_trust_bad_input_is_one_line_exit_2(extra, message):
    at = MEAN.index("--clients")
    base = MEAN if "--trust" in extra else MEAN[:at] + MEAN[at + 2 :]  # --clients: the mean task's with --trust only
    result = runner.invoke(app, [*base, *extra])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr


def test_plan_trust_refuses_the_frequency_task():
    result = runner.invoke(
        app, ["plan", "--task", "frequency", "--budget", "2,1e-5", "--rounds", "3", "--trust", "local"]
    )
    assert result.exit_code == 2 and "not --task frequency" in result.stderr


def test_train_rows_clip_the_update_to_clip_and_state_no_guarantee_against_a_trusted_server():
    """train: secagg encodes the whole update (digits logreg: d = 650, D = 1024) clipped to --clip,
    as central clips it; central's row holds nothing against the server."""
    result = runner.invoke(
        app,
        ["plan", "--task", "train", "--data", "digits", "--clients", "20", "--clip", "1", "--rounds", "5",
         "--budget", "4,1e-5", "--trust", "central,secagg", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {row["trust"]: row for row in json.loads(result.stdout)["rows"]}
    secagg, central = rows["secagg"], rows["central"]
    assert (secagg["parameters"]["dims"], secagg["parameters"]["padded_dims"], secagg["parameters"]["clip"]) == (
        650,
        1024,
        1.0,
    )
    per_coordinate = (secagg["parameters"]["local_stddev"] ** 2 + secagg["parameters"]["gamma"] ** 2 / 4) / 20
    assert secagg["predicted_error"] == pytest.approx(per_coordinate, rel=1e-9)
    assert central["epsilon_against_server"] is None and secagg["epsilon_against_server"] <= 4.0
    assert central["parameters"]["clip"] == 1.0 and central["bits_per_value"] == 32

"""`ldpfed account`: JSON keys, the published test vectors through the CLI, not-private output,
and one clean error line with exit code 2 for bad input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ldpfed.accounting import create_accountant, pure_round
from ldpfed.cli.main import app

runner = CliRunner()
OPACUS = (
    "-m",
    "gaussian",
    "--noise-multiplier",
    "1.5",
    "--sample-rate",
    "0.04",
    "--rounds",
    "2250",
    "--target-delta",
    "1e-5",
)


def account(*arguments):
    result = runner.invoke(app, ["account", *arguments, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_opacus_vector_through_the_cli():
    rdp = account(*OPACUS, "--accountant", "rdp")
    assert {"epsilon", "delta", "accountant", "private"} <= set(rdp)
    assert rdp["accountant"] == "rdp" and rdp["private"] is True and rdp["delta"] == 1e-5
    assert 7.32911117143 <= rdp["epsilon"] <= 7.32911117143 + 3e-4  # Opacus publishes 7.32911117143
    pld = account(*OPACUS, "--accountant", "pld")
    assert abs(pld["epsilon"] - 6.777395712150674) <= 0.01  # Opacus's PRV value, within its eps error
    assert pld["noise_multiplier"] == 1.5 and pld["event"]["type"] == "PoissonSampledDpEvent"


def test_pure_rounds_by_every_accountant_that_takes_them():
    common = ("-m", "piecewise", "--epsilon", "0.1", "--rounds", "100")
    figures = {name: account(*common, "--accountant", name) for name in ("basic", "advanced", "pld")}
    assert figures["basic"]["epsilon"] == pytest.approx(10.0) and figures["basic"]["delta"] == 0.0
    assert figures["pld"]["epsilon"] < figures["advanced"]["epsilon"] < figures["basic"]["epsilon"]
    assert figures["pld"]["epsilon"] == pytest.approx(
        create_accountant("pld").compose(pure_round(0.1), 100).get_epsilon(1e-5), rel=1e-12
    )
    assert account(*common)["accountant"] == "pld"  # the default


def test_gaussian_by_its_calibration_and_by_its_noise_multiplier():
    calibrated = account(
        "-m", "gaussian", "--epsilon", "1", "--delta", "1e-6", "--rounds", "10", "--accountant", "basic"
    )
    assert calibrated["epsilon"] == pytest.approx(10.0) and calibrated["delta"] == pytest.approx(1e-5)
    z = calibrated["noise_multiplier"]
    by_z = account(
        "-m", "gaussian", "--noise-multiplier", str(z), "--delta", "1e-6", "--rounds", "10", "--accountant", "basic"
    )
    assert by_z["epsilon"] == pytest.approx(10.0, abs=1e-2)  # the per-round eps at 1e-6 is 1 (PLD)
    pld = account("-m", "gaussian", "--epsilon", "1", "--delta", "1e-6", "--rounds", "10", "--target-delta", "1e-5")
    assert pld["epsilon"] < 10.0 / 2


def test_mechanism_none_is_not_private():
    result = runner.invoke(app, ["account", "-m", "none", "--rounds", "3", "--json"])
    assert result.exit_code == 0, result.output
    assert '"epsilon": null' in result.stdout
    payload = json.loads(result.stdout)
    assert payload["private"] is False and payload["epsilon"] is None and payload["reasons"]
    table = runner.invoke(app, ["account", "-m", "none", "--rounds", "3"])
    assert table.exit_code == 0 and "not private" in table.output


def test_table_output():
    result = runner.invoke(app, ["account", "-m", "laplace", "-e", "0.5", "-T", "20", "--accountant", "advanced"])
    assert result.exit_code == 0, result.output
    assert "advanced" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("-m", "laplace", "--noise-multiplier", "1.5", "-T", "10"), "not a noise multiplier"),
        (("-m", "laplace", "-e", "1", "-T", "10", "--accountant", "rdp"), "rdp accountant cannot account"),
        (("-m", "laplace", "-e", "1", "--delta", "1e-5", "-T", "10"), "takes no delta"),
        (("-m", "laplace", "-e", "1", "--sample-rate", "0.1", "-T", "10"), "Gaussian rounds only"),
        (("-m", "foo", "-e", "1", "-T", "10"), "unknown mechanism"),
        (("-m", "laplace", "-e", "nan", "-T", "10"), "epsilon"),
        (("-m", "laplace", "-e", "1", "-T", "0"), "--rounds"),
        (("-m", "laplace", "-e", "1", "-T", "10", "--accountant", "prv"), "unknown accountant"),
        (("-m", "gaussian", "-e", "1", "-T", "10"), "delta"),
        (("-m", "gaussian", "-z", "1", "-T", "10", "--accountant", "basic"), "per-round --delta"),
        (("-m", "gaussian", "-z", "1", "--delta", "1e-5", "-T", "10", "--accountant", "rdp"), "--target-delta"),
        (("-m", "gaussian", "-z", "1", "-q", "1.5", "-T", "10"), "sample_rate"),
        (("-m", "gaussian", "-z", "1", "-T", "10", "--target-delta", "0"), "--target-delta"),
        (("-m", "none", "-e", "1", "-T", "3"), "no privacy parameters"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(arguments, message):
    result = runner.invoke(app, ["account", *arguments, "--json"])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert message in text and text.startswith("error:") and text.count("error:") == 1
    assert "Traceback" not in text and "{" not in result.stdout

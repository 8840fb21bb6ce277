"""`ldpfed calibrate`: the papers' parameters under their names, the spec's check values."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ldpfed.accounting.plrvo import PlrvoStep
from ldpfed.cli.main import app
from ldpfed.gradient_noise import GUARANTEE_FAILS

runner = CliRunner()


def calibrate(*arguments) -> dict:
    result = runner.invoke(app, ["calibrate", *arguments, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_inid_gaussian_eta_and_layers():
    record = calibrate(
        "--mechanism",
        "inid-gaussian",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--layers",
        "1:4,0.5:9",
        "--sampler",
        "continuous",
    )
    assert record["parameters"]["eta"] == pytest.approx(0.268051, abs=5e-7)
    assert record["dims"] == 13 and record["guarantee_holds"] is True
    assert record["sampler"] == "continuous" and record["floating_point_safe"] is False
    safe = calibrate("--mechanism", "inid-gaussian", "--epsilon", "1", "--delta", "1e-5", "--layers", "1:4,0.5:9")
    assert safe["sampler"] == "safe" and safe["floating_point_safe"] is True
    assert safe["parameters"]["eta_star_continuous"] == pytest.approx(0.268051, abs=5e-7)
    assert safe["parameters"]["eta"] < 0.268051  # RDP calibration and the grid: more noise
    laplace = calibrate("--mechanism", "inid-laplace", "--epsilon", "1", "--dims", "20")
    assert laplace["sampler"] == "safe" and laplace["parameters"]["realized_epsilon"] <= 1.0
    bad = runner.invoke(
        app,
        ["calibrate", "--mechanism", "r1smg", "--epsilon", "1", "--delta", "1e-5", "--dims", "5", "--sampler", "safe"],
    )
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1


def test_r1smg_and_product_noise_check_values_and_marking():
    r1smg = calibrate("--mechanism", "r1smg", "--epsilon", "1", "--delta", "1e-5", "--dims", "100")
    assert r1smg["parameters"]["inv_psi"] == pytest.approx(1.331629, abs=5e-7)
    product = calibrate("--mechanism", "product-noise", "--epsilon", "0.1", "--dims", "1000000", "--k", "1000")
    assert product["parameters"]["t"] == pytest.approx(428.899, abs=5e-4)
    assert product["parameters"]["delta"] == pytest.approx(1.144e-6, abs=5e-10)
    for record in (r1smg, product):
        assert record["private"] is False and GUARANTEE_FAILS in record["warning"]
    searched = calibrate("--mechanism", "product-noise", "--epsilon", "1", "--dims", "1000", "--delta", "1e-5")
    assert searched["parameters"]["k_searched"] and searched["parameters"]["delta"] <= 1e-5


def test_plrvo_search_reaches_the_target_by_the_joint_accountant():
    record = calibrate(
        "--mechanism", "plrvo", "--epsilon", "2", "--dims", "50", "--sample-rate", "0.05", "--steps", "10"
    )
    p = record["parameters"]
    eps, _ = PlrvoStep(p["k"], p["theta"], 1.0, 50, 0.05).epsilon(10, 1e-5, "joint")
    assert eps <= 2.0 and eps == pytest.approx(2.0, rel=1e-3)
    assert p["epsilon_paper"] < p["epsilon_joint"]


def test_table_output_names_the_verdict():
    result = runner.invoke(
        app, ["calibrate", "--mechanism", "r1smg", "--epsilon", "1", "--delta", "1e-5", "--dims", "10"]
    )
    assert result.exit_code == 0 and GUARANTEE_FAILS in result.stdout

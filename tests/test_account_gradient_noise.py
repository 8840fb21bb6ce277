"""`ldpfed account` for PLRV-O (joint, paper, rdp) and the i.n.i.d. Gaussian (gradient-noise.md)."""

from __future__ import annotations

import json

import pytest
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.pld import PLDAccountant
from typer.testing import CliRunner

from ldpfed.accounting.plrvo import PlrvoStep
from ldpfed.cli.main import app

runner = CliRunner()
PLRVO = [
    "--mechanism",
    "plrvo",
    "--k",
    "20",
    "--theta",
    "0.05",
    "--clip",
    "1",
    "--dims",
    "200",
    "--sample-rate",
    "0.05",
    "--rounds",
    "50",
    "--target-delta",
    "1e-5",
]


def account(*arguments) -> dict:
    result = runner.invoke(app, ["account", *arguments, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("accountant", ["joint", "paper"])
@pytest.mark.parametrize("sampler", ["safe", "continuous"])
def test_plrvo_step_epsilon_is_the_library_accountant(accountant, sampler):
    """Default: the safe sampler, accounted for what it samples (slightly above the continuous law)."""
    from ldpfed.samplers.plrvo_safe import SafeLaw

    record = account(*PLRVO, "--accountant", accountant, *(["--sampler", sampler] if sampler == "continuous" else []))
    law = SafeLaw.for_params(200) if sampler == "safe" else None
    expected, order = PlrvoStep(20.0, 0.05, 1.0, 200, 0.05, law).epsilon(50, 1e-5, accountant)
    assert record["epsilon"] == pytest.approx(expected, rel=1e-12) and record["order"] == order
    assert record["sound"] is (accountant == "joint") and record["sampler"] == sampler
    assert record["event"]["sampler"] == sampler


def test_plrvo_default_is_joint_and_rdp_ledger_is_an_upper_bound():
    joint = account(*PLRVO)
    assert joint["accountant"] == "joint"
    rdp = account(*PLRVO, "--accountant", "rdp")
    assert rdp["epsilon"] >= joint["epsilon"] - 1e-12


def test_plrvo_paper_check_value_through_the_cli():
    record = account(
        "--mechanism",
        "plrvo",
        "--k",
        "30000",
        "--theta",
        "5e-5",
        "--clip",
        "0.1",
        "--dims",
        "26010",
        "--sample-rate",
        "0.01",
        "--rounds",
        "300",
        "--target-delta",
        "1e-5",
        "--accountant",
        "paper",
    )
    assert record["epsilon"] == pytest.approx(0.1718, abs=1e-3)


def test_inid_gaussian_is_the_sampled_gaussian_of_its_noise_multiplier():
    record = account(
        "--mechanism",
        "inid-gaussian",
        "--noise-multiplier",
        "1.1",
        "--sample-rate",
        "0.01",
        "--rounds",
        "500",
        "--layers",
        "1:100,0.5:10",
    )
    library = PLDAccountant().compose(SelfComposedDpEvent(PoissonSampledDpEvent(0.01, GaussianDpEvent(1.1)), 500))
    assert record["epsilon"] == pytest.approx(library.get_epsilon(1e-5), rel=1e-3)
    assert record["profile"]["dims"] == 110
    assert record["profile"]["mse_per_round"] == pytest.approx(1.1**2 * (100 * 1 / 10 + 10 * 0.5 / 10**0.5) ** 2)


@pytest.mark.parametrize(
    "fault",
    [
        ["--accountant", "pld"],
        ["--theta", "20"],
        ["--epsilon", "1"],
        ["--k", "0.5"],
    ],
)
def test_plrvo_bad_input_is_one_line(fault):
    arguments = list(PLRVO)
    for flag, value in zip(fault[::2], fault[1::2]):
        if flag in arguments:
            arguments[arguments.index(flag) + 1] = value
        else:
            arguments += [flag, value]
    result = runner.invoke(app, ["account", *arguments])
    assert result.exit_code == 2 and result.stderr.strip().startswith("error:"), result.output


def test_inid_gaussian_profile_file_and_ledger_totals_of_plrvo(tmp_path):
    from ldpfed.accounting import PlrvoDpEvent, PrivacyLedger

    path = tmp_path / "profile.txt"
    path.write_text("\n".join(["0.5"] * 4 + ["0.25"] * 16))
    record = account("--mechanism", "inid-gaussian", "--noise-multiplier", "2", "--rounds", "3", "--profile", str(path))
    assert record["profile"]["dims"] == 20
    assert record["profile"]["mse_per_round"] == pytest.approx(4 * (4 * 0.5 + 16 * 0.25) ** 2)
    ledger = PrivacyLedger()
    for step in range(3):
        ledger.record_event("c", step, PlrvoDpEvent(20.0, 0.05, 1.0, 200, 0.05))
    totals = ledger.totals()["c"]
    assert totals["private"] and totals["rdp_epsilon"] > 0
    assert totals["pld_epsilon"] is None and totals["basic_epsilon"] is None

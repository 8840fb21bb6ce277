"""`ldpfed audit`: the JSON object, the exit codes, clean failure on bad input.

Expected values come from the Python API run with the same arguments, built independently of the
CLI's option handling.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ldpfed.audit import audit
from ldpfed.audit.subjects import has_sampler_option
from ldpfed.cli.main import app

runner = CliRunner()
REQUIRED = {
    "mechanism",
    "claimed_epsilon",
    "claimed_delta",
    "epsilon_lower",
    "confidence",
    "event",
    "samples",
    "verdict",
    "sampler",
}


def _continuous(name: str) -> list[str]:
    return ["--sampler", "continuous"] if has_sampler_option(name) else []


def test_json_has_the_contract_keys_and_matches_the_api():
    result = runner.invoke(app, ["audit", "-m", "oue", "-e", "2", "--samples", "20000", "--seed", "3", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    assert REQUIRED <= set(row)
    expected = audit("oue", 2.0, samples=20_000, seed=3, k=4).to_dict()
    assert row == json.loads(json.dumps(expected))
    assert row["verdict"] == "pass" and row["claimed_delta"] == 0.0 and row["confidence"] == 0.99


def test_progress_goes_to_stderr_a_line_per_step_off_a_terminal():
    result = runner.invoke(app, ["audit", "-m", "laplace", "-e", "1", "--samples", "2000", "--json"])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout holds the JSON alone
    steps = result.stderr.splitlines()
    total = len(steps)
    assert steps[0].startswith(f"audit: 1/{total} 2,000 draws at neighbour 1/2 (")
    assert steps[1].startswith(f"audit: 2/{total} 2,000 draws at neighbour 2/2 (")
    assert all(f"/{total} event family " in step for step in steps[2:]) and total > 2


def test_refuted_claim_exits_1_and_still_prints_the_result():
    result = runner.invoke(
        app, ["audit", "-m", "laplace", "-e", "1", "--samples", "20000", *_continuous("laplace"), "--json"]
    )
    assert result.exit_code == 1, result.output
    row = json.loads(result.stdout)
    assert row["verdict"] == "fail" and row["epsilon_lower"] > row["claimed_epsilon"]
    assert row["sampler"] == "continuous"


def test_table_output_names_the_verdict_and_the_event():
    result = runner.invoke(
        app,
        [
            "audit",
            "-m",
            "square-wave",
            "--estimator",
            "debiased",
            "-e",
            "1.5",
            "--samples",
            "4000",
            "--confidence",
            "0.9",
            *_continuous("square-wave"),
        ],
    )
    assert result.exit_code in (0, 1), result.output
    assert "square-wave[estimator=debiased]" in result.stdout
    assert ("PASS" in result.stdout) or ("FAIL" in result.stdout)
    assert "never-produced" in result.stdout and "threshold" in result.stdout


@pytest.mark.parametrize(
    "arguments",
    [
        ["-m", "laplace", "-e", "-1"],
        ["-m", "laplace", "-e", "nan"],
        ["-m", "nope", "-e", "1"],
        ["-m", "gaussian", "-e", "1"],
        ["-m", "laplace", "-e", "1", "--delta", "0.1"],
        ["-m", "laplace", "-e", "1", "--samples", "5"],
        ["-m", "laplace", "-e", "1", "--confidence", "1.5"],
        ["-m", "laplace", "-e", "1", "--sampler", "bogus"],
        ["-m", "grr", "-e", "1", "--categories", "1"],
    ],
)
def test_bad_input_exits_2_with_one_line_and_no_output(arguments):
    result = runner.invoke(app, ["audit", *arguments, "--json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "error" in result.stderr

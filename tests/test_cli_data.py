"""Reading tuple data in `predict` and `compare`: CSV files with
and without a header row, --header/--no-header, what was read on stderr, --out-of-domain, the scale
of errors with --domain, the default data set, and compare's progress lines without a terminal.

Expected values come from the library (`ldpfed.analysis.predict`, numpy), never from the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import ldpfed

from ldpfed.analysis import predict

ROWS, COLUMNS = 400, 3


@pytest.fixture
def values():
    return np.random.default_rng(11).uniform(0.0, 10.0, size=(ROWS, COLUMNS))


def _csv(path, values, header: bool):
    lines = (["a,b,c"] if header else []) + [",".join(f"{v:.17g}" for v in row) for row in values]
    path.write_text("\n".join(lines) + "\n")
    return path


def _predict_json(*arguments):
    result = ldpfed("predict -m duchi -e 1 --json", *arguments)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def _compare(path, *arguments):
    """`compare` of Laplace at eps 1 on the tuples of a file, one repetition."""
    return ldpfed("compare -m laplace -e 1 --repeats 1 --data", path, *arguments)


def _expected_mse(values, low=0.0, high=10.0):
    scaled = 2.0 * (np.clip(values, low, high) - low) / (high - low) - 1.0
    return predict("duchi", 1.0, len(values), values.shape[1], None, scaled).mse


@pytest.mark.parametrize("header", [False, True])
def test_predict_reads_every_row_of_a_csv_with_or_without_header(tmp_path, values, header):
    path = _csv(tmp_path / "d.csv", values, header)
    payload, stderr = _predict_json("--domain 0,10 --data", path)
    assert payload["users"] == ROWS and payload["dims"] == COLUMNS  # headerless: the first row was lost before
    assert payload["mse"] == pytest.approx(_expected_mse(values), rel=1e-12)
    assert f"read {ROWS} rows x {COLUMNS} columns" in stderr
    assert ("header row skipped" if header else "no header row") in stderr
    given = _predict_json(f"--domain 0,10 --users {ROWS} --data", path)[0]  # was "399 rows but users=400"
    assert given["users"] == ROWS


def test_header_options_override_the_detection(tmp_path, values):
    numbers = _csv(tmp_path / "n.csv", values, header=False)
    payload, stderr = _predict_json("--domain 0,10 --header --data", numbers)
    assert payload["users"] == ROWS - 1 and f"read {ROWS - 1} rows" in stderr
    named = _csv(tmp_path / "h.csv", values, header=True)
    result = ldpfed("predict -m duchi -e 1 --no-header --data", named)
    assert result.exit_code == 2 and "cannot read" in result.stderr


@pytest.mark.parametrize("header", [False, True])
def test_compare_reads_every_row_of_a_csv_with_or_without_header(tmp_path, values, header):
    path = _csv(tmp_path / "d.csv", values, header)
    out = tmp_path / "out"
    result = _compare(path, "--domain 0,10 --aggregators mean --out", out)
    assert result.exit_code == 0, result.output
    config = json.loads((out / "summary.json").read_text())["config"]
    assert (config["users"], config["dims"]) == (ROWS, COLUMNS)
    assert f"read {ROWS} rows x {COLUMNS} columns" in result.stderr


def test_out_of_domain_error_advises_an_option_that_exists_and_clip_works(tmp_path, values):
    path = _csv(tmp_path / "d.csv", values, header=False)  # values in [0, 10], declared [0, 8]
    refused = ldpfed("predict -m duchi -e 1 --domain 0,8 --data", path)
    assert refused.exit_code == 2 and "--out-of-domain clip" in refused.stderr
    payload, stderr = _predict_json("--domain 0,8 --out-of-domain clip --data", path)
    outside = int(np.count_nonzero(values > 8.0))
    assert f"{outside} value(s) outside the domain clipped" in stderr
    assert payload["mse"] == pytest.approx(_expected_mse(values, 0.0, 8.0), rel=1e-12)
    compare = _compare(path, "--domain 0,8 --out-of-domain clip --json")
    assert compare.exit_code == 0, compare.output
    assert f"{outside} value(s) outside the domain clipped" in compare.stderr


def test_errors_on_a_declared_domain_say_their_scale(tmp_path, values):
    path = _csv(tmp_path / "d.csv", values, header=False)
    payload, _ = _predict_json("--domain 0,10 --data", path)
    assert payload["scale"]["scale"] == "normalised [-1, 1]"
    assert payload["scale"]["mse_to_data_units"] == pytest.approx(((10.0 - 0.0) / 2.0) ** 2)
    table = ldpfed("predict -m duchi -e 1 --domain 0,10 --data", path)
    assert "normalised [-1, 1] scale" in " ".join(table.stdout.split())
    out = tmp_path / "out"
    compared = _compare(path, "--domain 0,10 --out", out)
    assert compared.exit_code == 0 and "normalised [-1, 1] scale" in " ".join(compared.stdout.split())
    assert json.loads((out / "summary.json").read_text())["config"]["scale"]["mse_to_data_units"] == 25.0


def test_predict_with_only_a_mechanism_and_a_budget_uses_the_default_data_set():
    from ldpfed.data import DEFAULT_DIMS, DEFAULT_SET, DEFAULT_USERS, generate

    result = ldpfed("predict --mechanism piecewise --epsilon 1 --json")
    assert result.exit_code == 0, result.output  # was an AttributeError traceback
    payload = json.loads(result.stdout)
    assert (payload["users"], payload["dims"]) == (DEFAULT_USERS, DEFAULT_DIMS)
    assert "default data set" in payload["data"]
    values = generate(DEFAULT_SET, DEFAULT_USERS, DEFAULT_DIMS, np.random.default_rng(0))
    assert payload["mse"] == pytest.approx(
        predict("piecewise", 1.0, DEFAULT_USERS, DEFAULT_DIMS, None, values).mse, rel=1e-12
    )
    synthetic = ldpfed("predict -m laplace -e 1 --data uniform --json")
    assert synthetic.exit_code == 0, synthetic.output  # was "needs users, dims and a seed"
    half = ldpfed("predict -m laplace -e 1 --users 100")
    assert half.exit_code == 2 and half.stderr.strip() == (
        "error: --dims is missing: give --users and --dims (data-free), or --data"
    )


def test_compare_prints_a_line_per_configuration_without_a_terminal():
    result = ldpfed("compare -m laplace,duchi -e 1,2 -n 300 -d 3 -r 2 --json")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("compare:")]
    assert [line.split(" (")[0] for line in lines] == [
        "compare: 2/8 laplace eps=1 done",
        "compare: 4/8 laplace eps=2 done",
        "compare: 6/8 duchi eps=1 done",
        "compare: 8/8 duchi eps=2 done",
    ]


def test_simulate_config_messages(tmp_path):
    directory = ldpfed("simulate --config", tmp_path)
    assert directory.exit_code == 2 and "is a directory" in directory.stderr  # was "not found"
    typo = tmp_path / "typo.toml"
    typo.write_text("[federation]\nclients = 'ten'\n")
    wrong_type = ldpfed("simulate --config", typo)
    assert wrong_type.exit_code == 2 and "must be an int" in wrong_type.stderr  # was "must be a int"

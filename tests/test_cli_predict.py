"""`ldpfed predict`: JSON keys, the optional analyses, and clean exit 2 on bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers import ldpfed

from ldpfed.analysis import predict

REQUIRED_KEYS = {"mse", "bias_sq", "variance", "berry_esseen", "mechanism", "epsilon", "users", "dims", "report_dims"}


def run(*parts):
    """`ldpfed predict PARTS...` (tests/helpers.py: str parts split at white space, paths whole)."""
    return ldpfed("predict", *parts)


def flat(result) -> str:
    return " ".join(result.output.split())


def test_json_has_the_required_keys_and_matches_the_library():
    result = run(
        "--mechanism piecewise --epsilon 2 --users 2000 --dims 6 --report-dims 2 --data poisson --seed 4 --json"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert REQUIRED_KEYS <= set(payload)
    assert len(payload["per_dimension"]["sigma2"]) == 6
    from ldpfed.data import generate

    values = generate("poisson", 2000, 6, np.random.default_rng(4))
    assert payload["mse"] == pytest.approx(predict("piecewise", 2.0, 2000, 6, 2, values).mse, rel=1e-12)
    assert payload["report_dims"] == 2 and payload["epsilon"] == 2.0


def test_compare_and_confidence(tmp_path):
    output = tmp_path / "results"
    result = run(
        "-m square-wave -e 1 -n 5000 -d 4 --data gaussian --estimator raw --compare piecewise --confidence 0.95 --json",
        "--out",
        output,
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["report_dims"] == 4  # default m = d
    assert payload["mechanism"]["options"] == {"estimator": "raw"}
    assert {"winner", "break_even_users", "mse_a", "mse_b"} <= set(payload["compare"])
    assert payload["compare"]["winner"] in (payload["compare"]["a"], payload["compare"]["b"])
    assert len(payload["confidence"]["per_dimension"]) == 4
    assert json.loads((output / "prediction.json").read_text())["mse"] == payload["mse"]
    rows = pd.read_csv(output / "per_dimension.csv")
    assert list(rows["dimension"]) == [0, 1, 2, 3]
    assert np.allclose(rows["mse"], rows["delta"] ** 2 + rows["sigma2"])
    assert np.allclose(rows["mse"].mean(), payload["mse"])
    assert np.allclose(rows["error_supremum"], payload["confidence"]["per_dimension"])


def test_human_output_and_data_free_laplace():
    result = run("-m laplace -e 1 -n 1000 -d 3 --confidence 0.9 --compare gaussian --delta 1e-6")
    # --delta goes to the approximate mechanism only; Laplace needs no data.
    assert result.exit_code == 2 and "takes no delta" in flat(result)
    result = run("-m gaussian -e 1 --delta 1e-6 -n 1000 -d 3 --compare laplace --confidence 0.9")
    assert result.exit_code == 0, result.output
    assert "MSE" in result.output and "Berry" in result.output and "Compare" in result.output


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "data.csv"
    values = np.random.default_rng(0).uniform(0, 10, size=(50, 3))
    path.write_text("a,b,c\n" + "\n".join(",".join(f"{v:.6f}" for v in row) for row in values))
    return path


def test_a_data_file_with_a_declared_domain(table):
    result = run("-m", "duchi", "-e", "1", "--data", table, "--domain", "0,10", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["users"] == 50


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["-m", "laplace", "-e", "1", "-n", "100", "-d", "3", "-k", "4"], "report_dims"),
        (["-m", "laplace", "-e", "1", "-n", "0", "-d", "3"], "users"),
        (["-m", "nope", "-e", "1", "-n", "100", "-d", "3"], "unknown mechanism"),
        (["-m", "laplace", "-e", "-1", "-n", "100", "-d", "3"], "epsilon"),
        (["-m", "laplace", "-e", "nan", "-n", "100", "-d", "3"], "epsilon"),
        (["-m", "piecewise", "-e", "1", "-n", "100", "-d", "3"], "depends on the data"),
        (["-m", "laplace", "-e", "1", "-n", "100", "-d", "3", "--estimator", "raw"], "square-wave"),
        (["-m", "laplace", "-e", "1", "-n", "100", "-d", "3", "--confidence", "1.5"], "alpha"),
        (["-m", "laplace", "-e", "1", "-n", "100", "-d", "3", "--domain", "1,0"], "--domain"),
        (["-m", "gaussian", "-e", "1", "-n", "100", "-d", "3"], "delta"),
        (["-m", "laplace", "-e", "1", "-n", "100", "-d", "3", "--data", "nowhere.csv"], "does not exist"),
        (["-m", "laplace", "-e", "1", "-n", "100", "-d", "3", "--data", "mystery"], "neither a synthetic"),
    ],
)
def test_bad_input_exits_2_with_one_line(arguments, message, tmp_path):
    output = tmp_path / "out"
    result = run(*arguments, "--json", "--out", output)
    assert result.exit_code == 2
    text = " ".join(result.output.split())  # rich wraps long messages at the terminal width
    assert message in text
    assert text.startswith("error:") and text.count("error:") == 1 and "Traceback" not in text
    assert not output.exists()


def test_bad_files_exit_2(table, tmp_path):
    wrong_shape = run("-m", "duchi", "-e", "1", "-n", "50", "-d", "4", "--data", table, "--domain", "0,10")
    assert wrong_shape.exit_code == 2 and "columns" in flat(wrong_shape)
    outside = run("-m", "duchi", "-e", "1", "--data", table)  # values up to 10 in the default [-1, 1]
    assert outside.exit_code == 2 and "[-1.0, 1.0]" in flat(outside)
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"not a numpy file")
    unreadable = run("-m", "duchi", "-e", "1", "--data", garbage)
    assert unreadable.exit_code == 2 and "cannot read" in flat(unreadable)

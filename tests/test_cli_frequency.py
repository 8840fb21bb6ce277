"""`ldpfed predict --task frequency` and `ldpfed compare --task frequency` end to end."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ldpfed.cli.main import app
from ldpfed.data.categorical import read_categorical

runner = CliRunner()


def _csv(tmp_path, text: str) -> str:
    path = tmp_path / "answers.csv"
    path.write_text(text)
    return str(path)


def test_predict_frequency_json_per_category(tmp_path):
    path = _csv(tmp_path, "colour,size\n" + "red,S\nblue,M\nred,L\ngreen,S\n" * 50)
    result = runner.invoke(
        app,
        [
            "predict",
            "--task",
            "frequency",
            "-m",
            "grr,oue,piecewise",
            "-e",
            "2",
            "--data",
            path,
            "--report-dims",
            "1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [e["category"] for e in payload["entries"]] == ["blue", "green", "red", "L", "M", "S"]
    assert [p["mechanism"]["oracle"] for p in payload["predictions"]] == ["grr", "oue", "histogram"]
    truth = payload["predictions"][0]["per_entry"]["frequency"]
    np.testing.assert_allclose(truth, [0.25, 0.25, 0.5, 0.25, 0.25, 0.5])
    for prediction in payload["predictions"]:
        assert prediction["report_dims"] if "report_dims" in prediction else True
        assert prediction["mse"] == pytest.approx(np.mean(prediction["per_entry"]["mse"]))
        assert prediction["sampling_variance"] > 0  # m = 1 < d = 2


def test_compare_frequency_writes_truth_next_to_estimates(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "compare",
            "--task",
            "frequency",
            "-m",
            "oue,laplace",
            "--epsilons",
            "1,3",
            "--data",
            "zipf",
            "--users",
            "2000",
            "--dims",
            "3",
            "--categories",
            "4",
            "--report-dims",
            "2",
            "--repeats",
            "2",
            "--seed",
            "4",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    for name in (
        "runs.csv",
        "summary.csv",
        "frequencies.csv",
        "summary.json",
        "frequencies.png",
        "mse_per_aggregator.png",
    ):
        assert (out / name).is_file(), name
    frequencies = pd.read_csv(out / "frequencies.csv", dtype={"category": str})
    assert set(frequencies["aggregator"]) == {"mean", "l1", "l2", "hdr4me", "james-stein", "simplex"}
    assert len(frequencies) == 2 * 2 * 6 * 12
    # the truth column is the data's frequencies (same data seed scheme as the command)
    from ldpfed.protocols.seeds import data_seed

    data = read_categorical("zipf", users=2000, attributes=3, categories="4", rng=np.random.default_rng(data_seed(4)))
    one = frequencies[
        (frequencies["mechanism"] == "oue") & (frequencies["epsilon"] == 1) & (frequencies["aggregator"] == "mean")
    ]
    np.testing.assert_allclose(one["true_frequency"], data.frequencies())
    simplex = frequencies[frequencies["aggregator"] == "simplex"]
    sums = simplex.groupby(["mechanism", "epsilon", "attribute"])["first_estimate"].sum()
    np.testing.assert_allclose(sums, 1.0)
    summary = json.loads((out / "summary.json").read_text())
    rows = {(r["mechanism"], r["epsilon"], r["aggregator"]): r for r in summary["rows"]}
    assert rows[("oue", 1.0, "mean")]["predicted_mse"] > rows[("oue", 3.0, "mean")]["predicted_mse"]
    assert rows[("oue", 1.0, "simplex")]["predicted_mse"] is None


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "--task", "frequency", "-m", "nope"],
        ["compare", "--task", "frequency", "--domain", "0,1"],
        ["compare", "--task", "frequency", "--model", "cnn"],
        ["compare", "--task", "frequency", "--aggregators", "median"],
        ["compare", "--task", "frequency", "--data", "fair", "--categories", "3"],
        ["compare", "--task", "mean", "--categories", "3"],
        ["predict", "--task", "frequency", "-m", "grr", "-e", "1", "--confidence", "0.9"],
        ["predict", "--task", "frequency", "-m", "grr", "-e", "1", "--report-dims", "9"],
        ["predict", "--task", "frequency", "-m", "grr", "-e", "1", "--delta", "1e-5"],
        ["predict", "--task", "nope", "-m", "grr", "-e", "1"],
        ["predict", "-m", "laplace", "-e", "1", "--categories", "3"],
    ],
)
def test_bad_frequency_input_is_one_line_exit_2(tmp_path, args):
    out = tmp_path / "never"
    extra = ["--out", str(out)]
    result = runner.invoke(app, args + extra)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()  # a "data: ..." line may precede the error, as in the mean task
    assert lines[-1].startswith("error:") and sum(line.startswith("error:") for line in lines) == 1
    assert not out.exists()


@pytest.mark.parametrize("text", ["a,b\nc,\n", "1\nnan\n"])
def test_bad_csv_writes_nothing(tmp_path, text):
    out = tmp_path / "never"
    result = runner.invoke(app, ["compare", "--task", "frequency", "--data", _csv(tmp_path, text), "--out", str(out)])
    assert result.exit_code == 2 and "empty or NaN" in result.stderr
    assert not out.exists()

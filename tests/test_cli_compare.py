"""`ldpfed compare`: JSON rows, output files, and clean failures that write nothing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import ldpfed.aggregation as agg
from ldpfed.cli.main import app

SMALL = [
    "compare",
    "--mechanism",
    "laplace",
    "--epsilons",
    "1,4",
    "--users",
    "2000",
    "--dims",
    "6",
    "--repeats",
    "2",
    "--seed",
    "3",
]


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_json_rows_have_the_issue_keys():
    result = invoke(*SMALL, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 2 * len(agg.available("mean"))
    for row in rows:
        assert set(row) == {"mechanism", "epsilon", "aggregator", "mse", "mse_std", "predicted_mse"}
        assert row["mse"] >= 0 and row["mse_std"] >= 0
        assert (row["predicted_mse"] is None) == (row["aggregator"] != "mean")
    # Noise falls with eps: the plain mean's MSE at eps 4 is below that at eps 1.
    mean = {row["epsilon"]: row["mse"] for row in rows if row["aggregator"] == "mean"}
    assert mean[4.0] < mean[1.0]


def test_table_output_and_files(tmp_path):
    out = tmp_path / "cmp"
    result = invoke(*SMALL, "--aggregators", "mean,hdr4me", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "hdr4me" in result.stdout and "predicted" in result.stdout
    runs = pd.read_csv(out / "runs.csv")
    summary = pd.read_csv(out / "summary.csv")
    assert len(runs) == 2 * 2 * 2 and len(summary) == 2 * 2
    payload = json.loads((out / "summary.json").read_text())
    assert payload["config"]["seed"] == 3 and payload["config"]["deviation"] == "plug-in"
    assert payload["config"]["users"] == 2000 and len(payload["rows"]) == 4
    assert (out / "mse_vs_epsilon.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_data_file_and_reproducibility(tmp_path):
    path = tmp_path / "data.npy"
    np.save(path, np.random.default_rng(0).uniform(0, 10, size=(1500, 4)))
    args = [
        "compare",
        "--mechanism",
        "laplace",
        "--epsilons",
        "2",
        "--data",
        str(path),
        "--domain",
        "0,10",
        "--repeats",
        "2",
        "--json",
    ]
    first, second = invoke(*args), invoke(*args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout) == json.loads(second.stdout)


TRAIN = ["compare", "--task", "train", "--engine", "local", "--clients", "2", "--rounds", "1"]
BAD_INPUT = [  # (the run it spoils, the bad option, what the error names)
    (SMALL, ["--epsilons", "1,-2"], "epsilons"),
    (SMALL, ["--epsilons", "1,x"], "epsilons"),
    (SMALL, ["--aggregators", "mean,median"], "unknown aggregator"),
    (SMALL, ["--mechanism", "laplace,nope"], "unknown mechanism"),
    (SMALL, ["--report-dims", "7"], "report_dims"),
    (SMALL, ["--data", "missing.csv"], "does not exist"),
    (SMALL, ["--data", "mnist"], "neither a synthetic set"),
    (SMALL, ["--alpha", "1.5"], "alpha"),
    (SMALL, ["--deviation", "oracle"], "deviation"),
    (SMALL, ["--delta", "1e-5"], "delta"),
    (SMALL, ["--estimator", "debiased"], "estimator"),
    (SMALL, ["--repeats", "0"], "repeats"),
    (SMALL, ["--task", "train"], "task"),
    (SMALL, ["--l2-reference", "truth"], "l2_reference"),
    (TRAIN, ["--aggregators", "mean,median"], "aggregator must be one of"),
    (TRAIN, ["--epsilons", "1,-2"], "epsilon"),
    (TRAIN, ["--epsilons", "1,abc"], "--epsilons"),
    (TRAIN, ["--users", "100"], "--users do(es) not apply to --task train"),
    (TRAIN, ["--engine", "spark"], "engine must be one of"),
]


@pytest.mark.parametrize("base, bad, message", BAD_INPUT)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, base, bad, message):
    out = tmp_path / "out"
    result = invoke(*base, *bad, "--out", str(out))
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not out.exists()


def test_bad_data_values_exit_2(tmp_path):
    path = tmp_path / "bad.csv"
    pd.DataFrame({"a": [0.1, 2.0], "b": [0.0, 0.5]}).to_csv(path, index=False)
    out = tmp_path / "out"
    result = invoke("compare", "--data", str(path), "--mechanism", "laplace", "--out", str(out))
    assert result.exit_code == 2 and "must lie in" in result.output
    assert not out.exists()


def test_the_figure_labels_each_budget_run_once_and_rounds_are_whole_numbers():
    """Log-axis minor labels (0.6, 0.7, ... 3, 4) collided with the budgets; a round axis showed 1.5."""
    from types import SimpleNamespace

    import pandas as pd

    from ldpfed.cli.mean import mse_figure
    from ldpfed.config import Config
    from ldpfed.protocols.recorder import plot_rounds

    budgets = [0.5, 1.0, 2.0, 4.0]
    summary = pd.DataFrame(
        {
            "mechanism": "laplace",
            "options": "",
            "epsilon": budgets,
            "aggregator": "mean",
            "mse": [0.4, 0.1, 0.03, 0.01],
            "mse_se": 0.0,
            "predicted_mse": [0.4, 0.1, 0.03, 0.01],
        }
    )
    figure = mse_figure(SimpleNamespace(summary=summary))
    figure.canvas.draw()
    axis = figure.axes[0]
    shown = [t.get_text() for t in axis.get_xticklabels() if t.get_text()]
    minor = [t.get_text() for t in axis.get_xticklabels(minor=True) if t.get_text()]
    assert shown == ["0.5", "1", "2", "4"] and minor == []
    frame = pd.DataFrame(
        {"round": [1, 2, 3], "mse": 0.1, "mse_plain_mean": 0.1, "predicted_mse": 0.1, "clients_replied": 3}
    ).assign(clients_failed=0)
    rounds = plot_rounds(frame, Config())
    rounds.canvas.draw()
    for axis in rounds.axes:
        assert all(float(t.get_text()).is_integer() for t in axis.get_xticklabels() if t.get_text())

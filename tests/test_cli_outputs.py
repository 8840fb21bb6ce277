"""How the commands write results: JSON without NaN at the value level,
--out and --output checked before any work, another run's results refused unless --overwrite,
Ctrl-C leaving complete files or none with one line. Runs against the commands only, so that each
test can be run on the code before the fix."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import SMALL_COMPARE, runner, words

from ldpfed.cli.main import app
from ldpfed.outputs import write_json

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ".ldpfed-run.json"
COMPARE = words(SMALL_COMPARE)


# ---- results.dumps (item 6) ------------------------------------------------------------------------------
def test_json_results_null_non_finite_values_and_leave_strings_alone(tmp_path):
    payload = {
        "path": "results/NaN_runs.csv",
        "label": "Infinity and -Infinity",
        "nan": math.nan,
        "inf": np.float64(np.inf),
        "values": np.array([1.0, np.nan, -np.inf]),
        "nested": [{"x": -math.inf}, (np.float32(np.nan), 2)],
        "ints": np.arange(3),
        "ok": 0.5,
    }
    path = write_json(tmp_path / "r.json", payload)
    decoded = json.loads(path.read_text(), parse_constant=lambda token: pytest.fail(f"{token} in JSON"))
    assert decoded == {
        "path": "results/NaN_runs.csv",
        "label": "Infinity and -Infinity",
        "nan": None,
        "inf": None,
        "values": [1.0, None, None],
        "nested": [{"x": None}, [None, 2]],
        "ints": [0, 1, 2],
        "ok": 0.5,
    }


# ---- the commands -------------------------------------------------------------------------------
def test_compare_refuses_a_simulate_directory_and_overwrite_clears_only_ldpfeds_files(tmp_path):
    out = tmp_path / "sim"
    out.mkdir()
    for name in ("metrics.csv", "summary.json", "plot.png", "config.toml"):
        (out / name).write_text("simulate's")
    (out / "notes.txt").write_text("mine")
    refused = runner.invoke(app, [*COMPARE, "--out", str(out)])
    assert refused.exit_code == 2 and "holds results of another run" in refused.stderr
    assert (out / "summary.json").read_text() == "simulate's"
    replaced = runner.invoke(app, [*COMPARE, "--out", str(out), "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MANIFEST, "notes.txt", "runs.csv", "summary.csv", "summary.json", "mse_vs_epsilon.png"]
    )
    assert json.loads((out / "summary.json").read_text())["config"]["users"] == 300


@pytest.mark.parametrize("where", ["file", "below a file"])
def test_compare_train_checks_out_before_any_federation(tmp_path, monkeypatch, where):
    import simulations.compare_train as compare_train

    monkeypatch.setattr(compare_train, "run_sweep", lambda *a, **k: pytest.fail("trained before checking --out"))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    out = a_file if where == "file" else a_file / "run"
    result = runner.invoke(
        app, ["compare", "--task", "train", "--engine", "local", "--clients", "2", "--rounds", "1", "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().startswith("error: --out") and len(result.stderr.strip().splitlines()) == 1


SIMULATE = ["simulate", "--engine", "local", "--clients", "2", "--users", "100", "--dims", "2", "--rounds", "1"]


@pytest.mark.parametrize(
    "command",
    [
        SIMULATE,
        COMPARE,
        ["compare", "--task", "frequency"],
        ["compare", "--task", "train", "--engine", "local", "--clients", "2", "--rounds", "1"],
    ],
)
def test_an_empty_out_is_an_error_not_the_current_directory(tmp_path, monkeypatch, command):
    """`--out ""` (an unset shell variable, say) used to write the results into the current
    directory (Path("") is "."); it is one line and exit 2, nothing written. `--out .` still is the
    current directory."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*command, "--out", ""])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().startswith("error: --out is empty") and len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    if command is SIMULATE:
        assert runner.invoke(app, [*command, "--out", "."]).exit_code == 0
        assert (tmp_path / "summary.json").exists()


def test_predict_out_is_checked_first_and_not_replaced_without_overwrite(tmp_path):
    base = ["predict", "-m", "laplace", "-e", "1", "-n", "100", "-d", "3", "--json"]
    target = tmp_path / "p"
    assert runner.invoke(app, [*base, "--out", str(target)]).exit_code == 0
    assert sorted(path.name for path in target.iterdir()) == [MANIFEST, "per_dimension.csv", "prediction.json"]
    first = (target / "prediction.json").read_text()
    again = runner.invoke(app, [*base, "-e", "2", "--out", str(target)])
    assert again.exit_code == 2 and "--overwrite" in again.stderr and (target / "prediction.json").read_text() == first
    frequency = ["predict", "--task", "frequency", "-m", "grr", "-e", "2", "--json", "--out", str(target)]
    replaced = runner.invoke(app, [*frequency, "--overwrite"])
    assert replaced.exit_code == 0 and json.loads((target / "prediction.json").read_text())["epsilon"] == 2.0
    # the earlier run's per-dimension file is gone: the directory holds one run's results
    assert sorted(path.name for path in target.iterdir()) == [MANIFEST, "per_category.csv", "prediction.json"]


def test_predict_has_no_output_option(tmp_path):
    result = runner.invoke(app, ["predict", "-m", "laplace", "-e", "1", "--output", str(tmp_path / "p.json")])
    assert result.exit_code == 2 and "No such option" in result.stderr and not (tmp_path / "p.json").exists()


def test_ctrl_c_during_compare_exits_130_with_one_line_and_writes_nothing(tmp_path):
    """A real SIGINT to a real process, sent once the work has started (first progress line)."""
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-c",
        "from ldpfed.cli.main import app; app()",
        "compare",
        "--mechanism",
        "laplace",
        "--epsilons",
        ",".join(str(e) for e in range(1, 41)),
        "--users",
        "200000",
        "--dims",
        "20",
        "--repeats",
        "2",
        "--aggregators",
        "mean",
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines = []
    for line in process.stderr:  # "data: ..." then one "compare: k/N ..." line per configuration
        lines.append(line)
        if line.startswith("compare:"):
            process.send_signal(signal.SIGINT)
            break
    rest = process.stderr.read()
    process.wait(timeout=60)
    assert process.returncode == 130, "".join(lines) + rest
    *progress, last = rest.strip().splitlines()
    assert last == f"error: interrupted; nothing written to {out}"
    assert all(line.startswith("compare:") for line in progress)  # lines printed before the signal arrived
    assert not out.exists()

"""docs/outputs.md names every file and CSV column the commands write (each --help points there):
read from real runs, so a column added later without its line fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from ldpfed.cli.main import app

PAGE = Path(__file__).resolve().parents[1] / "docs" / "outputs.md"
RUNS = {
    "simulate mean": ["simulate", "--engine", "local", "--rounds", "1", "--clients", "2", "--users", "200"],
    "simulate train": [
        "simulate",
        "--engine",
        "local",
        "--task",
        "train",
        "--rounds",
        "1",
        "--clients",
        "2",
        "--local-steps",
        "1",
    ],
    "compare mean": ["compare", "-m", "laplace", "-e", "1", "--users", "200", "--dims", "2", "--repeats", "1"],
    "compare train": (
        "compare --task train -m laplace -e 4 -a mean --engine local --clients 2 --rounds 1 --local-steps 1 --repeats 1"
    ).split(),
    "simulate shuffle": (
        "simulate --trust shuffle --engine local --users 5000 --dims 2 --clients 2 --rounds 1 --epsilon 1"
    ).split(),
    "compare trust": (
        "compare --trust local,shuffle --users 5000 --dims 2 --clients 2 --rounds 1 --engine local -e 2"
    ).split(),
    "predict mean": ["predict", "-m", "laplace", "-e", "1", "--confidence", "0.9"],
    "predict frequency": ["predict", "--task", "frequency", "-m", "grr,oue", "-e", "1", "--users", "300"],
    "compare frequency": ["compare", "--task", "frequency", "-m", "grr", "-e", "1", "--users", "300", "--repeats", "1"],
    "compare mean budget": "compare -m laplace,gaussian --budget 4,1e-5 --rounds 2 --users 200 --dims 2".split(),
    "compare frequency budget": "compare --task frequency -m grr --budget 4 --rounds 2 --users 300".split(),
    "plan mean": ["plan", "--budget", "4,1e-5", "--rounds", "10", "-m", "laplace"],
    "plan frequency": ["plan", "--task", "frequency", "--budget", "4", "--rounds", "10", "-m", "grr", "--users", "300"],
    "plan train": ["plan", "--task", "train", "--budget", "4,1e-5", "--rounds", "3", "-m", "laplace,inid-gaussian"],
}


def documented() -> set[str]:
    """Every `name` in backquotes on the page."""
    return set(re.findall(r"`([^`\s]+)`", PAGE.read_text()))


@pytest.mark.parametrize("run", sorted(RUNS))
def test_every_file_and_column_is_on_the_outputs_page(tmp_path, run):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*RUNS[run], "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    names = documented()
    files = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    missing = [f for f in files if f not in names]
    for csv in out.glob("*.csv"):
        missing += [f"{csv.name}:{column}" for column in pd.read_csv(csv).columns if column not in names]
    assert not missing, f"{run}: not on docs/outputs.md: {missing}"


@pytest.mark.slow  # a Flower federation (Ray)
def test_a_flower_central_runs_files_and_columns_are_on_the_outputs_page(tmp_path):
    out = tmp_path / "out"
    args = "simulate --task train --trust central --clipping adaptive --max-epsilon 8 --clients 40 --fraction 0.5"
    result = CliRunner().invoke(app, [*args.split(), "--rounds", "1", "--nodes", "1", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    names = documented()
    missing = [p.name for p in out.iterdir() if not p.name.startswith(".") and p.name not in names]
    for csv in out.glob("*.csv"):
        missing += [f"{csv.name}:{column}" for column in pd.read_csv(csv).columns if column not in names]
    assert not missing, f"not on docs/outputs.md: {missing}"


def _keys(record) -> set[str]:
    """Every key of a JSON record, nested ones included."""
    if isinstance(record, dict):
        return set(record) | {key for value in record.values() for key in _keys(value)}
    return set()


def test_every_manifest_field_is_on_the_outputs_page(tmp_path):
    """The manifest of a real run, and its torch record as a training run writes it."""
    from ldpfed.manifest import environment
    from ldpfed.outputs import MANIFEST

    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*RUNS["predict mean"], "--out", str(out)])
    assert result.exit_code == 0, result.output
    record = json.loads((out / MANIFEST).read_text())
    keys = _keys(record) | _keys(environment(load_torch=True))
    assert {"command", "files", "environment", "versions", "git", "numpy_simd", "torch", "python", "os"} <= keys
    missing = sorted(keys - documented())
    assert not missing, f"manifest fields not on docs/outputs.md: {missing}"
    assert MANIFEST in documented()

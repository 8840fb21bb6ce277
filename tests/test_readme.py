"""What the README states that the code can check."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import typer
from typer.testing import CliRunner

from simulations.dpsgd_cli import register

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_flower_version_the_readme_names_is_the_one_installed():
    installed = ".".join(version("flwr").split(".")[:2])
    named = set(re.findall(r"Flower (\d+\.\d+)", README.read_text()))
    assert named == {installed}, f"README names Flower {sorted(named)}, installed {installed}"


def test_the_readme_says_its_geodp_example_stays_at_chance_and_it_does():
    """The README's GeoDP command (without --mia, which adds the attack, not the training) ends at
    chance accuracy on digits' ten classes, as the README says below its examples."""
    text = README.read_text()
    line = next(line for line in text.splitlines() if line.startswith("ldpfed dpsgd --perturbation geodp"))
    command, comment = line.split("#", 1)
    assert "stays at chance" in comment and "The GeoDP example likewise shows GeoDP's cost" in text
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    options = [word for word in command.split()[2:] if word != "--mia"]
    result = CliRunner().invoke(app, ["dpsgd", *options, "--noise-seed", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["accuracy"] < 0.15  # chance: 0.1

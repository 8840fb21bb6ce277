"""What the README states that the code can check."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_flower_version_the_readme_names_is_the_one_installed():
    installed = ".".join(version("flwr").split(".")[:2])
    named = set(re.findall(r"Flower (\d+\.\d+)", README.read_text()))
    assert named == {installed}, f"README names Flower {sorted(named)}, installed {installed}"

"""`ldpfed mechanisms`: the table, `--json`, and clean failure on a bad budget.

Written over `ldpfed.mechanisms.available()`, so every registered randomizer is checked; expected
values come from the mechanism objects themselves, built independently of the CLI.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import ldpfed.mechanisms as registry
from ldpfed.cli import common
from ldpfed.cli.main import app
from ldpfed.cli.mechanisms import EXAMPLE_DELTA

runner = CliRunner()


def _mechanism(name: str, epsilon: float, options: dict):
    return registry.get(name, epsilon, EXAMPLE_DELTA if registry.get_class(name).approximate else None, **options)


def _json(*args: str) -> list[dict]:
    result = runner.invoke(app, ["mechanisms", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("epsilon", [1.0, 2.5])
def test_json_lists_every_mechanism_with_its_properties(epsilon):
    rows = _json("--epsilon", str(epsilon))
    # One row per variant (e.g. both Square-wave estimators); classic Gaussian needs eps < 1.
    expected = [(name, options) for name, options in registry.variants() if options.get("calibration") != "classic"]
    assert [(row["name"], row["options"]) for row in rows] == expected
    assert sorted({row["name"] for row in rows}) == sorted(registry.available())
    for row in rows:
        mechanism = _mechanism(row["name"], epsilon, row["options"])
        assert isinstance(row["guarantee"], str) and row["guarantee"] == mechanism.guarantee
        assert row["bounded"] is mechanism.bounded
        assert row["unbiased"] is mechanism.unbiased
        assert row["epsilon"] == epsilon
        assert row["delta"] == mechanism.delta
        assert row["variance_at_0"] == pytest.approx(float(mechanism.variance(0.0)), rel=1e-12)
        assert row["variance_at_1"] == pytest.approx(float(mechanism.variance(1.0)), rel=1e-12)
        if mechanism.bounded:
            assert row["output_bound"] == pytest.approx(mechanism.output_bound)
        else:
            assert row["output_bound"] is None


def test_json_variance_follows_the_budget():
    """V(0) at eps = 1 and eps = 4 differ for every mechanism (variance falls as eps grows)."""
    low, high = _json("--epsilon", "1"), _json("--epsilon", "4")
    for a, b in zip(low, high):
        assert b["variance_at_0"] < a["variance_at_0"], a["name"]


def test_json_default_epsilon_is_one():
    assert _json() == _json("--epsilon", "1")


def test_table_has_one_row_per_variant(monkeypatch):
    monkeypatch.setattr(common.console, "width", 300)  # one line per row, no folding
    result = runner.invoke(app, ["mechanisms", "--epsilon", "2"])
    assert result.exit_code == 0, result.output
    rows = {}
    for line in result.stdout.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if len(cells) == 8 and cells[0] in registry.available():
            options = dict(item.split("=") for item in cells[7].split(", ")) if cells[7] != "-" else {}
            rows[(cells[0], tuple(options.items()))] = cells
    expected = [(name, options) for name, options in registry.variants() if options.get("calibration") != "classic"]
    assert sorted(rows) == sorted((name, tuple(options.items())) for name, options in expected)
    for (name, options), (_, guarantee, sampler, output, bias, v0, v1, _) in rows.items():
        mechanism = _mechanism(name, 2.0, dict(options))
        assert guarantee == mechanism.guarantee
        assert sampler.startswith("safe") if mechanism.floating_point_safe else "NOT floating-point safe" in sampler
        assert output.startswith("bounded") if mechanism.bounded else output == "unbounded"
        assert bias == ("unbiased" if mechanism.unbiased else "biased")
        assert v0 == f"{float(mechanism.variance(0.0)):.4f}"
        assert v1 == f"{float(mechanism.variance(1.0)):.4f}"


@pytest.mark.parametrize("epsilon", ["0", "-1", "nan", "inf"])
@pytest.mark.parametrize("as_json", [False, True])
def test_bad_epsilon_exits_2_with_one_line_and_no_output(epsilon, as_json):
    args = ["mechanisms", f"--epsilon={epsilon}"] + (["--json"] if as_json else [])
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "epsilon" in lines[0] and "> 0" in lines[0]


def test_non_numeric_epsilon_is_a_usage_error():
    result = runner.invoke(app, ["mechanisms", "--epsilon", "abc"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--epsilon" in result.stderr


def test_classic_gaussian_is_listed_below_eps_one():
    rows = _json("--epsilon", "0.5")
    assert ("gaussian", {"calibration": "classic"}) in [(row["name"], row["options"]) for row in rows]


def test_continuous_samplers_are_listed_as_not_floating_point_safe():
    rows = _json("--sampler", "continuous")
    assert rows and all(
        not row["floating_point_safe"] and "NOT floating-point safe" in row["guarantee"] for row in rows
    )
    safe = _json("--sampler", "safe")  # every mechanism has a safe sampler (the Gaussian's is the discrete Gaussian)
    assert {row["name"] for row in safe} == set(registry.available())
    assert all(row["floating_point_safe"] for row in safe)


@pytest.mark.parametrize("epsilon", ["1e-300", "1e300"])
def test_budget_outside_every_range_exits_2_with_the_range(epsilon):
    result = runner.invoke(app, ["mechanisms", "--epsilon", epsilon])
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "epsilon in [" in lines[0]

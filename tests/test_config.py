"""The one typed, nested config: the TOML files, Flower's run config and the
CLI flags agree with the dataclasses of ldpfed.config, and bad input is one clear error."""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ldpfed import config as configuration
from ldpfed.cli.main import app
from ldpfed.config import OPTIONS, Config, from_flat, from_nested, load_file, to_toml
from ldpfed.tasks import resolve
from ldpfed.validation import LDPValueError

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def typer_flags(function) -> dict[str, object]:
    """{flag name without dashes: typer OptionInfo} of a typer command function."""
    flags = {}
    for parameter in inspect.signature(function).parameters.values():
        info = parameter.default
        declared = [d for d in getattr(info, "param_decls", ()) if d.startswith("--")]
        name = declared[0].split("/")[0][2:] if declared else parameter.name.replace("_", "-")
        flags[name] = info
    return flags


# ---- drift -----------------------------------------------------------------------------------
def test_default_toml_and_flower_run_config_equal_the_dataclass_defaults():
    defaults = Config().to_nested()
    assert tomllib.loads((ROOT / "configs" / "default.toml").read_text()) == defaults
    flower = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
    assert flower == defaults


def test_simulate_flags_are_exactly_the_config_options():
    from simulations.cli import CLI_ONLY, simulate

    flags = typer_flags(simulate)
    cli_only = {"config", "noise-seed", "json", "verbose"}
    assert set(flags) - cli_only == set(OPTIONS)
    assert len(CLI_ONLY) == len(cli_only)
    for name in OPTIONS:
        default = configuration.option_default(name)
        if isinstance(default, bool):  # booleans are --flag/--no-flag switches
            assert flags[name].param_decls == (f"--{name}/--no-{name}",), name


def test_compare_train_flags_are_simulate_options_of_the_same_name():
    from ldpfed.cli.compare import compare
    from simulations.compare_train import PASS_THROUGH

    flags = typer_flags(compare)
    for name in PASS_THROUGH:
        flag = name.replace("_", "-")
        assert flag in OPTIONS and flag in flags, flag
    assert "data" in flags and "tuples" not in flags and "tuples" not in OPTIONS  # `--data` everywhere


def test_the_drift_check_can_fail(tmp_path):
    """A TOML key the dataclasses do not have is an error, not silently ignored."""
    path = tmp_path / "job.toml"
    path.write_text("[privacy]\nepsilonn = 2.0\n")
    with pytest.raises(LDPValueError, match="unknown option 'privacy.epsilonn'"):
        load_file(path)


def test_a_noise_seed_is_no_config_option(tmp_path):
    """The clients' noise root is a secret of the run (`simulate --noise-seed`): the config is written
    to config.toml and, under `flwr run`, is the run config the server reads, so neither a config
    file nor Flower's run config can carry one."""
    with pytest.raises(LDPValueError, match="unknown option 'run.noise-seed'"):
        from_flat({"run.noise-seed": "0x07"}, source="run config")
    path = tmp_path / "job.toml"
    path.write_text('[run]\nnoise-seed = "7"\n')
    with pytest.raises(LDPValueError, match="unknown option 'run.noise-seed'"):
        load_file(path)


# ---- round trips and overrides ---------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "configs").glob("*.toml")))
def test_shipped_configs_are_valid(name):
    resolve(ROOT / "configs" / name)


def test_toml_flat_and_nested_round_trip(tmp_path):
    config = Config().with_options({"task": "train", "clients": 7, "fresh-noise": True, "data": "digits"})
    assert from_flat(config.to_flat()) == config
    assert from_nested(config.to_nested()) == config
    path = tmp_path / "config.toml"
    path.write_text(to_toml(config))
    assert load_file(path) == config


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('[run]\ntask = "train"\n[federation]\nclients = 7\n[training]\nlocal-steps = 3\nlr = 1\n')
    config = resolve(path, {"clients": 5, "rounds": None})
    assert (config.run.task, config.federation.clients, config.training.local_steps, config.training.lr) == (
        "train",
        5,
        3,
        1.0,
    )
    assert config.run.rounds == Config().run.rounds


def test_no_epsilon_is_recorded_without_noise():
    config = Config().with_options({"task": "train", "mechanism": "none"})
    assert "epsilon" not in tomllib.loads(to_toml(config))["privacy"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("[federation]\nclientz = 3\n", "unknown option 'federation.clientz'"),
        ("clients = 3\n", "unknown section 'clients'"),
        ('[federation]\nclients = "four"\n', "'federation.clients' must be an int"),
        ("[privacy]\nepsilon = true\n", "'privacy.epsilon' must be a float"),
        ("[run]\nfresh-noise = 1\n", "'run.fresh-noise' must be a bool"),
        ("[privacy]\nepsilon = -1.0\n", "epsilon"),
        ('[privacy]\nmechanism = "laplase"\n', "unknown mechanism"),
        ("[federation]\nclients = \n", "not valid TOML"),
    ],
)
def test_bad_config_file_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(LDPValueError, match=message):
        resolve(path)


def test_cli_bad_config_exits_2_and_writes_nothing(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[federation]\nclients = 4\nnot_an_option = 1\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["simulate", "--config", str(path), "--out", str(out)])
    assert result.exit_code == 2
    assert "unknown option 'federation.not_an_option'" in " ".join(result.output.split())
    assert not out.exists()
    result = runner.invoke(app, ["simulate", "--fail-clients", "9", "--clients", "4", "--out", str(out)])
    assert result.exit_code == 2 and not out.exists()

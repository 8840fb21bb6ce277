"""Every command of `ldpfed`, given missing or malformed options, ends in one line `error: ...` on
stderr and exit code 2, never a traceback (issue 11, item 10).

The commands are read from the app (`ldpfed.cli.main.app`, plugins such as `simulate` included), and
the generic faults are derived from each command's declared options: an unknown option, an option
without its value, a number option given text, a float option given nan, an int option given -1, each
required option left out. A command added later is checked without any change here; `VALID` (a small
valid invocation, so that the malformed option is the only fault) and `SPECIFIC` (faults that need
domain knowledge: unknown names, bad files, bad output paths) make the checks sharper where given.
"""

from __future__ import annotations

import click
import pytest
import typer
from typer.testing import CliRunner

from ldpfed.cli.main import app

runner = CliRunner()
COMMANDS: dict[str, click.Command] = typer.main.get_command(app).commands

VALID = {
    "account": ["--mechanism", "laplace", "--epsilon", "1", "--rounds", "10"],
    "calibrate": ["--mechanism", "inid-gaussian", "--epsilon", "1", "--delta", "1e-5", "--dims", "10"],
    "mechanisms": [],
    "predict": ["--mechanism", "laplace", "--epsilon", "1", "--users", "100", "--dims", "3"],
    "compare": ["--mechanism", "laplace", "--epsilons", "1", "--users", "200", "--dims", "3", "--repeats", "1"],
    "simulate": ["--engine", "local", "--clients", "2", "--rounds", "1", "--users", "200", "--dims", "3"],
}


def _file(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _specific(tmp_path) -> dict[str, list[list[str]]]:
    """Faults that only make sense for one command; paths under tmp_path."""
    a_file = _file(tmp_path, "a_file.txt", "x")
    outside = _file(tmp_path, "outside.csv", "0.5,2.0\n0.1,0.2\n")
    return {
        "account": [
            ["--mechanism", "nope"],
            ["--epsilon", "0"],
            ["--epsilon", "inf"],
            ["--accountant", "prv"],
            ["--accountant", "rdp"],
            ["--noise-multiplier", "1"],
            ["--sample-rate", "0.5"],
            ["--delta", "1e-5"],
            ["--target-delta", "1"],
            ["--rounds", "0"],
            ["--k", "2"],
            ["--layers", "1:5"],
            ["--mechanism", "plrvo", "--k", "2", "--theta", "0.1", "--params", "5"],
            ["--mechanism", "inid-gaussian"],
        ],
        "calibrate": [
            ["--mechanism", "nope"],
            ["--epsilon", "0"],
            ["--epsilon", "inf"],
            ["--delta", "1"],
            ["--dims", "0"],
            ["--clip", "0"],
            ["--k", "2"],
            ["--sample-rate", "0.5"],
            ["--steps", "3"],
            ["--layers", "1:0"],
            ["--layers", "x"],
            ["--layers", "1:5", "--profile", a_file],
            ["--profile", str(tmp_path / "nowhere.txt")],
            ["--profile", a_file],
            ["--mechanism", "r1smg", "--dims", "2"],
            ["--mechanism", "product-noise", "--k", "1"],
        ],
        "mechanisms": [["--epsilon", "0"], ["--epsilon", "inf"]],
        "predict": [
            ["--mechanism", "nope"],
            ["--epsilon", "-1"],
            ["--epsilon", "1e-400"],
            ["--data", "mystery"],
            ["--data", str(tmp_path / "nowhere.csv")],
            ["--data", str(tmp_path)],
            ["--domain", "1,0"],
            ["--domain", "a,b"],
            ["--out-of-domain", "ignore"],
            ["--output", str(tmp_path)],
            ["--output", str(tmp_path / "x.txt")],
            ["--output", f"{a_file}/x.json"],
            ["--data", outside, "--users", "2", "--dims", "2"],
            ["--data", "gaussian", "--header"],
            ["--data", "uniform", "--domain", "0,10"],
            ["--domain", "0,10"],
        ],
        "compare": [
            ["--epsilons", "1,-2"],
            ["--aggregators", "median"],
            ["--data", str(tmp_path / "nowhere.npy")],
            ["--domain", "0"],
            ["--out-of-domain", "maybe"],
            ["--out", a_file],
            ["--out", f"{a_file}/sub"],
            ["--task", "nope"],
            ["--header"],
            ["--model", "cnn"],
        ],
        "simulate": [
            ["--config", str(tmp_path)],
            ["--config", str(tmp_path / "none.toml")],
            ["--config", _file(tmp_path, "bad.toml", "clients = [")],
            ["--config", _file(tmp_path, "typo.toml", "[federation]\nclients = 'x'")],
            ["--mechanism", "nope"],
            ["--epsilon", "-1"],
            ["--data", "mystery"],
            ["--aggregator", "median"],
            # tuple files as predict and compare read them (issue 11, item 13) and --out (item 11)
            ["--domain", "1,0"],
            ["--domain", "a,b"],
            ["--out-of-domain", "ignore"],
            ["--data", "gaussian", "--header"],
            ["--data", "uniform", "--domain", "0,10"],
            ["--data", outside, "--users", "3"],
            ["--data", outside],
            ["--data", str(tmp_path / "nowhere.csv")],
            ["--data", outside, "--domain", "0,5", "--report-dims", "3"],
            ["--out", a_file],
            ["--out", f"{a_file}/sub"],
            ["--config", _file(tmp_path, "header.toml", "[data]\nheader = true")],
            ["--node-reply", "rows"],
            ["--node-reply", "sum", "--task", "train", "--aggregator", "hdr4me"],
        ],
    }


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.name != "help"]


def _cases(tmp_path) -> list[tuple[str, list[str]]]:
    cases = []
    for name, command in sorted(COMMANDS.items()):
        base = VALID.get(name, [])
        cases.append((name, [*base, "--no-such-option"]))
        for option in _options(command):
            flag = option.opts[0]
            if option.is_flag:
                continue
            cases.append((name, [*base, flag]))  # the value is missing
            if isinstance(option.type, (click.types.IntParamType, click.types.FloatParamType)):
                cases.append((name, [*base, flag, "abc"]))
            if isinstance(option.type, click.types.FloatParamType):
                cases.append((name, [*base, flag, "nan"]))
            if isinstance(option.type, click.types.IntParamType):
                cases.append((name, [*base, flag, "-1"]))
            if option.required:
                without = []
                skip = False
                for item in base:
                    if skip:
                        skip = False
                    elif item in option.opts:
                        skip = True
                    else:
                        without.append(item)
                cases.append((name, without))
        cases.extend((name, [*base, *fault]) for fault in _specific(tmp_path).get(name, []))
    return cases


def assert_one_line_error(result, arguments) -> None:
    shown = f"ldpfed {' '.join(arguments)}\n{result.output}"
    assert result.exit_code == 2, shown
    assert result.exception is None or isinstance(result.exception, SystemExit), shown
    assert "Traceback" not in result.output, shown
    assert result.stdout == "", shown
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error:"), shown
    # Before a late check fails, a command may have said what data it read; nothing else.
    assert all(line.startswith("data:") for line in lines[:-1]), shown


def test_the_app_registers_the_known_commands():
    assert {"mechanisms", "predict", "compare", "simulate"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(VALID))
def test_the_valid_invocations_run(name):
    """Each base invocation succeeds alone, so in the cases below the added fault is the only one."""
    assert name in COMMANDS
    result = runner.invoke(app, [name, *VALID[name], "--json"])
    assert result.exit_code == 0, result.output


def test_every_command_rejects_missing_and_malformed_options_in_one_line(tmp_path):
    cases = _cases(tmp_path)
    assert len(cases) > 100  # every command contributes its generic cases
    failures = []
    for name, arguments in cases:
        result = runner.invoke(app, [name, *arguments])
        try:
            assert_one_line_error(result, [name, *arguments])
        except AssertionError:
            tail = (result.output.strip().splitlines() or [""])[-1][:200]
            failures.append(f"exit {result.exit_code}: ldpfed {name} {' '.join(arguments)} -> {tail}")
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures)

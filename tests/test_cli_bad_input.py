"""Every command of `ldpfed`, given missing or malformed options, ends in one line `error: ...` on
stderr and exit code 2, never a traceback.

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
from click.testing import CliRunner

from ldpfed.cli.main import app

runner = CliRunner()
# The app's click command, built once: typer's CliRunner rebuilds it from every command's signature
# on each invoke (~10 ms), and this file invokes it some 500 times.
CLI = typer.main.get_command(app)
COMMANDS: dict[str, click.Command] = CLI.commands

VALID = {
    "account": ["--mechanism", "laplace", "--epsilon", "1", "--rounds", "10"],
    "audit": ["--mechanism", "laplace", "--epsilon", "1", "--samples", "2000"],
    "calibrate": ["--mechanism", "inid-gaussian", "--epsilon", "1", "--delta", "1e-5", "--dims", "10"],
    "mechanisms": [],
    "predict": ["--mechanism", "laplace", "--epsilon", "1", "--users", "100", "--dims", "3"],
    "plan": ["--budget", "4", "--rounds", "10", "--mechanism", "laplace", "--users", "100", "--dims", "3"],
    "compare": ["--mechanism", "laplace", "--epsilons", "1", "--users", "200", "--dims", "3", "--repeats", "1"],
    "simulate": ["--engine", "local", "--clients", "2", "--rounds", "1", "--users", "200", "--dims", "3"],
}


def _file(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


HUGE = str(10**12)  # sizes no machine holds: refused before any allocation, naming the memory available


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
            ["--mechanism", "plrvo", "--k", "2", "--theta", "0.1", "--dims", "5"],
            ["--mechanism", "inid-gaussian"],
            ["--mechanism", "inid-gaussian", "--epsilon", "1", "--noise-multiplier", "1", "--layers", f"1:{HUGE}"],
        ],
        "audit": [["--samples", HUGE], ["--mechanism", "gaussian-vector", "--delta", "1e-5", "--dims", HUGE]],
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
            ["--dims", HUGE],
            ["--mechanism", "r1smg", "--dims", HUGE],
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
            ["--out", a_file],
            ["--out", f"{a_file}/x"],
            ["--out", ""],
            ["--data", outside, "--users", "2", "--dims", "2"],
            ["--data", "gaussian", "--header"],
            ["--data", "uniform", "--domain", "0,10"],
            ["--domain", "0,10"],
            ["--data", "gaussian", "--users", HUGE],
            ["--dims", HUGE],
            ["--task", "frequency", "--categories", "abc"],
            ["--task", "frequency", "--categories", "3,"],
            ["--task", "frequency", "--users", HUGE],
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
            ["--users", HUGE],
            ["--dims", HUGE],
            ["--epsilons", "1,1"],
            ["--epsilons", "1,1.0"],
            ["--epsilons", "1,"],
            ["--epsilons", "1,,2"],
            ["--mechanism", "laplace,laplace"],
            ["--aggregators", "mean,mean"],
            ["--task", "frequency", "--categories", "abc"],
            ["--task", "frequency", "--epsilons", "2,2"],
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
            # tuple files as predict and compare read them, and --out
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
            ["--node-wait", "-1"],
            ["--node-wait", "nan"],
            ["--node-reply", "sum", "--task", "train", "--aggregator", "hdr4me"],
            ["--users", HUGE],
            ["--task", "frequency", "--users", HUGE],
            ["--task", "frequency", "--categories", "abc"],
            ["--model", "cnn"],
            ["--task", "mean", "--local-steps", "3"],
            ["--categories", "5"],
            ["--task", "frequency", "--domain", "0,10"],
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
    result = runner.invoke(CLI, [name, *VALID[name], "--json"])
    assert result.exit_code == 0, result.output


def test_every_command_rejects_missing_and_malformed_options_in_one_line(tmp_path, monkeypatch):
    # in an empty working directory: `--out ""` must be refused, not read as "." and written there
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    cases = _cases(tmp_path)
    assert len(cases) > 100  # every command contributes its generic cases
    failures = []
    for name, arguments in cases:
        result = runner.invoke(CLI, [name, *arguments])
        try:
            assert_one_line_error(result, [name, *arguments])
        except AssertionError:
            tail = (result.output.strip().splitlines() or [""])[-1][:200]
            failures.append(f"exit {result.exit_code}: ldpfed {name} {' '.join(arguments)} -> {tail}")
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures)


def test_a_size_beyond_memory_names_the_memory_available(monkeypatch):
    """The refusal says what the work needs and what this machine has; the limit is the memory
    available now (here pretended to be 1 GiB), not a fixed number."""
    import ldpfed.validation as validation

    monkeypatch.setattr(validation, "available_memory", lambda: 2**30)
    arguments = ["predict", "--mechanism", "laplace", "--epsilon", "1", "--data", "gaussian", "--users", "20000000"]
    result = runner.invoke(CLI, arguments)
    assert_one_line_error(result, arguments)
    assert "3.0 GiB" in result.stderr and "1.0 GiB available" in result.stderr and "--users" in result.stderr
    arguments[-1] = "2000000"  # 0.3 GiB: runs
    assert runner.invoke(CLI, [*arguments, "--json"]).exit_code == 0


def test_errors_come_before_synthetic_data_is_generated():
    """Options that can be checked without the data fail before any `data:` line."""
    for arguments in (
        ["predict", "--mechanism", "nope", "--epsilon", "1", "--data", "gaussian"],
        ["predict", "--mechanism", "laplace", "--epsilon", "1", "--data", "gaussian", "--report-dims", "20"],
        ["predict", "--mechanism", "gaussian", "--epsilon", "1", "--data", "gaussian"],
        ["compare", "--epsilons", "1e-300"],
        ["compare", "--report-dims", "50"],
        ["compare", "--mechanism", "gaussian"],
        ["simulate", "--engine", "local", "--epsilon", "1e-300"],
        ["simulate", "--engine", "local", "--mechanism", "gaussian"],
        # frequency: the categories of a synthetic set come from --dims and --categories
        ["simulate", "--engine", "local", "--task", "frequency", "--mechanism", "gaussian"],
        ["simulate", "--engine", "local", "--task", "frequency", "-m", "piecewise", "--epsilon", "1e-300"],
        ["simulate", "--engine", "local", "--task", "frequency", "--dims", "3", "--categories", "2,3"],
        ["simulate", "--engine", "local", "--task", "frequency", "--data", "uniform", "--report-dims", "5"],
    ):
        result = runner.invoke(CLI, arguments)
        assert_one_line_error(result, arguments)
        assert "data:" not in result.stderr, result.stderr


def test_a_budget_out_of_range_names_what_was_typed():
    arguments = ["predict", "--mechanism", "laplace", "--epsilon", "1e-300", "--users", "10", "--dims", "2"]
    result = runner.invoke(CLI, arguments)
    assert_one_line_error(result, arguments)
    assert "epsilon 1e-300 (a user's total) is 5e-301 per reported value" in result.stderr


def test_version():
    from importlib.metadata import version

    result = runner.invoke(CLI, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"ldpfed {version('ldpfed')}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_every_bracket_and_points_to_the_outputs_page(name):
    """Help texts are Rich markup: an unescaped '[mnist]' would vanish from --help."""
    shown = " ".join(runner.invoke(CLI, [name, "--help"], terminal_width=400).stdout.replace("│", " ").split())
    assert "docs/outputs.md" in shown
    for option in _options(COMMANDS[name]):
        for bracket in __import__("re").findall(r"\\?\[[a-z][^\]]*\]", option.help or ""):
            assert bracket.lstrip("\\") in shown, (name, option.opts, bracket)


def test_simulate_help_shows_the_defaults():
    from ldpfed.config import option_default

    shown = " ".join(runner.invoke(CLI, ["simulate", "--help"], terminal_width=400).stdout.replace("│", " ").split())
    for flag in ("rounds", "clients", "epsilon", "mechanism", "aggregator"):
        assert f"[default: {option_default(flag)}]" in shown, flag


def test_short_flags_mean_one_thing_across_commands():
    """-n, -k, -T, -a... name the same long option wherever they appear (a list option's plural,
    compare's --epsilons for -e, counts as the same name)."""
    meaning: dict[str, set[str]] = {}
    for command in COMMANDS.values():
        for option in _options(command):
            longs = [o.removesuffix("s") for o in option.opts if o.startswith("--")]
            for short in (o for o in option.opts if not o.startswith("--")):
                meaning.setdefault(short, set()).update(longs)
    assert {short: longs for short, longs in meaning.items() if len(longs) > 1} == {}


def test_an_option_name_has_one_meaning_across_commands():
    """Every command's help of a shared option carries its one meaning (ldpfed.cli.vocabulary), a
    budget's help names its unit, and the table covers every such option that a command takes."""
    from ldpfed.cli.vocabulary import MEANINGS, UNIT_OPTIONS, UNITS

    wrong, seen = [], set()
    for name, command in sorted(COMMANDS.items()):
        for option in _options(command):
            for flag in (o for o in option.opts if o in MEANINGS):
                seen.add(flag)
                text = " ".join((option.help or "").lower().split())
                if MEANINGS[flag].lower() not in text:
                    wrong.append(f"{name} {flag}: {option.help!r} lacks {MEANINGS[flag]!r}")
                if flag in UNIT_OPTIONS and not any(unit in text for unit in UNITS):
                    wrong.append(f"{name} {flag}: {option.help!r} names no unit of {UNITS}")
    assert not wrong, "\n".join(wrong)
    assert seen == set(MEANINGS)


def test_clip_is_an_l2_norm_and_coordinate_clip_a_per_coordinate_bound():
    """The two bounds of a client update are different options; one set where the other applies
    (e.g. an old `--clip 0.1` with a scalar mechanism) is an error, not silently ignored."""
    from ldpfed.config import Config
    from ldpfed.tasks import validated

    train = {"task": "train", "mechanism": "laplace"}
    assert validated(Config().with_options({**train, "coordinate-clip": 0.1})).update_clip == 0.1
    noise = {"task": "train", "mechanism": "inid-gaussian", "delta": 1e-5, "aggregator": "fedavg"}
    assert validated(Config().with_options({**noise, "clip": 2.0})).update_clip == 2.0
    for trust in ("central", "secagg"):  # their Gaussian noise is calibrated to the update's L2 norm
        gaussian = {"task": "train", "trust": trust, "max-epsilon": 4.0, "max-delta": 1e-5, "clip": 1.0}
        assert validated(Config().with_options(gaussian)).update_clip == 1.0
    for arguments, message in (
        (["--task", "train", "--clip", "0.1"], "use coordinate-clip"),
        (
            [
                "--task",
                "train",
                "--mechanism",
                "inid-gaussian",
                "--delta",
                "1e-5",
                "--aggregator",
                "fedavg",
                "--coordinate-clip",
                "1",
            ],
            "use clip",
        ),
        (["--coordinate-clip", "1"], "--coordinate-clip do(es) not apply to --task mean"),
    ):
        result = runner.invoke(CLI, ["simulate", "--engine", "local", *arguments])
        assert_one_line_error(result, arguments)
        assert message in result.stderr, result.stderr
    # a sweep: each bound goes to the runs it applies to; one that applies to none is an error
    from simulations.compare_train import plan

    sweep = Config().with_options({"task": "train", "clip": 2.0, "coordinate-clip": 0.1, "delta": 1e-5})
    runs = plan(sweep, ["laplace", "inid-gaussian"], [4.0], ["fedavg"], 1, 0)
    assert [config.update_clip for _, config in runs] == [0.1, 2.0]
    arguments = ["compare", "--task", "train", "-m", "laplace", "--clip", "0.1"]
    result = runner.invoke(CLI, arguments)
    assert_one_line_error(result, arguments)
    assert "--clip applies to none of the mechanisms laplace" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["predict", "-m", "laplace", "-e", "1", "--data", "{npy}"], "not in numpy's .npy format"),
        (["predict", "-m", "laplace", "-e", "1", "--data", "{csv}", "--domain", "-1e308,1e308"], "finite width"),
        (["predict", "--task", "frequency", "-m", "grr", "-e", "1", "--data", "{floats}"], "non-integer numbers"),
        (["predict", "--task", "frequency", "-m", "grr", "-e", "1", "--categories", "abc"], "count K or counts"),
        (["compare", "--epsilons", "1,1"], "lists 1.0 more than once"),
        (["compare", "--epsilons", "1,"], "empty item"),
        (["simulate", "--task", "mean", "--model", "cnn"], "--model do(es) not apply to --task mean"),
        (["simulate", "--categories", "5"], "--categories do(es) not apply to --task mean"),
        (["audit", "-m", "laplace", "-e", "1", "--categories", "3"], "--categories applies to --mechanism grr"),
        (["account", "-m", "laplace", "-e", "1", "--rounds", "1", "-a", "rdp"], "No such option '-a'"),
    ],
)
def test_what_used_to_pass_silently_or_crash_names_the_fault(tmp_path, arguments, message):
    files = {
        "npy": _file(tmp_path, "text.npy", "0.1,0.2\n0.3,0.4\n"),
        "csv": _file(tmp_path, "values.csv", "0.1,0.2\n0.3,0.4\n"),
        "floats": _file(tmp_path, "floats.csv", "\n".join(f"{0.001 * i + 0.0005}" for i in range(200)) + "\n"),
    }
    arguments = [item.format(**files) for item in arguments]
    result = runner.invoke(CLI, arguments)
    assert_one_line_error(result, arguments)
    assert message in result.stderr, result.stderr


def test_a_pld_composition_beyond_memory_is_refused_before_the_fft(monkeypatch):
    """10^6 Poisson-sampled Gaussian rounds: dp_accounting's FFT has 2.2 * 10^6 points (about 270 MiB);
    with 100 MiB available the pld accountant refuses in one line and names rdp, which runs."""
    import ldpfed.validation as validation

    monkeypatch.setattr(validation, "available_memory", lambda: 100 * 2**20)
    arguments = ["account", "-m", "gaussian", "-z", "1", "-q", "0.01", "--rounds", "1000000"]
    result = runner.invoke(CLI, arguments)
    assert_one_line_error(result, arguments)
    assert "pld accountant's composition of 1,000,000 rounds" in result.stderr and "rdp" in result.stderr
    assert runner.invoke(CLI, [*arguments, "--accountant", "rdp", "--json"]).exit_code == 0


def test_a_pld_round_grid_beyond_time_or_memory_is_refused_before_it_is_built(monkeypatch):
    """A small noise multiplier makes one round's loss grid large (z = 0.01, q = 0.5: 6e7 points,
    minutes and gigabytes before the composition's own check): refused from its size alone, in time
    (first with the limit lowered so that z = 0.3, q = 0.01, 3e5 points, exceeds it) and in memory."""
    import ldpfed.accounting.accountants as accountants

    with monkeypatch.context() as patch:
        patch.setattr(accountants, "PLD_TIME_LIMIT_S", 0.5)
        arguments = ["account", "-m", "gaussian", "-z", "0.3", "-q", "0.01", "--rounds", "10"]
        result = runner.invoke(CLI, arguments)
        assert_one_line_error(result, arguments)
        assert "more than the 0.5 s allowed" in result.stderr
    arguments = ["account", "-m", "gaussian", "-z", "0.01", "-q", "0.5", "--rounds", "100000000", "--accountant", "pld"]
    result = runner.invoke(CLI, arguments)
    assert_one_line_error(result, arguments)
    assert "59,745,477 points" in result.stderr and "s to compute" in result.stderr and "rdp" in result.stderr
    arguments = ["account", "-m", "gaussian", "-z", "0.01", "--rounds", "100000000"]  # one Gaussian of z 1e-6
    result = runner.invoke(CLI, arguments)
    assert_one_line_error(result, arguments)
    assert "of memory" in result.stderr and "100,000,000 Gaussian rounds" in result.stderr


PLAN = ["plan", "--budget", "4,1e-5", "--rounds", "10"]
PREDICT_FREQUENCY = ["predict", "--task", "frequency", "--epsilon", "1"]


@pytest.mark.parametrize(
    "arguments",
    [
        [*PLAN, "--accountant", "foo"],
        [*PLAN, "--accountant", "rdp"],  # no RDP curve for the generic eps-DP rounds
        [*PLAN, "--mechanism", "nope"],
        [*PLAN, "--mechanism", "grr"],  # an oracle: frequency only
        [*PLAN, "--participation", "0"],
        [*PLAN, "--report-dims", "0"],
        ["plan", "--budget", "4", "--rounds", "10", "--mechanism", "gaussian"],  # no delta in the total
        [*PLAN, "--task", "frequency", "--report-dims", "x"],
        [*PLAN, "--task", "frequency", "--mechanism", "nope"],
        [*PREDICT_FREQUENCY, "--mechanism", "gaussian"],  # no --delta
        [*PREDICT_FREQUENCY, "--mechanism", "gaussian", "--delta", "2"],  # split over the entries, it passed
        [*PREDICT_FREQUENCY, "--mechanism", "grr", "--report-dims", "0"],
    ],
)
def test_options_are_checked_before_any_data_are_read_or_generated(arguments):
    result = runner.invoke(CLI, arguments)
    assert_one_line_error(result, arguments)
    assert "data:" not in result.stderr, result.stderr

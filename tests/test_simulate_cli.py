"""`ldpfed simulate` as a user meets it: its --out directory
(checked before any work, another run's results refused unless --overwrite, written atomically
round by round) and tuple files read as `predict` and `compare` read them (--domain, --header,
--out-of-domain, users and dims from the file). Local engine: the same halves as under Flower,
without starting Ray (the Flower engine's Ctrl-C is tests/test_simulate.py)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import SMALL_COMPARE, ldpfed, runner

from ldpfed.cli.main import app

MANIFEST = ".ldpfed-run.json"
LOCAL = ["simulate", "--engine", "local", "--clients", "2", "--rounds", "2"]
SMALL = [*LOCAL, "--users", "200", "--dims", "3"]


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and all(line.startswith("data:") for line in lines[:-1]), result.stderr
    return lines[-1]


def files_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


# ---- --out (item 11) ---------------------------------------------------------------------------
def test_another_runs_directory_is_refused_and_overwrite_replaces_it(tmp_path):
    out = tmp_path / "run"
    assert runner.invoke(app, [*SMALL, "--seed", "1", "--out", str(out)]).exit_code == 0
    first = files_of(out)
    assert {"config.toml", "metrics.csv", "privacy.csv", "summary.json", "privacy.json", "plot.png", MANIFEST} <= set(
        first
    )
    assert set(json.loads(first[MANIFEST])["files"]) == set(first) - {MANIFEST}
    # the old code ran again and replaced the files silently
    message = one_line_error(runner.invoke(app, [*SMALL, "--seed", "2", "--out", str(out)]))
    assert "holds results of another run" in message and "--overwrite" in message
    assert files_of(out) == first
    result = runner.invoke(app, [*SMALL, "--seed", "2", "--out", str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["seed"] == 2
    assert "overwrite" not in tomllib.loads((out / "config.toml").read_text())["output"]  # never recorded


def test_a_compare_directory_is_refused_and_overwrite_keeps_other_files(tmp_path):
    out = tmp_path / "run"
    assert ldpfed(SMALL_COMPARE, "--out", out).exit_code == 0
    (out / "notes.txt").write_text("mine")
    one_line_error(runner.invoke(app, [*SMALL, "--out", str(out)]))
    assert runner.invoke(app, [*SMALL, "--out", str(out), "--overwrite"]).exit_code == 0
    names = set(files_of(out))
    assert "runs.csv" not in names and "mse_vs_epsilon.png" not in names  # compare's files cleared
    assert {"notes.txt", "metrics.csv", "summary.json"} <= names


@pytest.mark.parametrize("where", ["file", "below-a-file"])
def test_an_unwritable_out_is_an_error_before_any_work(tmp_path, monkeypatch, where):
    """The old code started the federation and ended in a traceback writing config.toml."""
    import simulations.federation as federation

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    out = a_file if where == "file" else a_file / "sub"
    monkeypatch.setattr(federation, "run", lambda *args, **kwargs: pytest.fail("the run started"))
    message = one_line_error(runner.invoke(app, [*SMALL, "--out", str(out)]))
    assert str(a_file) in message
    assert a_file.read_text() == "x"


def test_metrics_are_on_disk_after_every_round_and_written_with_privacy_csv(tmp_path):
    """The progress behaviour (metrics.csv rewritten after every round) kept, now through
    OutputDir: after round r, metrics.csv has r rows, privacy.csv the same round's totals, the
    manifest lists them, and no temporary file is left."""
    from ldpfed.config import Config
    from simulations.federation import run
    from simulations.progress import QuietProgress

    out = tmp_path / "run"
    config = (
        Config()
        .with_options({"engine": "local", "clients": 2, "users": 200, "dims": 3, "rounds": 3, "out": str(out)})
        .validated()
    )
    seen = []

    class OnDisk(QuietProgress):
        def update(self, row):
            metrics, privacy = pd.read_csv(out / "metrics.csv"), pd.read_csv(out / "privacy.csv")
            manifest = json.loads((out / MANIFEST).read_text())["files"]
            seen.append((row["round"], len(metrics), float(privacy["basic_epsilon"].max()), sorted(manifest)))
            assert not [path.name for path in out.iterdir() if path.name.endswith(".tmp")]

    run(config, OnDisk())
    assert [(r, n, e) for r, n, e, _ in seen] == [(1, 1, 2.0), (2, 2, 4.0), (3, 3, 6.0)]
    assert seen[0][3] == ["config.toml", "metrics.csv", "noise_secret", "privacy.csv"]  # the root before round 1


# ---- the clients' noise root -------------------------------------------------------------------
QUALIFIED = "private against a server that does not know the noise seed"


def test_the_noise_root_is_os_entropy_recorded_only_in_noise_secret_and_replays_the_run(tmp_path):
    """Two runs with the same --seed draw different noise (a noise root of 128 bits of OS entropy
    each); each root is in its run's noise_secret (owner-only) and in no other file; given back with
    --noise-seed it replays the run exactly, and that run says its noise seed was chosen by the user."""
    runs = {name: tmp_path / name for name in ("first", "second", "replay")}
    for name in ("first", "second"):
        assert runner.invoke(app, [*SMALL, "--seed", "1", "--out", str(runs[name])]).exit_code == 0
    first, second = (json.loads((runs[name] / "summary.json").read_text()) for name in ("first", "second"))
    assert first["final_mse"] != second["final_mse"]
    assert (first["noise_seed"], first["private"], first["privacy_qualification"]) == ("os-entropy", True, None)
    secret = (runs["first"] / "noise_secret").read_text()
    assert len(secret.strip()) == 2 + 32 and int(secret, 16) != int((runs["second"] / "noise_secret").read_text(), 16)
    assert (runs["first"] / "noise_secret").stat().st_mode & 0o777 == 0o600
    for name, content in files_of(runs["first"]).items():
        if name != "noise_secret":  # neither in hexadecimal nor in decimal anywhere else
            assert secret.strip()[2:].encode() not in content.lower() and str(int(secret, 16)).encode() not in content
    replay = [*SMALL, "--config", str(runs["first"] / "config.toml"), "--noise-seed", secret.strip()]
    assert runner.invoke(app, [*replay, "--out", str(runs["replay"])]).exit_code == 0
    replayed = json.loads((runs["replay"] / "summary.json").read_text())
    assert (
        replayed["final_mse"] == first["final_mse"]
        and replayed["mean_mse_over_rounds"] == first["mean_mse_over_rounds"]
    )
    assert (replayed["noise_seed"], replayed["private"], replayed["privacy_qualification"]) == (
        "user-chosen",
        True,
        QUALIFIED,
    )
    privacy = json.loads((runs["replay"] / "privacy.json").read_text())
    assert (privacy["private"], privacy["privacy_qualification"]) == (True, QUALIFIED)
    assert (runs["replay"] / "noise_secret").read_text() == secret


def test_a_chosen_noise_seed_is_said_on_the_console_and_qualifies_only_a_private_run(tmp_path):
    result = runner.invoke(app, [*SMALL, "--noise-seed", "7", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "user-chosen" in result.stdout and QUALIFIED in " ".join(result.stdout.split())
    assert (tmp_path / "run" / "noise_secret").read_text() == f"0x{7:032x}\n"
    train = [
        "simulate",
        "--engine",
        "local",
        "--task",
        "train",
        "--clients",
        "2",
        "--rounds",
        "1",
        "--local-steps",
        "1",
    ]
    result = runner.invoke(app, [*train, "--mechanism", "none", "--noise-seed", "7", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["private"], summary["privacy_qualification"], summary["noise_seed"]) == (False, None, "user-chosen")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--noise-seed", "0xg1"], "--noise-seed must be a non-negative integer"),
        (["--noise-seed", "-5"], "--noise-seed must be a non-negative integer"),
        (["--noise-seed", ""], "--noise-seed must be a non-negative integer"),
        (["--noise-seed", "7", "--fresh-noise"], "--noise-seed and --fresh-noise exclude each other"),
    ],
)
def test_a_bad_noise_seed_is_one_line_and_writes_nothing(tmp_path, flags, message):
    out = tmp_path / "run"
    assert message in one_line_error(runner.invoke(app, [*SMALL, *flags, "--out", str(out)]))
    assert not out.exists()


def test_fresh_noise_writes_no_noise_secret(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, [*SMALL, "--fresh-noise", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["noise_seed"] == "os-entropy-per-client" and not (out / "noise_secret").exists()


# ---- tuple files (item 13) ---------------------------------------------------------------------
@pytest.fixture
def tuples_file(tmp_path):
    """500 users x 3 dims in [0, 10], a CSV file without a header row."""
    values = np.random.default_rng(5).uniform(0.0, 10.0, size=(500, 3))
    path = tmp_path / "tuples.csv"
    np.savetxt(path, values, delimiter=",")
    return path, values


def test_a_tuple_file_gives_users_dims_and_the_scale_of_the_mse(tmp_path, tuples_file):
    """No --users/--dims: the file's shape (the old code required them equal to it and had no
    --domain); the summary says the MSE is on the normalised scale; config.toml records the shape."""
    path, _ = tuples_file
    out = tmp_path / "run"
    result = runner.invoke(
        app, [*LOCAL, "--clients", "4", "--data", str(path), "--domain", "0,10", "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["users"], summary["dims"]) == (500, 3)
    assert summary["scale"]["scale"] == "normalised [-1, 1]" and summary["scale"]["mse_to_data_units"] == 25.0
    assert "read 500 rows x 3 columns" in result.stderr and "no header row" in result.stderr
    recorded = tomllib.loads((out / "config.toml").read_text())["data"]
    assert (recorded["users"], recorded["dims"], recorded["domain"]) == (500, 3, "0,10")
    noise_secret = (out / "noise_secret").read_text().strip()
    replay = ["simulate", "--config", str(out / "config.toml"), "--json", "--noise-seed", noise_secret]
    again = runner.invoke(app, [*replay, "--out", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["final_mse"] == summary["final_mse"]  # the recorded run reproduces


def test_simulate_reads_a_file_exactly_as_compare_does(tmp_path, tuples_file):
    """One client: simulate's plain-mean MSE per round equals compare's per repetition on the
    same file, domain and seed (the same values in [-1, 1], the same noise streams)."""
    path, _ = tuples_file
    options = ["--data", str(path), "--domain", "0,10", "--seed", "4"]
    simulate = runner.invoke(
        app,
        [
            "simulate",
            "--engine",
            "local",
            "--clients",
            "1",
            "--rounds",
            "3",
            *options,
            "--noise-seed",
            "4",  # compare's noise: the secret its seed spawns
            "--out",
            str(tmp_path / "simulate"),
        ],
    )
    assert simulate.exit_code == 0, simulate.output
    compare = runner.invoke(
        app,
        [
            "compare",
            "--mechanism",
            "laplace",
            "--epsilons",
            "2",
            "--aggregators",
            "mean",
            "--repeats",
            "3",
            *options,
            "--out",
            str(tmp_path / "compare"),
        ],
    )
    assert compare.exit_code == 0, compare.output
    rounds = pd.read_csv(tmp_path / "simulate" / "metrics.csv")["mse_plain_mean"].to_numpy()
    repetitions = pd.read_csv(tmp_path / "compare" / "runs.csv")["mse"].to_numpy()
    np.testing.assert_allclose(rounds, repetitions, rtol=1e-12)


def test_header_and_out_of_domain_options(tmp_path, tuples_file):
    path, values = tuples_file
    header = tmp_path / "with_header.csv"
    header.write_text("a,b,c\n" + path.read_text())
    for arguments, rows in ([[str(header)], 500], [[str(header), "--header"], 500], [[str(path), "--header"], 499]):
        result = runner.invoke(app, [*LOCAL, "--data", *arguments, "--domain", "0,10", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["users"] == rows
    one_line_error(runner.invoke(app, [*LOCAL, "--data", str(header), "--no-header", "--domain", "0,10"]))
    message = one_line_error(runner.invoke(app, [*LOCAL, "--data", str(path), "--domain", "0,5"]))
    assert "--out-of-domain clip" in message
    result = runner.invoke(app, [*LOCAL, "--data", str(path), "--domain", "0,5", "--out-of-domain", "clip", "--json"])
    assert result.exit_code == 0, result.output
    assert f"{int(np.count_nonzero(values > 5))} value(s) outside the domain clipped" in result.stderr


def test_a_config_file_takes_the_data_options(tmp_path, tuples_file):
    path, _ = tuples_file
    job = tmp_path / "job.toml"
    job.write_text(
        f'[run]\nengine = "local"\nrounds = 1\n[data]\nname = "{path}"\ndomain = "0,10"\nheader = "no"\n'
        "[federation]\nclients = 2\n"
    )
    result = runner.invoke(app, ["simulate", "--config", str(job), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["users"] == 500
    job.write_text('[data]\nheader = "maybe"\n')
    assert "header must be one of auto, yes, no" in one_line_error(
        runner.invoke(app, ["simulate", "--config", str(job)])
    )


# ---- item 16 -----------------------------------------------------------------------------------
def test_another_aggregators_mse_is_never_shown_beside_the_plain_means_prediction_alone():
    """With --aggregator hdr4me the round line named neither: 'mse 0.376 (predicted 1)' compared
    hdr4me's measured MSE with the plain mean's prediction."""
    result = runner.invoke(app, [*SMALL, "--aggregator", "hdr4me"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stderr.splitlines() if line.startswith("round 1:"))
    assert line.startswith("round 1: mse hdr4me ") and ", plain mean " in line and "(predicted " in line


def test_a_bad_run_config_fails_the_flwr_run_server_app_with_one_line():
    """`flwr run` exits 0 whatever the run does (Flower 1.41); the ServerApp fails, which Flower
    records as the run's status finished:failed with this message, after one error line in the
    run's log."""
    import logging

    from flwr.app import Context, RecordDict

    from ldpfed.config import Config
    from server.server_app import RunFailed, run_config

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    flower_logger = logging.getLogger("flwr")
    flower_logger.addHandler(handler)
    flat = {**Config().to_flat(), "privacy.epsilon": -1.0}
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=flat)
    try:
        with pytest.raises(RunFailed, match="^invalid run config: epsilon must be"):
            run_config(context)
    finally:
        flower_logger.removeHandler(handler)
    messages = [record.getMessage() for record in records if record.levelno == logging.ERROR]
    assert len(messages) == 1 and messages[0].startswith("ldpfed: error: invalid run config: epsilon")
    assert (
        run_config(Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=Config().to_flat()))
        == Config()
    )


def test_a_total_budget_in_the_flwr_run_config_is_validated_and_planned_alike_by_both_halves():
    """`privacy.budget` under `flwr run`: refused in one line when malformed, and otherwise turned
    into the same per-round settings and budget by the server and by every node, as simulate
    --budget does."""
    from flwr.app import Context, RecordDict

    from clients.client_app import _run_config as node_config
    from ldpfed.config import Config
    from ldpfed.tasks import planned_config, resolve
    from ldpfed.validation import LDPValueError
    from server.server_app import RunFailed, run_config

    def context(**values):
        return Context(
            run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={**Config().to_flat(), **values}
        )

    with pytest.raises(RunFailed, match="budget must be EPS or EPS,DELTA"):
        run_config(context(**{"privacy.budget": "abc"}))
    with pytest.raises(LDPValueError, match="budget must be EPS or EPS,DELTA"):
        node_config(context(**{"privacy.budget": "abc"}))
    planned = context(**{"privacy.budget": "4,1e-5", "run.rounds": 5})
    server, node = run_config(planned), node_config(planned)
    expected, _ = planned_config(resolve(None, {"budget": "4,1e-5", "rounds": 5}))
    assert server == node == expected
    assert server.privacy.max_epsilon == 4.0 and server.privacy.epsilon < 4.0 and not server.privacy.budget


def test_a_run_without_out_says_that_nothing_is_saved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["simulate", "--engine", "local", "--rounds", "1", "--users", "200", "--json"])
    assert result.exit_code == 0, result.output
    assert "no --out: the results are shown, not saved" in result.stderr
    assert json.loads(result.stdout)["rounds_finished"] == 1 and not list(tmp_path.iterdir())
    saved = runner.invoke(app, ["simulate", "--engine", "local", "--rounds", "1", "--users", "200", "--out", "o"])
    assert saved.exit_code == 0 and "not saved" not in saved.stderr

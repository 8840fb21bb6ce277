"""Lines on stderr off a terminal (a log file, a pipe, CI) are written whole: rich assumes 80
columns without a terminal and used to wrap a longer progress line in two."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from ldpfed.cli.common import log_console

ROOT = Path(__file__).resolve().parents[1]


def test_a_log_console_writes_a_long_line_whole():
    stream = io.StringIO()
    log_console(stream).print("x " * 150, highlight=False)
    assert stream.getvalue().count("\n") == 1


def test_simulate_round_lines_are_whole_in_a_log(tmp_path):
    """hdr4me's round line names both MSEs (about 90 characters)."""
    command = [sys.executable, "-c", "from ldpfed.cli.main import app; app()", "simulate", "--engine", "local"]
    command += ["--rounds", "2", "--users", "200", "--dims", "3", "--clients", "2", "--aggregator", "hdr4me"]
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "FORCE_TERMINAL")}
    result = subprocess.run(
        [*command, "--out", str(tmp_path / "run")],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rounds = [line for line in result.stderr.splitlines() if line.startswith("round ")]
    assert len(rounds) == 2 and all(len(line) > 80 and "; eps spent " in line for line in rounds), result.stderr

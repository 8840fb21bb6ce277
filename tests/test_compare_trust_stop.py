"""Stopping `ldpfed compare --trust` with SIGINT or SIGTERM sent to its PID in the middle of one of
its runs: exit 130 / 143 with one line, no traceback, the finished runs' trust.csv, trust.json and
trust.png on disk (trust.json marked interrupted), no process left (tests/test_simulate_stop.py's
harness: a real process, the signal sent at a line it prints, never after a fixed delay)."""

from __future__ import annotations

import json
import os
import signal

import pandas as pd
import pytest
from test_simulate_stop import EXIT_CODES, Simulate

from ldpfed.outputs import MANIFEST
from simulations.stopping import sigint_ignored_notice

# run 1 (local, 50 rounds of 5,000 users) takes under a second; run 2 (shuffle) about six seconds on a
# quiet 2-core machine, so the signal sent once run 1's line is read arrives inside run 2
COMPARE = ["--task", "mean", "--trust", "local,shuffle", "--users", "5000", "--dims", "2", "--clients", "2",
           "--rounds", "50", "--epsilons", "1,2,4", "--engine", "local"]  # fmt: skip


# Both signals reach one handler (simulations/stopping.py; SIGTERM after a few local rounds is in the
# quick set, tests/test_simulate_stop.py): the SIGTERM case here runs with the slow tests.
@pytest.mark.parametrize(
    "signum", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)], ids=["SIGINT", "SIGTERM"]
)
def test_a_signal_inside_a_run_ends_the_comparison_with_the_finished_runs_written(tmp_path, signum):
    run = Simulate(COMPARE, tmp_path / "cmp", command="compare")
    try:
        run.wait_for(lambda: run.printed("compare --trust: 1/6"), "the first run's end")
        code, elapsed, stdout, stderr = run.stop(signum)
        assert code == EXIT_CODES[signum], f"exit {code} after {elapsed:.1f} s: " + stderr[-3000:]
        assert "Traceback" not in stderr and "Exception ignored" not in stderr and stdout == "", stderr[-3000:]
        messages = [line for line in stderr.splitlines() if "interrupted" in line]
        assert len(messages) == 1 and "holds complete trust.csv, trust.json, trust.png" in messages[0], stderr
        assert not any(line.startswith("compare --trust: 6/6") for line in stderr.splitlines())
        out = run.out
        manifest = json.loads((out / MANIFEST).read_text())
        files = {MANIFEST, "trust.csv", "trust.json", "trust.png"}
        assert set(os.listdir(out)) == {MANIFEST, *manifest["files"]} == files
        written = json.loads((out / "trust.json").read_text())
        frame = pd.read_csv(out / "trust.csv")
        assert written["interrupted"] is True and written["runs_planned"] == 6
        assert 1 <= written["runs_finished"] == len(frame) == len(written["rows"]) < 6
        assert frame["trust"].iloc[0] == "local" and frame["total_epsilon"].iloc[0] == 1.0
        assert (out / "trust.png").stat().st_size > 0
        assert not run.leftover()
    finally:
        run.kill()


def test_a_process_that_inherited_sigint_ignored_says_so():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        notice = sigint_ignored_notice()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert notice is not None and f"kill -TERM {os.getpid()}" in notice
    assert sigint_ignored_notice() is None  # Python's own handler (or the default): nothing to say

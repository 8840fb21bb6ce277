"""A stop requested during a run's set-up (the clients' secrets, the server half, the records: under
Flower, Ray's workers may already be up) ends the run before its first round in order: the summary
of no round written, marked interrupted, and `Interrupted` with the signal's exit code, as a
moment later; never a bare KeyboardInterrupt that skips the summary."""

from __future__ import annotations

import json
import os
import signal

import pytest

import simulations.federation as federation
from ldpfed.config import Config


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_server_half_is_built_stops_the_run_with_a_summary_of_none(tmp_path, monkeypatch, signum):
    built = []

    def server_half_then_signal(*args, **kwargs):
        built.append(federation_server_half(*args, **kwargs))
        os.kill(os.getpid(), signum)  # delivered in the main thread, here, during the set-up
        return built[-1]

    federation_server_half = federation.server_half
    monkeypatch.setattr(federation, "server_half", server_half_then_signal)
    out = tmp_path / "run"
    options = {"engine": "local", "clients": 3, "users": 30, "rounds": 3, "out": str(out), "plot": False}
    with pytest.raises(federation.Interrupted) as stopped:
        federation.run(Config().with_options(options).validated())
    assert built and stopped.value.exit_code == 128 + signum
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["rounds_finished"] == 0
    assert signal.getsignal(signal.SIGINT) is not None  # the previous handlers are back

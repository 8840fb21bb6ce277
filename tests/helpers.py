"""What many tests share: `ldpfed` run in-process from a command line written as a user types it,
and a context for the processes a test starts.

`ldpfed("compare -m laplace -e 1 --out", tmp_path / "out")` runs `ldpfed compare -m laplace -e 1
--out <path>`: a str part is split at white space (flags and values, none of which holds a space),
a path stays one word whatever it contains.
"""

from __future__ import annotations

import json
import os

import numpy as np
from typer.testing import CliRunner, Result

from ldpfed.cli.main import app

runner = CliRunner()
# a compare run of a second: one mechanism, one budget, one repetition, the plain mean
SMALL_COMPARE = "compare --mechanism laplace --epsilons 1 --users 300 --dims 3 --repeats 1 --aggregators mean"


def words(*parts: str | os.PathLike) -> list[str]:
    """The argument list of a command line: str parts split at white space, paths whole."""
    return [word for part in parts for word in ([os.fspath(part)] if isinstance(part, os.PathLike) else part.split())]


def ldpfed(*parts: str | os.PathLike) -> Result:
    """The result of `ldpfed PARTS...` (exit code, stdout and stderr apart)."""
    return runner.invoke(app, words(*parts))


def ldpfed_json(*parts: str | os.PathLike) -> dict:
    """The JSON object `ldpfed PARTS... --json` prints; a non-zero exit fails the test with the output."""
    result = ldpfed(*parts, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


class StartedProcesses:
    """Processes a test starts in `with`: `launch()` starts them and waits until they serve, `stop()`
    stops every one it started (by PID); a launch that fails stops what had started, and leaving the
    `with` block stops them all."""

    def launch(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        try:
            self.launch()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def assert_same(fast, slow) -> None:
    """Two NodeReplies equal bit for bit: failures, each client's metrics and arrays, the sums."""
    assert fast.failures == slow.failures
    assert sorted(fast.replies) == sorted(slow.replies)
    for pid, reply in slow.replies.items():
        assert fast.replies[pid].metrics == reply.metrics
        for name, array in reply.arrays.items():
            assert np.array_equal(fast.replies[pid].arrays[name], array)
    assert fast.summed.keys() == slow.summed.keys()
    for name, array in slow.summed.items():
        assert np.array_equal(fast.summed[name], array)

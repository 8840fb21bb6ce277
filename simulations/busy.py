"""A machine made busy on demand, as a shared one is: CPU-bound processes beside a run (the tests'
`busy_machine` fixture, benchmarks/bench_first_round.py)."""

from __future__ import annotations

import contextlib
import subprocess
import sys

BUSY_PROCESSES = 2  # as many as the 2-core development and CI machines have cores


@contextlib.contextmanager
def busy(count: int = BUSY_PROCESSES):
    """`count` CPU-bound processes (`python -c 'while True: pass'`) for the block, killed by PID
    after it."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield [spinner.pid for spinner in spinners]
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()

"""The timing the benchmarks share: the best of repeated runs, on the CPU time of this process."""

from __future__ import annotations

import time


def best(function, repeats: int) -> float:
    """The least CPU time (time.process_time) of `repeats` calls of function(): the run least
    disturbed by other processes on a shared machine."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        function()
        times.append(time.process_time() - start)
    return min(times)

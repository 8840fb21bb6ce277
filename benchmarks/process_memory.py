"""Memory of a process tree: the summed PSS (proportional set size, Linux /proc/PID/smaps_rollup)
of a process and all its descendants, sampled while it runs.

PSS counts a page shared by n processes as 1/n in each, so the sum over a tree is what the tree
takes (RSS would count shared libraries once per process). The sharers include processes outside
the tree (other Python processes mapping the same libraries), so the same run reads lower on a
busy machine: compare runs made side by side. USS (the private pages, Private_Clean +
Private_Dirty) does not depend on other processes: it is a lower bound of what the tree takes.
Under Flower's Ray engine the tree is the driver (`ldpfed simulate`, the ServerApp thread), Ray's
services (GCS, raylet, ...) and the ClientAppActors, all descendants of the driver.

    from process_memory import run_sampled
    peak, wall = run_sampled(["ldpfed", "simulate"])   # peak summed PSS (MiB) by process name
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def children(pid: int) -> list[int]:
    """Direct children of `pid` (every thread's /proc/PID/task/TID/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    pids, pending = [], [pid]
    while pending:
        current = pending.pop()
        pids.append(current)
        pending += children(current)
    return pids


def memory_kib(pid: int) -> tuple[int, int]:
    """(PSS, USS) of one process in KiB ((0, 0) if it has gone)."""
    fields = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = int(value.split()[0]) if value.strip().endswith("kB") else 0
    except OSError:
        return 0, 0
    return fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:60].strip()
    except OSError:
        return "?"


def sample(pid: int) -> dict[int, tuple[str, int, int]]:
    """{pid: (command line, PSS KiB, USS KiB)} of the tree under `pid` now."""
    return {member: (name(member), *memory_kib(member)) for member in tree(pid)}


def run_sampled(command: list[str], interval: float = 0.25, **popen) -> tuple[dict, float]:
    """Run `command`, sampling its tree every `interval` s. Returns ({"total_mib": peak summed PSS,
    "uss_mib": summed USS at that moment, "processes": the tree then as [(command, PSS MiB, USS
    MiB)], "count": its size}, wall seconds)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, **popen)
    peak: dict = {"total_mib": 0.0, "uss_mib": 0.0, "processes": [], "count": 0}
    while process.poll() is None:
        now = sample(process.pid)
        total = sum(pss for _, pss, _ in now.values()) / 1024
        if total > peak["total_mib"]:
            members = sorted(((cmd, pss / 1024, uss / 1024) for cmd, pss, uss in now.values()), key=lambda m: -m[1])
            uss = sum(member[2] for member in members)
            peak = {"total_mib": total, "uss_mib": uss, "processes": members, "count": len(members)}
        time.sleep(interval)
    return peak, time.perf_counter() - started

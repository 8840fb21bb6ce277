"""Time to the first round of `ldpfed simulate`, step by step, on the machine as it is and beside CPU-bound processes.

    python benchmarks/bench_first_round.py                        # the default job (mean task), busy 0 and 2
    python benchmarks/bench_first_round.py --task train --clients 200 --nodes 2 --repeats 2
    python benchmarks/bench_first_round.py --checkout /tmp/before --json     # this code and another's, alternately

Each run is `ldpfed simulate` in a fresh process (as a user runs it, with a Ray of its own), for
every count in `--busy` (default 0,2) with that many CPU-bound processes (`python -c 'while True:
pass'`) started beside it and stopped, by PID, after it. Reported per run, in seconds since the
process was started, from the arrival of its stderr lines (simulations.progress):
- `started`: "starting Ray..." (Python's imports, the data, the preflight, the server half);
- `ray_begun`: Ray's first process (the GCS server) seen in the run's process tree: Ray's start
  begins before "starting Ray..." (once the preflight has passed) in code that begins it ahead;
- `ray_up`: "Ray up" (Ray's processes; the server half is built meanwhile);
- `nodes_up`: "K of K nodes up" (the nodes' Ray actors started, Flower and the ClientApp imported);
- `round_1`: "round 1:" (the nodes built, round 1 run and recorded): the time to the first round;
- `exit`: the process' end; `steady`: the median `seconds` of rounds 2..R in metrics.csv;
- `cpu to r1`, `cpu`: CPU seconds of the run's whole process tree (driver, Ray's services, the
  nodes' workers; `TreeCpu`) up to "round 1:" and in all: on a shared machine the wall figures move
  with the other work, these much less; `r1 driver`, `r1 ray`, `r1 nodes`: the CPU to "round 1:" of
  the driver, of Ray's services (GCS, raylet, its agents) and of Ray's workers (the nodes).
The table shows the steps as differences (imports, Ray, nodes, round 1; Ray from `started`, as
the log lines give it), `ray start` (`ray_up` - `ray_begun`: Ray's own start, however early it
begins), and `budget`: the time to round 1 over 3 steady rounds plus Ray's start (`ray start`; the
Ray step where no GCS was seen), at most 1 when the start-up costs no more than that. Code from before the
start-up lines existed reports `started`, `round_1` and `exit` only. `--checkout DIR` runs another
checkout's code (its directory first on PYTHONPATH) alternately with this one, so that both see the
same load. Numbers are reported, never asserted; the 1-minute load average is printed with them.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.process_memory import tree  # noqa: E402
from scripts.arguments import script_parser  # noqa: E402
from scripts.provenance import run_stamp  # noqa: E402
from simulations.busy import busy  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")

STEPS = {  # the first stderr line of each step (simulations.progress.RoundProgress, off a terminal)
    "started": re.compile(r": starting Ray\.\.\.$"),
    "ray_up": re.compile(r": Ray up; "),
    "nodes_up": re.compile(r": (\d+) of \1 nodes? up \("),
    "round_1": re.compile(r"^round 1: "),
}


def one_run(checkout: Path, options: list[str], out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", "from ldpfed.cli.main import app; app()", "simulate", *options, "--out", str(out)]
    start = time.monotonic()
    process = subprocess.Popen(
        command, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    marks: dict[str, float] = {}
    lines = []
    with TreeCpu(process.pid) as cpu:
        for line in process.stderr:  # the run writes its lines whole off a terminal
            lines.append(line)
            for step, pattern in STEPS.items():
                if step not in marks and pattern.search(line.rstrip("\n")):
                    marks[step] = time.monotonic() - start
                    cpu.mark(step)
        code = process.wait()
    ended = time.monotonic() - start
    if "gcs_server" in cpu.first_seen:
        marks["ray_begun"] = cpu.first_seen["gcs_server"] - start
    if code != 0:
        raise SystemExit(f"error: {' '.join(command)} exited {code}:\n{''.join(lines)[-2000:]}")
    seconds = pd.read_csv(out / "metrics.csv")["seconds"].to_numpy(float)
    return {
        **{step: marks.get(step) for step in STEPS},
        "ray_begun": marks.get("ray_begun"),
        "exit": ended,
        "steady": float(statistics.median(seconds[1:])) if len(seconds) > 1 else None,
        "cpu": cpu.total(),
        "cpu_round_1": cpu.marks.get("round_1"),
        **{f"cpu_r1_{part}": seconds for part, seconds in cpu.parts.get("round_1", {}).items()},
        "load_1min": os.getloadavg()[0],
    }


GROUPS = ("driver", "ray", "nodes")  # where the CPU goes: the run's process, Ray's services, its workers
AGENTS = ("ray::DashboardA", "ray::RuntimeEnv")  # the raylet's agents, as /proc's 15-character names give them


def group(pid: int, root: int, name: str) -> str:
    """The process' part of the run: the driver (`root`), a Ray worker (a node's actor: Ray's
    `default_worker.py`, renamed `ray::IDLE`, `ray::ClientAppActor` as it starts) or one of Ray's
    services (GCS, raylet, the raylet's agents: `ray::DashboardAgent`, `ray::RuntimeEnvAgent`)."""
    if pid == root:
        return "driver"
    if name.startswith(AGENTS):
        return "ray"
    if name.startswith("ray::"):
        return "nodes"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "ray"
    return "nodes" if b"default_worker.py" in command else "ray"


class TreeCpu:
    """CPU seconds (user + system) of a process and its descendants (Ray's services and workers,
    which the run's process does not reap: rusage misses them), sampled from /proc every
    `interval` s in a thread: each process' last reading, summed; `mark(step)` records the sum then,
    and `parts[step]` the sums by `GROUPS`; `first_seen` {process name: monotonic time it was first
    sampled}."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid, self.interval = pid, interval
        self.seen: dict[int, float] = {}
        self.groups: dict[int, str] = {}
        self.marks: dict[str, float] = {}
        self.parts: dict[str, dict[str, float]] = {}
        self.first_seen: dict[str, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeCpu:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()

    def _sample(self) -> None:
        while not self.done.wait(self.interval):
            self.read()

    def read(self) -> None:
        for member in tree(self.pid):
            try:
                name, fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)
                name, fields = name.partition("(")[2], fields.split()
            except (OSError, IndexError):
                continue
            self.first_seen.setdefault(name, time.monotonic())
            self.seen[member] = (int(fields[11]) + int(fields[12])) / TICKS
            if self.groups.get(member, "ray") == "ray":  # a worker is renamed once it runs a task
                self.groups[member] = group(member, self.pid, name)

    def total(self) -> float:
        return sum(self.seen.values())

    def mark(self, step: str) -> None:
        self.read()
        self.marks[step] = self.total()
        self.parts[step] = {part: 0.0 for part in GROUPS}
        for member, seconds in self.seen.items():
            self.parts[step][self.groups[member]] += seconds


def simulate_options(args) -> list[str]:
    """The job: the default one (the mean task) unless --task train; --clients/--nodes when given."""
    options = ["--rounds", str(args.rounds)]
    if args.task != "mean":
        options += ["--task", args.task]
    for flag in ("clients", "nodes"):
        if getattr(args, flag):
            options += [f"--{flag}", str(getattr(args, flag))]
    return options


def ray_start(row: dict) -> float | None:
    """Ray's own start: from its first process (else from "starting Ray...") to "Ray up"."""
    begun = row.get("ray_begun") if row.get("ray_begun") is not None else row["started"]
    return None if None in (begun, row["ray_up"]) else row["ray_up"] - begun


def budget(row: dict) -> float | None:
    """Time to round 1 over (3 steady rounds + Ray's start); None without the marks."""
    if None in (row["round_1"], row["steady"], ray_start(row)):
        return None
    return row["round_1"] / (3 * row["steady"] + ray_start(row))


def steps(row: dict) -> list[str]:
    """imports, Ray, nodes, round 1 (differences of the marks), Ray's start, time to round 1, exit,
    steady, budget."""
    marks = [row[step] for step in STEPS]
    differences = [None if b is None or a is None else b - a for a, b in zip([0.0, *marks[:-1]], marks)]
    if row["ray_up"] is None:  # code without the start-up lines: imports, then all of it to round 1
        differences = [row["started"], None, None, None]
    cells = [*differences, ray_start(row), row["round_1"], row["exit"], row["steady"], budget(row)]
    cells += [row.get("cpu_round_1"), *(row.get(f"cpu_r1_{part}") for part in GROUPS), row.get("cpu")]
    return ["-" if value is None else f"{value:.2f}" for value in cells]


def main() -> None:
    parser = script_parser(__doc__, task="mean", clients=0, nodes=0, rounds=5, repeats=1, busy="0,2", json=False)
    parser.add_argument("--checkout", type=Path, default=None, help="another checkout to time alongside this one")
    args = parser.parse_args()
    if args.rounds < 2:
        raise SystemExit("error: --rounds must be >= 2 (a steady-state round needs a round after the first)")
    counts = [int(count) for count in args.busy.split(",")]
    options = simulate_options(args)

    checkouts = {"this": ROOT, **({"other": args.checkout.resolve()} if args.checkout else {})}
    rows = []
    with tempfile.TemporaryDirectory(prefix="ldpfed-first-round-") as scratch:
        for repeat in range(args.repeats):
            for count in counts:
                for name, checkout in checkouts.items():
                    out = Path(scratch) / f"{name}-{count}-{repeat}"
                    with busy(count):
                        rows.append({"code": name, "busy": count, "repeat": repeat, **one_run(checkout, options, out)})
    if args.json:
        print(json.dumps({"stamp": run_stamp(), "simulate": options, "runs": rows}, indent=2))
        return
    print(f"{run_stamp()} simulate {' '.join(options)}")
    header = ["code", "busy", "repeat", "imports", "Ray", "nodes", "round 1", "ray start", "to round 1", "exit"]
    header += ["steady", "budget"]
    header += ["cpu to r1", *(f"r1 {part}" for part in GROUPS), "cpu"]
    header.append("load")
    print(" ".join(f"{title:>10}" for title in header))
    for row in rows:
        cells = [row["code"], str(row["busy"]), str(row["repeat"]), *steps(row), f"{row['load_1min']:.1f}"]
        print(" ".join(f"{cell:>10}" for cell in cells))


if __name__ == "__main__":
    main()

"""Start-up cost of `ldpfed`: the CPU of `ldpfed --version`, and the default job under Flower against the local engine.

    python benchmarks/bench_startup.py                              # this code, 3 repeats
    python benchmarks/bench_startup.py --checkout /tmp/before       # and another checkout's, alternately
    python benchmarks/bench_startup.py --repeats 1 --skip-jobs      # --version only

Every measurement is a fresh process, as a user runs it:
- `version`: CPU seconds (user + system, `resource.getrusage` of the reaped child) of `ldpfed
  --version`, against `python -c pass` in the same run (the interpreter's own start);
- `flower` and `local`: wall seconds of the default job (`ldpfed simulate` with no options but
  `--out`, i.e. the Flower engine with a Ray of its own) and of the same job with `--engine local`,
  with the CPU seconds of each: `cpu` of the processes the run reaps (Ray's services), `tree_cpu`
  sampled over its whole process tree (Ray's workers, the nodes, included).
The ratio that matters, flower / local, is of medians over `--repeats`, the two jobs alternating so
that both see the same load; the 1-minute load average at each run is printed with it (on a shared
machine a wall ratio is only as quiet as the machine). `--checkout DIR` runs another checkout's code
(its directory first on PYTHONPATH) alternately with this one. Numbers are reported, never asserted.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_first_round import TreeCpu  # noqa: E402
from scripts.arguments import script_parser  # noqa: E402
from scripts.provenance import run_stamp  # noqa: E402

CLI = "from ldpfed.cli.main import app; app()"


def timed(command: list[str], checkout: Path) -> dict:
    """Wall and CPU seconds of `command` run to its end in `checkout` (first on PYTHONPATH): `cpu`
    from the reaped children's rusage, `tree_cpu` sampled over the process tree (`TreeCpu`: Ray's
    workers, which the run's process does not reap, included)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    process = subprocess.Popen(
        command, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with TreeCpu(process.pid) as tree:
        _, stderr = process.communicate()
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        raise SystemExit(f"error: {' '.join(command)} exited {process.returncode}:\n{stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "tree_cpu": max(cpu, tree.total()), "load_1min": os.getloadavg()[0]}


def measure(checkout: Path, repeat: int, scratch: Path, jobs: bool) -> dict[str, dict]:
    """One round of every measurement for one checkout."""
    rows = {
        "python": timed([sys.executable, "-c", "pass"], checkout),
        "version": timed([sys.executable, "-c", CLI, "--version"], checkout),
    }
    if jobs:
        for engine in ("flower", "local"):
            out = scratch / f"{checkout.name}-{engine}-{repeat}"
            options = ["--out", str(out)] + (["--engine", "local"] if engine == "local" else [])
            rows[engine] = timed([sys.executable, "-c", CLI, "simulate", *options], checkout)
    return rows


def summary(runs: list[dict[str, dict]]) -> dict[str, float]:
    """Medians over the repeats, and the ratios."""
    median = {
        f"{name}_{figure}": statistics.median(run[name][figure] for run in runs)
        for name in runs[0]
        for figure in ("wall", "cpu", "tree_cpu")
    }
    if "flower" in runs[0]:
        ratios = [run["flower"]["wall"] / run["local"]["wall"] for run in runs]
        median["flower_over_local_wall"] = statistics.median(ratios)
    median["load_1min"] = statistics.median(row["load_1min"] for run in runs for row in run.values())
    return median


def main() -> None:
    parser = script_parser(__doc__, repeats=3, skip_jobs=False, json=False)
    parser.add_argument("--checkout", type=Path, default=None, help="another checkout to time alongside this one")
    args = parser.parse_args()
    checkouts = {"this": ROOT, **({"other": args.checkout.resolve()} if args.checkout else {})}
    runs: dict[str, list] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="ldpfed-startup-") as scratch:
        for repeat in range(args.repeats):
            for name, checkout in checkouts.items():
                runs[name].append(measure(checkout, repeat, Path(scratch), not args.skip_jobs))
    results = {name: summary(rows) for name, rows in runs.items()}
    if args.json:
        print(json.dumps({"stamp": run_stamp(), "medians": results, "runs": runs}, indent=2))
        return
    print(f"{run_stamp()} medians of {args.repeats} (seconds)")
    for name, figures in results.items():
        print(f"[{name}] " + ", ".join(f"{key} {value:.2f}" for key, value in figures.items()))


if __name__ == "__main__":
    main()

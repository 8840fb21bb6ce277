"""Time to the first round of `ldpfed simulate --task train` against its steady-state round.

    python benchmarks/bench_first_round.py                       # 200 clients on 2 cohort nodes, 5 rounds
    python benchmarks/bench_first_round.py --clients 1000 --nodes 2 --repeats 3 --json
    python benchmarks/bench_first_round.py --checkout /path/to/another/checkout   # the same, other code

Each repeat runs `ldpfed simulate` in a fresh process (the `ldpfed` entry point, as a user
runs it, with its own Ray) and reports side by side:
- `round_1_s`: metrics.csv's first `seconds` (from the run's start, after the command's preflight:
  Ray's start, the Flower actors' start and imports, the nodes' build and the first round);
- `steady_s`: the median `seconds` of rounds 2..R (a round once everything is up);
- `wall_s`: the command's wall-clock seconds, start to exit (imports, preflight and Ray's shutdown
  included).
`--checkout DIR` runs another checkout's code (its directory first on PYTHONPATH) in the same
invocation, alternating with this one, so that both see the same load. Numbers are reported,
never asserted; the machine's load average is printed with them.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulations.arguments import script_parser  # noqa: E402
from simulations.provenance import run_stamp  # noqa: E402


def one_run(checkout: Path, clients: int, nodes: int, rounds: int, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", "from ldpfed.cli.main import app; app()", "simulate", "--task", "train"]
    command += ["--clients", str(clients), "--nodes", str(nodes), "--rounds", str(rounds), "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    seconds = pd.read_csv(out / "metrics.csv")["seconds"].to_numpy(float)
    return {
        "round_1_s": float(seconds[0]),
        "steady_s": float(statistics.median(seconds[1:])) if len(seconds) > 1 else None,
        "wall_s": wall,
        "load_1min": os.getloadavg()[0],
    }


def main() -> None:
    parser = script_parser(__doc__, clients=200, nodes=2, rounds=5, repeats=1, json=False)
    parser.add_argument("--checkout", type=Path, default=None, help="another checkout to time alongside this one")
    args = parser.parse_args()
    if args.rounds < 2:
        raise SystemExit("error: --rounds must be >= 2 (a steady-state round needs a round after the first)")

    checkouts = {"this": ROOT, **({"other": args.checkout.resolve()} if args.checkout else {})}
    rows = []
    with tempfile.TemporaryDirectory(prefix="ldpfed-first-round-") as scratch:
        for repeat in range(args.repeats):
            for name, checkout in checkouts.items():
                out = Path(scratch) / f"{name}-{repeat}"
                rows.append(
                    {"code": name, "repeat": repeat, **one_run(checkout, args.clients, args.nodes, args.rounds, out)}
                )
    if args.json:
        print(json.dumps({"stamp": run_stamp(), "clients": args.clients, "nodes": args.nodes, "runs": rows}, indent=2))
        return
    print(f"{run_stamp()} simulate --task train --clients {args.clients} --nodes {args.nodes} --rounds {args.rounds}")
    print(f"{'code':6} {'repeat':>6} {'round 1 s':>10} {'steady s':>9} {'wall s':>7} {'load':>5}")
    for row in rows:
        print(
            f"{row['code']:6} {row['repeat']:>6} {row['round_1_s']:>10.2f} {row['steady_s']:>9.3f} "
            f"{row['wall_s']:>7.1f} {row['load_1min']:>5.1f}"
        )


if __name__ == "__main__":
    main()

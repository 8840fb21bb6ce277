"""A round under Flower against the same round on the local engine, side by side, and the memory
of the default job (`ldpfed simulate`, no options) over its whole process tree.

    python benchmarks/bench_flower_engine.py                       # mean task, N = 1000 and 2000
    python benchmarks/bench_flower_engine.py --clients 1000 --rounds 6 --memory-only
    python benchmarks/bench_flower_engine.py --clients 100000 --rounds 8 --no-memory \
        --task frequency --extra "--users 100000" --floor

Each run is `ldpfed simulate --task T --clients N --nodes K --rounds R --out TMP` in a fresh
process (so Ray starts and stops with it), once with `--engine flower` and once with
`--engine local`, one after the other. A round's time is metrics.csv's `seconds` (from the end of
one round's record to the next, the server's aggregation and the record included); the steady
state is the median of rounds 2..R (round 1 starts the actors and builds the nodes). Reported: the
seconds per round, ms per client-round, Flower / local, and a round at the largest N over one at
the smallest (linear growth: their ratio of clients). The default job's peak is the largest sum of
PSS over the tree (driver, Ray's services, the ClientAppActors; benchmarks/process_memory.py), with
its summed USS then (PSS moves with what else on the machine maps the same libraries).
Timings on a shared machine move with its load (printed with `uptime`); compare ratios of one run.

`--floor`: what a round costs when nothing is computed and nothing sent, on this machine: stock
Flower's echo (benchmarks/plain_fedavg_app.py `make_echo_apps`: an empty message to each of K
nodes and its empty reply, through Flower's grid with its default pull interval, then with a
short one) and ldpfed's smallest round (the same `simulate` with K clients of one user, one
dimension) under Flower and on the local engine. Results at 10^5 clients, with where a round's
time goes and Flower's floor: docs/results/scale.md, "Tuple rounds under Flower at 10^5 clients".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process_memory import run_sampled  # noqa: E402

LDPFED = [str(Path(sys.executable).parent / "ldpfed")]


def steady_seconds(clients: int, nodes: int, rounds: int, engine: str, extra: list[str], task: str = "mean") -> dict:
    """One `ldpfed simulate --task TASK` run: per-round seconds and their steady-state median."""
    with tempfile.TemporaryDirectory(prefix="bench-flower-") as out:
        command = [
            *LDPFED,
            "simulate",
            "--task",
            task,
            "--clients",
            str(clients),
            "--nodes",
            str(nodes),
            "--rounds",
            str(rounds),
            "--engine",
            engine,
            "--seed",
            "0",
            "--out",
            out,
            *extra,
        ]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        seconds = pd.read_csv(Path(out) / "metrics.csv")["seconds"].tolist()
    return {"seconds": seconds, "steady": statistics.median(seconds[1:])}


def echo_rounds(nodes: int, rounds: int, pull_interval: float | None) -> list[float]:
    """Stock Flower's echo rounds (`make_echo_apps`), run in a fresh process: seconds per round."""
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks');"
        "from plain_fedavg_app import make_echo_apps;"
        "from flwr.simulation import run_simulation;"
        f"times = []; server, client = make_echo_apps({nodes}, {rounds}, times, {pull_interval!r});"
        f"run_simulation(server, client, {nodes}, 'ray', {{'client_resources': {{'num_cpus': 1}}}});"
        "print('ECHO', json.dumps(times))"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("ECHO "))
    return json.loads(line[5:])


def floor(nodes: int, rounds: int) -> dict:
    """Flower's per-round floor (module docstring, `--floor`), steady medians (round 1 left out)."""
    result = {}
    for name, interval in (("flower_echo_default_pull", None), ("flower_echo_pull_0.01", 0.01)):
        times = echo_rounds(nodes, rounds, interval)
        result[name] = {"seconds": times, "steady": statistics.median(times[1:])}
    tiny = ["--users", str(nodes), "--dims", "1"]
    for engine in ("flower", "local"):
        result[f"ldpfed_tiny_{engine}"] = steady_seconds(nodes, nodes, rounds, engine, tiny)
    for name, row in result.items():
        print(f"floor, {name}: {row['steady']:.3f} s/round (rounds: {', '.join(f'{s:.3f}' for s in row['seconds'])})")
    return result


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="1000,2000")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--task", default="mean", choices=("mean", "frequency"))
    parser.add_argument("--extra", default="", help="more simulate options, space-separated")
    parser.add_argument("--floor", action="store_true", help="also Flower's per-round floor (docstring)")
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result: dict = {"load_before": load(), "rows": []}
    if not args.memory_only:
        print("| clients | Flower s/round | local s/round | Flower ms/client-round | Flower / local | load |")
        print("|---|---|---|---|---|---|")
        for clients in (int(n) for n in args.clients.split(",")):
            flower = steady_seconds(clients, args.nodes, args.rounds, "flower", args.extra.split(), args.task)
            local = steady_seconds(clients, args.nodes, args.rounds, "local", args.extra.split(), args.task)
            row = {
                "clients": clients,
                "flower_seconds_per_round": flower["steady"],
                "local_seconds_per_round": local["steady"],
                "flower_ms_per_client_round": 1000 * flower["steady"] / clients,
                "flower_over_local": flower["steady"] / local["steady"],
                "flower_rounds": flower["seconds"],
                "local_rounds": local["seconds"],
                "load": load(),
            }
            result["rows"].append(row)
            print(
                f"| {clients} | {flower['steady']:.3f} | {local['steady']:.3f} | "
                f"{row['flower_ms_per_client_round']:.3f} | {row['flower_over_local']:.2f} | {row['load']} |",
                flush=True,
            )
            print(f"    rounds, flower: {', '.join(f'{s:.3f}' for s in flower['seconds'])}")
            print(f"    rounds, local:  {', '.join(f'{s:.3f}' for s in local['seconds'])}")
        rows = result["rows"]
        if len(rows) > 1:
            growth = rows[-1]["flower_seconds_per_round"] / rows[0]["flower_seconds_per_round"]
            result["flower_growth"] = growth
            print(f"Flower round at {rows[-1]['clients']} / at {rows[0]['clients']} clients: {growth:.2f}x")
    if args.floor:
        result["floor"] = floor(args.nodes, args.rounds)
    if not args.no_memory:
        for engine in ("flower", "local"):
            peak, wall = run_sampled([*LDPFED, "simulate", "--engine", engine], stdout=subprocess.DEVNULL)
            result[f"default_job_{engine}"] = {"peak_pss_mib": peak["total_mib"], "wall_seconds": wall, **peak}
            print(
                f"default job, {engine}: {wall:.1f} s, peak summed PSS {peak['total_mib']:.0f} MiB "
                f"(USS {peak['uss_mib']:.0f} MiB) over {peak['count']} processes",
                flush=True,
            )
            for command, pss, uss in peak["processes"]:
                print(f"    PSS {pss:7.1f} MiB  USS {uss:7.1f} MiB  {command}")
    result["load_after"] = load()
    print(f"load average before: {result['load_before']}, after: {result['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

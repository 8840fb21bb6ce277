"""Per-round cost of `--trust secagg` against `--trust local` under Flower (mean task), as a ratio
measured in one run: the same clients, nodes, users and dims; the steady round is the median of
rounds 2..R of each run's own `seconds` column (round 1 includes building the nodes and Ray's
first calls). secagg's round is four exchanges (keys, shares, masked vectors, unmasking) and every
client's key agreements, Shamir splits and AES masks with its k = O(log n) neighbours; local's is
one exchange of the clients' report sums.

    python benchmarks/bench_secagg.py                       # N = 100 and 1,000 clients
    python benchmarks/bench_secagg.py --clients 100 --rounds 3 --nodes 2 --engine local
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ldpfed.protocols.recorder import output_dir  # noqa: E402
from ldpfed.tasks import resolve  # noqa: E402
from simulations.federation import run  # noqa: E402
from simulations.trust import run_trust  # noqa: E402


def steady_round(trust: str, clients: int, nodes: int, rounds: int, dims: int, engine: str) -> float:
    """Median seconds of rounds 2..R of one run (its metrics.csv)."""
    flags = {
        "task": "mean",
        "engine": engine,
        "clients": clients,
        "nodes": nodes,
        "users": 10 * clients,
        "dims": dims,
        "rounds": rounds,
        "seed": 0,
    }
    if trust == "secagg":
        flags.update(trust="secagg", max_epsilon=4.0, mechanism=None)
    with tempfile.TemporaryDirectory() as folder:
        flags["out"] = str(Path(folder) / "out")
        config = resolve(None, {name: value for name, value in flags.items() if value is not None})
        if trust == "secagg":
            run_trust(config, output_dir(config), noise_seed=1)
        else:
            run(config, output=output_dir(config), noise_seed=1)
        seconds = pd.read_csv(Path(folder) / "out" / "metrics.csv")["seconds"].tolist()
    return statistics.median(seconds[1:] or seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="100,1000")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dims", type=int, default=16)
    parser.add_argument("--engine", default="flower", choices=["flower", "local"])
    args = parser.parse_args()
    print(f"engine {args.engine}, {args.nodes} nodes, d = {args.dims}, median of rounds 2..{args.rounds}")
    print(f"{'clients':>8} {'local s/round':>14} {'secagg s/round':>15} {'secagg / local':>15}")
    for clients in (int(text) for text in args.clients.split(",")):
        local = steady_round("local", clients, args.nodes, args.rounds, args.dims, args.engine)
        secagg = steady_round("secagg", clients, args.nodes, args.rounds, args.dims, args.engine)
        print(f"{clients:>8} {local:>14.3f} {secagg:>15.3f} {secagg / local:>15.1f}")


if __name__ == "__main__":
    main()

"""What the in-run audit costs: `ldpfed simulate --task train --canaries M` against the same run
without canaries, as the ratio of their wall times measured in this process, one after the other.

    python benchmarks/bench_canaries.py [--clients 10,100] [--canaries 100] [--rounds 3] [--repeats 2]

Both runs: digits, logistic regression, inid-gaussian at eps 4 (delta 1e-5, L2 clip 1, rdp), FedAvg,
engine local, one noise seed, no output files; the time is `simulations.federation.run` end to end
(data, halves, rounds, summary and, with canaries, the verdict), the minimum over the repeats. A
canary trains nothing: it costs its privatization (one noise draw of d values), its reply, its
ledger entry and its share of the audit's cosines, so the ratio falls as the real clients' training
grows. Target: at most 1.3 with 100 canaries.

Measured on the shared 2-core machine (one repeat each, 3 rounds): 100 real clients + 100 canaries
2.91 s against 2.81 s without, ratio 1.04; 10 real clients + 100 canaries (a federation of 110,
ten times the real one) 1.56 s against 0.77 s, ratio 2.0: there each canary's per-client share of
the round (its noise draw, its reply through Flower's FedAvg arrays, its ledger entry) outweighs
the ten real clients' few local steps.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.digits_config import digits_train_config  # noqa: E402
from ldpfed.config import Config  # noqa: E402
from scripts.arguments import script_parser  # noqa: E402

NOISE_SEED = 20261128
TARGET = 1.3


def config_for(clients: int, canaries: int, rounds: int) -> Config:
    return digits_train_config(
        {
            "engine": "local",
            "clients": clients,
            "canaries": canaries,
            "rounds": rounds,
            "mechanism": "inid-gaussian",
            "epsilon": 4.0,
            "delta": 1e-5,
            "clip": 1.0,
            "accountant": "rdp",
            "aggregator": "fedavg",
        }
    )


def run_seconds(config: Config, repeats: int) -> float:
    from simulations.federation import run

    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run(config, noise_seed=NOISE_SEED)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    args = script_parser(__doc__, clients="10,100", canaries=100, rounds=3, repeats=2).parse_args()
    run_seconds(config_for(2, 4, 1), 1)  # warm-up: imports, the data's first load
    print(f"| real clients | canaries | s without | s with | ratio (target <= {TARGET}) |")
    print("|---|---|---|---|---|")
    for clients in (int(c) for c in args.clients.split(",")):
        without = run_seconds(config_for(clients, 0, args.rounds), args.repeats)
        with_canaries = run_seconds(config_for(clients, args.canaries, args.rounds), args.repeats)
        ratio = with_canaries / without
        print(f"| {clients} | {args.canaries} | {without:.2f} | {with_canaries:.2f} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()

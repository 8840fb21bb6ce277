"""A tuple task's round on the local engine against its own arithmetic (spec: scale.md): the
steady round of `ldpfed simulate --engine local --task mean|frequency` with N clients of one user
each (N users x d dims) against one batched perturbation of the same N x d values (one Generator)
plus their aggregation (`summarize`), as ratios measured in one run; and the share of the run spent
writing its outputs (`--out`).

    python benchmarks/bench_tuple_round.py                         # mean and frequency, N = 100,000
    python benchmarks/bench_tuple_round.py --clients 1000000 --tasks mean --rounds 3
    python benchmarks/bench_tuple_round.py --clients 10000 --one-by-one   # also the per-client path

The steady round is the median of rounds 2..R of the run's own `seconds` (each from the end of one
round's record to the end of the next: the nodes' replies, the server's aggregation, the harness's
diagnostics, the ledger and the per-round files). Round 1 includes building the nodes (the
clients' data and premixed secrets). `--one-by-one` times the same node answering client after
client (`ClientsNode.one_by_one`, the path before batching) for one round, on the node alone.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ldpfed.config import Config  # noqa: E402


def config_for(task: str, clients: int, dims: int, rounds: int, out: str, mechanism: str) -> Config:
    options = {
        "task": task,
        "engine": "local",
        "clients": clients,
        "users": clients,
        "dims": dims,
        "rounds": rounds,
        "mechanism": mechanism,
        "epsilon": 2.0,
        "out": out,
        "overwrite": True,
    }
    return Config().with_options(options).validated()


def timed_writes():
    """Patch OutputDir.write to add up its seconds; returns the running total (a one-item list)."""
    from ldpfed.outputs import OutputDir

    spent = [0.0]
    real = OutputDir.write

    def write(self, files):
        start = time.perf_counter()
        try:
            return real(self, files)
        finally:
            spent[0] += time.perf_counter() - start

    OutputDir.write = write
    return spent


def baseline(config: Config, repeats: int = 3) -> float:
    """Median seconds of one batched perturbation of all N x d values with one Generator and their
    aggregation (mean: `perturb_tuples` + `summarize`; frequency: the oracles' `report_sums`)."""
    from ldpfed.mechanisms.multidim import perturb_tuples, summarize
    from ldpfed.protocols import frequency, mean, seeds

    data_seed = seeds.data_seed(0)
    bound = (frequency if config.run.task == "frequency" else mean).bound(config, data_seed)
    times = []
    for repeat in range(repeats):
        rng = np.random.default_rng(repeat)
        start = time.perf_counter()
        if config.run.task == "mean":
            values = mean.tuples(bound, data_seed)
            summarize(*perturb_tuples(values, mean.mechanism(bound), mean.report_dims(bound), rng))
        else:
            oracles = frequency.oracles_from_config(bound, data_seed)
            oracles.report_sums(frequency.read(bound, data_seed).codes, rng)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def one_by_one(config: Config) -> float:
    """Seconds of one round of one node answering client after client (the unbatched path)."""
    from ldpfed.protocols import seeds
    from ldpfed.protocols.session import World, bind_data, node_half

    world = World.from_config(config, noise_seed=1)
    bound = bind_data(config, world.data)
    pids = list(range(bound.federation.clients))
    node = node_half(bound, pids, world.data, world.secrets_of(pids))
    start = time.perf_counter()
    node.one_by_one(1, {}, pids)
    del seeds
    return time.perf_counter() - start


def run_task(task: str, args) -> dict:
    from simulations.federation import run

    with tempfile.TemporaryDirectory() as out:
        config = config_for(task, args.clients, args.dims, args.rounds, out, args.mechanism)
        base = baseline(config)
        writes = timed_writes()
        start = time.perf_counter()
        run(config, noise_seed=1)
        total = time.perf_counter() - start
        import pandas as pd

        rounds = pd.read_csv(Path(out) / "metrics.csv")["seconds"].to_numpy()
    steady = float(np.median(rounds[1:])) if rounds.size > 1 else float(rounds[0])
    result = {
        "task": task,
        "clients": args.clients,
        "baseline_s": base,
        "first_round_s": float(rounds[0]),
        "steady_round_s": steady,
        "steady_over_baseline": steady / base,
        "rounds_s": ",".join(f"{value:.3f}" for value in rounds),
        "run_s": total,
        "writing_s": writes[0],
        "writing_share": writes[0] / total,
    }
    if args.one_by_one:
        result["one_by_one_round_s"] = one_by_one(config)
        result["one_by_one_over_baseline"] = result["one_by_one_round_s"] / base
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="mean,frequency")
    parser.add_argument("--clients", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mechanism", default="laplace")
    parser.add_argument("--one-by-one", action="store_true")
    args = parser.parse_args()
    for task in args.tasks.split(","):
        result = run_task(task, args)
        print(" ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}" for key, value in result.items()))


if __name__ == "__main__":
    main()

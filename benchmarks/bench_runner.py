"""Time per repetition and peak memory of the mean-estimation runner at 10^6 users x 100 dims.

    python benchmarks/bench_runner.py [--users 1000000] [--dims 100] [--repeats 2] [--mechanism laplace]

Reports, for one repetition of `collect_sums` + `estimate_once` (every aggregator):
- seconds per repetition, and the share spent in the mechanism's sampling alone (the same
  number of values drawn by `mechanism.perturb` chunk by chunk in the same process: the baseline);
- peak memory above the data (tracemalloc, which sees numpy's allocations) and the process's
  maximum resident set (ru_maxrss, which includes the data itself and the interpreter).
Performance is reported as numbers and ratios, never asserted.
"""

from __future__ import annotations

import resource
import time
import tracemalloc

import numpy as np

import ldpfed.aggregation as aggregation
from ldpfed.data import generate
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.protocols.mean import collect_sums, default_chunk_users, estimate_once
from scripts.arguments import script_parser


def sampling_only(data, mechanism, chunk_users, rng) -> None:
    for start in range(0, data.shape[0], chunk_users):
        mechanism.perturb(data[start : start + chunk_users], rng)


def main() -> None:
    parser = script_parser(__doc__, users=1_000_000, dims=100, repeats=2, mechanism="laplace", epsilon=1.0)
    parser.add_argument("--chunk-users", type=int, default=None)
    args = parser.parse_args()

    data = generate("gaussian", args.users, args.dims, np.random.default_rng(0))
    mechanism = per_value_mechanism(args.mechanism, args.epsilon, args.dims)
    aggregators = aggregation.get_many(aggregation.available())
    chunk = args.chunk_users or default_chunk_users(args.dims)
    streams = np.random.SeedSequence(1).spawn(args.repeats)

    tracemalloc.start()
    tracemalloc.reset_peak()
    times = []
    for stream in streams:
        start = time.perf_counter()
        sums = collect_sums(data, mechanism, args.dims, stream, chunk_users=chunk)
        estimate_once(sums, mechanism, aggregators)
        times.append(time.perf_counter() - start)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    start = time.perf_counter()
    sampling_only(data, mechanism, chunk, np.random.default_rng(2))
    sampling = time.perf_counter() - start

    per_repetition = float(np.median(times))
    print(
        f"{args.mechanism} eps={args.epsilon:g}, {args.users} users x {args.dims} dims (m = d), chunk = {chunk} users"
    )
    print(f"data array: {data.nbytes / 2**20:.0f} MiB (held by the caller)")
    print(f"time per repetition: {per_repetition:.2f} s (runs: {', '.join(f'{t:.2f}' for t in times)})")
    print(f"mechanism sampling alone: {sampling:.2f} s = {sampling / per_repetition:.0%} of a repetition")
    print(f"peak traced memory above the data: {peak / 2**20:.0f} MiB")
    print(f"process max RSS (incl. data): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")


if __name__ == "__main__":
    main()

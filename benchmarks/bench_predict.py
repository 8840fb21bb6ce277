"""Speed of the CLT predictor (issue 3): O(d) from summary moments, and its time as a ratio to one
Monte Carlo repetition of the same configuration (not a test; numbers for the docs).

1. Prediction from summary moments (ColumnMoments.from_summary) at d = 10^5 for every randomizer:
   best of --repeats runs. Target: well under a second.
2. The same configuration (n users, d = 10^5, m) three ways, same process:
   - predict from summary moments (O(d));
   - predict from the raw (n, d) array (O(nd): moments plus exact Berry–Esseen third moments);
   - one Monte Carlo repetition: the actual mechanism with m-of-d sampling
     (perturb_tuples + summarize + mean_estimate), the baseline.
   n is chosen so that one repetition takes a few seconds.
   Target (issue 11 item 9): predict from raw data >= 10x faster than one repetition, every mechanism.
   Predicting from raw data includes the data pass (ColumnMoments.from_array: one blocked pass for
   the power sums up to t^4, column sums as BLAS products) and the Berry–Esseen polynomial fit
   (cached per mechanism after the first call, as in any repeated use; the first call adds
   ~10-30 ms). The safe samplers' tables and the Gaussian calibration are built once per
   parameters and shared by every mechanism with them (~0.2 s for the Gaussian, ~5 ms Laplace).

`--clock cpu` (the default) times the CPU time of this process (time.process_time): other
processes on a shared machine do not inflate it. It counts every thread of the process, so the
data pass's BLAS column sums are charged in full (conservative for the predictor; the Monte Carlo
repetition is single-threaded). `--clock wall` times elapsed time.

    python benchmarks/bench_predict.py [--dims 100000] [--users 1000] [--report-dims 100] [--repeats 5] [--clock cpu]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import ldpfed.mechanisms as registry
from ldpfed.analysis import ColumnMoments, predict
from ldpfed.analysis.montecarlo import simulate_deviations
from ldpfed.data import generate
from ldpfed.multidim import per_value_mechanism

ESTIMATOR_VARIANTS = {"square-wave": ({"estimator": "raw"}, {"estimator": "debiased"})}
DELTA = 1e-5


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def best_of(repeats: int, function, clock=time.process_time) -> float:
    times = []
    for _ in range(repeats):
        start = clock()
        function()
        times.append(clock() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--report-dims", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="cpu")
    args = parser.parse_args()
    clock = CLOCKS[args.clock]
    d, n, m = args.dims, args.users, args.report_dims
    data_rng = np.random.default_rng(args.seed)
    values = generate("uniform", n, d, data_rng)
    summary = ColumnMoments.from_array(values).summary()

    table = Table(title=f"ldpfed predict: d = {d:,}, n = {n:,}, m = {m} (predict: best of {args.repeats}; MC: 1 repetition; {args.clock} time)")
    for column in ("mechanism", "predict, summary moments [ms]", "predict, raw data [ms]",
                   "one MC repetition [s]", "MC / predict(summary)", "MC / predict(raw)"):
        table.add_column(escape(column), justify="right")  # rich reads "[ms]" as markup otherwise
    for name in registry.available():
        for options in ESTIMATOR_VARIANTS.get(name, ({},)):
            delta = DELTA if registry.get_class(name).approximate else None
            from_summary = best_of(args.repeats, lambda: predict(name, args.epsilon, n, d, m, summary, delta=delta, **options), clock)
            from_data = best_of(args.repeats, lambda: predict(name, args.epsilon, n, d, m, values, delta=delta, **options), clock)
            mechanism = per_value_mechanism(name, args.epsilon, m, delta, **options)
            one_repetition = best_of(1, lambda: simulate_deviations(values, mechanism, m, 1, args.seed), clock)
            label = name + "".join(f" ({v})" for v in options.values())
            table.add_row(label, f"{1e3 * from_summary:.2f}", f"{1e3 * from_data:.0f}", f"{one_repetition:.2f}",
                          f"{one_repetition / from_summary:,.0f}x", f"{one_repetition / from_data:,.1f}x")
    Console(width=max(120, Console().width)).print(table)


if __name__ == "__main__":
    main()

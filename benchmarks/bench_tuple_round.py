"""A tuple task's round on the local engine against its own arithmetic (spec: scale.md): the
steady round of `ldpfed simulate --engine local --task mean|frequency` with N clients of one user
each (N users x d dims) against one batched perturbation of the same N x d values (one Generator)
plus their aggregation (`summarize`), as ratios measured in one run; and the share of the run spent
writing its outputs (`--out`).

    python benchmarks/bench_tuple_round.py                         # mean and frequency, N = 100,000
    python benchmarks/bench_tuple_round.py --clients 1000000 --tasks mean --rounds 3
    python benchmarks/bench_tuple_round.py --clients 10000 --one-by-one   # also the per-client path
    python benchmarks/bench_tuple_round.py --tasks mean,frequency --rounds 8 --no-plot  # no plot.png

The full round is the median of rounds 3..R of the run's own `seconds` (each from the end of one
round's record to the end of the next: the nodes' replies, the server's aggregation, the harness's
diagnostics, the ledger and the per-round files); `full_over_baseline` is the figure the target
(<= 3x) speaks to, the baseline the median of three repeats before the run and three after it;
`full_over_baseline_cpu` is the same ratio in the process's CPU seconds (steadier on a shared
machine; a round's CPU from the start of one round's record to the next's). Round 1 includes
building the nodes (the clients' data and premixed secrets); round 2 includes round 1's record,
whose first call imports the ledger's accountants and pandas (once per process), so neither is
steady (with R < 4 the median is of rounds 2..R). The protocol round is the same median of
`local_round` alone (nodes and server, no harness diagnostics, no files); `world_s` is the
harness's seeds and the clients' secrets (`World.from_config`) and `nodes_s` building every node
(data, failures, premixed secrets). `--one-by-one` times a protocol round with each node's
clients answering client after client (`ClientsNode.one_by_one`, the path before batching).

The output work (`writing_*`, see `timed_writes`) is all of the Recorder's work and every other
write, on both clocks; `file_writes_*` the file writes alone (the measure used before). Measured
2026-11-29 at load 5-9, 8 rounds, before and after the figure's rework and metrics.csv without
pandas: mean (first in its process: it pays matplotlib's import, 0.45 s of CPU, and before,
pandas', 0.34 s) 69-71% -> 60% of the run's CPU; frequency (second) 14% -> 9.2-9.4%
(docs/results/scale.md). Later the same day, load 5-6, four runs each: with the figure mean 63-67%
(1.56-1.79 s of 2.3-2.8 s), frequency 10.0-11.1%; `--no-plot` mean 30-33% (0.30-0.48 s of
1.0-1.4 s: dp-accounting's first import for privacy.csv's rdp and pld columns, ~0.2 s, and 23 MB
of per-client CSV text, ~0.1 s), frequency 4.9-5.5%. With privacy_entries.csv as runs of consecutive
ids, rdp's refusal of a generic round without dp-accounting and privacy.csv's interim rewrites ten
seconds apart (load ~1.1, three runs): `--no-plot` mean 7.5-9.2% (73-99 ms of 0.89-1.09 s: the final
privacy.csv, 10^5 lines, ~35 ms, most of it the ids' text; a round's metrics.csv 1.2-2 ms),
frequency 1.6-2.3%; with the figure (two runs) 53-62% and 6.5-7.2%.
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
    """Patch the run's output work to add up its seconds on the wall and the CPU clock: all of the
    Recorder's per-round and end-of-run work (`add_round`, `finish`: rendering metrics.csv,
    privacy.csv, privacy_entries.csv and privacy.json from the ledger, building the figure, with
    matplotlib's import on its first use in a process, and writing every file) and any
    `OutputDir.write` outside it (config.toml, noise_secret, the manifest). Also the seconds of
    each file's write by name, of building the figure ("plot.png(figure)") and of rendering the
    ledger's tables ("privacy.csv(render)", its first call importing dp-accounting for the rdp and
    pld columns; "privacy_entries.csv(render)"), for the breakdown; the writes alone
    (`file_writes_s`: `write_content`, what this benchmark counted before the rendering, the
    figure and the imports were included) are summed from it.
    Returns ([wall, CPU], {name: wall seconds})."""
    import ldpfed.outputs as outputs
    import ldpfed.protocols.recorder as recorder
    from ldpfed.accounting.ledger import PrivacyLedger as ledger

    spent, by_file, depth = [0.0, 0.0], {}, [0]

    def clocked(function, name=None):
        def wrapper(*args, **kwargs):
            start, start_cpu = time.perf_counter(), time.process_time()
            depth[0] += 1
            try:
                return function(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:  # the outermost output call: counted once
                    spent[0] += time.perf_counter() - start
                    spent[1] += time.process_time() - start_cpu
                if name is not None:
                    by_file[name] = by_file.get(name, 0.0) + time.perf_counter() - start

        return wrapper

    real_content = outputs.write_content

    def write_content(path, content, *, suffix=None):
        start = time.perf_counter()
        try:
            return real_content(path, content, suffix=suffix)
        finally:
            name = Path(path).name.split(".tmp")[0].lstrip(".")
            name = next((known for known in KNOWN if known in name), name)
            by_file[name] = by_file.get(name, 0.0) + time.perf_counter() - start

    recorder.Recorder.add_round = clocked(recorder.Recorder.add_round)
    recorder.Recorder.finish = clocked(recorder.Recorder.finish, "finish(all)")
    recorder.plot_rounds = clocked(recorder.plot_rounds, "plot.png(figure)")
    ledger.totals_csv = clocked(ledger.totals_csv, "privacy.csv(render)")  # dp-accounting's import on first use
    ledger.entries_csv = clocked(ledger.entries_csv, "privacy_entries.csv(render)")
    outputs.OutputDir.write = clocked(outputs.OutputDir.write)
    outputs.write_content = write_content
    return spent, by_file


# breakdown entries that are not one file's write
COMPOSITE = ("plot.png(figure)", "finish(all)", "privacy.csv(render)", "privacy_entries.csv(render)")
KNOWN = (
    "metrics.csv",
    "privacy_entries.csv",
    "privacy.csv",
    "privacy.json",
    "summary.json",
    "plot.png",
    "config.toml",
    "noise_secret",
    "ldpfed-run.json",
)


def baseline(config: Config, repeats: int = 3) -> tuple[list[float], list[float]]:
    """Seconds (wall, CPU) of `repeats` batched perturbations of all N x d values with one
    Generator and their aggregation (mean: `perturb_tuples` + `summarize`; frequency: the
    oracles' `report_sums`)."""
    from ldpfed.mechanisms.multidim import perturb_tuples, summarize
    from ldpfed.protocols import frequency, mean, seeds

    data_seed = seeds.data_seed(0)
    bound = (frequency if config.run.task == "frequency" else mean).bound(config, data_seed)
    times, cpu = [], []
    for repeat in range(repeats):
        rng = np.random.default_rng(repeat)
        start, start_cpu = time.perf_counter(), time.process_time()
        if config.run.task == "mean":
            values = mean.tuples(bound, data_seed)
            summarize(*perturb_tuples(values, mean.mechanism(bound), mean.report_dims(bound), rng))
        else:
            oracles = frequency.oracles_from_config(bound, data_seed)
            oracles.report_sums(frequency.read(bound, data_seed).codes, rng)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return times, cpu


def round_cpu():
    """Patch Session.after_round to note the process's CPU seconds as each round's record starts;
    returns the list of marks (their differences: each round's CPU, the previous record included,
    as the run's own `seconds` include it)."""
    from ldpfed.protocols.session import Session

    marks, real = [], Session.after_round

    def after_round(self, *args, **kwargs):
        marks.append(time.process_time())
        return real(self, *args, **kwargs)

    Session.after_round = after_round
    return marks


def protocol_rounds(config: Config, rounds: int, one_by_one: bool = False) -> list[float]:
    """Seconds of each of `rounds` rounds of the protocol alone (`local_round`: the nodes' replies
    and the server's aggregation, participation record and ledger), without the harness's per-round
    diagnostics (truth and CLT prediction) and files; `one_by_one`: each node's clients answering
    client after client (the unbatched path), for one round."""
    from ldpfed.protocols.nodes import NodeSet, local_round
    from ldpfed.protocols.session import World
    from ldpfed.tasks.run import bind_data, layout, node_half, server_half

    start = time.perf_counter()
    world = World.from_config(config, noise_seed=1)
    built = {"world_s": time.perf_counter() - start}
    bound = bind_data(config, world.data)
    server = server_half(bound, world.data, world.server)

    def build(partitions):
        node = node_half(bound, partitions, world.data, world.secrets_of(partitions))
        if one_by_one:
            node.reply = node.one_by_one
        return node

    nodes = NodeSet(layout(bound), build)
    start = time.perf_counter()
    for index in range(nodes.layout.nodes):
        nodes.node(index)
    built["nodes_s"] = time.perf_counter() - start
    seconds = []
    for server_round in range(1, rounds + 1):
        start = time.perf_counter()
        local_round(server, nodes, server_round)
        seconds.append(time.perf_counter() - start)
    return seconds, built


def steady(rounds: np.ndarray) -> float:
    """The median of rounds 3..R (2..R when R < 4; the only round when R = 1)."""
    skip = 2 if rounds.size >= 4 else min(1, rounds.size - 1)
    return float(np.median(rounds[skip:]))


def without_plot() -> None:
    """Patch the Recorder to leave plot.png out (its `plot` False), as a run asked for no figure."""
    import ldpfed.protocols.recorder as recorder

    real = recorder.Recorder.__init__

    def init(self, config, output=None, plot=None):
        real(self, config, output, plot=False)

    recorder.Recorder.__init__ = init


def run_task(task: str, args) -> dict:
    from simulations.federation import run

    with tempfile.TemporaryDirectory() as out:
        config = config_for(task, args.clients, args.dims, args.rounds, out, args.mechanism)
        before, before_cpu = baseline(config)
        if args.no_plot:
            without_plot()
        writes, by_file = timed_writes()
        marks = round_cpu()
        start, start_cpu = time.perf_counter(), time.process_time()
        run(config, noise_seed=1)
        total, total_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        after, after_cpu = baseline(config)  # before and after the run: the same load on both sides
        import pandas as pd

        rounds = pd.read_csv(Path(out) / "metrics.csv")["seconds"].to_numpy()
    base, base_cpu = float(np.median(before + after)), float(np.median(before_cpu + after_cpu))
    full = steady(rounds)
    full_cpu = float(np.median(np.diff(marks)[1:])) if len(marks) > 2 else float("nan")  # rounds 3..R
    result = {
        "task": task,
        "plot": not args.no_plot,
        "clients": args.clients,
        "baseline_s": base,
        "first_round_s": float(rounds[0]),
        "full_round_s": full,
        "full_over_baseline": full / base,
        "full_round_cpu_s": full_cpu,
        "baseline_cpu_s": base_cpu,
        "full_over_baseline_cpu": full_cpu / base_cpu,
        "rounds_s": ",".join(f"{value:.3f}" for value in rounds),
        "run_s": total,
        "writing_s": writes[0],
        "writing_share": writes[0] / total,
        "file_writes_s": (files := sum(v for k, v in by_file.items() if k not in COMPOSITE)),
        "file_writes_share": files / total,
        "run_cpu_s": total_cpu,
        "writing_cpu_s": writes[1],
        "writing_share_cpu": writes[1] / total_cpu,
        "writing_by_file_s": ",".join(f"{name}:{seconds:.3f}" for name, seconds in sorted(by_file.items())),
    }
    protocol, built = protocol_rounds(config, args.rounds)
    result["protocol_round_s"] = steady(np.array(protocol))
    result["protocol_over_baseline"] = result["protocol_round_s"] / base
    result.update(built)
    if args.one_by_one:
        result["one_by_one_round_s"] = protocol_rounds(config, 2, one_by_one=True)[0][1]
        result["one_by_one_over_baseline"] = result["one_by_one_round_s"] / base
    return result


def shown(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="mean,frequency")
    parser.add_argument("--clients", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mechanism", default="laplace")
    parser.add_argument("--one-by-one", action="store_true")
    parser.add_argument("--no-plot", action="store_true", help="the run draws no plot.png (Recorder's plot off)")
    args = parser.parse_args()
    for task in args.tasks.split(","):
        result = run_task(task, args)
        print(" ".join(f"{key}={shown(value)}" for key, value in result.items()))


if __name__ == "__main__":
    main()

"""Scale of `ldpfed simulate --task train` (spec: scale.md): client-steps per second and
seconds per round of cohort nodes (K Flower nodes, each training its clients at once) against
today's one-client-per-node layout (K = N) and a plain loop (each client's `train_local` one after
another in this process, no Flower, no privatization), as ratios measured in one run; and the peak
memory of one node at N = 1000 for the CNN (one round of one node of K in a fresh process: its
resident memory before the round and its peak).

    python benchmarks/bench_scale.py                      # the default grid (below)
    python benchmarks/bench_scale.py --models logreg --clients 1000 --steps 20 --paths cohort,per-client
    python benchmarks/bench_scale.py --full               # models x N {100, 1000} x E {20, 200}

Each federation runs `rounds` rounds (default 4) under the Flower engine (Ray) with
`--mechanism laplace`; its time per round is the median of rounds 2..R (round 1 includes building
the nodes, loading the data and torch.func's first call), each from the end of one round's record
to the end of the next, so it includes the server's aggregation and evaluation. Client-steps per
second = sampled clients x E / seconds per round. The plain loop trains `--loop-clients` clients
(at most N), scaled to N: once untimed (its first model calls run about 3x slow), then the median
of `--loop-repeats` timed passes (default 3). Default grid (`DEFAULT_GRID`): logreg and MLP at N = 1000, E = 20 and
the CNN at N = 100, E = 20 on all three paths; the CNN at N = 1000, E = 20 on the cohort path and
the loop; the node memory. With 2 rounds it took about 25 minutes on the shared 2-core machine
(load ~10), most of it the per-client path at N = 1000, then 200-250 s per round as every message
rebuilt its node; on 2026-11-25 (nodes built once per actor, load 4-10) that path took 51 s per
round for logreg (`--rounds 3`), the cohort path 0.44 s (`--rounds 6`). The rest of the full grid
(E = 200; N = 1000 per-client for the CNN, hours) is `--full` or a grid of your own.

With the default data (scikit-learn digits, 1,438 training samples) N = 1000 clients hold 1-2
samples each, so their minibatches are 1-2 rows: pass `--data mnist-5k` (or mnist with
`--data-dir`) for fuller clients.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ldpfed.config import Config  # noqa: E402
from ldpfed.tasks import validated
from scripts.provenance import run_stamp  # noqa: E402

DEFAULT_GRID = [  # (model, N, E, paths)
    ("logreg", 1000, 20, ("cohort", "per-client", "loop")),
    ("mlp", 1000, 20, ("cohort", "per-client", "loop")),
    ("cnn", 100, 20, ("cohort", "per-client", "loop")),
    ("cnn", 1000, 20, ("cohort", "loop")),
]


def config_for(model: str, clients: int, steps: int, nodes: int, rounds: int, cpus: int, data: str) -> Config:
    return validated(
        Config().with_options(
            {
                "task": "train",
                "data": data,
                "model": model,
                "clients": clients,
                "nodes": nodes,
                "rounds": rounds,
                "local-steps": steps,
                "mechanism": "laplace",
                "epsilon": 2.0,
                "coordinate-clip": 0.05,
                "lr": 0.1,
                "batch-size": 32,
                "cpus": cpus,
                "cpus-per-client": 1.0,
                "device": "cpu",
                "seed": 0,
                "engine": "flower",
            }
        )
    )


def seconds_per_round(config: Config) -> float:
    """The steady-state seconds per round under `ldpfed simulate`'s harness (Flower engine): the
    median of rounds 2..R (round 1 alone when R = 1)."""
    from simulations.federation import run
    from simulations.progress import QuietProgress

    times: list[float] = []

    class Clock(QuietProgress):
        def start(self, stream):
            times.append(time.perf_counter())

        def update(self, row):
            times.append(time.perf_counter())

    run(config, Clock())
    rounds = np.diff(times)
    return float(np.median(rounds[1:] if rounds.size > 1 else rounds))


def loop_seconds(config: Config, clients: int, repeats: int = 3) -> float:
    """Seconds for `clients` clients' local training one after another (reset the weights, train):
    the median of `repeats` timed passes after one untimed warm-up pass."""
    from ldpfed.protocols import seeds
    from ldpfed.protocols.train import federated_data, new_model
    from ldpfed.training.local import single_thread, train_local

    data = federated_data(config, seeds.data_seed(0))
    training = config.training
    model = new_model(config, seeds.data_seed(0))
    initial = {name: tensor.clone() for name, tensor in model.state_dict().items()}

    def one_pass() -> float:
        started = time.perf_counter()
        for pid in range(clients):
            model.load_state_dict(initial)
            train_local(
                model,
                *data.client(pid),
                steps=training.local_steps,
                lr=training.lr,
                batch_size=training.batch_size,
                seed=pid,
            )
        return time.perf_counter() - started

    with single_thread():
        one_pass()  # warm-up: torch's first calls of a model run several times slower
        return float(np.median([one_pass() for _ in range(repeats)]))


def _resident_mib() -> float:
    """This process' current resident memory (Linux /proc)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20


def node_peak(model: str, clients: int, steps: int, nodes: int, data: str) -> dict:
    """One node of `nodes` hosting its block of clients, one round, in THIS process: its resident
    memory before the round and the process' peak resident memory after it (MiB)."""
    from ldpfed.protocols.nodes import hosted
    from ldpfed.protocols.session import World
    from ldpfed.tasks import node_half, server_half

    config = config_for(model, clients, steps, nodes, 1, nodes, data)
    world = World.from_config(config)
    plan = server_half(config, world.data, world.server).configure_round(1)
    pids = hosted(0, nodes, clients)
    node = node_half(config, pids, world.data, world.secrets_of(pids))
    before = _resident_mib()
    node.reply(1, plan.broadcast, pids)
    return {
        "model": model,
        "clients": clients,
        "local_steps": steps,
        "nodes": nodes,
        "clients_on_node": len(pids),
        "chunk_clients": node.chunk,
        "resident_before_round_mib": before,
        "peak_resident_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def node_peak_memory(model: str, clients: int, steps: int, nodes: int, data: str) -> dict:
    """`node_peak` in a fresh Python process (so the peak is that node's, not this run's)."""
    code = (
        f"import json, sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); import bench_scale; "
        f"print(json.dumps(bench_scale.node_peak({model!r}, {clients}, {steps}, {nodes}, {data!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="", help="comma-separated (with --clients/--steps: a grid of your own)")
    parser.add_argument("--clients", default="", help="comma-separated N")
    parser.add_argument("--steps", default="", help="comma-separated E")
    parser.add_argument("--paths", default="cohort,per-client,loop")
    parser.add_argument("--full", action="store_true", help="models {logreg, mlp, cnn} x N {100, 1000} x E {20, 200}")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=0, help="cohort path's K (0 = min(N, cpus))")
    parser.add_argument("--loop-clients", type=int, default=100)
    parser.add_argument("--loop-repeats", type=int, default=3)
    parser.add_argument("--data", default="digits")
    parser.add_argument(
        "--memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="peak memory of one node at N = 1000 for the CNN",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()

    if args.models or args.full:
        models = (args.models or "logreg,mlp,cnn").split(",")
        clients = [int(n) for n in (args.clients or "100,1000").split(",")]
        steps = [int(e) for e in (args.steps or "20,200").split(",")]
        paths = tuple(args.paths.split(","))
        grid = [(m, n, e, paths) for m in models for n in clients for e in steps]
    else:
        grid = DEFAULT_GRID
    results = []
    for model, n, e, paths in grid:
        row: dict = {"model": model, "clients": n, "local_steps": e}
        cohort_nodes = args.nodes or min(n, args.cpus)
        for path in paths:
            if path == "loop":
                measured = min(args.loop_clients, n)
                loop_config = config_for(model, n, e, 1, 1, args.cpus, args.data)
                seconds = loop_seconds(loop_config, measured, args.loop_repeats) * n / measured
            else:
                nodes = cohort_nodes if path == "cohort" else n
                seconds = seconds_per_round(config_for(model, n, e, nodes, args.rounds, args.cpus, args.data))
                row[f"{path}_nodes"] = nodes
            row[f"{path}_seconds_per_round"] = seconds
            row[f"{path}_client_steps_per_second"] = n * e / seconds
            print(json.dumps(row), flush=True)
        for other in ("per-client", "loop"):
            if "cohort" in paths and other in paths:
                row[f"cohort_over_{other}"] = row[f"{other}_seconds_per_round"] / row["cohort_seconds_per_round"]
        results.append(row)
        print(json.dumps(row), flush=True)
    memory = None
    if args.memory:
        memory = node_peak_memory("cnn", 1000, 20, args.nodes or args.cpus, args.data)
        print(json.dumps({"node_peak_memory": memory}), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"run": run_stamp(), "results": results, "node_peak_memory": memory}, indent=2))


if __name__ == "__main__":
    main()

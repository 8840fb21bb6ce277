"""Time per round of `ldpfed simulate --task train --mechanism none` against a plain Flower FedAvg
app (benchmarks/plain_fedavg_app.py) with the same model, clients, data and local steps, both
in-process on the Ray backend with the same resources; and the per-client overhead Flower adds.

    python benchmarks/bench_simulate.py [--clients 10,100] [--rounds 4] [--cpus 2]

Round 1 (Ray actors importing torch and loading data) is excluded; the time per round is the mean
of rounds 2..R, from the end of one round's central evaluation to the next. The local compute a
round needs is measured outside Flower (each client's model build + local training, serially);
the Flower overhead per client is (round time - compute / parallel workers) / clients, where
parallel workers = min(cpus / cpus-per-client, clients). ldpfed clips with C = 1e9 here (no effect),
so both apps run the same algorithm.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.digits_config import digits_train_config  # noqa: E402
from scripts.arguments import script_parser  # noqa: E402


def options_for(clients: int, rounds: int, cpus: int) -> dict:
    return digits_train_config(
        {
            "clients": clients,
            "rounds": rounds,
            "mechanism": "none",
            "coordinate-clip": 1e9,
            "local-steps": 10,
            "lr": 0.1,
            "batch-size": 32,
            "cpus": cpus,
            "cpus-per-client": 1.0,
        }
    )


def ldpfed_seconds_per_round(config) -> float:
    from simulations.federation import run
    from simulations.progress import QuietProgress

    times: list[float] = []

    class Clock(QuietProgress):
        def update(self, row):
            times.append(time.perf_counter())

    run(config, Clock())
    return float(np.mean(np.diff(times)))


def plain_seconds_per_round(config) -> float:
    import logging
    import os

    from flwr.simulation import run_simulation
    from plain_fedavg_app import make_apps

    from simulations.runner import QUIET_ENVIRONMENT, _stderr_to, backend_config

    os.environ.update(QUIET_ENVIRONMENT)
    logging.getLogger("flwr").setLevel(logging.CRITICAL)
    times: list[float] = []
    server_app, client_app = make_apps(config, times)
    with _stderr_to(Path("/dev/null")):
        run_simulation(server_app, client_app, config.federation.clients, "ray", backend_config(config))
    # times[0] is the initial evaluation, times[r] the end of round r: rounds 2..R.
    return float(np.mean(np.diff(times[1:])))


def local_compute_seconds(config) -> float:
    """One round's client work done serially in this process (build model, set weights, train)."""
    import torch

    from ldpfed.protocols.train import federated_data, new_model
    from ldpfed.training.local import train_local

    torch.set_num_threads(1)  # as in a Ray actor with 1 CPU
    data = federated_data(config, 0)
    training = config.training

    def one_round() -> float:
        started = time.perf_counter()
        for pid in range(config.federation.clients):
            X, y = data.client(pid)
            model = new_model(config, 0)
            train_local(model, X, y, steps=training.local_steps, lr=training.lr, batch_size=training.batch_size, seed=1)
        return time.perf_counter() - started

    one_round()  # warm-up, as Ray actors are warm after round 1
    return min(one_round() for _ in range(3))


def main() -> None:
    args = script_parser(__doc__, clients="10,100", rounds=4, cpus=2).parse_args()
    print(
        "| clients | ldpfed s/round | plain FedAvg s/round | ratio | local compute s/round (serial) "
        "| ldpfed overhead ms/client | plain overhead ms/client |"
    )
    print("|---|---|---|---|---|---|---|")
    for clients in (int(c) for c in args.clients.split(",")):
        config = options_for(clients, args.rounds, args.cpus)
        ours = ldpfed_seconds_per_round(config)
        plain = plain_seconds_per_round(config)
        compute = local_compute_seconds(config)
        workers = min(args.cpus / config.federation.cpus_per_client, clients)
        overhead = lambda t: 1000 * (t - compute / workers) / clients  # noqa: E731
        print(
            f"| {clients} | {ours:.3f} | {plain:.3f} | {ours / plain:.2f} | {compute:.3f} "
            f"| {overhead(ours):.1f} | {overhead(plain):.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

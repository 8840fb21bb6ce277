"""`ldpfed simulate --trust shuffle|central`: the harness of the non-local trust models (ldpfed.accounting.trust).

- central (train): Flower's simulation runtime runs `server/central.py`'s ServerApp (Flower's DP
  wrapper around ldpfed's `CentralStrategy`) and `clients/central_app.py`'s ClientApp; the
  clients' minibatch streams come from the noise root as under the local model.
- shuffle (mean): in this process, the clients' users randomize, a `Shuffler` with OS entropy pools
  and permutes their reports, and the server half sees only the shuffled batch.
Both write summary.json, metrics.csv and privacy.csv to --out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clients.central_app import make_central_client_app
from ldpfed.accounting import DEFAULT_DELTA_TARGET
from ldpfed.accounting.trust import get
from ldpfed.config import Config
from ldpfed.outputs import OutputDir, dumps
from ldpfed.protocols.central import CentralServer, central_plan
from ldpfed.protocols.mean import bound, tuples
from ldpfed.protocols.session import World
from ldpfed.protocols.shuffle import ShuffledMeanServer, Shuffler, client_reports
from server.central import central_strategy, make_central_server_app
from simulations.runner import run_simulation


def run_trust(
    config: Config, output: OutputDir | None, *, verbose: bool = False, noise_seed: int | None = None
) -> dict:
    world = World.from_config(config, noise_seed)
    runner = {"central": run_central, "shuffle": run_shuffle}[config.privacy.trust]
    summary, rows, privacy = runner(config, world, verbose)
    summary = {**get(config.privacy.trust).record(), "task": config.run.task, "rounds": config.run.rounds, **summary}
    if output is not None and config.output.out:
        output.write(
            {
                "summary.json": dumps(summary) + "\n",
                "metrics.csv": pd.DataFrame(rows).to_csv(index=False),
                "privacy.csv": privacy.to_csv(index=False),
            }
        )
    return summary


def run_central(config: Config, world: World, verbose: bool):
    plan = central_plan(config)
    server = CentralServer(config, world.data, world.server, plan)
    central_strategy(server, plan)  # the wrapper's own checks (adaptive clipping's count noise) before Ray starts
    rows: list[dict] = []
    holder: dict = {}
    app = make_central_server_app(server, plan, lambda r, m: rows.append({"round": r, **m}), holder)
    client_app = make_central_client_app(config, world.data, world.secrets)
    run_simulation(config, app, client_app, verbose=verbose, nodes=config.federation.nodes or None)
    accounted = holder["accounted"]
    spent = server.ledger.max_spent("rdp", plan.delta)
    summary = {
        "flower_strategy": type(holder["strategy"]).__name__,
        **plan.record(accounted),
        "epsilon_spent_rdp": spent.epsilon,
        "private": spent.private,
        "final_accuracy": rows[-1]["accuracy"] if rows else None,
        "noise": world.noise,
    }
    return summary, rows, server.ledger.to_frame(plan.delta)


def run_shuffle(config: Config, world: World, verbose: bool):
    config = bound(config, world.data)
    server = ShuffledMeanServer(config)
    shuffler = Shuffler()  # OS entropy: neither the server nor the run seed knows the permutation
    truth = tuples(config, world.data).mean(axis=0)
    rows = []
    for server_round in range(1, config.run.rounds + 1):
        pids = list(range(config.federation.clients))
        reports = {pid: client_reports(config, pid, world.data, world.secret(pid), server_round) for pid in pids}
        batch = shuffler.shuffle(reports)
        estimate = server.aggregate(server_round, batch)
        guarantee = server.record(server_round, pids, len(batch.reports))
        rows.append({"round": server_round, "mse": float(np.mean((estimate - truth) ** 2)), **guarantee})
    delta = config.delta_target if config.delta_target else DEFAULT_DELTA_TARGET
    central = server.ledger.max_spent("pld", delta)
    local = server.local_ledger.max_spent("basic", delta)
    summary = {
        "mechanism": config.privacy.mechanism,
        "users": config.data.users,
        "local_epsilon_per_round": config.privacy.epsilon,
        "local_epsilon_total_basic": local.epsilon,
        "shuffled_epsilon_per_round": rows[-1]["shuffled_epsilon"],
        "shuffled_delta_per_round": server.round_delta,
        "shuffled_epsilon_total_pld": central.epsilon,
        "shuffled_delta_total": central.delta,
        "bound": "Feldman, McMillan & Talwar 2021, numerical (Section 4), within Thm 3.1's condition",
        "private": central.private,
        "mean_mse": float(np.mean([row["mse"] for row in rows])),
        "noise": world.noise,
    }
    return summary, rows, server.ledger.to_frame(delta)

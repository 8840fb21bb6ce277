"""`ldpfed simulate --trust shuffle|central`: the harness of the non-local trust models (ldpfed.accounting.trust).

- central (train): Flower's simulation runtime runs `server/central.py`'s ServerApp (Flower's DP
  wrapper around ldpfed's `CentralStrategy`) and `clients/central_app.py`'s ClientApp; the
  clients' minibatch streams come from the noise root as under the local model.
- shuffle (mean): the clients' users randomize as under the local model, the shuffler pools and
  permutes their reports with OS entropy, and the server half sees only the shuffled batch. Engine
  `flower` (default): the clients are Flower ClientApps (`clients/shuffle_app.py`) and the
  shuffler is the ServerApp's strategy (`server/shuffle.py`); engine `local`: the same halves in
  this process. `--max-epsilon` stops a client before its total against the server would exceed it.

Like every simulate run: a per-round progress line on stderr, summary.json, metrics.csv and
privacy.csv rewritten after every round, and one Ctrl-C (SIGINT) or SIGTERM stops the run between
rounds, writes the finished rounds (summary marked interrupted) and exits 130 (143).
"""

from __future__ import annotations

import signal

import numpy as np
import pandas as pd

from clients.central_app import make_central_client_app
from clients.shuffle_app import make_shuffle_client_app
from ldpfed.accounting import DEFAULT_DELTA_TARGET
from ldpfed.accounting.trust import get
from ldpfed.config import Config
from ldpfed.outputs import OutputDir, dumps
from ldpfed.protocols.central import CentralServer, central_plan
from ldpfed.protocols.mean import bound, tuples
from ldpfed.protocols.session import World
from ldpfed.protocols.shuffle import ShuffledMeanServer, Shuffler, ShuffleRound, client_reports
from server.central import central_strategy, make_central_server_app
from server.shuffle import make_shuffle_server_app
from simulations.federation import Interrupted
from simulations.runner import kill_client_actors, run_simulation, showing
from simulations.stopping import Stopped, StopRequest

SHUFFLE_BOUND = "Feldman, McMillan & Talwar 2021, numerical (Section 4), within Thm 3.1's condition"


def run_trust(
    config: Config,
    output: OutputDir | None,
    *,
    verbose: bool = False,
    noise_seed: int | None = None,
    progress=None,
) -> dict:
    """Run `config` under its trust model; return the summary. On SIGINT/SIGTERM: the finished
    rounds are written and `Interrupted` is raised (simulations.federation)."""
    stop = StopRequest()
    with stop.handling():
        world = World.from_config(config, noise_seed)
        run = {"central": CentralRun, "shuffle": ShuffleRun}[config.privacy.trust](config, world, output, progress)
        try:
            run.execute(verbose, stop)
        except KeyboardInterrupt as error:
            stop.record(error.signum if isinstance(error, Stopped) else signal.SIGINT)
        summary = run.finish(interrupted=stop.requested)
    if stop.requested:
        raise Interrupted(summary, stop)
    return summary


class TrustRun:
    """The rows of the finished rounds, written after each round, and the summary."""

    def __init__(self, config: Config, world: World, output: OutputDir | None, progress) -> None:
        self.config, self.world, self.output, self.progress = config, world, output, progress
        self.rows: list[dict] = []

    def simulate(self, server_app, client_app, verbose: bool, stop: StopRequest) -> None:
        """The two apps in a Flower simulation on the run's nodes; a stop request ends it after the round."""
        with stop.deferred():
            run_simulation(
                self.config,
                server_app,
                client_app,
                self.progress,
                verbose=verbose,
                nodes=self.config.federation.nodes or None,
                stop=stop,
            )

    def after_round(self, row: dict) -> None:
        self.rows.append(row)
        self.write(self.summary(interrupted=False))
        if self.progress is not None:
            self.progress.update(row)

    def finish(self, interrupted: bool) -> dict:
        summary = self.summary(interrupted)
        self.write(summary)
        return summary

    def summary(self, interrupted: bool) -> dict:
        config = self.config
        return {
            **get(config.privacy.trust).record(),
            "task": config.run.task,
            "engine": self.engine,
            "clients": config.federation.clients,
            "rounds": config.run.rounds,
            "rounds_finished": len(self.rows),
            "interrupted": interrupted,
            **self.figures(),
            "noise": self.world.noise,
        }

    def write(self, summary: dict) -> None:
        if self.output is None or not self.config.output.out:
            return
        self.output.write(
            {
                "summary.json": dumps(summary) + "\n",
                "metrics.csv": pd.DataFrame(self.rows).to_csv(index=False),
                "privacy.csv": self.privacy_frame().to_csv(index=False),
            }
        )


class CentralRun(TrustRun):
    engine = "flower"

    def __init__(self, config, world, output, progress) -> None:
        super().__init__(config, world, output, progress)
        self.plan = central_plan(config)
        self.server = CentralServer(config, world.data, world.server, self.plan)
        # the wrapper's own checks (adaptive clipping's count noise) before Ray starts
        self.strategy, self.accounted = central_strategy(self.server, self.plan)

    def execute(self, verbose: bool, stop: StopRequest) -> None:
        holder: dict = {}

        def on_round(server_round: int, metrics: dict) -> None:
            spent = self.server.ledger.max_spent("rdp", self.plan.delta)
            self.after_round({"round": server_round, **metrics, "epsilon_spent": spent.epsilon})

        app = make_central_server_app(
            self.server, self.plan, on_round, holder, stop=stop.event, on_stop=kill_client_actors
        )
        self.simulate(app, make_central_client_app(self.config, self.world.data, self.world.secrets), verbose, stop)
        self.strategy = holder.get("strategy", self.strategy)

    def figures(self) -> dict:
        spent = self.server.ledger.max_spent("rdp", self.plan.delta)
        return {
            "flower_strategy": type(self.strategy).__name__,
            **self.plan.record(self.accounted, self.strategy.noise_multiplier),
            "epsilon_spent_rdp": spent.epsilon,
            "private": spent.private,
            "final_accuracy": self.rows[-1]["accuracy"] if self.rows else None,
        }

    def privacy_frame(self) -> pd.DataFrame:
        return self.server.ledger.to_frame(self.plan.delta)


class ShuffleRun(TrustRun):
    def __init__(self, config, world, output, progress) -> None:
        config = bound(config, world.data)
        super().__init__(config, world, output, progress)
        self.engine = config.run.engine
        self.accounting = ShuffleRound(config)
        self.server = ShuffledMeanServer(config)
        self.truth = tuples(config, world.data).mean(axis=0)
        self.delta = config.delta_target if config.delta_target else DEFAULT_DELTA_TARGET
        self.accountant = config.privacy.accountant if config.budget is not None else "pld"

    def on_batch(self, server_round: int, batch, reported: list[int], stopped: list[int], failed: list[int]) -> None:
        """The shuffler's batch reaches the server half; the shuffler's side records the round."""
        row: dict = {"round": server_round}
        if batch is not None:
            estimate = self.server.aggregate(server_round, batch)
            row["mse"] = float(np.mean((estimate - self.truth) ** 2))
            row.update(self.accounting.record(server_round, reported, len(batch.reports)))
        else:
            row.update(mse=None, reports=0)
        row.update(clients_replied=len(reported), clients_failed=len(failed), clients_stopped_by_budget=len(stopped))
        spent = self.accounting.ledger.max_spent(self.accountant, self.delta) if len(self.accounting.ledger) else None
        row["epsilon_spent"] = None if spent is None else spent.epsilon
        self.after_round(row)

    def execute(self, verbose: bool, stop: StopRequest) -> None:
        if self.engine == "local":
            self.execute_local(stop)
            return
        app = make_shuffle_server_app(
            self.accounting,
            self.config.federation.clients,
            self.config.run.rounds,
            self.on_batch,
            stop=stop.event,
            on_stop=kill_client_actors,
        )
        self.simulate(app, make_shuffle_client_app(self.config, self.world.data, self.world.secrets), verbose, stop)

    def execute_local(self, stop: StopRequest) -> None:
        shuffler = Shuffler()  # OS entropy: neither the server nor the run seed knows the permutation
        world, config = self.world, self.config
        with showing(self.progress, None), stop.deferred():
            for server_round in range(1, config.run.rounds + 1):
                if stop.requested:
                    return
                admitted, stopped = self.accounting.admit(list(range(config.federation.clients)))
                reports = {
                    pid: client_reports(config, pid, world.data, world.secret(pid), server_round) for pid in admitted
                }
                batch = shuffler.shuffle(reports) if reports else None
                self.on_batch(server_round, batch, admitted, stopped, [])

    def figures(self) -> dict:
        config, rows = self.config, [row for row in self.rows if row.get("mse") is not None]
        central = self.accounting.ledger.max_spent(self.accountant, self.delta)
        local = self.accounting.local_ledger.max_spent("basic", self.delta)
        return {
            "mechanism": config.privacy.mechanism,
            "users": config.data.users,
            "dims": config.data.dims,
            "local_epsilon_per_round": config.privacy.epsilon,
            "local_epsilon_total_basic": local.epsilon if rows else 0.0,
            "shuffled_epsilon_per_round": rows[-1]["shuffled_epsilon"] if rows else None,
            "shuffled_delta_per_round": self.accounting.round_delta,
            "minimum_reports_per_round": rows[-1]["minimum_reports"] if rows else None,
            "accountant": self.accountant,
            f"shuffled_epsilon_total_{self.accountant}": central.epsilon if rows else 0.0,
            "shuffled_delta_total": central.delta if rows else 0.0,
            **({"budget": config.budget.record()} if config.budget is not None else {}),
            "clients_stopped_by_budget_total": sum(row["clients_stopped_by_budget"] for row in self.rows),
            "bound": SHUFFLE_BOUND,
            "private": central.private,
            "mean_mse": float(np.mean([row["mse"] for row in rows])) if rows else None,
        }

    def privacy_frame(self) -> pd.DataFrame:
        return self.accounting.ledger.to_frame(self.delta)

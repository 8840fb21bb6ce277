"""`ldpfed simulate --trust shuffle|central`: the harness of the non-local trust models
(ldpfed.accounting.trust). Every trust model's run has the same shape as a local run: the same
files through the same `Recorder` (config.toml, noise_secret, metrics.csv, privacy.csv,
summary.json, privacy.json, plot.png), the same summary keys (`private`, `privacy_reasons`,
`noise_seed`, `privacy_qualification`, `epsilon_spent_max_per_client`), and the guarantees of
every party (`guarantees`: who gets which (eps, delta), per user or per client).

- central (train): Flower's simulation runtime runs `server/central.py`'s ServerApp (Flower's DP
  wrapper as ldpfed corrects it, around ldpfed's `CentralStrategy`) and `clients/central_app.py`'s
  ClientApp; the clients' minibatch streams come from the noise root as under the local model,
  and so does the server's central noise secret (a child of the root the clients never get).
- shuffle (mean): the clients' users randomize as under the local model, the shuffler pools and
  permutes their reports with OS entropy, and the server half sees only the shuffled batch. Engine
  `flower` (default): the clients are Flower ClientApps (`clients/shuffle_app.py`) and the
  shuffler is the ServerApp's strategy (`server/shuffle.py`); engine `local`: the same halves in
  this process. `--max-epsilon` stops a client before its amplified total would exceed it.

Like every simulate run: a per-round progress line on stderr, metrics.csv and privacy.csv rewritten
after every round, and one Ctrl-C (SIGINT) or SIGTERM stops the run between rounds, writes the
finished rounds (summary marked interrupted) and exits 130 (143).
"""

from __future__ import annotations

import signal

import numpy as np

from clients.central_app import make_central_client_app
from clients.shuffle_app import make_shuffle_client_app
from ldpfed.accounting.central import ACCOUNTANT as CENTRAL_ACCOUNTANT
from ldpfed.config import Config
from ldpfed.outputs import OutputDir
from ldpfed.protocols import canaries
from ldpfed.protocols.central import CentralClient, CentralServer
from ldpfed.protocols.mean import bound, tuples
from ldpfed.protocols.session import World
from ldpfed.protocols.shuffle import ShuffledMeanServer, Shuffler, ShuffleRound, client_reports
from ldpfed.validation import LDPValueError
from server.central import central_strategy, make_central_server_app
from server.shuffle import make_shuffle_server_app
from simulations.federation import Interrupted, save_noise_root
from simulations.runner import kill_client_actors, showing
from simulations.secagg import SecAggRun
from simulations.stopping import Stopped, StopRequest
from simulations.trust_run import TrustRun, central_audit, flat_weights, record_trust_audit

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
        run = TRUST_RUNS[config.privacy.trust](config, world, output, progress)  # its Recorder comes last
        try:
            save_noise_root(run.recorder.output, world)  # before the first round: an interrupted run replays too
            run.execute(verbose, stop)
        except KeyboardInterrupt as error:
            stop.record(error.signum if isinstance(error, Stopped) else signal.SIGINT)
        except Exception:
            if not run.recorder.rows:  # failed before any round (Ray did not come up): --out as it was
                run.recorder.output.discard()
            raise
        summary = run.finish(interrupted=stop.requested)
    if stop.requested:
        raise Interrupted(summary, stop)
    return summary


class CentralRun(TrustRun):
    """Engine `flower` (default): Flower's DP wrapper around `CentralStrategy` (server/central.py);
    engine `local`: the same halves in this process, fixed clipping (the wrapper's `SafeRelease` at
    the plan's clip). With canaries (ldpfed.protocols.canaries) the federation's clients include
    them, and the verdict on the released model goes beside the accounted eps."""

    accountant = CENTRAL_ACCOUNTANT  # the sampled discrete Gaussian's (ldpfed.accounting.central)

    def __init__(self, config, world, output, progress) -> None:
        self.engine = config.run.engine
        config = canaries.expanded(config)
        self.server = CentralServer(config, world.data, world.server, world.central_noise_secret())
        self.initial = flat_weights(self.server.weights)
        self.strategy = central_strategy(self.server)  # the wrapper's own checks before Ray starts
        self.holder: dict = {}  # the ServerApp's strategy, once a Flower run built it
        super().__init__(config, world, output, progress)

    @property
    def ledger(self):
        return self.server.ledger

    def execute(self, verbose: bool, stop: StopRequest) -> None:
        super().execute(verbose, stop)
        self.strategy = self.holder.get("strategy", self.strategy)  # the wrapper's, after a Flower run

    def server_app(self, stop: StopRequest):
        def on_round(server_round: int, metrics: dict) -> None:
            self.after_round({"round": server_round, **metrics})

        return make_central_server_app(self.server, on_round, self.holder, stop=stop.event, on_stop=kill_client_actors)

    def client_app(self):
        return make_central_client_app(self.config, self.world.data, self.world.secrets)

    def execute_local(self, stop: StopRequest) -> None:
        """The rounds in this process: Poisson sampling, the clients' models, the noisy sum of the
        updates clipped at the plan's clip, the record and the evaluation, as the wrapper runs them."""
        if self.server.plan.clipping != "fixed":
            raise LDPValueError("--engine local under central trust runs fixed clipping only (--clipping fixed)")
        server, world, clients = self.server, self.world, {}
        weights = server.weights
        with showing(self.progress, None), stop.deferred():
            for server_round in range(1, self.config.run.rounds + 1):
                if stop.requested:
                    return
                sampled = server.sample(server_round)
                models = []
                for pid in sampled:
                    if pid not in clients:
                        clients[pid] = CentralClient(self.config, pid, world.data, world.secret(pid))
                    models.append(clients[pid].train(weights, server_round)[0])
                weights, record = server.aggregate(server_round, weights, models, server.plan.clip)
                counts = {"clients_sampled": len(sampled), "clients_replied": len(models), "clients_failed": 0}
                server.record_round(server_round, {**counts, **record})
                metrics = server.evaluate(weights)
                self.after_round({"round": server_round, **metrics, **server.rounds[-1]})

    def summary(self, interrupted: bool) -> dict:
        summary = super().summary(interrupted)
        design = self.world.canaries
        if design is None:
            return summary
        summary.update(canaries.counts(self.config))
        final_delta = flat_weights(self.server.weights) - self.initial
        summary["canary_audit"] = central_audit(design, final_delta, summary)
        return summary

    def finish(self, interrupted: bool) -> dict:
        summary = super().finish(interrupted)
        if self.world.canaries is not None and self.recorder.rows:
            record_trust_audit(self.recorder, self.ledger, summary, self.world.canaries, self.initial.size)
        return summary

    def figures(self) -> dict:
        rows = self.recorder.rows
        return {
            "mechanism": "central gaussian (discrete, on a grid)",
            "flower_strategy": f"{type(self.strategy).__name__} (ldpfed's correction of Flower's "
            f"{type(self.strategy).__mro__[2].__name__})",
            **self.server.plan.record(),
            "final_clip": self.strategy.clipping_norm,
            "final_accuracy": rows[-1]["accuracy"] if rows else None,
        }


class ShuffleRun(TrustRun):
    def __init__(self, config, world, output, progress) -> None:
        config = bound(config, world.data)
        self.engine = config.run.engine
        self.accounting = ShuffleRound(config)
        self.server = ShuffledMeanServer(config)
        self.truth = tuples(config, world.data).mean(axis=0)
        # the budget's accountant; without a budget pld, the tightest for the amplified rounds
        self.accountant = config.privacy.accountant if config.budget is not None else "pld"
        super().__init__(config, world, output, progress)  # the Recorder (config.toml) once the run is built

    @property
    def ledger(self):
        return self.accounting.ledger

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
        self.after_round(row)

    def server_app(self, stop: StopRequest):
        return make_shuffle_server_app(
            self.accounting,
            self.config.federation.clients,
            self.config.run.rounds,
            self.on_batch,
            stop=stop.event,
            on_stop=kill_client_actors,
        )

    def client_app(self):
        return make_shuffle_client_app(self.config, self.world.data, self.world.secrets)

    def execute_local(self, stop: StopRequest) -> None:
        shuffler = Shuffler()  # OS entropy: neither the server half nor the run seed knows the permutation
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
        config, rows = self.config, [row for row in self.recorder.rows if row.get("mse") is not None]
        shuffled = self.accounting.ledger.max_spent(self.accountant, config.delta_target)
        local = self.accounting.local_ledger.max_spent("basic", config.delta_target)
        return {
            "mechanism": config.privacy.mechanism,
            "users": config.data.users,
            "dims": config.data.dims,
            "epsilon": config.privacy.epsilon,
            "local_epsilon_per_round": config.privacy.epsilon,
            "local_epsilon_total_basic": local.epsilon if rows else 0.0,
            "shuffled_epsilon_per_round": rows[-1]["shuffled_epsilon"] if rows else None,
            "shuffled_delta_per_round": self.accounting.round_delta,
            "minimum_reports_per_round": rows[-1]["minimum_reports"] if rows else None,
            "shuffled_epsilon_total": shuffled.epsilon if rows else 0.0,
            "shuffled_delta_total": shuffled.delta if rows else 0.0,
            **({"budget": config.budget.record()} if config.budget is not None else {}),
            "clients_stopped_by_budget_total": sum(row["clients_stopped_by_budget"] for row in self.recorder.rows),
            "bound": SHUFFLE_BOUND,
            "mean_mse": float(np.mean([row["mse"] for row in rows])) if rows else None,
        }


# one harness per trust model but local's (simulations.federation); tests/test_trust_models.py
# checks that this covers the trust registry
TRUST_RUNS = {"central": CentralRun, "shuffle": ShuffleRun, "secagg": SecAggRun}

"""The run of a non-local trust model (simulations/trust.py's central and shuffle, simulations/
secagg.py's secagg): the rows of the finished rounds, written after each round through the run's
`Recorder`, and the summary in the shape of a local run's. Its own module so that both harnesses
import it (simulations/trust.py registers secagg's run, so secagg cannot import that module)."""

from __future__ import annotations

import time

import numpy as np

import ldpfed.tasks as tasks
from ldpfed.accounting.trust import get
from ldpfed.config import Config
from ldpfed.outputs import OutputDir, Secret, dumps
from ldpfed.protocols import canaries, seeds
from ldpfed.protocols.recorder import Recorder, qualified
from ldpfed.protocols.session import World, run_header
from ldpfed.validation import LDPValueError
from simulations.runner import run_simulation
from simulations.stopping import StopRequest


class TrustRun:
    """The shared steps of a trust model's run; a subclass gives `ledger`, `accountant`,
    `figures()`, its two Flower apps and its rounds in this process (`execute_local`)."""

    engine = "flower"
    accountant: str  # the accountant of the run's figures

    def __init__(self, config: Config, world: World, output: OutputDir | None, progress) -> None:
        self.config, self.world, self.progress = config, world, progress
        self.started = self.round_started = time.perf_counter()
        self.recorder = Recorder(canaries.user_config(config), output)

    @property
    def ledger(self):
        raise NotImplementedError

    @property
    def privacy_unit(self) -> str:
        """Who a guarantee protects (the summary's `guarantees`)."""
        return tasks.of(self.config).unit

    def execute(self, verbose: bool, stop: StopRequest) -> None:
        """Engine local: both halves in this process (`execute_local`); otherwise the run's two
        apps in a Flower simulation."""
        if self.engine == "local":
            self.execute_local(stop)
        else:
            self.simulate(self.server_app(stop), self.client_app(), verbose, stop)

    def execute_local(self, stop: StopRequest) -> None:
        raise NotImplementedError

    def server_app(self, stop: StopRequest):
        """The Flower ServerApp of the run's server half (a stop request ends it after the round)."""
        raise NotImplementedError

    def client_app(self):
        """The Flower ClientApp of the run's clients."""
        raise NotImplementedError

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
        spent = self.ledger.max_spent(self.accountant, self.config.delta_target)
        now = time.perf_counter()
        row.update(epsilon_spent=spent.epsilon, delta_spent=spent.delta, seconds=now - self.round_started)
        self.round_started = now
        self.recorder.add_round(row, self.ledger)
        self.show(row)

    def show(self, row: dict) -> None:
        """The round's progress line."""
        if self.progress is not None:
            self.progress.update(row)

    def finish(self, interrupted: bool) -> dict:
        summary = self.summary(interrupted)
        self.recorder.finish(summary, self.ledger)
        return summary

    def summary(self, interrupted: bool) -> dict:
        config, rows = self.config, self.recorder.rows
        model = get(config.privacy.trust)
        spent = self.ledger.max_spent(self.accountant, config.delta_target) if rows else None
        private = spent is None or spent.private
        summary = {
            **run_header(config, self.engine, len(rows), interrupted),
            **model.record(),
            "private": private,
            "privacy_reasons": [] if spent is None else list(spent.reasons),
            "privacy_qualification": seeds.qualification(private, self.world.noise),
            "seed": config.run.seed,
            "fresh_noise": config.run.fresh_noise,
            "noise_seed": self.world.noise,
            **self.figures(),
            "accountant": self.accountant,
            "epsilon_spent_max_per_client": spent.epsilon if spent is not None else None,
            "delta_spent_max_per_client": spent.delta if spent is not None else None,
            "seconds": time.perf_counter() - self.started,
        }
        summary["guarantees"] = model.guarantees(summary, self.privacy_unit)
        return summary

    def figures(self) -> dict:
        raise NotImplementedError


def flat_weights(weights) -> np.ndarray:
    return np.concatenate([np.asarray(w, dtype=np.float64).ravel() for w in weights])


AGAINST_THE_MODEL = "the released model (final model delta)"


def central_audit(design, final_delta: np.ndarray, summary: dict) -> dict:
    """summary.json's `canary_audit` of a central run: the released model against its accounted eps."""
    accounted = summary["epsilon_spent_max_per_client"]
    if not summary["rounds_finished"] or accounted is None:
        return canaries.summary_entry(None, AGAINST_THE_MODEL, "no finished round or no accounted eps to audit")
    try:
        verdict = canaries.central_verdict(design, final_delta, accounted, summary["delta_spent_max_per_client"])
    except LDPValueError as error:
        return canaries.summary_entry(None, AGAINST_THE_MODEL, str(error))
    return canaries.summary_entry(verdict, AGAINST_THE_MODEL)


def record_trust_audit(recorder, ledger, summary: dict, design, dims: int) -> None:
    """privacy.json with the verdict, and the canaries' record (owner-only)."""
    output = recorder.output
    if not output.enabled:
        return
    state = ledger.state_dict(recorder.config.delta_target, per_client=False)
    privacy = {**qualified(state, summary), "canary_audit": summary["canary_audit"]}
    record = {"record": design.record(dims).to_dict(), **summary["canary_audit"]}
    output.write({"privacy.json": privacy, canaries.RECORD: Secret(dumps(record))})

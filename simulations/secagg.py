"""`ldpfed simulate --trust secagg`: the distributed discrete Gaussian under secure aggregation
(ldpfed.protocols.ddgauss, ldpfed.protocols.secagg), tasks mean and train, in the shape of the
other trust harnesses (simulations/trust.py: the same files, summary keys and guarantees).

Each client (partition id) encodes its vector (mean: its cohort's mean, clipped to c = sqrt(d), so
nothing is clipped; train: its local model's update, clipped to `--clip`) with its own share of the
noise, and takes part in SecAgg+ as its own party (clients/secagg_app.py, server/secagg.py):
the server half sees the modular sum only. The encoder is calibrated so that T rounds of all N
clients' shares meet (--max-epsilon, --max-delta) at `--bits`; every round is accounted at the
number of shares actually summed (the survivors: a client that dropped mid-round left its noise
out), so a run with dropouts may spend more than planned, and says so. Engine `flower` (default):
Flower's simulation runtime with the two apps; engine `local`: the same halves in this process,
their messages through the same records.
"""

from __future__ import annotations

import math

import numpy as np

import ldpfed.tasks as tasks
from clients.secagg_app import SecAggNode, make_secagg_client_app
from ldpfed.accounting import PrivacyLedger
from ldpfed.accounting.ddgauss import ddgauss_epsilon
from ldpfed.protocols import canaries
from ldpfed.protocols.secagg import NEIGHBOURHOOD, plan_for
from ldpfed.training.local import evaluate
from ldpfed.training.parameters import set_weights
from server.secagg import SecAggAborted, SecAggRound, make_secagg_server_app, run_round
from simulations.runner import kill_client_actors, showing
from simulations.trust_run import TrustRun, central_audit, flat_weights, record_trust_audit
from wire.records import read_secagg, secagg_reply

MECHANISM = "distributed discrete gaussian (Kairouz, Liu & Steinke 2021) under SecAgg+"
ADJACENCY = "zero-out: one client's vector replaced by zero while the summed shares stay (KLS Theorem 1)"
ACCOUNTED_AT = "each round at the number of shares actually summed (the surviving clients)"
PRIVACY_UNIT = "per client: each simulated client masks and noises its own vector"
THREAT_MODEL = (
    "semi-honest server, no collusion with t - 1 or more of a client's neighbours; the server sees masked "
    "vectors and the modular sum only; a malicious server lying about dropouts is not covered; the accounted "
    "eps assumes the server knows no client's noise share: a client colluding with it takes its share out "
    "of the noise (the eps is then that of the shares it does not know)"
)
WRAPS = (
    "coordinates where the modular sum wrapped (the decoder's [-m/2, m/2) misread the integer sum): counted "
    "under --engine local, where the harness sums the clients' encodings before the modulus; not observable "
    "under flower (the clients' values never leave their nodes): modular_headroom, max |sum| / (m/2) of the "
    "decoded sum, is what the server sees of how close a round came"
)
LOCAL_NODE = 0  # engine local: one node hosting every client


class SecAggRun(TrustRun):
    """The run of `--trust secagg` (simulations/trust.py registers it in TRUST_RUNS): the shared
    steps come from `TrustRun`; its own are the rounds, the progress line and the figures."""

    accountant = "rdp"  # the event's RDP curve (KLS Proposition 14) in ldpfed's rdp accountant

    def __init__(self, config, world, output, progress) -> None:
        self.engine = config.run.engine
        self.aborted: list[str] = []
        self.views: list[SecAggRound] = []  # engine local: every round's server view (tests)
        self.integer_sums: dict | None = None  # engine local: the node's integer sums (SecAggNode.integer_sums)
        config = canaries.expanded(config)  # canary clients take part in the secure sum as any client
        start = tasks.of(config).secure_sum_start(config, world.data, world.server)
        config, dims, clip, self.weights = start["config"], start["dims"], start["clip"], start["weights"]
        self.initial = None if self.weights is None else flat_weights(self.weights)
        self.truth, self.model, self.data = start.get("truth"), start.get("model"), start.get("data")
        self.plan = plan_for(config, dims, clip, world.server)
        self._ledger = PrivacyLedger()
        super().__init__(config, world, output, progress)

    @property
    def ledger(self) -> PrivacyLedger:
        return self._ledger

    @property
    def privacy_unit(self) -> str:
        return PRIVACY_UNIT

    def show(self, row: dict) -> None:
        """The round's progress line (TrustProgress's console; its `update` knows shuffle's rows only)."""
        bar = getattr(self.progress, "progress", None)
        if bar is None:
            return
        if row.get("aborted"):
            result = f"aborted ({row['aborted']})"
        elif "accuracy" in row:
            result = f"acc {row['accuracy']:.3f} loss {row['loss']:.3f}"
        else:
            result = f"mse {row['mse']:.3g}"
        spent = row["epsilon_spent"]
        bar.console.print(
            f"round {row['round']}: {result}; {row['clients_summed']} clients summed, {row['clients_dropped']} "
            f"dropped mid-round; accounted at {row['shares_accounted']} shares; eps spent against the server "
            f"{spent:.3g}"
            if spent is not None
            else "",
            highlight=False,
        )
        bar.update(self.progress.task_id, advance=1, last="")

    def next_round(self, server_round: int):
        return list(range(self.config.federation.clients)), self.weights

    def on_result(self, server_round: int, result, reason: str | None, secagg: SecAggRound) -> None:
        """The server half's work on the revealed sum: decode, estimate, account at the survivors."""
        clients = self.config.federation.clients
        row: dict = {"round": server_round, "clients_sampled": clients}
        if result is None:
            self.aborted.append(reason)
            row.update(clients_summed=0, clients_dropped=0, clients_failed=clients, shares_accounted=0, aborted=reason)
            row.update({"mse": None} if self.weights is None else {"accuracy": None, "loss": None})
            self.after_round(row)
            return
        ddg, summed = self.plan.ddg, len(result.survivors)
        total = ddg.decode(result.modular_sum, self.plan.rotation_seed(server_round))
        integer_sum = self.integer_sums.pop(server_round, None) if self.integer_sums is not None else None
        row.update(
            modular_headroom=ddg.headroom(result.modular_sum),
            modular_wraps=None if integer_sum is None else ddg.wraps(result.modular_sum, integer_sum),
        )
        if self.weights is None:
            row["mse"] = float(np.mean((total / summed - self.truth) ** 2))
        else:
            row.update(self.step(total / summed))
        self.ledger.record_round(result.survivors, server_round, ddg.event(summed), "distributed discrete gaussian")
        row.update(
            clients_summed=summed,
            clients_dropped=len(result.dropped),
            clients_failed=clients - summed,
            shares_accounted=summed,
            aborted="",
        )
        self.after_round(row)

    def step(self, update: np.ndarray) -> dict:
        """train: the global model moves by the mean of the survivors' decoded updates."""
        flat = np.concatenate([w.ravel() for w in self.weights]).astype(np.float64) + update
        splits = np.cumsum([w.size for w in self.weights])[:-1]
        self.weights = [p.reshape(w.shape).astype(w.dtype) for p, w in zip(np.split(flat, splits), self.weights)]
        set_weights(self.model, self.weights)
        loss, accuracy = evaluate(self.model, *self.data.test)
        return {"loss": float(loss), "accuracy": float(accuracy)}

    def server_app(self, stop):
        return make_secagg_server_app(
            self.plan,
            self.config.federation.clients,
            self.config.run.rounds,
            self.next_round,
            self.on_result,
            stop=stop.event,
            on_stop=kill_client_actors,
        )

    def client_app(self):
        return make_secagg_client_app(self.config, self.plan, self.world.data, self.world.secrets)

    def execute_local(self, stop) -> None:
        node = SecAggNode(self.config, self.plan, self.world.data, self.world.secrets, keep_sums=True)
        self.integer_sums = node.integer_sums
        state: dict = {}

        def exchange(stage: str, requests: dict) -> dict:
            return {
                host: secagg_reply(*node.answer(stage, read_secagg(request), state))
                for host, request in requests.items()
            }

        with showing(self.progress, None), stop.deferred():
            for server_round in range(1, self.config.run.rounds + 1):
                if stop.requested:
                    return
                participants, model = self.next_round(server_round)
                secagg = SecAggRound(self.plan, server_round, participants, model)
                self.views.append(secagg)
                try:
                    self.on_result(server_round, run_round(secagg, {LOCAL_NODE: participants}, exchange), None, secagg)
                except SecAggAborted as error:
                    self.on_result(server_round, None, str(error), secagg)

    def figures(self) -> dict:
        config, ddg, rows = self.config, self.plan.ddg, self.recorder.rows
        summed = [row for row in rows if row.get("shares_accounted")]
        planned = ddgauss_epsilon(ddg.event(config.federation.clients), config.run.rounds, config.delta_target)
        quality = (
            {"mean_mse": float(np.mean([row["mse"] for row in summed])) if summed else None}
            if self.weights is None
            else {"final_accuracy": summed[-1]["accuracy"] if summed else None}
        )
        return {
            "mechanism": MECHANISM,
            "privacy_unit": PRIVACY_UNIT,
            "adjacency": ADJACENCY,
            "accounted_at": ACCOUNTED_AT,
            "threat_model": THREAT_MODEL,
            "secure_aggregation": NEIGHBOURHOOD,
            "bits_per_value": ddg.bits,
            "modulus": ddg.modulus,
            "dims": ddg.dims,
            "padded_dims": ddg.padded_dims,
            "clip": ddg.clip,
            "gamma": ddg.gamma,
            "local_stddev": ddg.local_stddev,
            "share_steps": ddg.share_steps,
            "planned_shares_per_round": config.federation.clients,
            "planned_epsilon": planned,
            "budget_epsilon": config.privacy.max_epsilon,
            "budget_delta": config.delta_target,
            "fewest_shares_accounted": min((row["shares_accounted"] for row in summed), default=None),
            "clients_dropped_total": sum(row.get("clients_dropped", 0) for row in rows),
            "modular_wraps_total": None
            if self.integer_sums is None
            else sum(row.get("modular_wraps") or 0 for row in summed),
            "largest_modular_headroom": max((row["modular_headroom"] for row in summed), default=None),
            "modular_wraps": WRAPS,
            "rounds_aborted": len(self.aborted),
            "abort_reasons": self.aborted,
            **quality,
        }

    def finish(self, interrupted: bool) -> dict:
        summary = super().finish(interrupted)
        if self.world.canaries is not None and self.recorder.rows:
            record_trust_audit(self.recorder, self.ledger, summary, self.world.canaries, self.initial.size)
        return summary

    def summary(self, interrupted: bool) -> dict:
        """The shared summary, whether dropouts made the run spend more than planned, and with
        canaries the verdict on the released model (its final delta) beside the accounted eps."""
        summary = super().summary(interrupted)
        if self.world.canaries is not None:
            summary.update(canaries.counts(self.config))
            final_delta = flat_weights(self.weights) - self.initial
            summary["canary_audit"] = central_audit(self.world.canaries, final_delta, summary)
        if math.isfinite(summary.get("planned_epsilon") or math.inf) and summary["epsilon_spent_max_per_client"]:
            summary["spent_beyond_plan"] = summary["epsilon_spent_max_per_client"] > summary["planned_epsilon"] * (
                1 + 1e-9
            )
        return summary

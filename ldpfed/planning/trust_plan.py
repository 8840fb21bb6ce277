"""What each trust model predicts at one total (eps, delta) per client, before any run (`ldpfed
plan --trust`; the settings: ldpfed.planning.trust.equal_budget, as `compare --trust` runs them).

Per model: the noise where it is added, its standard deviation per coordinate of what the server
aggregates (the task's own `Task.trust_figures`, as compare --trust reports them), the predicted
error (the noise's variance per coordinate of the aggregate and round: each dimension's mean
estimate, or each coordinate of the averaged update), the bits each value costs on the wire, the
eps spent against the model's adversary and against the server, and whom the total protects.
Secagg's row carries the distributed discrete Gaussian's parameters from its accountant (bits,
gamma, the share's sigma, beta, the padded dimension) for the vectors the task encodes
(`Task.secure_sum_start`: dimension and clip), as `simulate --trust secagg` calibrates them
(ldpfed.protocols.secagg.plan_for: every client's share in every round, q = 1).

The task's entry is passed in (this floor imports no task): its unit says whom local and shuffle
protect (the mean task: per user, each user of a cohort randomizing her own tuple), where secagg
protects per client (a cohort's mean is one vector).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ldpfed.accounting.ddgauss import DEFAULT_K_STDDEVS, ddgauss_epsilon
from ldpfed.accounting.trust import get_class
from ldpfed.config import Config
from ldpfed.planning.calibration import TotalBudget
from ldpfed.planning.trust import TrustSetting, equal_budget
from ldpfed.protocols import seeds
from ldpfed.protocols.central import central_plan
from ldpfed.protocols.ddgauss import DistributedDiscreteGaussian
from ldpfed.validation import LDPValueError

FLOAT_BITS = {"mean": 64, "train": 32}  # what a value costs on the wire where no modulus bounds it (by task)
SECAGG_UNIT = "per client"
PLAN_SERVER_SEED = 0  # the model a plan sizes (train): its shape, not its values, matters


@dataclass(frozen=True)
class TrustPrediction:
    """One trust model's row of a plan: its `setting`, the noise (`noise_sd` where it is added,
    `noise_sd_on_mean` per coordinate of what the server aggregates), the predicted `error` (the
    noise's variance per coordinate of the aggregate and round), `bits_per_value` on the wire, the
    eps `spent` against the model's adversary and against the server (None: no guarantee against
    it), whom it protects (`unit`) and the model's own `parameters` (secagg: the distributed
    discrete Gaussian's)."""

    setting: TrustSetting
    noise: str
    noise_sd: float
    noise_sd_on_mean: float
    error: float
    bits_per_value: int
    spent: float
    against_server: float | None
    unit: str
    parameters: dict

    def to_dict(self) -> dict:
        return {
            **self.setting.to_dict(),
            "spent_epsilon": self.spent,
            "epsilon_against_server": self.against_server,
            "unit": self.unit,
            "noise": self.noise,
            "noise_sd": self.noise_sd,
            "noise_sd_on_mean": self.noise_sd_on_mean,
            "predicted_error": self.error,
            "bits_per_value": self.bits_per_value,
            "parameters": self.parameters,
        }


def secagg_encoder(total: TotalBudget, rounds: int, dims: int, clip: float, bits: int, clients: int):
    """The encoder `simulate --trust secagg` calibrates: every client's share in each of `rounds`
    rounds, within `total` at `bits` bits (ldpfed.protocols.secagg.plan_for)."""
    if total.delta <= 0:
        raise LDPValueError("--trust secagg's guarantee is (eps, delta): give the total's delta > 0")
    return DistributedDiscreteGaussian.for_budget(dims, clip, bits, total.epsilon, total.delta, clients, rounds=rounds)


def secagg_prediction(setting: TrustSetting, ddg: DistributedDiscreteGaussian, clients: int) -> TrustPrediction:
    """The sum of N shares has sd sigma sqrt(N) per rotated coordinate; the rotation is orthogonal,
    so each coordinate of the mean of the N decoded vectors carries variance sigma^2 / N, plus the
    rounding's at most gamma^2 / 4 per client and coordinate (its variance p(1-p) gamma^2 spread
    evenly by the Hadamard rotation): (sigma^2 + gamma^2/4) / N bounds the MSE per coordinate."""
    spent = ddgauss_epsilon(ddg.event(clients), setting.rounds, setting.total.delta)
    parameters = {
        "bits": ddg.bits,
        "modulus": ddg.modulus,
        "gamma": ddg.gamma,
        "local_stddev": ddg.local_stddev,
        "share_steps": ddg.share_steps,
        "beta": ddg.beta,
        "k_stddevs": DEFAULT_K_STDDEVS,
        "clip": ddg.clip,
        "dims": ddg.dims,
        "padded_dims": ddg.padded_dims,
        "shares_per_round": clients,
        "sampling_prob": 1.0,
    }
    return TrustPrediction(
        setting,
        f"discrete gaussian shares, {ddg.bits} bits per value",
        ddg.local_stddev,
        ddg.local_stddev / math.sqrt(clients),
        (ddg.local_stddev**2 + ddg.gamma**2 / 4.0) / clients,
        ddg.bits,
        spent,
        spent,
        SECAGG_UNIT,
        parameters,
    )


def _with_privacy(config: Config, **values) -> Config:
    return replace(config, privacy=replace(config.privacy, **values))


def noise_prediction(task, config: Config, setting: TrustSetting, dims: int) -> TrustPrediction:
    """local, shuffle and central: the noise the task's `trust_figures` states for the setting
    (local and shuffle: the randomizer at the setting's eps per round, worst case over the values;
    central: ldpfed.protocols.central's calibrated plan, without a run)."""
    summary: dict = {"parameters": dims, "final_accuracy": None}
    parameters: dict = {"epsilon_per_round": setting.epsilon_per_round}
    if setting.trust == "central":
        config = _with_privacy(config, max_epsilon=setting.total.epsilon, max_delta=setting.total.delta)
        plan = central_plan(config, dims)
        summary.update(plan.record())
        parameters = {
            "noise_multiplier": plan.noise_multiplier,
            "clip": plan.clip,
            "expected_clients": plan.expected_clients,
        }
    else:
        config = _with_privacy(config, epsilon=setting.epsilon_per_round, delta=0.0)
    figures = task.trust_figures(config, summary, setting.trust)
    against = {"local": setting.spent_epsilon, "central": None}.get(setting.trust)
    if setting.trust == "shuffle":  # the server runs the shuffler: eps0 per round, basic composition
        against = setting.rounds * setting.epsilon_per_round
    return TrustPrediction(
        setting,
        figures["noise"],
        figures["noise_sd"],
        figures["noise_sd_on_mean"],
        figures["noise_sd_on_mean"] ** 2,
        FLOAT_BITS[config.run.task],
        setting.spent_epsilon,
        against,
        SECAGG_UNIT if setting.trust == "central" else task.unit,
        parameters,
    )


def plan_trust(task, config: Config, total: TotalBudget, models: list[str], accountant: str = "pld"):
    """Each trust model of `models` at `total` per client over the run's rounds, for the task
    (`task`: its registry entry) and the data and federation of `config`: its setting
    (`equal_budget`) and what it predicts (module docstring)."""
    if not task.trust_options:
        raise LDPValueError(f"plan --trust compares the tasks compare --trust runs, not --task {task.name}")
    start = task.secure_sum_start(config, seeds.data_seed(config.run.seed), PLAN_SERVER_SEED)
    config, dims, clip = start["config"], start["dims"], start["clip"]  # bound to the data's shape
    rounds, clients = config.run.rounds, config.federation.clients
    rows = []
    for name in models:
        model = get_class(name)
        if task.name not in model.tasks:
            raise LDPValueError(
                f"--trust {model.name} applies to --task {', '.join(model.tasks)}; got --task {task.name}"
            )
        reports = task.shuffle_reports(config) if model.name == "shuffle" else None
        mechanism = config.privacy.mechanism
        setting = equal_budget(model.name, total, rounds, mechanism=mechanism, reports=reports, accountant=accountant)
        if model.name == "secagg":
            ddg = secagg_encoder(total, rounds, dims, clip, config.privacy.bits, clients)
            rows.append(secagg_prediction(setting, ddg, clients))
        else:
            rows.append(noise_prediction(task, config, setting, dims))
    return rows

"""What each trust model predicts at one total (eps, delta) per client, before any run (`ldpfed
plan --trust`; the settings: ldpfed.planning.trust.equal_budget, as `compare --trust` runs them).

Per model: the noise where it is added, its standard deviation per coordinate of what the server
aggregates, the predicted error (mean task: the MSE of each dimension's estimate per round; train:
E||noise||^2 of the averaged update per round), the bits each value costs on the wire, the eps
spent against the model's adversary and against the server, and whom the total protects. Secagg's
row carries the distributed discrete Gaussian's parameters from its accountant (bits, gamma, the
share's sigma, beta, the padded dimension), as `simulate --trust secagg` calibrates them
(ldpfed.protocols.secagg.plan_for: every client's share in every round, q = 1).

The mean task's totals do not protect the same unit: local and shuffle hold per user (each user
of a cohort randomizes her own tuple), secagg per client (its cohort's mean is one vector).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import ldpfed.protocols.mean as mean_protocol
import ldpfed.protocols.train as train_protocol
from ldpfed.accounting.ddgauss import DEFAULT_K_STDDEVS, ddgauss_epsilon
from ldpfed.accounting.trust import get_class
from ldpfed.config import Config
from ldpfed.planning.calibration import TotalBudget
from ldpfed.planning.train import update_dims
from ldpfed.planning.trust import TrustSetting, equal_budget, report_noise, update_noise
from ldpfed.protocols import seeds
from ldpfed.protocols.central import central_plan
from ldpfed.protocols.ddgauss import DistributedDiscreteGaussian
from ldpfed.protocols.secagg import mean_clip
from ldpfed.validation import LDPValueError

FLOAT_BITS = {"mean": 64, "train": 32}  # what a value costs on the wire where no modulus bounds it
UNITS = {"mean": "per user", "train": "per client"}  # whom a tuple task's local/shuffle total protects


@dataclass(frozen=True)
class TrustPrediction:
    """One trust model's row of a plan: its `setting`, the noise (`noise_sd` where it is added,
    `noise_sd_on_mean` per coordinate of what the server aggregates), the predicted `error` (mean:
    MSE of each dimension's estimate per round; train: E||noise||^2 of the averaged update per
    round), `bits_per_value` on the wire, the eps `spent` against the model's adversary and against
    the server (None: no guarantee against it), whom it protects (`unit`) and the model's own
    `parameters` (secagg: the distributed discrete Gaussian's)."""

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


def secagg_prediction(setting: TrustSetting, ddg: DistributedDiscreteGaussian, clients: int, task: str):
    """The sum of N shares has sd sigma sqrt(N) per rotated coordinate; the rotation is orthogonal,
    so each coordinate of the mean of the N decoded vectors carries variance sigma^2 / N, plus the
    rounding's at most gamma^2 / 4 per client and coordinate (its variance p(1-p) gamma^2 spread
    evenly by the Hadamard rotation): (sigma^2 + gamma^2/4) / N bounds the MSE per coordinate."""
    per_coordinate = (ddg.local_stddev**2 + ddg.gamma**2 / 4.0) / clients
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
        math.sqrt(ddg.local_stddev**2 / clients),
        per_coordinate * (1 if task == "mean" else ddg.dims),
        ddg.bits,
        spent,
        spent,
        "per client",
        parameters,
    )


def _with_privacy(config: Config, **values) -> Config:
    return replace(config, privacy=replace(config.privacy, **values))


def _mean_prediction(config: Config, setting: TrustSetting) -> TrustPrediction:
    """local and shuffle on the mean task: the randomizer at the setting's eps per report (worst
    case over the values; exact for Laplace), averaged over the users reporting each dimension."""
    config = _with_privacy(config, epsilon=setting.epsilon_per_round, delta=0.0)
    sd, on_mean = report_noise(
        mean_protocol.mechanism(config), config.data.users, config.data.dims, mean_protocol.report_dims(config)
    )
    against = setting.spent_epsilon if setting.trust == "local" else setting.rounds * setting.epsilon_per_round
    return TrustPrediction(
        setting,
        f"{config.privacy.mechanism} on each report's value",
        sd,
        on_mean,
        on_mean**2,
        FLOAT_BITS["mean"],
        setting.spent_epsilon,
        against,
        UNITS["mean"],
        {"epsilon_per_report": setting.epsilon_per_round},
    )


def _train_prediction(config: Config, setting: TrustSetting, dims: int) -> TrustPrediction:
    """local: the privatizer's noise on each update, weighted by the clients' data (`update_noise`);
    central: z C (1 + grid) on the sum of the clipped updates, over q N (ldpfed.protocols.central)."""
    if setting.trust == "central":
        config = _with_privacy(config, max_epsilon=setting.total.epsilon, max_delta=setting.total.delta)
        plan = central_plan(config, dims)
        sd = plan.noise.stddev_of_sum(plan.clip)
        on_mean = sd / plan.expected_clients
        return TrustPrediction(
            setting,
            "discrete gaussian on the sum of clipped updates (trusted server)",
            sd,
            on_mean,
            dims * on_mean**2,
            FLOAT_BITS["train"],
            setting.spent_epsilon,
            None,
            "per client",
            {"noise_multiplier": plan.noise_multiplier, "clip": plan.clip, "expected_clients": plan.expected_clients},
        )
    config = _with_privacy(config, epsilon=setting.epsilon_per_round, delta=0.0)
    privatizer = train_protocol.privatizer(config)
    sizes = train_protocol.federated_data(config, seeds.data_seed(config.run.seed)).client_sizes
    sd, on_mean = update_noise(privatizer, dims, sizes)
    return TrustPrediction(
        setting,
        f"{config.privacy.mechanism} on m = {privatizer.dims_reported(dims)} of d = {dims} coordinates of each update",
        sd,
        on_mean,
        dims * on_mean**2,
        FLOAT_BITS["train"],
        setting.spent_epsilon,
        setting.spent_epsilon,
        "per client",
        {"epsilon_per_round": setting.epsilon_per_round, "coordinate_clip": config.training.coordinate_clip},
    )


def plan_trust(config: Config, total: TotalBudget, models: list[str], accountant: str = "pld") -> list[TrustPrediction]:
    """Each trust model of `models` at `total` per client over the run's rounds, for the task,
    data and federation of `config` (a mean config bound to its data's shape): its setting
    (`equal_budget`) and what it predicts (module docstring)."""
    task, rounds, clients = config.run.task, config.run.rounds, config.federation.clients
    if task not in FLOAT_BITS:
        raise LDPValueError(f"plan --trust compares --task {' or '.join(FLOAT_BITS)}, not --task {task}")
    mechanism = config.privacy.mechanism
    dims = config.data.dims if task == "mean" else update_dims(config)
    rows = []
    for name in models:
        model = get_class(name)
        if task not in model.tasks:
            raise LDPValueError(f"--trust {model.name} applies to --task {', '.join(model.tasks)}; got --task {task}")
        setting = equal_budget(
            model.name, total, rounds, mechanism=mechanism, reports=config.data.users, accountant=accountant
        )
        if model.name == "secagg":
            clip = mean_clip(dims) if task == "mean" else config.training.clip
            ddg = secagg_encoder(total, rounds, dims, clip, config.privacy.bits, clients)
            rows.append(secagg_prediction(setting, ddg, clients, task))
        elif task == "mean":
            rows.append(_mean_prediction(config, setting))
        else:
            rows.append(_train_prediction(config, setting, dims))
    return rows

"""The train task: federated LDP-SGD, clients privatize their clipped model updates (spec:
federated.md, gradient-noise.md, directional.md)."""

from __future__ import annotations

import numpy as np

import ldpfed.aggregation as aggregation
import ldpfed.mechanisms as mechanisms
from ldpfed.config import FEDAVG, LDPVEC_AGGREGATORS, MODELS, TRAIN_DEVIATIONS, Config, TrainingConfig, choice
from ldpfed.data.federated import FEDERATED_DATASETS
from ldpfed.data.partition import check_scheme
from ldpfed.data.partition_counts import label_count_files
from ldpfed.planning.calibration import RoundBudget, TotalBudget
from ldpfed.planning.train import PLRVO, calibrate_train_round, update_dims
from ldpfed.planning.trust import update_noise
from ldpfed.protocols import diagnostics, seeds, train
from ldpfed.protocols.canaries import check_world, real_clients
from ldpfed.protocols.central import CentralClient
from ldpfed.tasks.base import Task, nanmean
from ldpfed.training.parameters import get_weights
from ldpfed.validation import LDPValueError, check_epsilon

OPTIONS = (
    "model",
    "local_steps",
    "lr",
    "batch_size",
    "clip",
    "coordinate_clip",
    "perturbation",
    "beta",
    "window",
    "magnitude",
    "rotation",
    "chunk_clients",
    "partition",
    "classes_per_client",
    "dirichlet_alpha",
    "fraction",
    "device",
    "deviation",
    "data_dir",
    "canaries",
)


# `ldpfed compare`'s options of the train task (its mean and frequency comparisons run in process,
# without a federation)
COMPARE_OPTIONS = (
    "model",
    "clients",
    "rounds",
    "local_steps",
    "lr",
    "batch_size",
    "clip",
    "coordinate_clip",
    "partition",
    "fraction",
    "engine",
    "cpus",
    "data_dir",
    "nodes",
    "device",
)


class TrainTask(Task):
    name = "train"
    options = OPTIONS
    compare_options = COMPARE_OPTIONS
    plan_options = ("model", "clients", "clip", "coordinate_clip")
    metric, metric_label = "final_accuracy", "final test accuracy"
    # compare --trust passes every train option of compare but the clipping of one trust model and --fraction
    trust_options = ("data", *(name for name in COMPARE_OPTIONS if name not in ("clip", "coordinate_clip", "fraction")))
    sends = train.SENDS
    unit = "per client (all of its data)"
    epsilon_unit = "per client and round"

    def validate(self, config: Config) -> None:
        _check_mechanism(config)
        aggregator = config.aggregation.aggregator
        choice("aggregator", aggregator, (*aggregation.available("mean"), FEDAVG))
        choice("deviation", config.aggregation.deviation, TRAIN_DEVIATIONS)
        choice("data", config.data_name, FEDERATED_DATASETS)
        check_scheme(config.data.partition)  # NAME[:ARGS] or flwr:NAME[:ARGS] (ldpfed.data.partition)
        choice("model", config.training.model, MODELS)
        if config.federation.node_reply == "sum" and aggregator not in ("mean", FEDAVG):
            raise LDPValueError(
                f"node-reply sum needs --aggregator mean or fedavg: {aggregator!r} re-calibrates from each "
                "client's update, which a summed reply does not carry (use --node-reply clients)"
            )
        _check_clip_applies(config)
        _check_canaries(config)

    def server(self, config, data_seed, server_seed, fedavg=None):
        check_world(config)  # canaries: `ldpfed simulate` only, never a deployment's halves
        return train.TrainServer(self.public(config, data_seed), data_seed, server_seed, fedavg)

    def client(self, public, partition_id, data_seed, secret):
        return train.TrainClient(public, partition_id, data_seed, secret)

    def preflight(self, config: Config, data_seed: int):
        return config, None, train.check_setup(config, data_seed)

    def round_budget(self, config: Config, total: TotalBudget) -> RoundBudget:
        """On the event the run's privatizer records (ldpfed.planning.train); plrvo is calibrated
        over the rounds by its own accountant, so it takes a per-round epsilon instead."""
        privacy = config.privacy
        if privacy.mechanism == PLRVO:
            raise LDPValueError(
                "plrvo is calibrated over the T rounds by its own accountant (ldpfed plan --task train), and a run "
                "calibrates it per round: give its per-round --epsilon instead of --budget"
            )
        round_budget = calibrate_train_round(config, total, config.run.rounds, update_dims(config))
        if round_budget.accountant != privacy.accountant:
            raise LDPValueError(
                f"the {privacy.accountant} accountant cannot account a {privacy.mechanism} round: "
                f"give --accountant {round_budget.accountant}"
            )
        return round_budget

    def data_files(self, config: Config, data_seed: int) -> dict:
        """Each client's training examples per class (label_counts.csv) and their plot."""
        data = train.federated_data(config, data_seed)
        title = f"{data.name}, partition {data.partition}"
        return label_count_files(data.label_counts(), title=title, plot=config.output.plot)

    def trust_figures(self, config: Config, summary: dict, trust: str) -> dict:
        return _trust_figures(config, summary, trust)

    def secure_sum_start(self, config: Config, data_seed: int, server_seed: int) -> dict:
        model = train.new_model(config, data_seed, seeds.torch_seed(server_seed, seeds.MODEL_INIT))
        weights = get_weights(model)
        dims = int(sum(w.size for w in weights))
        data = train.federated_data(config, data_seed)
        return {
            "config": config,
            "dims": dims,
            "clip": config.training.clip,
            "weights": weights,
            "model": model,
            "data": data,
        }

    def secure_sum_vectors(self, config: Config, data_seed: int, pids, weights, server_round: int, secret_of):
        """Each client's update: its local model after training from `weights`, minus `weights`."""
        flat = np.concatenate([w.ravel() for w in weights]).astype(np.float64)
        rows = []
        for pid in pids:  # each client trains its own model (CentralClient): one at a time
            model, _ = CentralClient(config, pid, data_seed, secret_of(pid)).train(weights, server_round)
            rows.append(np.concatenate([m.ravel() for m in model]).astype(np.float64) - flat)
        return np.stack(rows)

    def joined(self, config, server, observed, diagnostics_of_clients):
        metrics = diagnostics.train_round(server.outcome, diagnostics_of_clients, server.privatizer)
        if config.training.canaries:  # a canary trains nothing: its loss is NaN, the real clients' is the run's
            metrics["train_loss"] = real_train_loss(server.outcome, diagnostics_of_clients, real_clients(config))
        return metrics

    def summary(self, config: Config, server, rows: list[dict], reported: list[dict]) -> dict:
        measured = np.array([row["measured_squared_distance"] for row in rows], dtype=float)
        predicted = np.array([row["predicted_squared_distance"] for row in rows], dtype=float)
        known = np.isfinite(measured) & np.isfinite(predicted)
        ratio = (
            float(measured[known].sum() / predicted[known].sum())
            if known.any() and predicted[known].sum() > 0
            else None
        )
        directional = getattr(server.privatizer, "ldpvec", None)
        parameters = int(server.weights.size)
        return {
            "perturbation": config.training.perturbation,
            **({"ldpvec": _ldpvec_record(directional, parameters)} if directional is not None else {}),
            "mean_cosine_to_clean": nanmean([row["cosine_to_clean"] for row in rows]),
            "mean_leading_energy_share": nanmean([row["leading_energy_share"] for row in rows]),
            "final_accuracy": rows[-1]["accuracy"],
            "final_loss": rows[-1]["loss"],
            "best_accuracy": float(max(row["accuracy"] for row in rows)),
            "data": config.data_name,
            "model": config.training.model,
            "parameters": parameters,
            "deviation": deviation_used(config),
            "noise_measured_over_predicted": ratio,
            # gradient noises (ldpfed.gradient_noise): which sampler ran (safe = floating-point safe)
            "noise_sampler": (
                server.privatizer.noise(parameters).sampler_description if hasattr(server.privatizer, "noise") else None
            ),
            "mean_measured_squared_distance": nanmean(measured),
            "mean_predicted_squared_distance": nanmean(predicted),
            "mean_applied_squared_distance": nanmean([row["applied_squared_distance"] for row in rows]),
            "diagnostics": (
                "clients wrote their clean clipped updates to the run's local output; the harness "
                "joined them with the server's aggregate (never sent to the server)"
                if np.isfinite(measured).any()
                else None
            ),
        }


def real_train_loss(outcome, diagnostics_of_clients: dict[int, dict], first_canary: int) -> float:
    """The count-weighted mean training loss of the replying clients that hold data (partition ids
    below `first_canary`); NaN when none replied or one's diagnostics are missing (as
    `diagnostics.train_round`)."""
    if outcome is None:
        return float("nan")
    pids = np.asarray(outcome.partitions)
    real = pids < first_canary
    if not real.any() or not all(int(pid) in diagnostics_of_clients for pid in pids[real]):
        return float("nan")
    losses = np.array([diagnostics_of_clients[int(pid)]["loss"] for pid in pids[real]], dtype=float)
    weights = outcome.sizes[real] / outcome.sizes[real].sum()
    return float(weights @ losses) if np.all(np.isfinite(losses)) else float("nan")


def deviation_used(config: Config) -> str:
    """The deviation model (plug-in | model) the run's aggregator re-calibrates with, or "not used":
    FedAvg and the plain mean ignore it (the only aggregators an LDPVec run allows)."""
    aggregator = config.aggregation.aggregator
    if aggregator == FEDAVG or not aggregation.get_class(aggregator).uses_deviation:
        return "not used"
    return config.aggregation.deviation


def _ldpvec_record(ldpvec, dims: int) -> dict:
    """LDPVec's settings and budget split; without a guarantee (exact-unsafe), no epsilon at all."""
    if ldpvec.private:
        return ldpvec.describe(dims)
    return {key: value for key, value in ldpvec.describe().items() if key not in ("epsilon", "delta")}


def _check_mechanism(config: Config) -> None:
    """A scalar mechanism per coordinate, a gradient noise (L2-clipped updates plus a vector noise,
    gradient-noise.md), LDPVec on a scalar base mechanism, or none."""
    privacy = config.privacy
    if config.directional:
        _check_ldpvec(config)
    elif config.gradient_noise:
        if config.aggregation.aggregator != FEDAVG:
            raise LDPValueError(
                f"{privacy.mechanism} needs --aggregator fedavg (the re-calibrating aggregators "
                "assume per-coordinate clipping to [-C, C])"
            )
        if privacy.report_dims:
            raise LDPValueError(f"{privacy.mechanism} perturbs the whole update: report-dims does not apply")
        check_epsilon(privacy.epsilon)
    elif config.noisy:
        mechanisms.get_class(privacy.mechanism)
        check_epsilon(privacy.epsilon)


def _check_ldpvec(config: Config) -> None:
    """--perturbation ldpvec: a scalar base mechanism, whole-update release, mean/fedavg."""
    privacy = config.privacy
    if not config.noisy or config.gradient_noise:
        raise LDPValueError(
            f"--perturbation ldpvec needs a scalar base mechanism ({', '.join(mechanisms.available())}), "
            f"got {privacy.mechanism!r}"
        )
    mechanisms.get_class(privacy.mechanism)
    check_epsilon(privacy.epsilon)
    if config.aggregation.aggregator not in LDPVEC_AGGREGATORS:
        raise LDPValueError(
            f"--perturbation ldpvec needs --aggregator mean or fedavg (no per-coordinate noise model "
            f"for {config.aggregation.aggregator!r}); got {config.aggregation.aggregator!r}"
        )
    if privacy.report_dims:
        raise LDPValueError("--perturbation ldpvec perturbs the whole update: report-dims does not apply")


CANARY_TRUST = ("local", "central", "secagg")  # the trust models whose harness hosts canary clients


def _check_canaries(config: Config) -> None:
    """Canaries (ldpfed.protocols.canaries) need the run's noise root: their directions and coins
    derive from it, and fresh noise has none."""
    if config.training.canaries and config.privacy.trust not in CANARY_TRUST:
        raise LDPValueError(
            f"--canaries runs under --trust {' or '.join(CANARY_TRUST)} (its canary clients are not built for "
            f"{config.privacy.trust} yet)"
        )
    if config.training.canaries and config.run.fresh_noise:
        raise LDPValueError(
            "--canaries needs the run's noise root (the canaries' directions and secret coins derive from it): "
            "drop --fresh-noise"
        )
    if config.training.canaries and config.privacy.trust == "central" and config.privacy.clipping == "adaptive":
        raise LDPValueError(
            "--canaries under central trust needs --clipping fixed (a left-out canary must leave the release "
            "as it would be without it; the adaptive clip's count would see its zero update)"
        )


def _check_clip_applies(config: Config) -> None:
    """A clip bound set (not its default) where the other one applies is an error, not ignored: the
    two bound different norms (`Config.update_clip`)."""
    defaults = TrainingConfig()
    if config.l2_clipped and config.training.coordinate_clip != defaults.coordinate_clip:
        raise LDPValueError(
            f"coordinate-clip bounds each coordinate for the scalar mechanisms; {config.privacy.mechanism!r}"
            f"{' (ldpvec)' if config.directional else ''} clips the update's L2 norm: use clip"
        )
    if not config.l2_clipped and config.training.clip != defaults.clip:
        raise LDPValueError(
            f"clip is the L2 norm bound of the gradient noises and ldpvec; {config.privacy.mechanism!r} clips "
            "each coordinate to [-C, C]: use coordinate-clip"
        )


def _trust_figures(config: Config, summary: dict, trust: str) -> dict:
    """Central: the safe discrete Gaussian of sd z C (1 + grid) on the sum of the clipped updates,
    over q N clients; local (and shuffle): the privatizer's noise on each update."""
    if trust == "central":
        sd = summary["noise_stddev_of_sum_per_unit_clip"] * summary["initial_clip"]
        return {
            "final_accuracy": summary["final_accuracy"],
            "noise": "discrete gaussian on the sum of clipped updates (trusted server)",
            "noise_sd": sd,
            "noise_sd_on_mean": sd / summary["expected_clients"],
        }
    dims = summary["parameters"]
    update_privatizer = train.privatizer(config)
    m = update_privatizer.dims_reported(dims)
    sizes = train.federated_data(config, seeds.data_seed(config.run.seed)).client_sizes
    sd, on_mean = update_noise(update_privatizer, dims, sizes)
    return {
        "final_accuracy": summary.get("final_accuracy"),
        "noise": f"{config.privacy.mechanism} on m = {m} of d = {dims} coordinates of each update, scaled by d/m",
        "noise_sd": sd,
        "noise_sd_on_mean": on_mean,
    }

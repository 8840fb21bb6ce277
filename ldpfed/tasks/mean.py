"""The mean task: users' tuples in a bounded domain, estimated per dimension (spec: federated.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import ldpfed.mechanisms as mechanisms
from ldpfed.config import Config
from ldpfed.data import DEFAULT_DIMS, available_synthetic
from ldpfed.data.federated import FEDERATED_DATASETS
from ldpfed.planning.trust import report_noise
from ldpfed.protocols import diagnostics, mean, seeds
from ldpfed.protocols.privacy import round_event
from ldpfed.protocols.secagg import cohort_means, mean_clip
from ldpfed.tasks.tuples import TupleTask
from ldpfed.validation import LDPValueError


class MeanTask(TupleTask):
    name = "mean"
    options = ("domain", "out_of_domain")
    plan_options = ("report_dims", "users")
    metric, metric_label, metric_log = "mse", "MSE (mean over rounds)", True
    trust_options = ("data", "users", "dims", "clients", "rounds", "engine", "nodes", "cpus")
    compare_options = ("domain", "users", "dims", "l2_reference", "estimator", "chunk_users", "header", "out_of_domain")

    def check_mechanism(self, config: Config) -> None:
        mechanisms.get_class(config.privacy.mechanism)

    def validate(self, config: Config) -> None:
        super().validate(config)
        if config.data_name in FEDERATED_DATASETS and config.data_name not in available_synthetic():
            raise LDPValueError(f"data {config.data_name!r} is a training data set; --task mean takes tuples")

    def server(self, config, data_seed, server_seed, fedavg=None):
        return mean.server_from_config(self.public(config, data_seed))

    def client(self, public, partition_id, data_seed, secret):
        return mean.client_from_config(public, partition_id, data_seed, secret)

    def preflight(self, config: Config, data_seed: int):
        if config.noisy and config.data_name in available_synthetic():
            # the shape is known: a bad budget fails before the data are generated
            mean.mechanism(replace(config, data=replace(config.data, dims=config.data.dims or DEFAULT_DIMS)))
        described = mean.read(config, data_seed).description
        config = self.bind(config, data_seed)
        if config.noisy:
            mean.mechanism(config)  # a file: m is known once it is read
        return config, described, round_event(config, config.privacy.epsilon, config.delta_or_none)

    def observe(self, config: Config, data_seed: int) -> np.ndarray:
        return mean.tuples(config, data_seed)

    def joined(self, config, server, observed, diagnostics_of_clients):
        return diagnostics.mean_round(server.outcome, observed, self.cohorts(config), config)

    def data_summary(self, config: Config) -> dict:
        """For a file with --domain, the scale of its MSE too."""
        scale = mean.scale(config)
        return {**super().data_summary(config), **({"scale": scale} if scale else {})}

    def shuffle_reports(self, config: Config) -> int:
        """The data's users (0 = from the data: a synthetic set's default or a file's rows)."""
        return self.bind(config, seeds.data_seed(config.run.seed)).data.users

    def trust_figures(self, config: Config, summary: dict, trust: str) -> dict:
        config = self.bind(config, seeds.data_seed(config.run.seed))  # users and dims as read
        sd, on_mean = report_noise(
            mean.mechanism(config), config.data.users, config.data.dims, mean.report_dims(config)
        )
        return {
            "mse": summary.get("mean_mse_over_rounds", summary.get("mean_mse")),
            "noise": f"{config.privacy.mechanism} on each report's value",
            "noise_sd": sd,
            "noise_sd_on_mean": on_mean,
        }

    def secure_sum_start(self, config: Config, data_seed: int, server_seed: int) -> dict:
        config = self.bind(config, data_seed)
        dims = config.data.dims
        truth = mean.tuples(config, data_seed).mean(axis=0)
        return {"config": config, "dims": dims, "clip": mean_clip(dims), "weights": None, "truth": truth}

    def secure_sum_vectors(self, config: Config, data_seed: int, pids, weights, server_round: int, secret_of):
        """Each client's cohort mean (its users' tuples averaged)."""
        values = mean.tuples(config, data_seed)
        return cohort_means(values, config.data.users, config.federation.clients, pids)

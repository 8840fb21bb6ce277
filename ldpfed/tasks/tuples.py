"""What the two tuple tasks (mean, frequency) share: users split into client cohorts (their nodes:
ldpfed.protocols.node_halves), and MSE figures against the cohorts' truth."""

from __future__ import annotations

import ldpfed.aggregation as aggregation
from ldpfed.config import Config, check_tuple_shape
from ldpfed.protocols.mean import Cohorts
from ldpfed.protocols.nodes import default_tuple_nodes
from ldpfed.tasks.base import Task, nanmean
from ldpfed.validation import LDPValueError, check_epsilon


class TupleTask(Task):
    """Users' tuples collected by the clients; the server estimates from their report sums."""

    sends = "tuples"
    unit = "per user (each user of a client's cohort)"
    epsilon_unit = "per user and round, eps/m per value"  # what a round's epsilon is a budget of

    def validate(self, config: Config) -> None:
        if config.directional:
            raise LDPValueError("--perturbation ldpvec perturbs model updates: --task train only")
        if config.gradient_noise:
            raise LDPValueError(f"{config.privacy.mechanism} is a gradient noise: --task train only")
        self.check_mechanism(config)
        check_epsilon(config.privacy.epsilon)
        aggregation.check_names([config.aggregation.aggregator], self.name)
        check_tuple_shape(config.data, config.federation, config.privacy)

    def check_mechanism(self, config: Config) -> None:
        """The mechanism's name is one the task's clients can run."""
        raise NotImplementedError

    def default_nodes(self, config: Config) -> int:
        """What the round's work fills (users x dims of the bound config; `default_tuple_nodes`)."""
        federation = config.federation
        values = config.data.users * config.data.dims
        return default_tuple_nodes(federation.clients, values, federation.cpus)

    def cohorts(self, config: Config) -> Cohorts:
        """The users each client holds (`Cohorts`: by arithmetic, not a split of the users per round)."""
        return Cohorts(config.data.users, config.federation.clients)

    def summary(self, config: Config, server, rows: list[dict], reported: list[dict]) -> dict:
        """The final figures are the last round's that had reports (`last_round_with_reports`): a
        round without any (every client failed, or the budget stopped them all) estimates nothing."""
        last = reported[-1] if reported else rows[-1]
        return {
            "final_mse": last["mse"],
            "predicted_mse_plain_mean": last["predicted_mse"],
            "mean_mse_over_rounds": nanmean([row["mse"] for row in rows]),
            "final_mse_plain_mean": last["mse_plain_mean"],
        }

    def data_summary(self, config: Config) -> dict:
        return {"users": config.data.users, "dims": config.data.dims}

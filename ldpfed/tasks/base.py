"""What every task shares, and the hooks by which a task differs (spec: federated.md).

A task (mean, frequency, train) is one entry of `ldpfed.tasks`; the harness, the Flower apps
and the commands ask the entry and never test the task's name. An entry owns:
- its own options (`options`, `compare_options`: a flag of another task is an error,
  `ldpfed.tasks.foreign_flags`), the checks
  of the config that only it makes (`validate`) and what its clients send (`sends`) and whom a
  figure protects (`unit`);
- the run: the config bound to the data (`bind`), the server and client halves (a node's half and
  its binding are its node entry's, ldpfed.protocols.node_halves), the
  default number of nodes, the checks before a federation starts (`preflight`) and the total
  budget's per-round plan (`round_budget`);
- the record: what the harness observes of the data (`observe`), the diagnostics joined into a
  round's row (`joined`) and the task's part of the summary (`summary`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ldpfed.config import Config
from ldpfed.planning.calibration import RoundBudget, TotalBudget, calibrate_round
from ldpfed.protocols.node_halves import entry
from ldpfed.protocols.nodes import default_nodes


def nanmean(values) -> float | None:
    """The mean of the finite values (None when there are none): a figure over the rounds that had it."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


class Task:
    """The behaviour every task shares; subclasses override where they differ."""

    name: str = ""
    options: tuple[str, ...] = ()  # config options (simulate's flags) that apply to this task only
    compare_options: tuple[str, ...] = ()  # `ldpfed compare` options that apply to this task only
    plan_options: tuple[str, ...] = ()  # `ldpfed plan` options that apply to this task only
    sends: str = ""  # what a client sends, as the privacy record says it
    unit: str = ""  # whom one guarantee protects
    epsilon_unit: str = ""  # what a round's epsilon is a budget of
    metric: str = ""  # the summary's measured figure that comparisons rank runs by
    metric_label: str = ""  # its axis label
    metric_log: bool = False  # plotted on a log scale
    trust_options: tuple[str, ...] = ()  # compare --trust: the options passed to every run (): not compared

    def epsilon_label(self, summary: dict) -> str:
        """What the run's `epsilon` is a budget of, as its summary says it (`epsilon_unit` by default)."""
        return self.epsilon_unit

    def validate(self, config: Config) -> None:
        """The checks of `config` that depend on the task (the shared ones: `Config.validated`)."""

    def bind(self, config: Config, data_seed: int) -> Config:
        """The config bound to the data's shape (0 = from the data), validated: the task's node
        entry's (ldpfed.protocols.node_halves), which a node binds by without the task entries."""
        return entry(self.name).bind(config, data_seed)

    def public(self, config: Config, data_seed: int) -> Config:
        """The config a half is given: bound to the data, without the run seed (its node entry's)."""
        return entry(self.name).public(config, data_seed)

    def server(self, config: Config, data_seed: int, server_seed: int, fedavg: Callable | None = None):
        raise NotImplementedError

    def client(self, public: Config, partition_id: int, data_seed: int, secret: int):
        raise NotImplementedError

    def default_nodes(self, config: Config) -> int:
        """Nodes when `federation.nodes` is 0: min(clients, CPUs)."""
        return default_nodes(config.federation.clients, config.federation.cpus)

    def preflight(self, config: Config, data_seed: int) -> tuple[Config, str | None, object]:
        """(the bound config, one line on the data read or None, one client's round event)."""
        raise NotImplementedError

    def round_budget(self, config: Config, total: TotalBudget) -> RoundBudget:
        """The per-round epsilon (and delta) that `total` allows over the run's rounds."""
        privacy = config.privacy
        return calibrate_round(privacy.mechanism, total, config.run.rounds, privacy.accountant)

    def observe(self, config: Config, data_seed: int):
        """What the harness (the world) knows of the data for the diagnostics (None: nothing)."""
        return None

    def joined(self, config: Config, server, observed, diagnostics: dict[int, dict]) -> dict:
        """The diagnostics of a round, joined with what the server holds after it."""
        return {}

    def data_files(self, config: Config, data_seed: int) -> dict:
        """Files about the run's data for its output directory ({name: content}; none by default)."""
        return {}

    def data_summary(self, config: Config) -> dict:
        """The data's shape in the summary (also of a run that finished no round)."""
        return {}

    def summary(self, config: Config, server, rows: list[dict], reported: list[dict]) -> dict:
        """The task's part of the summary (rows: every finished round; reported: those with reports)."""
        return {}

    def shuffle_reports(self, config: Config) -> int | None:
        """The reports a shuffler mixes in a round (the data's users), or None where none is shuffled."""
        return None

    def trust_figures(self, config: Config, summary: dict, trust: str) -> dict:
        """compare --trust: the run's measured figure and the noise its trust model added (sd where it
        is added and on the mean)."""
        raise NotImplementedError

    def secure_sum_start(self, config: Config, data_seed: int, server_seed: int) -> dict:
        """--trust secagg: what the run starts from: the config bound to the data, the dims and clip
        of the vectors the clients encode, and the task's own state (`weights`: the initial model,
        None where the task trains none)."""
        raise NotImplementedError

    def secure_sum_vectors(self, config: Config, data_seed: int, pids, weights, server_round: int, secret_of):
        """--trust secagg: the (clients, dims) vectors the clients `pids` encode this round
        (`secret_of(pid)`: a client's noise secret)."""
        raise NotImplementedError

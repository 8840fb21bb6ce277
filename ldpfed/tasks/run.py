"""A run's halves and checks, asked of its task's entry (`ldpfed.tasks`): the server and client
halves bound to the data (a node's: ldpfed.protocols.node_halves), the nodes' layout, and the
preflight before any federation starts."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from ldpfed.accounting import create_accountant
from ldpfed.config import Config, from_flat
from ldpfed.planning.run import planned_config as plan_rounds
from ldpfed.protocols import seeds
from ldpfed.protocols.node_halves import node_half as node_half  # a run's node half, by its task
from ldpfed.protocols.nodes import Layout
from ldpfed.tasks.registry import of, validated
from ldpfed.validation import LDPValueError


def bind_data(config: Config, data_seed: int) -> Config:
    """The config with the data's users and dims (attributes) (0 = from the data)."""
    return of(config).bind(config, data_seed)


def server_half(config: Config, data_seed: int, server_seed: int, fedavg: Callable | None = None):
    return of(config).server(config, data_seed, server_seed, fedavg)


def client_half(config: Config, partition_id: int, data_seed: int, secret: int):
    task = of(config)
    return task.client(task.public(config, data_seed), partition_id, data_seed, secret)


def layout(config: Config) -> Layout:
    """The run's nodes: `federation.nodes`, or when 0 the task's default."""
    federation = config.federation
    return Layout(federation.clients, federation.nodes or of(config).default_nodes(config))


def preflight(config: Config) -> tuple[Config, str | None]:
    """Fail before any federation starts on what can be checked here (data present and in its
    domain, names, one round's accounting). Returns the config bound to the data's shape and, for
    a tuple task, one line saying what data was read."""
    config, described, event = of(config).preflight(config, seeds.data_seed(config.run.seed))
    check_accounting(config, event)
    return config, described


def check_accounting(config: Config, event) -> None:
    """The run's accountant can account a client's round, and a budget holds at least one."""
    if config.budget is not None:
        config.budget.check(event)
        return
    reason = create_accountant(config.privacy.accountant).unsupported(event)
    if reason is not None:
        raise LDPValueError(reason)


def planned_config(config: Config, flags: dict | None = None):
    """(config with a total budget's per-round settings, the round budget) as `ldpfed plan` gives
    them for the task (`Task.round_budget`), validated; (config, None) without a total budget."""
    config, round_budget = plan_rounds(config, flags, lambda total: of(config).round_budget(config, total))
    return (validated(config) if round_budget is not None else config), round_budget


def flower_run_config(flat: dict) -> Config:
    """The run config of `flwr run` (`[tool.flwr.app.config]` + `--run-config`, flattened) as both
    Flower halves read it: validated, and with a total `privacy.budget` turned into the plan's
    per-round settings and budget exactly as `ldpfed simulate --budget` does (`planned_config`),
    so the server's ledger and the clients' randomizers use the same plan. LDPValueError on a bad
    value, a budget included."""
    return _flower_run_config(tuple(sorted(flat.items())))


@lru_cache(maxsize=8)
def _flower_run_config(items: tuple) -> Config:
    """Cached: a node reads its run config on every message, and a plan is calibrated once."""
    config, _ = planned_config(validated(from_flat(dict(items), source="run config")))
    return config

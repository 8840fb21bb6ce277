"""Tasks as objects: one registry entry per task (mean, frequency, train) owning what differs by
task (`ldpfed.tasks.base.Task`); everything else asks the entry, never the task's name.
`ldpfed.tasks.run` gives a run's halves, layout, preflight and plan through the entry."""

from ldpfed.protocols.node_halves import without_seed
from ldpfed.tasks.base import Task
from ldpfed.tasks.registry import available, foreign_flags, foreign_options, get, of, resolve, validated
from ldpfed.tasks.run import (
    bind_data,
    check_accounting,
    client_half,
    flower_run_config,
    layout,
    node_half,
    planned_config,
    preflight,
    server_half,
)

__all__ = [
    "Task",
    "available",
    "bind_data",
    "check_accounting",
    "client_half",
    "flower_run_config",
    "foreign_flags",
    "foreign_options",
    "get",
    "layout",
    "node_half",
    "of",
    "planned_config",
    "preflight",
    "resolve",
    "server_half",
    "validated",
    "without_seed",
]

"""The task registry: one entry per task, and the rules derived from it."""

from __future__ import annotations

from ldpfed.config import Config, resolve_file
from ldpfed.registry import Registry
from ldpfed.tasks.base import Task
from ldpfed.tasks.frequency import FrequencyTask
from ldpfed.tasks.mean import MeanTask
from ldpfed.tasks.train import TrainTask

_REGISTRY: Registry[Task] = Registry("task", (MeanTask(), TrainTask(), FrequencyTask()))


def available() -> list[str]:
    return _REGISTRY.available()


def get(name: str) -> Task:
    return _REGISTRY.get_class(name)


def of(config: Config) -> Task:
    """The entry of the config's task."""
    return get(config.run.task)


def validated(config: Config) -> Config:
    """`config` checked: the checks every task shares, then its task's own; returns it."""
    config = config.validated()
    of(config).validate(config)
    return config


def resolve(config_file=None, flags: dict | None = None) -> Config:
    """Defaults < config file < flags that were given (None = not given), validated."""
    return validated(resolve_file(config_file, flags))


def foreign_options(name: str, scope: str = "options") -> list[str]:
    """The options that belong only to tasks other than `name` (a flag of another task is an error,
    not ignored); `scope`: "options" (the config's, as simulate takes them) or "compare_options"."""
    mine = set(getattr(get(name), scope))
    others = {option for entry in _REGISTRY.entries() if entry is not get(name) for option in getattr(entry, scope)}
    return sorted(others - mine)


def foreign_flags(name: str, given: dict, scope: str = "options") -> list[str]:
    """The flags of `foreign_options` that `given` has (None: not given)."""
    return ["--" + option.replace("_", "-") for option in foreign_options(name, scope) if given.get(option) is not None]

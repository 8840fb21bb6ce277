"""The node half of each task, by the task's name: what a node (a Flower node, a node of the local
engine) builds for the clients it hosts (ldpfed.protocols.nodes). The task entries of `ldpfed.tasks`
ask this registry for their nodes and their config's binding to the data; a Flower node asks it
directly, so a node's process imports the tasks' protocols only, not the task entries with the
plan's calibration, the diagnostics' predictors and the other commands' dependencies above them.

The train protocol (its trainers, the canaries with their audit and scipy.stats) is loaded when a
train node is built (`TRAIN_NODE`, by name as the CLI loads its commands): a tuple node never
imports it."""

from __future__ import annotations

import functools
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, replace

from ldpfed.config import Config
from ldpfed.protocols import frequency, mean
from ldpfed.protocols.nodes import ClientsNode
from ldpfed.registry import Registry

# A train node's world check and node, as "module:name" (pkgutil.resolve_name)
CHECK_WORLD = "ldpfed.protocols.canaries:check_world"
TRAIN_NODE = "ldpfed.protocols.train:TrainNode"


def without_seed(config: Config) -> Config:
    """The config a server, client or node half is given: the run seed removed (it never needs it)."""
    return replace(config, run=replace(config.run, seed=None))


def unbound(config: Config, data_seed: int) -> Config:
    """A task whose config does not depend on the data's shape: the config as it is."""
    return config


def tuple_node(public: Config, partitions: list[int], data_seed: int, secrets, client_of, batched) -> ClientsNode:
    """The clients of `partitions` of a tuple task: held as one batch built from the task's columns
    (`batched`), their halves (`client_of`) built only when one answers alone; else each client's
    half built now, the clients batched from their halves or answering one after another (each
    vectorized over its cohort of users). With node-reply sum the node adds their report sums up."""
    summing = public.federation.node_reply == "sum"

    @functools.cache
    def client(pid: int):
        return client_of(public, pid, data_seed, secrets[pid])

    batch = batched(public, partitions, data_seed, secrets, client)
    if batch is None:
        halves = {pid: client(pid) for pid in partitions}
        return ClientsNode(halves.__getitem__, summing=summing)
    return ClientsNode(client, summing=summing, batch=batch)


def train_node(public: Config, partitions: list[int], data_seed: int, secrets):
    """The node trains its clients at once (ldpfed.protocols.train.TrainNode, resolved by name:
    module docstring), in a world its canaries fit."""
    pkgutil.resolve_name(CHECK_WORLD)(public)
    return pkgutil.resolve_name(TRAIN_NODE)(public, partitions, data_seed, secrets)


@dataclass(frozen=True)
class NodeEntry:
    """A task's node: `bind(config, data_seed)` the config bound to the data's shape (0 = from the
    data), `build(public, partitions, data_seed, secrets)` the node half of `partitions`."""

    name: str
    bind: Callable[[Config, int], Config]
    build: Callable[..., object]

    def public(self, config: Config, data_seed: int) -> Config:
        """The config a half is given: bound to the data, without the run seed."""
        return without_seed(self.bind(config, data_seed))


_NODES: Registry[NodeEntry] = Registry(
    "task",
    (
        NodeEntry(
            "mean",
            mean.bound,
            functools.partial(tuple_node, client_of=mean.client_from_config, batched=mean.MeanClients.of_config),
        ),
        NodeEntry("train", unbound, train_node),
        NodeEntry(
            "frequency",
            frequency.bound,
            functools.partial(
                tuple_node, client_of=frequency.client_from_config, batched=frequency.FrequencyClients.of_config
            ),
        ),
    ),
)


def entry(name: str) -> NodeEntry:
    """The node entry of task `name`."""
    return _NODES.get_class(name)


def node_half(config: Config, partitions: list[int], data_seed: int, secrets: dict[int, int]):
    """The half of a node hosting `partitions` of the config's task, each client with its secret."""
    task = entry(config.run.task)
    return task.build(task.public(config, data_seed), partitions, data_seed, secrets)

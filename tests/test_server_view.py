"""Playing the server (issue 10, item 4; spec: federated.md, "Who knows the noise").

The server is honest-but-curious: it holds its config, its seeds, every broadcast and every reply.
Here it tries to re-draw a client's noise from every integer it holds (config values, its own
seed, the data seed, round numbers and partition ids) through every derivation the code offers
(`ldpfed.protocols.seeds` streams under any purpose/key shape, the old scheme
SeedSequence(seed, (1, partition, round)), and each integer taken as a run seed whose client
secrets it spawns), and subtracts it. With Laplace on every coordinate the noise is additive and
independent of the value, so a right guess recovers the clean value to float precision: the
positive control below does it with the client's real secret (what a leaked seed gave the review:
1e-17). Without the secret the best residual stays at the noise's scale.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.base import local_round
from ldpfed.protocols.mean import MeanClient
from ldpfed.protocols.nodes import ClientsNode, Layout, NodeSet
from ldpfed.protocols.session import World, client_half, server_half, without_seed
from ldpfed.protocols.train import privatizer

CLIENTS, ROUNDS = 3, 2


def observed_run(task: str):
    """A local-engine run; returns (everything the server saw, the clients' clean values, world)."""
    options = {
        "task": task,
        "clients": CLIENTS,
        "rounds": ROUNDS,
        "engine": "local",
        "seed": 11,
        "mechanism": "laplace",
        "epsilon": 4.0,
    }
    if task == "train":
        options.update({"report-dims": 650, "local-steps": 2, "clip": 0.05})
    else:
        options.update({"users": 60, "dims": 40})
    config = Config().with_options(options).validated()
    world = World.from_config(config)
    half = server_half(config, world.data, world.server)
    clients = {pid: client_half(config, pid, world.data, world.secret(pid)) for pid in range(CLIENTS)}
    seen = {
        "config": without_seed(config),
        "server_seed": world.server,
        "data_seed": world.data,
        "broadcasts": {},
        "replies": {},
    }
    clean = {}
    original = half.aggregate

    def aggregate(server_round, replies, failures):
        seen["replies"][server_round] = replies
        return original(server_round, replies, failures)

    half.aggregate = aggregate
    nodes = NodeSet(Layout(CLIENTS, CLIENTS), lambda pids: ClientsNode(lambda pid: _Spy(clients[pid], clean, pid)))
    for server_round in range(1, ROUNDS + 1):
        local_round(half, nodes, server_round)
    return config, seen, clean, world


class _Spy:
    """Keeps the client's clean value (the test's ground truth, never seen by the server)."""

    def __init__(self, half, clean, pid):
        self.half, self.clean, self.pid = half, clean, pid

    def reply(self, server_round, broadcast):
        reply, diagnostics = self.half.reply(server_round, broadcast)
        if isinstance(self.half, MeanClient):
            self.clean[server_round, self.pid] = self.half.values.sum(axis=0)
        else:
            self.clean[server_round, self.pid] = diagnostics["clean"]
        return reply, diagnostics


def integers_seen(config: Config, seen: dict) -> set[int]:
    values = {seen["server_seed"], seen["data_seed"], *range(0, ROUNDS + 1), *range(CLIENTS)}
    values.update(v for v in config.to_flat().values() if isinstance(v, int) and not isinstance(v, bool))
    return {int(v) for v in values if v >= 0}


def candidate_streams(candidate: int, pid: int, server_round: int):
    """Every stream the code can derive from one integer for this client and round."""
    for purpose in range(5):
        yield np.random.SeedSequence(candidate, spawn_key=(purpose, server_round))
        yield np.random.SeedSequence(candidate, spawn_key=(purpose, pid, server_round))  # the old scheme's shape
    secret = seeds.client_secrets(candidate, CLIENTS)[pid]  # the integer taken as a run seed
    yield seeds.stream(secret, seeds.NOISE, server_round)


def best_residual(task, config, seen, clean, world, candidates: set[int]) -> float:
    """RMS of (recovered - clean) over coordinates, for the best derivation, worst over clients."""
    worst = 0.0
    for (server_round, pid), truth in clean.items():
        reply = seen["replies"][server_round][pid]
        best = np.inf
        for candidate in candidates:
            for stream in candidate_streams(candidate, pid, server_round):
                if task == "train":
                    guess = privatizer(config).privatize(np.zeros_like(truth), np.random.default_rng(stream))
                    recovered = reply.arrays["update"] - guess
                else:
                    users = int(reply.metrics["users"])
                    mean_half = client_half(config, pid, world.data, 0)
                    zeros = MeanClient(
                        np.zeros((users, config.data.dims)), mean_half.mechanism, mean_half.report_dims, 0
                    )
                    noise = _sums_with(zeros, stream)
                    recovered = reply.arrays["total"] - noise
                best = min(best, float(np.sqrt(np.mean((recovered - truth) ** 2))))
        worst = max(worst, best)
    return worst


def _sums_with(client: MeanClient, stream) -> np.ndarray:
    from ldpfed.experiment import collect_sums

    return collect_sums(client.values, client.mechanism, client.report_dims, stream).total


@pytest.mark.parametrize("task", ["train", "mean"])
def test_the_server_cannot_redraw_a_clients_noise(task):
    config, seen, clean, world = observed_run(task)
    if task == "train":  # what the server half holds: the config without the run seed
        assert seen["config"] == server_half(config, world.data, world.server).config
    assert seen["config"].run.seed is None
    residual = best_residual(task, config, seen, clean, world, integers_seen(seen["config"], seen))
    if task == "train":
        noise_sd = config.training.clip * np.sqrt(2) * 2 * 650 / config.privacy.epsilon  # C * sd(Laplace(2d/eps))
    else:
        users = config.data.users // CLIENTS
        noise_sd = np.sqrt(users * 2) * 2 * config.data.dims / config.privacy.epsilon  # sum of `users` Laplace(2d/eps)
    assert residual > 0.5 * noise_sd, (residual, noise_sd)
    # Positive control: with a client's real secret the same attack recovers the clean values, up
    # to the safe Laplace's input rounding to its grid (K/J depends on t, so re-drawing on zeros
    # leaves a residual of a few grid steps, ~1e-5 of the noise sd here; the continuous sampler's
    # additive noise would cancel to float rounding).
    secrets = set(world.secrets.values())
    assert best_residual(task, config, seen, clean, world, secrets) < 1e-3 * max(1.0, noise_sd)

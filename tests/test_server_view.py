"""Playing the server (spec: federated.md, "Who knows the noise").

The server is honest-but-curious: it holds its config, its seeds, every broadcast and every reply.
Here it tries to re-draw a client's noise from every integer it holds (config values, its own
seed, the data seed, round numbers and partition ids) through every derivation the code offers
(`ldpfed.protocols.seeds` streams under any purpose/key shape, the old scheme
SeedSequence(seed, (1, partition, round)), and each integer taken as a run seed whose client
secrets it spawns), and subtracts it. With Laplace on every coordinate the noise is additive and
independent of the value, so a right guess recovers the clean value to float precision: the
positive control below does it with the client's real secret (what a leaked seed gave the review:
1e-17). Without the secret the best residual stays at the noise's scale.

The run seed is a small integer, so the server also finds it by enumeration (the candidate whose
data seed and server seed it was given) and tries every secret the code derives from it; the
clients' noise root is 128 bits of OS entropy, independent of it. A noise seed the user chose is
enumerable in turn (the last test), which is why such a run's privacy statement is qualified.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.mean import MeanClient
from ldpfed.protocols.nodes import ClientsNode, Layout, NodeSet, local_round
from ldpfed.protocols.session import World
from ldpfed.protocols.train import privatizer
from ldpfed.tasks import client_half, server_half, validated, without_seed

CLIENTS, ROUNDS = 3, 2


def observed_run(task: str, noise_seed: int | None = None):
    """A local-engine run (the clients' noise root: OS entropy, or `noise_seed`); returns (the config,
    everything the server saw, the clients' clean values, the world)."""
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
        options.update({"report-dims": 650, "local-steps": 2, "coordinate-clip": 0.05})
    else:
        options.update({"users": 60, "dims": 40})
    config = validated(Config().with_options(options))
    world = World.from_config(config) if noise_seed is None else World.from_config(config, noise_seed)
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
    from ldpfed.protocols.mean import collect_sums

    return collect_sums(client.values, client.mechanism, client.report_dims, stream).total


def noise_sd(task: str, config: Config) -> float:
    """The sd of the noise in one reply: C * sd(Laplace(2d/eps)) per coordinate of an update, or the
    sum of a cohort's `users` Laplace(2d/eps) per dimension."""
    if task == "train":
        return config.update_clip * np.sqrt(2) * 2 * 650 / config.privacy.epsilon
    return np.sqrt(config.data.users // CLIENTS * 2) * 2 * config.data.dims / config.privacy.epsilon


@pytest.mark.parametrize("task", ["train", "mean"])
def test_the_server_cannot_redraw_a_clients_noise(task):
    config, seen, clean, world = observed_run(task)
    if task == "train":  # what the server half holds: the config without the run seed
        assert seen["config"] == server_half(config, world.data, world.server).config
    assert seen["config"].run.seed is None
    residual = best_residual(task, config, seen, clean, world, integers_seen(seen["config"], seen))
    assert residual > 0.5 * noise_sd(task, config), (residual, noise_sd(task, config))
    # Positive control: with a client's real secret the same attack recovers the clean values, up
    # to the safe Laplace's input rounding to its grid (K/J depends on t, so re-drawing on zeros
    # leaves a residual of a few grid steps, ~1e-5 of the noise sd here; the continuous sampler's
    # additive noise would cancel to float rounding).
    secrets = set(world.secrets.values())
    assert best_residual(task, config, seen, clean, world, secrets) < 1e-3 * max(1.0, noise_sd(task, config))


# ---- enumerating the run seed ------------------------------------------------------------------
RUN_SEEDS = 10_000  # candidate run seeds the server tries (about 27 us each: 0.3 s in all)


def enumerated_run_seed(seen: dict) -> int | None:
    """The run seed, found as a server that knows the code finds it: the candidate whose data seed
    and server seed are the ones it was given."""
    for candidate in range(RUN_SEEDS):
        if seeds.data_seed(candidate) == seen["data_seed"] and seeds.server_seed(candidate) == seen["server_seed"]:
            return candidate
    return None


@pytest.mark.parametrize("task", ["train", "mean"])
def test_enumerating_the_run_seed_does_not_give_the_clients_noise(task):
    """Run seeds are small integers, so the server finds the run's from the data seed it holds; the
    clients' secrets must not follow from it. Had they been spawned from the run seed, this attack
    would recover every clean value up to the safe sampler's grid rounding (residual 1.5e-4 against
    a noise sd of 23 for the update, 0.009 against 126 for the cohort sums); from an independent
    noise root it leaves sqrt(2) noise sds (two independent noises)."""
    config, seen, clean, world = observed_run(task)
    run_seed = enumerated_run_seed(seen)
    assert run_seed == 11  # the run seed is public in effect: nothing secret may derive from it
    residual = best_residual(task, config, seen, clean, world, {run_seed})
    assert residual > 0.5 * noise_sd(task, config), (residual, noise_sd(task, config))


def looks_clipped(config: Config, update: np.ndarray, candidate: int) -> bool:
    """The server's test of a candidate noise root without any ground truth: client 0's update of
    round 1, with the noise that root gives subtracted, lies within the clipping bound [-C, C] (up
    to the safe sampler's grid rounding); a wrong root leaves noise of sd ~ 23 / C = 460 times C."""
    secret = seeds.client_secrets(candidate, 1)[0]  # client 0's secret (keys are (CLIENTS, pid))
    noise = privatizer(config).privatize(np.zeros_like(update), seeds.rng(secret, seeds.NOISE, 1))
    return bool(np.max(np.abs(update - noise)) <= 1.01 * config.update_clip)


def test_a_chosen_noise_seed_is_enumerable_which_is_why_its_run_is_qualified():
    """Positive control of the enumeration, and the reason a run with a user-chosen noise seed says
    "private against a server that does not know the noise seed": the server tries every small
    integer as the noise root and keeps the one under which client 0's reply looks like a clipped
    update; it finds the chosen seed and with it every client's clean values."""
    config, seen, clean, world = observed_run("train", noise_seed=7)
    update = seen["replies"][1][0].arrays["update"]
    found = [candidate for candidate in range(100) if looks_clipped(config, update, candidate)]
    assert found == [7]
    assert best_residual("train", config, seen, clean, world, set(found)) < 1e-3 * noise_sd("train", config)
    assert world.noise == seeds.USER_CHOSEN

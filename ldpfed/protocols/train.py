"""Federated LDP-SGD, client half and server half (spec: federated.md, Federated LDP-SGD;
analysis.md, federated rounds; recalibration.md for the aggregators).

Client (round r, from the broadcast global weights w): E local SGD steps on its partition with
minibatches from its secret stream (secret, MINIBATCHES, r), on one torch thread (reproducible
across engines); a node trains all its sampled clients of the round at once (`TrainNode`,
ldpfed.training.cohort; spec: scale.md), each with its own streams; update u = w_k - w; a
non-finite coordinate (diverged training) becomes 0 (NaN) or +-C (inf) so that a diverging client
still sends an ordinary privatized update and its data
cannot show up as a failure; u is clipped per coordinate to [-C, C] and perturbed
(`UpdatePrivatizer`) with the noise stream (secret, NOISE, r). With `perturbation = ldpvec` the
update is instead clipped to L2 norm C and perturbed by LDPVec (`DirectionalPrivatizer`,
directional.md), whose public inputs (the previous global step for centred windows, the Hadamard
rotation's seed from the server's seed) come in the broadcast; its noise, too, only from the
client's secret stream. The reply is the privatized update
and the sample count n_k (public by design: the FedAvg weight, docs/decisions.md). The clean
clipped update and the training loss are diagnostics: never sent (ldpfed.protocols.diagnostics).

Server: samples round(fraction * clients) partitions (>= 1) with its own seed, broadcasts w,
applies w <- w + aggregate of the replies (re-calibrated by `aggregator`, or Flower's FedAvg
through an injected `fedavg` function: ldpfed does not import Flower), evaluates on the test
split, and records each replying client's round cost in its ledger.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import ldpfed.aggregation as aggregation
import ldpfed.gradient_noise as gradient_noise
from ldpfed.accounting import not_private
from ldpfed.aggregation.updates import aggregate_updates
from ldpfed.config import FEDAVG, Config
from ldpfed.data.federated import load_federated
from ldpfed.directional.diagnostics import cosine, leading_energy_share
from ldpfed.directional.privatizer import REFERENCE, ROTATION_SEED, DirectionalPrivatizer
from ldpfed.protocols import canaries, seeds
from ldpfed.protocols.base import (
    BudgetedServer,
    ClientReply,
    InjectedFailure,
    RoundPlan,
    short_reason,
)
from ldpfed.protocols.nodes import NodeReply
from ldpfed.protocols.privacy import privacy_status
from ldpfed.training.cohort import DEVICES, CohortTrainer, batch_plan, chunk_size, padded_data, resolve_device
from ldpfed.training.local import evaluate, single_thread
from ldpfed.training.models import build_model, parameter_count
from ldpfed.training.noise_privatizer import NoisePrivatizer
from ldpfed.training.parameters import flatten, get_weights, set_weights, unflatten
from ldpfed.training.privatize import Privatizer, UpdatePrivatizer
from ldpfed.validation import LDPValueError

UPDATE, GLOBAL, NUM_EXAMPLES = "update", "global", "num-examples"
# Values per batched privatization call: its (rows, d) float64 temporaries stay at 32 MiB each
# (results do not depend on the blocks: each row is privatized from its own generator).
SENDS = "clipped model updates"  # what a client sends (the privacy record's words)
PRIVATIZE_BLOCK = 2**22


# ---- world: data, model, privatizer ---------------------------------------------------------
@functools.lru_cache(maxsize=2)
def _federated(name: str, clients: int, partition: str, data_seed: int, data_dir: str, classes: int, alpha: float):
    return load_federated(
        name,
        clients,
        partition=partition,
        seed=data_seed,
        data_dir=data_dir or None,
        classes_per_client=classes,
        alpha=alpha,
    )


def federated_data(config: Config, data_seed: int):
    """The partitioned data set, from the data seed (the same on the server and every client), over
    the real clients (canaries hold no data: ldpfed.protocols.canaries)."""
    data = config.data
    return _federated(
        config.data_name,
        canaries.real_clients(config),
        data.partition,
        data_seed,
        data.data_dir,
        data.classes_per_client,
        data.dirichlet_alpha,
    )


def new_model(config: Config, data_seed: int, init_seed: int = 0):
    data = federated_data(config, data_seed)
    return build_model(config.training.model, data.input_shape, data.num_classes, seed=init_seed)


@functools.lru_cache(maxsize=4)
def _privatizer(
    mechanism: str,
    epsilon: float,
    clip: float,
    delta: float | None,
    report_dims: int | None,
    directional: tuple | None = None,
):
    if directional is not None:  # LDPVec (ldpfed.directional): L2 clipping to C, directional noise
        beta, window, magnitude, rotation = directional
        return DirectionalPrivatizer(
            mechanism, epsilon, clip, delta, beta=beta, window=window, magnitude=magnitude, rotation=rotation
        )
    if mechanism in gradient_noise.available():  # L2 clipping to C and a vector noise (ldpfed.gradient_noise)
        return NoisePrivatizer(mechanism, epsilon=epsilon, delta=delta, clip=clip)
    return UpdatePrivatizer(mechanism, epsilon, clip, delta=delta, report_dims=report_dims)


def privatizer(config: Config) -> Privatizer:
    """Clip (and, unless mechanism is none, perturb) the update; built once per config."""
    training = config.training
    directional = (
        (training.beta, training.window, training.magnitude, training.rotation) if config.directional else None
    )
    return _privatizer(
        config.privacy.mechanism,
        config.privacy.epsilon,
        config.update_clip,
        config.delta_or_none,
        config.report_dims_or_none,
        directional,
    )


def privatize(
    update_privatizer: Privatizer, update: np.ndarray, rng: np.random.Generator, broadcast: dict
) -> np.ndarray:
    """One client's privatized update (d,), with the round's public inputs from the broadcast: the
    row a node's batched `privatize_rows` gives this client."""
    return update_privatizer.privatize_rows(np.asarray(update, dtype=np.float64)[None, :], [rng], broadcast)[0]


def check_setup(config: Config, data_seed: int):
    """Load the data, size the model and build the privatizer once, so bad options fail early;
    returns one client's round event (for the accounting checks of the preflight). Without torch:
    the model's size comes from the data's shapes (`parameter_count`, the same errors as building
    it), so a run's preflight, which Ray's start waits for, imports no torch."""
    check_device(config)
    return client_round_event(config, privatizer(config), update_size(config, data_seed))


def update_size(config: Config, data_seed: int) -> int:
    """d, the number of the model's parameters (a client's update), from the data's shapes."""
    data = federated_data(config, data_seed)
    return parameter_count(config.training.model, data.input_shape, data.num_classes)


def check_device(config: Config) -> None:
    """The nodes' torch device: `--device cuda` without a GPU is an LDPValueError, and so is a
    node asking Ray for GPUs (`gpus-per-node`) that would train on the CPU. Only those two ask
    torch (imported for it, seconds of CPU): any other device (cpu, auto) without GPUs per node
    passes whatever torch sees."""
    name, gpus = config.federation.device, config.federation.gpus_per_node
    if name not in DEVICES:
        resolve_device(name)  # its error
    if name != "cuda" and gpus <= 0:
        return
    device = resolve_device(name)
    if gpus > 0 and device.type != "cuda":
        raise LDPValueError(
            f"gpus-per-node {gpus:g} needs --device cuda (or auto with a GPU); this run trains on {device.type}"
        )


def client_round_event(config: Config, update_privatizer: Privatizer, dims: int):
    """The ledger event of one client's round (ldpfed.accounting): the privatizer's, unless the run
    sends something without accounted noise (`privacy_status`)."""
    status = privacy_status(config, SENDS)
    return update_privatizer.event(dims) if status.private else not_private("; ".join(status.reasons))


# ---- client half: a node's cohort of clients --------------------------------------------------
class TrainNode:
    """The clients of one node, trained together (spec: scale.md): for the sampled clients of a
    round, E SGD steps as one batched computation (ldpfed.training.cohort, chunks of at most
    `chunk` clients, on `device`), each client's minibatches from its stream (secret, MINIBATCHES,
    r) and its noise from (secret, NOISE, r), so a client's reply does not depend on its node.
    A chunk is privatized in one batched call (`privatize_rows`, one generator per client).
    A client in `fail-clients`, or a chunk whose training raised, fails alone; the others reply.
    With `node-reply sum` the node replies with sum_k n_k u_k over its replying clients and each
    client's count n_k (spec: scale.md, Design); each client's cosine to its clean update and
    leading-energy share then become node-side diagnostics (the server no longer sees u_k)."""

    def __init__(self, config: Config, partitions: list[int], data_seed: int, secrets: dict[int, int]) -> None:
        self.config, self.secrets = config, secrets
        data = federated_data(config, data_seed)
        first_canary = canaries.real_clients(config)
        self.partitions = [pid for pid in partitions if pid < first_canary]  # the clients with data
        self.canaries = [pid for pid in partitions if pid >= first_canary]
        self.row = {pid: row for row, pid in enumerate(self.partitions)}
        self.sizes = {pid: data.client_sizes[pid] for pid in self.partitions}
        if self.canaries:
            self.design = canaries.CanaryDesign.of(config, secrets[self.canaries[0]].design)
            self.sizes.update({pid: canaries.canary_count(secrets[pid], data.client_sizes) for pid in self.canaries})
        training = config.training
        self.width = min(training.batch_size, max(data.client_sizes))  # the federation's largest batch
        self.device = resolve_device(config.federation.device)
        model = new_model(config, data_seed)
        self.chunk = training.chunk_clients or chunk_size(model, data.input_shape, self.width)
        self.trainer = CohortTrainer(model, self.device, self.chunk)
        self.x = self.y = None  # a node of canaries only trains nothing
        if self.partitions:
            self.x, self.y = (t.to(self.device) for t in padded_data([data.client(pid) for pid in self.partitions]))
        self.privatizer = privatizer(config)
        self.summing = config.federation.node_reply == "sum"

    def reply(self, server_round: int, broadcast: dict, partitions: list[int] | None = None) -> NodeReply:
        answer = NodeReply()
        todo = []
        for pid in [*self.partitions, *self.canaries] if partitions is None else partitions:
            if pid in self.config.failing_partitions:
                answer.failures[pid] = short_reason(
                    f"InjectedFailure: injected failure of client {pid} in round {server_round}"
                )
            else:
                todo.append(pid)
        start = np.asarray(broadcast[GLOBAL], dtype=np.float64)
        total = np.zeros_like(start) if self.summing else None
        hosted_canaries = set(self.canaries)
        canary_chunk = [pid for pid in todo if pid in hosted_canaries]
        todo = [pid for pid in todo if pid not in hosted_canaries]
        with single_thread():
            for first in range(0, len(todo), self.chunk):
                chunk = todo[first : first + self.chunk]
                try:
                    updates, losses = self._train(chunk, start, server_round)
                except Exception as error:  # noqa: BLE001 - a failing chunk must not fail the node
                    answer.failures.update(dict.fromkeys(chunk, short_reason(f"{type(error).__name__}: {error}")))
                    continue
                self._privatize(chunk, updates, losses, server_round, broadcast, answer, total)
            if canary_chunk:  # no training: the design's updates, then the same clip and noise
                updates = self.design.updates(canary_chunk, start.size, self.config.update_clip, left_out=-1.0)
                losses = np.full(len(canary_chunk), np.nan)
                self._privatize(canary_chunk, updates, losses, server_round, broadcast, answer, total)
        if total is not None and answer.replies:
            answer.summed[UPDATE] = total
        return answer

    def _train(self, chunk: list[int], start: np.ndarray, server_round: int) -> tuple[np.ndarray, np.ndarray]:
        """The chunk's updates u_k = w_k - w (clients, d) float64 and mean training losses."""
        import torch

        training = self.config.training
        like = [p.detach().cpu().numpy() for p in self.trainer.model.parameters()]
        begin = [torch.as_tensor(array) for array in unflatten(start, like)]
        index, weight = batch_plan(
            [self.sizes[pid] for pid in chunk],
            [seeds.torch_seed(self.secrets[pid], seeds.MINIBATCHES, server_round) for pid in chunk],
            training.local_steps,
            training.batch_size,
            self.width,
        )
        rows = torch.tensor([self.row[pid] for pid in chunk])
        params, losses = self.trainer.train(begin, self.x, self.y, rows, index, weight, training.lr)
        weights = torch.cat([p.reshape(len(chunk), -1) for p in params], dim=1).cpu().numpy().astype(np.float64)
        return weights - start, losses.double().mean(dim=1).cpu().numpy()

    def _privatize(
        self,
        chunk: list[int],
        updates: np.ndarray,
        losses: np.ndarray,
        server_round: int,
        broadcast: dict,
        answer: NodeReply,
        total: np.ndarray | None,
    ) -> None:
        """The chunk privatized at once, each client with its own noise stream; the replies (or,
        summing, `total` += sum_k n_k u_k) and the diagnostics."""
        clip = self.config.update_clip
        updates = np.nan_to_num(updates, nan=0.0, posinf=clip, neginf=-clip)
        clean = self.privatizer.clip_only(updates)
        noisy, failed = self._noisy(chunk, updates, server_round, broadcast)
        answer.failures.update(failed)
        rows = [row for row, pid in enumerate(chunk) if pid not in failed]
        counts = np.array([self.sizes[chunk[row]] for row in rows], dtype=np.float64)
        if total is not None and rows:
            total += counts @ noisy[rows]
            cosines, shares = cosine(noisy[rows], clean[rows]), leading_energy_share(noisy[rows])
        for index, row in enumerate(rows):
            pid, count = chunk[row], int(counts[index])
            arrays = {} if total is not None else {UPDATE: noisy[row]}
            answer.replies[pid] = ClientReply(arrays, {NUM_EXAMPLES: count})
            answer.diagnostics[pid] = {"clean": clean[row], "loss": float(losses[row]), NUM_EXAMPLES: count}
            if total is not None:
                answer.diagnostics[pid].update(
                    cosine_to_clean=float(cosines[index]), leading_energy_share=float(shares[index])
                )

    def _noisy(self, chunk: list[int], updates: np.ndarray, server_round: int, broadcast: dict):
        """(privatized rows, {pid: reason} of the clients whose privatization failed). Batched calls
        of at most PRIVATIZE_BLOCK values; if one raises, each row again alone with a fresh generator
        of its stream, so that a failing client fails alone and the others' noise is what it would
        have been."""

        def rngs(pids):
            return [seeds.rng(canaries.noise_secret(self.secrets[pid]), seeds.NOISE, server_round) for pid in pids]

        step = max(1, PRIVATIZE_BLOCK // updates.shape[1])
        try:
            return np.concatenate(
                [
                    self.privatizer.privatize_rows(
                        updates[first : first + step], rngs(chunk[first : first + step]), broadcast
                    )
                    for first in range(0, len(chunk), step)
                ]
            ), {}
        except Exception:  # noqa: BLE001 - find the failing clients below
            pass
        noisy, failed = np.zeros_like(updates), {}
        for row, pid in enumerate(chunk):
            try:
                noisy[row] = self.privatizer.privatize_rows(updates[row : row + 1], rngs([pid]), broadcast)[0]
            except Exception as error:  # noqa: BLE001 - that client fails, not its node
                failed[pid] = short_reason(f"{type(error).__name__}: {error}")
        return noisy, failed


class TrainClient:
    """One client as a node of one (`TrainNode`, replying per client); `reply` raises the client's
    failure."""

    def __init__(self, config: Config, partition_id: int, data_seed: int, secret: int) -> None:
        from dataclasses import replace

        self.partition_id = partition_id
        per_client = replace(config, federation=replace(config.federation, node_reply="clients"))
        self.node = TrainNode(per_client, [partition_id], data_seed, {partition_id: secret})

    @property
    def privatizer(self):
        return self.node.privatizer

    def reply(self, server_round: int, broadcast: dict) -> tuple[ClientReply, dict]:
        if self.partition_id in self.node.config.failing_partitions:
            raise InjectedFailure(f"injected failure of client {self.partition_id} in round {server_round}")
        answer = self.node.reply(server_round, broadcast)
        if self.partition_id in answer.failures:
            raise RuntimeError(answer.failures[self.partition_id])
        return answer.replies[self.partition_id], answer.diagnostics[self.partition_id]


# ---- server half -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainOutcome:
    """What the server holds after a round: who replied, their counts, their privatized updates
    (None when the nodes sent sums: node-reply sum), the noisy weighted mean, the step."""

    partitions: list[int]
    sizes: np.ndarray
    updates: np.ndarray | None
    mean: np.ndarray
    step: np.ndarray


class TrainServer(BudgetedServer):
    """Strategy-shaped server half of federated LDP-SGD."""

    def __init__(
        self,
        config: Config,
        data_seed: int,
        server_seed: int,
        fedavg: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    ) -> None:
        self.config, self.server_seed, self.fedavg = config, server_seed, fedavg
        self.data = federated_data(config, data_seed)
        self.model = new_model(config, data_seed, seeds.torch_seed(server_seed, seeds.MODEL_INIT))
        self.like = get_weights(self.model)
        self.weights = flatten(self.like).astype(np.float64)
        self.privatizer = privatizer(config)
        # Worst case over coordinate values in [-C, C] of the per-coordinate noise variance v.
        self.noise_per_coordinate = float(np.mean(self.privatizer.per_coordinate_noise(self.weights.size)[1]))
        super().__init__(client_round_event(config, self.privatizer, self.weights.size), config.budget)
        self.previous_step = np.zeros_like(self.weights)  # LDPVec's public reference direction
        self.outcome: TrainOutcome | None = None

    def sample(self, server_round: int) -> list[int]:
        """round(fraction * clients) partitions (>= 1), without replacement, from the server's seed."""
        clients = self.config.federation.clients
        k = max(1, round(self.config.federation.fraction * clients))
        if k == clients:
            return list(range(clients))
        chosen = seeds.rng(self.server_seed, seeds.SAMPLING, server_round).choice(clients, size=k, replace=False)
        return sorted(int(pid) for pid in chosen)

    def configure_round(self, server_round: int) -> RoundPlan:
        return RoundPlan(
            self.admit(self.sample(server_round)), {GLOBAL: self.weights, **self.public_inputs(server_round)}
        )

    def public_inputs(self, server_round: int) -> dict:
        """LDPVec's public inputs of the round (directional.md): the previous global step (the
        centred windows' reference) and the Hadamard rotation's seed, from the server's seed.
        Neither is noise: the clients' noise comes from their secrets only."""
        needed = getattr(self.privatizer, "public_inputs", tuple)()
        inputs = {}
        if REFERENCE in needed:
            inputs[REFERENCE] = self.previous_step
        if ROTATION_SEED in needed:
            inputs[ROTATION_SEED] = seeds.stream(self.server_seed, seeds.ROTATION, server_round).generate_state(4)
        return inputs

    def aggregate(self, server_round: int, replies: dict, failures: dict[int, str], sums: dict | None = None) -> dict:
        """w <- w + (re-calibrated) aggregate; the predicted aggregate noise (analysis.md). `sums`:
        the nodes' count-weighted sums (node-reply sum; the replies then carry counts only), added
        in the order of their keys: the step is their total over sum_k n_k (mean and fedavg)."""
        metrics = {
            **self.round_record(replies, failures),
            "predicted_noise": 0.0,
            "predicted_noise_trace_worst_case": 0.0,
            "deviation_variance_trace": np.nan,
            "recalibration_shift_squared": np.nan,
        }
        self.outcome = None
        if not replies:
            return metrics
        pids = sorted(replies)
        sizes = np.array([replies[pid].metrics[NUM_EXAMPLES] for pid in pids], dtype=float)
        if sums:
            updates, recalibration = None, {}
            step = mean = self._summed_mean(sums, sizes, [replies[pid] for pid in pids])
        else:
            updates = np.stack([replies[pid].arrays[UPDATE] for pid in pids])
            step, recalibration = self._step(updates, sizes)
            mean = (sizes / sizes.sum()) @ updates
        self.weights = self.weights + step
        self.previous_step = step
        p = sizes / sizes.sum()
        # analysis.md, federated rounds: Var of sum_k p_k n_k per coordinate = sum_k p_k^2 v_k.
        metrics["predicted_noise"] = float(np.sum(p**2) * self.noise_per_coordinate)
        metrics["predicted_noise_trace_worst_case"] = metrics["predicted_noise"] * self.weights.size
        metrics.update(recalibration)
        self.charge(server_round, pids, self.privatizer.mechanism)
        self.outcome = TrainOutcome(pids, sizes, updates, mean, step)
        return metrics

    def _summed_mean(self, sums: dict[int, dict], sizes: np.ndarray, replies: list[ClientReply]) -> np.ndarray:
        """(sum over nodes of sum_k n_k u_k) / sum_k n_k: the FedAvg mean from summed replies."""
        if self.config.aggregation.aggregator not in ("mean", FEDAVG) or any(UPDATE in r.arrays for r in replies):
            raise LDPValueError(
                "summed node replies need --aggregator mean or fedavg and every node replying with "
                "its sum (node-reply sum)"
            )
        total = np.zeros_like(self.weights)
        for key in sorted(sums):
            total += sums[key][UPDATE]
        return total / sizes.sum()

    def _step(self, updates: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, dict]:
        config = self.config.aggregation
        if config.aggregator == FEDAVG:
            average = self.fedavg or (lambda u, n: (n / n.sum()) @ u)
            return average(updates, sizes), {}
        if not self.privatizer.per_value_noise_model:
            # no per-coordinate noise model to re-calibrate with: "mean" is the plain weighted mean
            # (config.py allows only mean and fedavg with the vector noises and ldpvec)
            return (sizes / sizes.sum()) @ updates, {}
        alpha = config.alpha if "alpha" in aggregation.accepted_options(config.aggregator) else None
        result = aggregate_updates(
            updates, sizes, config.aggregator, privatizer=self.privatizer, deviation=config.deviation, alpha=alpha
        )
        summary = result.summary()
        return result.estimate, {
            key: summary[key] for key in ("deviation_variance_trace", "recalibration_shift_squared")
        }

    def evaluate(self, server_round: int) -> dict:
        set_weights(self.model, unflatten(self.weights, self.like))
        loss, accuracy = evaluate(self.model, *self.data.test)
        return {"loss": float(loss), "accuracy": float(accuracy)}

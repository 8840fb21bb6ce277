"""ClientApp of the secure-aggregation trust model: SecAgg+ at client granularity (ldpfed.protocols.secagg)
from Flower's primitives: key pairs (`flwr.supercore.primitives.asymmetric`, ECDH on P-384), key
agreement and authenticated encryption (`flwr.common.secure_aggregation.crypto.symmetric_encryption`:
ECDH + HKDF, Fernet), Shamir sharing (`...crypto.shamir`). Every client a node hosts is one party
with its own keys, its own self mask and its own encoding (the claim is per client).

Stages of a round (one message per node each; `SecAggNode`):
1. keys: each client draws two key pairs (c: to encrypt shares, s: to agree pairwise masks) and
   sends their public halves.
2. shares: each client draws its self-mask seed b_u (OS entropy), splits b_u and its s secret key
   into Shamir shares (threshold t of its k neighbours) and encrypts one of each for every
   neighbour under their agreed c key: the server routes ciphertexts it cannot read.
3. mask: each client decrypts the shares addressed to it, encodes its vector with the distributed
   discrete Gaussian (ldpfed.protocols.ddgauss; rounding and noise from its own secret stream) and
   sends it masked by PRG(b_u) and the pairwise masks of its neighbours that shared. A client
   listed in `fail-clients` drops here, after its shares went out (the dropout the protocol
   recovers); a node all of whose clients are listed fails the message (a node crashing mid-round).
4. unmask: for each neighbour u that shared, a surviving client returns its share of b_u when u's
   masked vector arrived and its share of u's s key when u dropped, never both.

The secrets live in the node's `Context.state` (Flower keeps it across a node's messages), as
bytes; under `--engine local` a plain dict plays it.
"""

from __future__ import annotations

import os

import numpy as np
from flwr.app import ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.common.secure_aggregation.crypto.shamir import create_shares
from flwr.common.secure_aggregation.crypto.symmetric_encryption import decrypt, encrypt, generate_shared_key
from flwr.supercore.primitives.asymmetric import (
    bytes_to_private_key,
    bytes_to_public_key,
    generate_key_pairs,
    private_key_to_bytes,
    public_key_to_bytes,
)

import ldpfed.tasks as tasks
from clients.client_app import answering_app
from ldpfed.config import Config
from ldpfed.protocols import canaries, seeds
from ldpfed.protocols.secagg import SEED_BYTES, SecAggPlan, mask, neighbours, pair_sign, threshold
from wire.records import (
    CIPHER_KEYS,
    CIPHERTEXTS,
    DESTINATIONS,
    GRAPH_SEED,
    IDS,
    MASK_KEY,
    MASK_KEYS,
    MODEL,
    OWNERS,
    PARTICIPANTS,
    PARTITION_IDS,
    ROTATION_SEED,
    SECAGG_KEYS,
    SECAGG_MASK,
    SECAGG_SHARES,
    SECAGG_UNMASK,
    SECRET_KINDS,
    SELF_MASK,
    SERVER_ROUND,
    SHARED,
    SHARES,
    SOURCES,
    SURVIVORS,
    pair_seed,
    read_secagg,
    scalar_bytes,
    secagg_reply,
)

STATE = "secagg"  # the node's Context.state record
DROPPED = "injected failure (fail-clients): dropped after its shares went out, before masking"


def _pack(*parts: bytes) -> bytes:
    return b"".join(len(part).to_bytes(4, "little") + part for part in parts)


def _unpack(blob: bytes) -> list[bytes]:
    parts, at = [], 0
    while at < len(blob):
        size = int.from_bytes(blob[at : at + 4], "little")
        parts.append(blob[at + 4 : at + 4 + size])
        at += 4 + size
    return parts


class NodeDropped(RuntimeError):
    """Fault injection: a node whose clients all drop fails at the masking stage (Flower's error
    reply, as when a node crashes mid-round)."""


class SecAggNode:
    """A node's clients' side of the protocol (module docstring); `state`: a mapping of bytes and
    lists that outlives one message (the node's Context.state record)."""

    def __init__(
        self,
        config: Config,
        plan: SecAggPlan,
        data_seed: int,
        secrets: dict[int, int] | None,
        keep_sums: bool = False,
    ) -> None:
        self.config, self.plan, self.data_seed, self.secrets = config, plan, data_seed, secrets
        self.failing = config.failing_partitions
        # a simulation's diagnostic (engine local, where the harness plays the world): {round: the
        # integer sum of this node's encodings before the modulus}, to count the modular wraps; it
        # never goes into a reply, and a Flower node keeps none
        self.integer_sums: dict[int, np.ndarray] | None = {} if keep_sums else None

    def secret(self, pid: int, state) -> int:
        if self.secrets is not None:
            return self.secrets[pid]
        key = f"noise:{pid}"
        if key not in state:  # --fresh-noise: OS entropy, drawn once on this node
            state[key] = seeds.fresh_secret().to_bytes(16, "little")
        return int.from_bytes(state[key], "little")

    # --- stage 1 -------------------------------------------------------------------------------------
    def keys(self, request: dict, state) -> dict:
        cipher_keys, mask_keys = [], []
        for pid in request[PARTITION_IDS]:
            (c_secret, c_public), (s_secret, s_public) = generate_key_pairs(), generate_key_pairs()
            state[f"c:{pid}"], state[f"s:{pid}"] = private_key_to_bytes(c_secret), private_key_to_bytes(s_secret)
            cipher_keys.append(public_key_to_bytes(c_public))
            mask_keys.append(public_key_to_bytes(s_public))
        return {IDS: list(request[PARTITION_IDS]), CIPHER_KEYS: cipher_keys, MASK_KEYS: mask_keys}

    # --- stage 2 -------------------------------------------------------------------------------------
    def shares(self, request: dict, state) -> dict:
        publics = dict(zip(request[IDS], request[CIPHER_KEYS]))
        state["ids"], state["cipher-keys"], state["mask-keys"] = request[IDS], request[CIPHER_KEYS], request[MASK_KEYS]
        graph = neighbours(request[PARTICIPANTS], request[GRAPH_SEED])
        sources, destinations, ciphertexts = [], [], []
        for pid in request[PARTITION_IDS]:
            near = graph[pid]
            t = threshold(len(near))
            self_mask = os.urandom(SEED_BYTES)  # b_u: the client's own entropy, never the run's
            state[f"b:{pid}"] = self_mask
            scalar = scalar_bytes(bytes_to_private_key(state[f"s:{pid}"]))
            c_secret = bytes_to_private_key(state[f"c:{pid}"])
            pairs = zip(near, create_shares(self_mask, t, len(near)), create_shares(scalar, t, len(near)))
            for other, b_share, s_share in pairs:
                key = generate_shared_key(c_secret, bytes_to_public_key(publics[other]))
                plain = _pack(pid.to_bytes(8, "little"), other.to_bytes(8, "little"), b_share, s_share)
                sources.append(pid)
                destinations.append(other)
                ciphertexts.append(encrypt(key, plain))
        return {SOURCES: sources, DESTINATIONS: destinations, CIPHERTEXTS: ciphertexts}

    # --- stage 3 -------------------------------------------------------------------------------------
    def receive(self, request: dict, state) -> None:
        """Decrypt and keep the shares addressed to this node's clients (sender and addressee checked)."""
        publics = dict(zip(state["ids"], state["cipher-keys"]))
        held: dict[int, tuple[list, list, list]] = {pid: ([], [], []) for pid in request[PARTITION_IDS]}
        own = {pid: bytes_to_private_key(state[f"c:{pid}"]) for pid in request[PARTITION_IDS]}  # parsed once
        for source, destination, blob in zip(request[SOURCES], request[DESTINATIONS], request[CIPHERTEXTS]):
            key = generate_shared_key(own[destination], bytes_to_public_key(publics[source]))
            sender, addressee, b_share, s_share = _unpack(decrypt(key, blob))
            if int.from_bytes(sender, "little") != source or int.from_bytes(addressee, "little") != destination:
                raise ValueError(f"a share for client {destination} was not from client {source}")
            owners, b_shares, s_shares = held[destination]
            owners.append(source)
            b_shares.append(b_share)
            s_shares.append(s_share)
        for pid, (owners, b_shares, s_shares) in held.items():
            state[f"from:{pid}"], state[f"bs:{pid}"], state[f"ss:{pid}"] = owners, b_shares, s_shares

    def vectors(self, request: dict, pids: list[int], state) -> np.ndarray:
        """What each client encodes, as its task says (`Task.secure_sum_vectors`)."""
        weights = request.get(MODEL)
        return tasks.of(self.config).secure_sum_vectors(
            self.config, self.data_seed, pids, weights, request[SERVER_ROUND], lambda pid: self.secret(pid, state)
        )

    def masked(self, request: dict, state) -> tuple[dict, np.ndarray, dict[int, str]]:
        self.receive(request, state)
        pids = [pid for pid in request[PARTITION_IDS] if pid not in self.failing]
        failures = {pid: DROPPED for pid in request[PARTITION_IDS] if pid in self.failing}
        if not pids:
            return {IDS: []}, np.zeros((0, self.plan.ddg.padded_dims), dtype=np.int64), failures
        ddg, server_round = self.plan.ddg, request[SERVER_ROUND]
        rngs = [seeds.rng(canaries.noise_secret(self.secret(pid, state)), seeds.NOISE, server_round) for pid in pids]
        noisy = ddg.noisy_each(self.vectors(request, pids, state), request[ROTATION_SEED], rngs)
        if self.integer_sums is not None:
            self.integer_sums[server_round] = self.integer_sums.get(server_round, 0) + noisy.sum(axis=0)
        encoded = ddg.wrap(noisy)
        graph = neighbours(request[PARTICIPANTS], request[GRAPH_SEED])
        shared = set(request[SHARED])
        publics = dict(zip(state["ids"], state["mask-keys"]))
        dims, bits = ddg.padded_dims, ddg.bits
        for row, pid in enumerate(pids):
            total = ddg.wrap(encoded[row] + mask(state[f"b:{pid}"], dims, bits))
            s_secret = bytes_to_private_key(state[f"s:{pid}"])
            for other in graph[pid]:
                if other in shared:
                    seed = pair_seed(s_secret, bytes_to_public_key(publics[other]))
                    total = ddg.wrap(total + pair_sign(pid, other) * mask(seed, dims, bits))
            encoded[row] = total
        return {IDS: pids}, encoded, failures

    # --- stage 4 -------------------------------------------------------------------------------------
    def unmask(self, request: dict, state) -> dict:
        survivors = set(request[SURVIVORS])
        owners, kinds, shares = [], [], []
        for pid in request[PARTITION_IDS]:
            if pid not in survivors:
                continue  # a dropped client answers nothing
            for owner, b_share, s_share in zip(state[f"from:{pid}"], state[f"bs:{pid}"], state[f"ss:{pid}"]):
                owners.append(owner)
                kinds.append(SELF_MASK if owner in survivors else MASK_KEY)
                shares.append(b_share if owner in survivors else s_share)
        return {OWNERS: owners, SECRET_KINDS: kinds, SHARES: shares}

    def answer(self, stage: str, request: dict, state):
        """(fields, masked rows or None, failures) of a stage's request."""
        if stage == SECAGG_KEYS:
            return self.keys(request, state), None, {}
        if stage == SECAGG_SHARES:
            return self.shares(request, state), None, {}
        if stage == SECAGG_MASK:
            return self.masked(request, state)
        if stage == SECAGG_UNMASK:
            return self.unmask(request, state), None, {}
        raise ValueError(f"unknown secure-aggregation stage {stage!r}")


def make_secagg_client_app(
    config: Config, plan: SecAggPlan, data_seed: int, secrets: dict[int, int] | None
) -> ClientApp:
    app = answering_app(config.federation.clients)
    node = SecAggNode(config, plan, data_seed, secrets)

    def handler(stage: str):
        def handle(message: Message, context: Context) -> Message:
            if STATE not in context.state.config_records:
                context.state[STATE] = ConfigRecord()
            request = read_secagg(message.content)
            if stage == SECAGG_MASK and set(request[PARTITION_IDS]) <= node.failing:
                raise NodeDropped(f"every client of node {context.node_id} is in fail-clients")
            fields, masked, failures = node.answer(stage, request, context.state[STATE])
            return Message(secagg_reply(fields, masked, failures), reply_to=message)

        return handle

    for stage in (SECAGG_KEYS, SECAGG_SHARES, SECAGG_MASK, SECAGG_UNMASK):
        app.train(stage.split(".")[1])(handler(stage))
    return app

"""Secure aggregation of distributed discrete Gaussian encodings (spec: trust-models.md, Secure
aggregation with distributed discrete Gaussian noise): what the client half and the server half of
`--trust secagg` share, without Flower (the key agreement, Shamir sharing and encryption are
Flower's primitives, used by clients/secagg_app.py and server/secagg.py).

The protocol is SecAgg+ (Bell, Bonawitz, Gascon, Lepoint & Raykova, CCS 2020) for a semi-honest
server, at client granularity: every simulated client (partition id) is one party with its own
keys, its own self mask and its own encoding, even where one node hosts many.

- Graph (`neighbours`): the round's participants on a ring in the order of a public per-round
  permutation; each is joined to the k/2 nearest on either side (k = `degree(n)`, the whole set
  when k >= n - 1). Pairwise masks and Shamir shares go along these edges only.
- Masks (`mask`): a 32-byte seed expands to D values modulo 2^b by AES-256 in counter mode (a
  cryptographic PRG; Flower's `pseudo_rand_gen` folds its seed to 32 bits and draws from numpy's
  legacy generator, so ldpfed does not use it). Client u sends
  y_u = encode(x_u) + PRG(b_u) + sum_{v in N(u), v > u} PRG(s_uv) - sum_{v in N(u), v < u} PRG(s_uv) mod 2^b.
- Reconstruction: the server needs, for each client u whose shares went out, `threshold(k)` shares
  from u's surviving neighbours: of b_u for a client whose masked vector arrived, of u's mask key
  for one that dropped (never both: an honest client refuses to give both for one u).

`SecAggPlan` is the round's public setting (DDG encoder, rotation and graph seeds, degree,
threshold); `client_vectors` is what a client encodes under each task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ldpfed.config import Config
from ldpfed.protocols import seeds
from ldpfed.protocols.ddgauss import DistributedDiscreteGaussian
from ldpfed.protocols.mean import cohort_rows, cohort_sizes
from ldpfed.validation import LDPValueError

SEED_BYTES = 32  # a mask seed and a pairwise key: AES-256 keys
SECAGG_PURPOSE = 1  # (ROTATION, round, SECAGG_PURPOSE, what) under the server's public seed
ROTATION_KEY, GRAPH_KEY = 0, 1
NEIGHBOURHOOD = "SecAgg+ ring of k = min(n - 1, 2 ceil(log2 n) + 2) neighbours, threshold k // 2 + 1"


def degree(participants: int) -> int:
    """k: neighbours per client (even, O(log n), Bell et al.'s regime), all others for small n."""
    if participants < 2:
        raise LDPValueError(f"secure aggregation needs at least 2 clients per round, got {participants}")
    return min(participants - 1, 2 * math.ceil(math.log2(participants)) + 2)


def threshold(neighbour_count: int) -> int:
    """t: the shares that reconstruct a secret; more than half of a client's neighbours, so that
    two disjoint sets of neighbours never both reconstruct (the server cannot get b_u and the key)."""
    return neighbour_count // 2 + 1


def neighbours(participants, graph_seed: int) -> dict[int, list[int]]:
    """{client: its neighbours, ascending} on the round's ring (module docstring)."""
    ids = np.asarray(sorted(int(pid) for pid in participants), dtype=np.int64)
    n = ids.size
    k = degree(n)
    order = ids[np.random.default_rng(graph_seed).permutation(n)]
    offsets = np.concatenate([np.arange(1, k // 2 + 1), -np.arange(1, k - k // 2 + 1)])
    ring = order[(np.arange(n)[:, None] + offsets[None, :]) % n]  # (n, k)
    return {int(pid): sorted(set(int(v) for v in row)) for pid, row in zip(order, ring)}


def mask(seed: bytes, dims: int, bits: int) -> np.ndarray:
    """PRG(seed): `dims` uniform values in [0, 2^bits), int64, from AES-256-CTR keyed by `seed`."""
    if len(seed) != SEED_BYTES:
        raise LDPValueError(f"a mask seed has {SEED_BYTES} bytes, got {len(seed)}")
    encryptor = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor()
    stream = encryptor.update(bytes(8 * dims)) + encryptor.finalize()
    words = np.frombuffer(stream, dtype=np.uint64)
    return (words & np.uint64((1 << bits) - 1)).astype(np.int64)


def pair_sign(own: int, other: int) -> int:
    """+1 where the client adds the pair's mask (other > own), -1 where it subtracts it."""
    return 1 if other > own else -1


@dataclass(frozen=True)
class SecAggPlan:
    """The public setting of the run: the encoder (calibrated to the budget at `clients` shares),
    and the seeds of each round's rotation and graph, from the server's public seed."""

    ddg: DistributedDiscreteGaussian
    server_seed: int

    def rotation_seed(self, server_round: int) -> int:
        return self._seed(server_round, ROTATION_KEY)

    def graph_seed(self, server_round: int) -> int:
        return self._seed(server_round, GRAPH_KEY)

    def _seed(self, server_round: int, what: int) -> int:
        state = seeds.stream(self.server_seed, seeds.ROTATION, server_round, SECAGG_PURPOSE, what)
        return int(state.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))  # int64-safe for the wire

    def round_graph(self, server_round: int, participants) -> dict[int, list[int]]:
        return neighbours(participants, self.graph_seed(server_round))


def mean_clip(dims: int) -> float:
    """The mean task's clip c: sqrt(d), the largest norm of a cohort mean in [-1, 1]^d (no bias)."""
    return math.sqrt(dims)


def plan_for(config: Config, dims: int, clip: float, server_seed: int) -> SecAggPlan:
    """The encoder whose rounds of all `clients` shares meet (max-epsilon, max-delta) at the run's
    bits (one line if the bits, the clip or the rounds cannot: ldpfed.accounting.ddgauss)."""
    privacy = config.privacy
    if privacy.max_epsilon <= 0:
        raise LDPValueError("--trust secagg needs the run's per-client budget: give --max-epsilon (and --max-delta)")
    ddg = DistributedDiscreteGaussian.for_budget(
        dims,
        clip,
        privacy.bits,
        privacy.max_epsilon,
        config.delta_target,
        config.federation.clients,
        rounds=config.run.rounds,
    )
    return SecAggPlan(ddg, server_seed)


def cohort_means(values: np.ndarray, users: int, clients: int, partition_ids) -> np.ndarray:
    """Each listed client's cohort mean (its users' tuples averaged): the mean task's client vector."""
    sizes = cohort_sizes(users, clients, partition_ids)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.add.reduceat(values[cohort_rows(users, clients, partition_ids)], starts, axis=0) / sizes[:, None]

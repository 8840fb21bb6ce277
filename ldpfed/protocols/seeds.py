"""Who draws which randomness (spec: federated.md, "Who knows the noise"; reproducibility).

The harness of a simulation plays the world, not the server. It holds two roots:
- the run seed (`--seed`): the data seed (synthetic data, the partition of the users or samples
  over clients) and the server's seed (client sampling, model initialisation, evaluation) derive
  from it, so the same run seed reproduces the data and every choice of the server. It is a small
  integer and the server knows the code, so the server can find it (by enumerating candidates
  until `data_seed` matches the data seed it was given): nothing secret may derive from it;
- the noise root: 128 bits of OS entropy drawn for each run (`fresh_secret`), or a seed the user
  gives (`--noise-seed`: the root recorded by an earlier run, to replay it, or a chosen seed, which
  may be guessable: the run's privacy statement then says so). One secret per client (partition
  id) derives from it (`client_secrets`): the client's noise, report mask and minibatch order.
The server receives its own seed and the data seed only; neither depends on the noise root, so
enumerating the run seed gives it none of the clients' secrets. `--fresh-noise`, and a deployment
node without a `noise-seed` of its own, draw OS entropy per client instead.

Streams are `SeedSequence(seed, spawn_key=(purpose, *keys))`, keyed by purpose, round and (for
the server) nothing of Flower's random node ids, so scheduling never changes a result.
"""

from __future__ import annotations

import functools
import re
import secrets
from collections.abc import Mapping

import numpy as np

from ldpfed.samplers.streams import spawned_words
from ldpfed.validation import LDPValueError

# children of the run seed (DATA, SERVER) and of the noise root (CLIENTS, CENTRAL: the trusted
# server's noise under the central trust model, which no client and no analyst gets; CANARIES: the
# in-run audit's canary design, their directions and secret inclusion coins, which the server never gets)
DATA, SERVER, CLIENTS, CENTRAL, CANARIES = 0, 1, 2, 3, 4
# purposes under a client's secret: (purpose, round); CANARY_COUNT: a canary client's public count n_k
NOISE, MINIBATCHES, CANARY_COUNT = 0, 1, 2
# purposes under the canary design secret: the directions' root and the coins
DIRECTIONS, COINS = 0, 1
# purposes under the server's seed (ROTATION: LDPVec's public Hadamard signs, round-keyed)
SAMPLING, MODEL_INIT, ROTATION = 0, 1, 2
SECRET_BITS = 128  # OS entropy in a noise root or a fresh client secret

# where the clients' noise came from (a run summary's `noise_seed`)
OS_ENTROPY = "os-entropy"  # one noise root drawn from the OS for the run
FRESH_PER_CLIENT = "os-entropy-per-client"  # --fresh-noise: each client draws its own, recorded nowhere
USER_CHOSEN = "user-chosen"  # --noise-seed: given by the user, maybe guessable
NODES = "nodes"  # flwr run: each node's own (OS entropy unless its node config sets noise-seed)
QUALIFIED = "private against a server that does not know the noise seed"  # the statement for USER_CHOSEN


def _words(seed_sequence: np.random.SeedSequence) -> np.ndarray:
    """The four 32-bit words of a 128-bit seed drawn from `seed_sequence`, least significant first."""
    return seed_sequence.generate_state(4, dtype=np.uint32)


def _entropy(seed_sequence: np.random.SeedSequence) -> int:
    """A 128-bit integer seed drawn from `seed_sequence`."""
    return int(sum(int(word) << (32 * i) for i, word in enumerate(_words(seed_sequence))))


def data_seed(run_seed: int) -> int:
    return _entropy(np.random.SeedSequence(run_seed, spawn_key=(DATA,)))


def server_seed(run_seed: int) -> int:
    return _entropy(np.random.SeedSequence(run_seed, spawn_key=(SERVER,)))


def id_array(partitions) -> np.ndarray:
    """Partition ids as an int64 array; a range by `np.arange` (numpy converts a range element by
    element: ~7 ms per 10^5 ids, twice a round in a strategy's grouping)."""
    if isinstance(partitions, range):
        return np.arange(partitions.start, partitions.stop, partitions.step, dtype=np.int64)
    return np.asarray(partitions if isinstance(partitions, np.ndarray) else list(partitions), dtype=np.int64)


def ascending_ids(partitions) -> np.ndarray:
    """`partitions` as ascending, distinct int64 ids (sorted only when they are not already)."""
    pids = id_array(partitions)
    return pids if pids.size < 2 or bool(np.all(pids[1:] > pids[:-1])) else np.unique(pids)


class ClientSecrets(Mapping):
    """{partition id: 128-bit secret} held as one (clients, 4) array of the secrets' 32-bit words,
    least significant first (`words`): a node's batched clients premix their streams from the
    words (`StreamKeys.from_words`) and no Python int is made per client unless one is asked for
    (`secrets[pid]`, as `_entropy` gives it). `pids`: the partition ids of the rows, ascending."""

    def __init__(self, pids, words: np.ndarray) -> None:
        self.pids = np.asarray(pids, dtype=np.int64)
        self.words = np.asarray(words, dtype="<u4").reshape(self.pids.size, 4)
        if self.pids.size > 1 and np.any(np.diff(self.pids) <= 0):
            raise LDPValueError("ClientSecrets: partition ids must be ascending and distinct")
        contiguous = self.pids.size and self.pids[-1] - self.pids[0] == self.pids.size - 1
        self._first = int(self.pids[0]) if contiguous else None  # row = pid - first

    @classmethod
    def fresh(cls, partitions) -> ClientSecrets:
        """OS entropy (`SECRET_BITS` bits each, from the OS's cryptographic source) for `partitions`."""
        pids = ascending_ids(partitions)
        return cls(pids, np.frombuffer(secrets.token_bytes(16 * pids.size), dtype="<u4"))

    def rows(self, partitions) -> np.ndarray:
        """The rows of `partitions` (KeyError for one not held)."""
        asked = np.asarray(partitions, dtype=np.int64).reshape(-1)
        if self._first is not None:  # a contiguous block
            rows = asked - self._first
            held = (rows >= 0) & (rows < self.pids.size)
        else:
            rows = np.minimum(np.searchsorted(self.pids, asked), max(self.pids.size - 1, 0))
            held = self.pids[rows] == asked if self.pids.size else np.zeros(asked.shape, dtype=bool)
        if not np.all(held):
            raise KeyError(int(asked[~held][0]))
        return rows

    def words_of(self, partitions) -> np.ndarray:
        """(len(partitions), 4): the words of `partitions`' secrets."""
        return self.words[self.rows(partitions)]

    def restricted(self, partitions) -> ClientSecrets:
        """The secrets of `partitions` only (ascending)."""
        pids = ascending_ids(partitions)
        return ClientSecrets(pids, self.words_of(pids))

    def __getitem__(self, pid) -> int:
        """The secret of `pid` as an int (`_entropy`'s: its words, least significant first)."""
        try:
            pid = int(pid)
        except (TypeError, ValueError) as error:
            raise KeyError(pid) from error
        if self._first is not None and 0 <= pid - self._first < self.pids.size:  # one client: no array work
            row = pid - self._first
        else:
            row = int(self.rows([pid])[0])
        return int.from_bytes(self.words[row].tobytes(), "little")

    def __iter__(self):
        return iter(self.pids.tolist())

    def __len__(self) -> int:
        return self.pids.size

    def __contains__(self, pid) -> bool:
        try:
            self.rows([int(pid)])
        except (KeyError, TypeError, ValueError):
            return False
        return True


class SpawnedSecrets(ClientSecrets):
    """The secrets of clients 0..clients-1 spawned from a noise root: client pid's secret is
    `_entropy(SeedSequence(noise_root, spawn_key=(CLIENTS, pid)))`, computed in one compiled pass
    (`spawned_words`) for the rows asked: a node's block (`restricted`) spawns that block only
    (a lookup by id, `secrets[pid]`, spawns every row once), and a pickle carries the root and
    the count, not 16 bytes per client (the ClientApp that hands a simulation's nodes their
    secrets is pickled with every message)."""

    def __init__(self, noise_root: int, clients: int) -> None:
        if clients >= 1 << 32:  # a partition id of one 32-bit word: every key [CLIENTS, pid]
            raise LDPValueError(f"at most 2^32 - 1 clients, got {clients}")
        self.noise_root, self.pids, self._first = int(noise_root), np.arange(clients, dtype=np.int64), 0

    @functools.cached_property
    def words(self) -> np.ndarray:
        return self._spawned(self.pids)

    def _spawned(self, pids: np.ndarray) -> np.ndarray:
        keys = np.column_stack([np.full(pids.size, CLIENTS, dtype=np.uint32), pids.astype(np.uint32)])
        return spawned_words(self.noise_root, keys)

    def words_of(self, partitions) -> np.ndarray:
        if "words" in self.__dict__:  # spawned already
            return super().words_of(partitions)
        asked = np.asarray(partitions, dtype=np.int64).reshape(-1)
        return self._spawned(self.pids[self.rows(asked)])

    def __reduce__(self):
        return SpawnedSecrets, (self.noise_root, self.pids.size)


def client_secrets(noise_root: int, clients: int) -> SpawnedSecrets:
    """{partition id: 128-bit secret} spawned from the noise root (`SpawnedSecrets`); handed to
    the nodes outside the protocol. (A noise root equal to the run seed gives the secrets of runs
    made before the two roots were separated.)"""
    return SpawnedSecrets(noise_root, clients)


def central_secret(noise_root: int) -> int:
    """The central trust model's server noise secret, spawned from the noise root (never from the
    run seed, which an analyst can enumerate)."""
    return _entropy(np.random.SeedSequence(noise_root, spawn_key=(CENTRAL,)))


def canary_secret(noise_root: int) -> int:
    """The in-run audit's canary design secret (directions and inclusion coins), spawned from the
    noise root: never from the run seed, and one-way, so that the record of the canaries does not
    reveal the root."""
    return _entropy(np.random.SeedSequence(noise_root, spawn_key=(CANARIES,)))


def qualification(private: bool, noise: str) -> str | None:
    """A private run whose noise derives from a seed the user chose holds only against a party that
    cannot guess that seed (it may be a small, enumerable integer)."""
    return QUALIFIED if private and noise == USER_CHOSEN else None


def fresh_secret() -> int:
    """OS entropy (`SECRET_BITS` bits, from the OS's cryptographic source)."""
    return secrets.randbits(SECRET_BITS)


def parse_noise_seed(text: str, flag: str = "--noise-seed") -> int:
    """A noise seed as given by the user: a decimal integer, or hexadecimal with 0x (as `format_noise_seed`
    writes a run's noise root to its `noise_secret` file)."""
    value = str(text).strip().lower()
    if not re.fullmatch(r"0x[0-9a-f]+|[0-9]+", value):
        raise LDPValueError(
            f"{flag} must be a non-negative integer, decimal or hexadecimal with 0x (as in a run's noise_secret "
            f"file), got {text!r}"
        )
    return int(value, 16 if value.startswith("0x") else 10)


def format_noise_seed(noise_root: int) -> str:
    """The noise root as the `noise_secret` file holds it and `parse_noise_seed` reads it back."""
    return f"0x{noise_root:0{SECRET_BITS // 4}x}"


def stream(seed: int, purpose: int, *keys: int) -> np.random.SeedSequence:
    """The seed sequence of one purpose (and round / client) under `seed`."""
    return np.random.SeedSequence(seed, spawn_key=(purpose, *keys))


def rng(seed: int, purpose: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng(stream(seed, purpose, *keys))


def torch_seed(seed: int, purpose: int, *keys: int) -> int:
    """A 32-bit seed for torch.Generator from the same stream."""
    return int(stream(seed, purpose, *keys).generate_state(1)[0])

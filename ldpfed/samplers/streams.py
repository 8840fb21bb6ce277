"""Many clients' own noise streams at once, for batched kernels (spec: scale.md).

A client's noise in round r comes from `default_rng(SeedSequence(secret, spawn_key=key))` (numpy's
PCG64 seeded by the SeedSequence of its secret; ldpfed.protocols.seeds). Building one Generator
per client costs ~10 us of Python (the SeedSequence's hashing, the BitGenerator object), the whole
round's work when a node hosts 10^5 one-user clients. `StreamKeys.streams` computes the same PCG64
states for all rows in one compiled pass (numpy's SeedSequence mixing and PCG64 seeding, bit for
bit: tests/test_row_streams.py) and keeps them in one (rows, 4) array; `handles` points the
samplers' kernels (ldpfed.samplers.words: `next_word`, `draw_words`) at row i's state, so a batched
call draws row i's words from row i's stream exactly as the Generator would. Nothing here leaves
the node: the states derive from the clients' secrets, which the server never holds.
"""

from __future__ import annotations

import numpy as np

from ldpfed.samplers import words as _words
from ldpfed.samplers.words import UNIT, compiled, kernel, next_word

POOL = 4  # numpy's SeedSequence pool size, in 32-bit words
MASK32 = 0xFFFFFFFF
# numpy's SeedSequence constants, as uint64 scalars (the kernels' arithmetic stays unsigned)
_MASK, _SHIFT, _ONE = np.uint64(MASK32), np.uint64(16), np.uint64(1)
INIT_A, MULT_A, INIT_B, MULT_B = (np.uint64(c) for c in (0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED))
MIX_MULT_L, MIX_MULT_R = np.uint64(0xCA01F9DD), np.uint64(0x4973F715)


def uint32_words(value: int) -> list[int]:
    """A non-negative integer as numpy's SeedSequence splits it: 32-bit words, least significant
    first ([0] for 0)."""
    words = [value & MASK32]
    value >>= 32
    while value:
        words.append(value & MASK32)
        value >>= 32
    return words


def entropy_words(secrets) -> tuple[np.ndarray, np.ndarray]:
    """(rows, POOL) uint32 words of each secret, zero-padded (what SeedSequence pads to with a spawn
    key), and a boolean array of the secrets too long for POOL words (>= 2^128), which
    `StreamKeys` seeds through numpy instead."""
    secrets = [int(secret) for secret in secrets]
    limit = 1 << (32 * POOL)
    long = np.fromiter((secret >= limit for secret in secrets), dtype=bool, count=len(secrets))
    packed = b"".join((0 if secret >= limit else secret).to_bytes(4 * POOL, "little") for secret in secrets)
    words = np.frombuffer(packed, dtype="<u4").reshape(len(secrets), POOL).astype(np.uint32)
    return words, long


@kernel(inline=True)
def _hashmix(value, hash_const):
    """numpy's SeedSequence hashmix on 32-bit values held in uint64: (new value, new constant)."""
    value = (value ^ hash_const) & _MASK
    hash_const = (hash_const * MULT_A) & _MASK
    value = (value * hash_const) & _MASK
    return value ^ (value >> _SHIFT), hash_const


@kernel(inline=True)
def _mix(x, y):
    result = (MIX_MULT_L * x - MIX_MULT_R * y) & _MASK
    return result ^ (result >> _SHIFT)


@kernel
def _premix(entropy, mixers) -> None:
    """mixers[i] = numpy's SeedSequence pool after mixing entropy[i]'s POOL words (mix_entropy's
    first two loops: the part that does not depend on the spawn key)."""
    width = entropy.shape[1]
    for row in range(entropy.shape[0]):
        hash_const = INIT_A
        for i in range(width):
            mixers[row, i], hash_const = _hashmix(np.uint64(entropy[row, i]), hash_const)
        for source in range(width):
            for target in range(width):
                if source != target:
                    hashed, hash_const = _hashmix(mixers[row, source], hash_const)
                    mixers[row, target] = _mix(mixers[row, target], hashed)


@kernel
def _seed_pcg64(mixers, key, hash_start, states) -> None:
    """states[i] = (state low, high, inc low, high) of PCG64 seeded by SeedSequence(entropy[i],
    spawn_key=key) from the premixed pool: mix_entropy's last loop (the key's words),
    generate_state(4, uint64) and pcg64_set_seed, row by row. The hash constants do not depend on
    the data and the key is every row's: the key's hashed words and generate_state's constants are
    computed once, before the rows (the same arithmetic, in numpy's order)."""
    width, extra = mixers.shape[1], key.shape[0]
    hashed = np.zeros(extra * width, dtype=np.uint64)  # the key's words as mix_entropy hashes them
    hash_const = hash_start
    for source in range(extra):
        for target in range(width):
            hashed[source * width + target], hash_const = _hashmix(np.uint64(key[source]), hash_const)
    before, after = np.zeros(2 * width, dtype=np.uint64), np.zeros(2 * width, dtype=np.uint64)
    hash_const = INIT_B
    for i in range(2 * width):  # generate_state's constants: xor with `before`, multiply by `after`
        before[i] = hash_const
        hash_const = (hash_const * MULT_B) & _MASK
        after[i] = hash_const
    mixer = np.zeros(width, dtype=np.uint64)
    state = np.zeros(2 * width, dtype=np.uint64)
    half = np.uint64(32)
    for row in range(mixers.shape[0]):
        for i in range(width):
            mixer[i] = mixers[row, i]
        for source in range(extra):
            for target in range(width):
                mixer[target] = _mix(mixer[target], hashed[source * width + target])
        for i in range(2 * width):
            value = (((mixer[i % width] ^ before[i]) & _MASK) * after[i]) & _MASK
            state[i] = value ^ (value >> _SHIFT)
        seed_high, seed_low = state[0] | (state[1] << half), state[2] | (state[3] << half)
        sequence_high, sequence_low = state[4] | (state[5] << half), state[6] | (state[7] << half)
        inc_low = (sequence_low << _ONE) | _ONE
        inc_high = (sequence_high << _ONE) | (sequence_low >> np.uint64(63))
        low = inc_low + seed_low  # state = inc + seed (mod 2^128), then one step
        high = inc_high + seed_high + np.uint64(low < inc_low)
        low, high, _ = _words._pcg64_step(low, high, inc_low, inc_high)  # swapped in by compiled()
        states[row, 0], states[row, 1], states[row, 2], states[row, 3] = low, high, inc_low, inc_high


@kernel
def _spawned_words(mixer, hash_start, keys, out) -> None:
    """out[i] = generate_state(out.shape[1], uint32) of SeedSequence(entropy, spawn_key=keys[i]),
    from the pool `mixer` that `premixed(entropy)` gives: mix_entropy's last loop over row i's key
    words, then generate_state (one 32-bit word per output word)."""
    width = mixer.shape[0]
    pool = np.zeros(width, dtype=np.uint64)
    for row in range(keys.shape[0]):
        hash_const = hash_start
        for i in range(width):
            pool[i] = mixer[i]
        for source in range(keys.shape[1]):
            for target in range(width):
                hashed, hash_const = _hashmix(np.uint64(keys[row, source]), hash_const)
                pool[target] = _mix(pool[target], hashed)
        hash_const = INIT_B
        for i in range(out.shape[1]):
            value = (pool[i % width] ^ hash_const) & _MASK
            hash_const = (hash_const * MULT_B) & _MASK
            value = (value * hash_const) & _MASK
            out[row, i] = value ^ (value >> _SHIFT)


def premixed(entropy: int) -> tuple[np.ndarray, np.uint64]:
    """numpy's SeedSequence pool after mixing the words of `entropy` (zero-padded to POOL, as with a
    spawn key; the words beyond POOL mixed in too), and the hash constant it leaves: everything
    of mix_entropy but the spawn key's words, in plain integer arithmetic (one entropy)."""

    def hashmix(value: int, hash_const: int) -> tuple[int, int]:
        value = (value ^ hash_const) & MASK32
        hash_const = (hash_const * int(MULT_A)) & MASK32
        value = (value * hash_const) & MASK32
        return value ^ (value >> 16), hash_const

    def mix(x: int, y: int) -> int:
        result = (int(MIX_MULT_L) * x - int(MIX_MULT_R) * y) & MASK32
        return result ^ (result >> 16)

    words = uint32_words(int(entropy))
    words += [0] * (POOL - len(words))
    pool, hash_const = [0] * POOL, int(INIT_A)
    for i in range(POOL):
        pool[i], hash_const = hashmix(words[i], hash_const)
    for source in range(POOL):
        for target in range(POOL):
            if source != target:
                hashed, hash_const = hashmix(pool[source], hash_const)
                pool[target] = mix(pool[target], hashed)
    for word in words[POOL:]:
        for target in range(POOL):
            hashed, hash_const = hashmix(word, hash_const)
            pool[target] = mix(pool[target], hashed)
    return np.array(pool, dtype=np.uint64), np.uint64(hash_const)


def spawned_words(entropy: int, keys: np.ndarray, count: int = POOL) -> np.ndarray:
    """(rows, count) uint32: row i is `SeedSequence(entropy, spawn_key=key_i).generate_state(count)`,
    `keys` holding each key's 32-bit words (`uint32_words` of each part, joined; every key the same
    number of words), in one compiled pass: the spawn of many children of one seed (e.g. one
    secret per client from the noise root) without a SeedSequence object per child."""
    keys = np.ascontiguousarray(keys, dtype=np.uint32)
    out = np.empty((keys.shape[0], int(count)), dtype=np.uint32)
    if out.size:
        mixer, hash_start = premixed(entropy)
        compiled()
        _spawned_words(mixer, hash_start, keys, out)
    return out


class StreamKeys:
    """The clients' secrets, premixed once (`_premix`); `streams(spawn_key)` gives each client's
    stream of one purpose and round (`RowStreams`), the key-independent hashing not repeated."""

    # hash constant after mix_entropy's first two loops: POOL + POOL (POOL - 1) hashmix calls
    HASH_START = np.uint64((0x43B0D7E5 * pow(0x931E8875, POOL * POOL, 1 << 32)) & MASK32)

    def __init__(self, secrets) -> None:
        secrets = [int(secret) for secret in secrets]
        words, self._long = entropy_words(secrets)
        self._long_secrets = {int(row): secrets[row] for row in np.flatnonzero(self._long)}
        self._premixed(words)

    @classmethod
    def from_words(cls, words: np.ndarray) -> StreamKeys:
        """The keys of secrets given as their (rows, POOL) 32-bit words, least significant first
        (secrets below 2^128; e.g. `ldpfed.protocols.seeds.ClientSecrets.words`): no Python int per row."""
        keys = cls.__new__(cls)
        words = np.asarray(words, dtype=np.uint32).reshape(-1, POOL)
        keys._long, keys._long_secrets = np.zeros(words.shape[0], dtype=bool), {}
        keys._premixed(words)
        return keys

    def _premixed(self, words: np.ndarray) -> None:
        self.mixers = np.zeros(words.shape, dtype=np.uint64)
        if words.shape[0]:
            compiled()
            _premix(np.ascontiguousarray(words), self.mixers)

    def __len__(self) -> int:
        return self.mixers.shape[0]

    def take(self, rows) -> StreamKeys:
        """The keys of `rows` only."""
        keys = StreamKeys.__new__(StreamKeys)
        keys.mixers, keys._long = self.mixers[rows], self._long[rows]
        index = np.arange(len(self))[rows]
        keys._long_secrets = {int(new): self._long_secrets[int(index[new])] for new in np.flatnonzero(keys._long)}
        return keys

    def streams(self, spawn_key: tuple[int, ...], into: RowStreams | None = None) -> RowStreams:
        """Row i: the PCG64 state of default_rng(SeedSequence(secret_i, spawn_key=spawn_key)).
        `into`: streams of as many rows that their caller is done with (e.g. the last round's),
        seeded again in place and returned: their states and kernel handles are not allocated
        and filled anew (at 10^5 rows, page faults cost more than seeding them)."""
        key = np.array([word for part in spawn_key for word in uint32_words(int(part))], dtype=np.uint32)
        reuse = into is not None and len(into) == len(self)
        states = into.states if reuse else np.empty((len(self), 4), dtype=np.uint64)
        if len(self):
            compiled()
            _seed_pcg64(self.mixers, key, self.HASH_START, states)
        for row, secret in self._long_secrets.items():  # secrets beyond 128 bits: rare, through numpy
            generator = np.random.PCG64(np.random.SeedSequence(secret, spawn_key=spawn_key))
            states[row] = pcg64_words(generator.state["state"])
        return into if reuse else RowStreams(states)


@kernel
def _row_uniforms(handles, out) -> None:
    """out[i, :] = the next uniforms (word >> 11) 2^-53 of row i's stream (Generator.random())."""
    for row in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[row, j] = (next_word(handles[row]) >> np.uint64(11)) * UNIT


class RowStreams:
    """Row i's PCG64 state (numpy's layout: state low, high, increment low, high) and the kernels'
    handle to it: row i draws what `default_rng(SeedSequence(secret_i, spawn_key=key))` would."""

    def __init__(self, states: np.ndarray) -> None:
        self.states = np.ascontiguousarray(states, dtype=np.uint64)
        rows = self.states.shape[0]
        # numpy's pcg64 state struct starts with a pointer to {state, inc}: one pointer per row
        self._pointers = self.states.ctypes.data + 32 * np.arange(rows, dtype=np.uint64)
        self.handles = np.zeros((rows, 3), dtype=np.uintp)
        self.handles[:, 1] = self._pointers.ctypes.data + 8 * np.arange(rows, dtype=np.uint64)
        self.handles[:, 2] = 1  # PCG64: drawn inline by the kernels

    def __len__(self) -> int:
        return self.states.shape[0]

    def take(self, rows) -> RowStreams:
        """The streams of `rows` (copies: drawing from them leaves these untouched)."""
        return RowStreams(self.states[rows])

    def uniforms(self, count: int) -> np.ndarray:
        """(rows, count): each row's next `count` uniforms, as `Generator.random(count)`."""
        out = np.empty((len(self), int(count)))
        if out.size:
            compiled()
            _row_uniforms(self.handles, out)
        return out

    def generator(self, row: int) -> np.random.Generator:
        """A numpy Generator continuing row `row`'s stream (for samplers without a compiled pass)."""
        low, high, inc_low, inc_high = (int(word) for word in self.states[row])
        bit_generator = np.random.PCG64()
        bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": low | (high << 64), "inc": inc_low | (inc_high << 64)},
            "has_uint32": 0,
            "uinteger": 0,
        }
        return np.random.Generator(bit_generator)

    def advance_to(self, generators) -> None:
        """Row i takes the state of `generators[i]` (those made by `generator`, after drawing)."""
        for row, generator in enumerate(generators):  # the fallback of samplers without a kernel
            self.states[row] = pcg64_words(generator.bit_generator.state["state"])


def pcg64_words(state: dict) -> tuple[int, int, int, int]:
    """numpy's PCG64 state dict {'state', 'inc'} as (state low, high, inc low, high)."""
    mask = (1 << 64) - 1
    return state["state"] & mask, state["state"] >> 64, state["inc"] & mask, state["inc"] >> 64

"""The distributed discrete Gaussian under secure aggregation: the client's encoder and the
server's decoder (spec: trust-models.md, Secure aggregation with distributed discrete Gaussian
noise; Kairouz, Liu & Steinke, ICML 2021, Algorithms 1-2). Accounting and parameters:
ldpfed.accounting.ddgauss.

Client (`encode`): clip x to L2 norm c; rotate, R x = H diag(s) x / sqrt(D) with x zero-padded to
D = the next power of two (ldpfed.directional.rotation; the signs s from the round's PUBLIC
rotation seed, the same for every client); scale by 1/gamma; round every coordinate to floor or
ceil with probability its fractional part (a 53-bit uniform against the fraction: an exact
comparison), redrawing the whole vector until ||x~||_2 <= the bound of KLS Theorem 1 (the bound is
checked in exact integer arithmetic, so the sensitivity the accountant uses holds whatever the
floats did before); add a share N_Z(0, s^2) per coordinate, s = sigma / gamma (ldpfed's exact
discrete Gaussian sampler); reduce modulo m = 2^b into [0, m) as int64. The rounding and the share
come from the client's own Generator: its secret, never the server's.

Secure aggregation reveals only the sum modulo m (`aggregate` computes it for simulations).
Server (`decode`): map the modular sum into [-m/2, m/2), multiply by gamma, rotate back (R^T)
and drop the padding: the estimate of the sum of the clipped vectors. Nothing is lost when the
true sum of the rounded vectors and the shares lies in [-m/2, m/2) per coordinate (no wrap): the
integers come back exactly (tests/test_ddgauss.py).

The shares are drawn by the discrete Gaussian sampler of ldpfed.samplers (CKS Algorithm 3 with
an exact proposal: correct for every s > 0), through `ShareSampler` (ldpfed.accounting.ddgauss,
which also states its float slack), which computes the sampler's acceptance rate exactly where
s < 10: shares of a few grid steps, or less, are common here (sigma / gamma = 0.8 at 10 bits,
n = 1,000, eps = 6 in the DME experiment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

from ldpfed.accounting.ddgauss import (
    DEFAULT_BETA,
    MAX_BITS,
    DistributedDiscreteGaussianDpEvent,
    ShareSampler,
    ddgauss_params,
)
from ldpfed.directional.rotation import padded_dims, random_signs, rotate, unrotate
from ldpfed.validation import LDPValueError, check_generator, check_positive_int

MAX_NORM_STEPS = 2**31  # a rounded vector's squared norm (int64) stays below 2^62 for D <= 2^30
MAX_ROUNDING_TRIES = 1000  # the rounding is redrawn with probability <= beta (< 1) each time


@dataclass(frozen=True)
class DistributedDiscreteGaussian:
    """Encoder and decoder of one setting: `dims` coordinates, clip norm `clip`, granularity
    `gamma`, share standard deviation `local_stddev` (data units), `bits` per coordinate (modulus
    2^bits), rounding bias `beta` (module docstring)."""

    dims: int
    clip: float
    gamma: float
    local_stddev: float
    bits: int
    beta: float = DEFAULT_BETA

    def __post_init__(self) -> None:
        check_positive_int(self.dims, "dims")
        if check_positive_int(self.bits, "bits") > MAX_BITS:
            raise LDPValueError(f"bits must be at most {MAX_BITS} (the modular sum is int64), got {self.bits}")
        # norm_bound builds the accountant's one-share event, whose checks cover clip, gamma, local_stddev, beta
        if self.norm_bound >= MAX_NORM_STEPS:  # the squared norms are summed in int64
            raise LDPValueError(
                f"gamma = {self.gamma:g} is too fine for clip norm {self.clip:g}: the rounded norm bound "
                f"{self.norm_bound:.4g} grid steps must stay below 2^31"
            )

    @classmethod
    def for_budget(
        cls,
        dims: int,
        clip: float,
        bits: int,
        epsilon: float,
        delta: float,
        clients: int,
        **options,
    ) -> DistributedDiscreteGaussian:
        """The setting whose `rounds` rounds of `clients` shares meet (epsilon, delta) at `bits`
        bits: ldpfed.accounting.ddgauss.ddgauss_params at the padded dimension, with its keyword
        `options` (sampling_prob, rounds, beta, k_stddevs, sqrtn_norm_growth) and their defaults."""
        padded = padded_dims(check_positive_int(dims, "dims"))
        params = ddgauss_params(epsilon, delta, clients, padded, bits, clip, **options)
        return cls(dims, clip, params.gamma, params.local_stddev, bits, options.get("beta", DEFAULT_BETA))

    # --- derived -----------------------------------------------------------------------------------
    @property
    def padded_dims(self) -> int:
        return padded_dims(self.dims)

    @property
    def modulus(self) -> int:
        return 1 << self.bits

    @cached_property
    def _one_share(self) -> DistributedDiscreteGaussianDpEvent:
        """The accountant's event of one share: the grid quantities below are its own."""
        return self.event(1)

    @property
    def share_steps(self) -> float:
        """s = sigma / gamma, a share's standard deviation in grid steps."""
        return self._one_share.share_steps

    @property
    def norm_bound(self) -> float:
        """The rounded vector's L2 bound in grid steps (KLS Theorem 1), the accounted sensitivity."""
        return self._one_share.l2_sensitivity

    @cached_property
    def _squared_bound(self) -> int:
        """The largest integer t with sqrt(t) <= norm_bound (exact: the float bound as a fraction)."""
        return math.floor(Fraction(self.norm_bound) ** 2)

    def event(self, shares: int, sampling_prob: float = 1.0) -> DistributedDiscreteGaussianDpEvent:
        """One round's privacy event with `shares` noise shares in the sum."""
        return DistributedDiscreteGaussianDpEvent(
            self.gamma, self.local_stddev, shares, self.clip, self.padded_dims, self.beta, sampling_prob
        )

    def signs(self, rotation_seed) -> np.ndarray:
        """The round's public Hadamard signs, from its rotation seed (an int or a SeedSequence)."""
        return random_signs(self.dims, np.random.default_rng(rotation_seed))

    # --- client -----------------------------------------------------------------------------------
    def quantize(self, vectors, rotation_seed, rng: np.random.Generator) -> np.ndarray:
        """Clip, rotate, scale and round (conditionally) each row: int64 (rows, D), each row's
        L2 norm <= norm_bound."""
        check_generator(rng)
        return self._conditional_round(self._scaled(vectors, rotation_seed), rng)

    def _scaled(self, vectors, rotation_seed) -> np.ndarray:
        """R clip(x) / gamma for each row: float (rows, D)."""
        x = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
        if x.ndim != 2 or x.shape[-1] != self.dims or not np.all(np.isfinite(x)):
            raise LDPValueError(f"vectors must be finite with {self.dims} coordinates, got shape {x.shape}")
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = x * np.where(norms > self.clip, self.clip / np.maximum(norms, self.clip), 1.0)
        return rotate(x, self.signs(rotation_seed)) / self.gamma

    def _conditional_round(self, scaled: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Unbiased rounding of every coordinate, redrawn for the rows whose norm exceeds the bound."""
        floor = np.floor(scaled)
        fraction = scaled - floor  # exact in floating point
        base = floor.astype(np.int64)
        out = np.empty_like(base)
        pending = np.arange(scaled.shape[0])
        for _ in range(MAX_ROUNDING_TRIES):
            draw = base[pending] + (rng.random(fraction[pending].shape) < fraction[pending])
            fits = np.einsum("ij,ij->i", draw, draw) <= self._squared_bound  # exact int64
            out[pending[fits]] = draw[fits]
            pending = pending[~fits]
            if pending.size == 0:
                return out
        raise LDPValueError(f"conditional rounding failed {MAX_ROUNDING_TRIES} times (is beta close to 1?)")

    def shares(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """int64 (rows, D) of N_Z(0, s^2): the noise shares, from the client's generator."""
        check_generator(rng)
        draws = ShareSampler.for_sigma(self.share_steps).draw(rows * self.padded_dims, rng)
        return draws.astype(np.int64).reshape(rows, self.padded_dims)

    def encode(self, vectors, rotation_seed, rng: np.random.Generator) -> np.ndarray:
        """What a client hands to secure aggregation: (rounded vector + share) mod m, int64
        (rows, D) in [0, m). The rows share `rng`: one client's, or one row per call."""
        rounded = self.quantize(vectors, rotation_seed, rng)
        return self.wrap(rounded + self.shares(rounded.shape[0], rng))

    def encode_each(self, vectors, rotation_seed, rngs) -> np.ndarray:
        """One row per client, each rounded and noised from the client's own generator in `rngs`
        (a node simulating many clients: each masks its own vector, so the claim is per client);
        row i equals `encode(vectors[i], rotation_seed, rngs[i])`."""
        return self.wrap(self.noisy_each(vectors, rotation_seed, rngs))

    def noisy_each(self, vectors, rotation_seed, rngs) -> np.ndarray:
        """`encode_each` before the reduction modulo m: each client's rounded vector plus its share,
        int64 (rows, D) (what a simulation sums to count the modular wraps). The rotation is one
        array operation; the loop is over generators, which no array operation spans."""
        scaled = self._scaled(vectors, rotation_seed)
        if len(rngs) != scaled.shape[0]:
            raise LDPValueError(f"encode_each needs one generator per row, got {len(rngs)} for {scaled.shape[0]} rows")
        check_generator(*rngs)
        out = np.empty(scaled.shape, dtype=np.int64)
        for row, rng in enumerate(rngs):
            rounded = self._conditional_round(scaled[row : row + 1], rng)
            out[row] = (rounded + self.shares(1, rng))[0]
        return out

    def wraps(self, modular_sum, integer_sum) -> int:
        """Coordinates where the decoder's [-m/2, m/2) misreads the true integer sum (a modular wrap)."""
        return int(np.count_nonzero(self.centered(modular_sum) != np.asarray(integer_sum, dtype=np.int64)))

    def headroom(self, modular_sum) -> float:
        """max |centered sum| / (m/2): what the server can see of how close the sum came to a wrap."""
        return float(np.max(np.abs(self.centered(modular_sum)))) / (self.modulus // 2)

    def wrap(self, integers) -> np.ndarray:
        """Reduction modulo m into [0, m)."""
        return np.mod(np.asarray(integers, dtype=np.int64), self.modulus)

    # --- secure aggregation and server ------------------------------------------------------------
    def aggregate(self, encoded) -> np.ndarray:
        """The modular sum of the clients' encodings (what secure aggregation reveals), int64 (D,);
        summed in blocks that cannot overflow int64."""
        values = np.atleast_2d(np.asarray(encoded, dtype=np.int64))
        block = 1 << (62 - self.bits)
        total = np.zeros(values.shape[-1], dtype=np.int64)
        for first in range(0, values.shape[0], block):  # one block unless bits > 62 - log2(rows)
            total = np.mod(total + values[first : first + block].sum(axis=0), self.modulus)
        return total

    def centered(self, modular_sum) -> np.ndarray:
        """The modular sum mapped into [-m/2, m/2) (int64)."""
        total = self.wrap(modular_sum)
        return np.where(total >= self.modulus // 2, total - self.modulus, total)

    def decode(self, modular_sum, rotation_seed) -> np.ndarray:
        """The server's estimate of the sum of the clipped vectors: gamma R^T centered(sum),
        float (dims,)."""
        total = np.asarray(modular_sum)
        if total.shape != (self.padded_dims,):
            raise LDPValueError(f"the modular sum must have {self.padded_dims} coordinates, got shape {total.shape}")
        scaled = self.centered(total).astype(np.float64) * self.gamma
        return unrotate(scaled[None, :], self.signs(rotation_seed), self.dims)[0]

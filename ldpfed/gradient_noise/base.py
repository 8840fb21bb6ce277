"""The interface every gradient noise implements (spec: gradient-noise.md).

A gradient noise perturbs a clipped update (a client's) or a summed batch gradient (a central
trainer's): `perturb(updates, rng)` adds noise to a flat vector (d,) or to every row of a batch
(clients, d) at once. It is immutable, constructed with its calibrated parameters, and carries
its exact noise moments, its published claim, whether that claim holds, and the privacy event an
accountant charges for one release (ldpfed.accounting). A noise whose published guarantee does
not hold charges a not-private event: no ledger ever counts it as private.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from ldpfed.accounting import not_private
from ldpfed.accounting.library import dp_event
from ldpfed.samplers.safe_grid import SAFE_DESCRIPTION
from ldpfed.validation import LDPValueError, check_generator

GUARANTEE_FAILS = "published guarantee does not hold"
# Samplers: "continuous" = textbook float sampler, not floating-point safe (Mironov 2012; audit.md,
# Floating-point events); "safe" = per-coordinate grid with exact integer noise (safe_grid.py), the
# default of the i.n.i.d. noises. R1SMG, product noise and PLRV-O have the continuous one only
# (docs/decisions.md, Gradient noises).
CONTINUOUS = "continuous (not floating-point safe)"


def check_updates(updates, dims: int | None = None) -> np.ndarray:
    """A finite float array (d,) or (clients, d), with d = `dims` when the noise is calibrated to it."""
    array = np.asarray(updates, dtype=np.float64)
    if array.ndim not in (1, 2) or array.shape[-1] == 0:
        raise LDPValueError(f"updates must be a vector (d,) or a batch (clients, d), got shape {array.shape}")
    if dims is not None and array.shape[-1] != dims:
        raise LDPValueError(f"the noise is calibrated to d = {dims} coordinates, got updates with {array.shape[-1]}")
    if not np.all(np.isfinite(array)):
        raise LDPValueError("updates contain NaN or inf")
    return array


class GradientNoise(ABC):
    """Additive noise for a d-dimensional update, with its calibration and its claim."""

    name: ClassVar[str]
    guarantee_holds: ClassVar[bool] = True
    samplers: ClassVar[tuple[str, ...]] = ("continuous",)  # the first is the default
    # calibrated from a sensitivity profile, one D_i per coordinate (so per-layer clipping applies)
    takes_profile: ClassVar[bool] = False

    dims: int
    sampler: str = "continuous"

    @property
    def floating_point_safe(self) -> bool:
        return self.sampler == "safe"

    @property
    def sampler_description(self) -> str:
        return SAFE_DESCRIPTION if self.floating_point_safe else CONTINUOUS

    def perturb(self, updates, rng: np.random.Generator) -> np.ndarray:
        """The release of every row (one independent draw per row); same shape as `updates`."""
        array = check_updates(updates, self.dims)
        rows = np.atleast_2d(array)
        check_generator(rng)
        return self._release(rows, rng).reshape(array.shape)

    def perturb_rows(self, updates, rngs) -> np.ndarray:
        """Row i of `updates` (clients, d) released with its own generator `rngs[i]`: bit for bit
        `perturb(updates[i], rngs[i])`, so each client's noise comes from its own stream however
        clients are batched (spec: scale.md). A loop over the rows: each release is one vector
        draw from that row's generator."""
        rows = check_updates(updates, self.dims)
        if rows.ndim != 2 or len(rngs) != rows.shape[0]:
            raise LDPValueError(
                f"perturb_rows needs a (clients, d) block and one generator per row, got shape "
                f"{rows.shape} and {len(rngs)} generators"
            )
        check_generator(*rngs)
        released = np.empty_like(rows)
        for row, rng in enumerate(rngs):
            released[row] = self._release(rows[row : row + 1], rng)[0]
        return released

    def _release(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """rows + noise (continuous samplers); a safe sampler rounds the rows to its grid first."""
        return rows + self.sample(rows.shape[0], rng)

    def release_variance(self, rows) -> np.ndarray:
        """Exact Var(release - row) per coordinate for these rows (input-free for additive noise)."""
        return np.broadcast_to(self.coordinate_variance(), np.shape(rows)).copy()

    @abstractmethod
    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """`count` independent noise vectors, shape (count, d) (a safe sampler's integer noise times
        its steps: the release itself also rounds the input, use `perturb`)."""

    @abstractmethod
    def parameters(self) -> dict:
        """The calibrated parameters under the paper's names."""

    @abstractmethod
    def coordinate_variance(self) -> np.ndarray:
        """Exact Var(noise_i) per coordinate, shape (d,) (inf where it does not exist); a safe sampler
        includes its input rounding at the worst input (g_i^2 / 4; `release_variance` is exact)."""

    @property
    @abstractmethod
    def claim(self) -> str:
        """The guarantee as the paper states it."""

    def event(self) -> dp_event.DpEvent:
        """One release's privacy cost; a noise whose claim fails is not private."""
        if not self.guarantee_holds:
            return not_private(f"{self.name}: {GUARANTEE_FAILS} (gradient-noise.md)")
        return self._private_event()

    def _private_event(self) -> dp_event.DpEvent:
        raise NotImplementedError

    def describe(self) -> dict:
        """A JSON-ready summary: parameters, claim, verdict, sampler, moments."""
        variance = self.coordinate_variance()
        record = {
            "name": self.name,
            "dims": self.dims,
            "parameters": self.parameters(),
            "published_claim": self.claim,
            "guarantee_holds": self.guarantee_holds,
            "private": self.guarantee_holds,
            "sampler": self.sampler,
            "sampler_description": self.sampler_description,
            "floating_point_safe": self.floating_point_safe,
            "expected_squared_norm": float(np.sum(variance)),
        }
        if not self.guarantee_holds:
            record["warning"] = f"{GUARANTEE_FAILS}: never counted as private (ledger: eps = inf)"
        return record

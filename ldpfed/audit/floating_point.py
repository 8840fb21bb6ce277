"""Floating-point events: which output floats an input can produce at all (audit.md).

A randomizer that maps one uniform u to an output, y = Q(u, t), can only emit the floats
{Q(k / 2^53, t) : k on numpy's 53-bit lattice} (`Generator.random` returns
(next_uint64 >> 11) * 2^-53; `Generator.laplace(loc, scale)` takes the same u and returns
loc - scale*log(2 - u - u) if u >= 0.5, else loc + scale*log(u + u), redrawing u = 0; numpy
`random/src/distributions/distributions.c`). If that set depends on t, an output of x that x'
can never produce has likelihood ratio infinity (Mironov 2012).

`LatticeInverter` decides "can input t produce y" exactly for such samplers: it replays the
mechanism's own sampler on chosen lattice points (a stand-in generator hands the sampler those
uniforms), finds by bisection over k the lattice point where Q crosses y on each monotone piece of
Q, and checks a few neighbouring k for exact equality (float rounding may break monotonicity by an
ulp). It is built only after a replay check shows that the stand-in reproduces the real sampler bit
for bit; a sampler that draws anything else (integers, normals, several uniforms) is not
invertible this way and the auditor falls back on the table and bit-pattern events, and says so
(`replay_mismatch` gives the reason, which the audit reports under `unavailable_families`).

The stand-in computes what the generator computes with the same scalar functions: numpy's C
samplers call the C library's `log`, whereas numpy's ufunc `np.log` runs numpy's own SIMD kernels
where the CPU has them (AVX-512), which differ from the C library in the last bit of some values.
`scalar_log` calls the C library's `log`, so the replay is exact on every CPU, not only where numpy
happens to fall back on the C library.

A wrong decision can only weaken the audit, never make a sound mechanism fail: the event is
evaluated on held-out samples, so outputs of x' wrongly called "impossible" are counted against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

LATTICE_SIZE = 2**53  # Generator.random: u = k / 2^53, k = 0 .. 2^53 - 1
_UNIT = 2.0**-53
_WINDOW = 16  # lattice points checked either side of the bisection's crossing (rounding breaks
# monotonicity by up to ~8 points in square wave's inverse CDF at eps = 4)
_REPLAY_DRAWS = 4096


class _ReplayUniforms:
    """Stands in for a numpy Generator: every draw consumes the given uniforms, one per value."""

    def __init__(self, uniforms: np.ndarray):
        self.uniforms = uniforms

    def _take(self, size) -> np.ndarray:
        if size is not None and tuple(np.atleast_1d(size)) != self.uniforms.shape:
            raise ValueError("replay size mismatch")
        return self.uniforms

    def random(self, size=None, dtype=np.float64, out=None):
        if out is not None or dtype not in (np.float64, float):
            raise ValueError("replay supports plain float64 draws only")
        return self._take(size).copy()

    def laplace(self, loc=0.0, scale=1.0, size=None):
        """distributions.c, random_laplace: loc - scale log((2 - u) - u) if u >= 0.5, else
        loc + scale log(u + u), with the C library's log; u = 0 (numpy redraws it) gives -inf,
        never a real output."""
        u = self._take(size)
        upper = u >= 0.5
        argument = np.where(upper, (2.0 - u) - u, u + u)
        logarithm = scalar_log(argument)
        return np.where(upper, loc - scale * logarithm, loc + scale * logarithm)


def scalar_log(values: np.ndarray) -> np.ndarray:
    """The C library's log of each value (log 0 = -inf): what numpy's C samplers compute, where
    `np.log` may use numpy's SIMD kernels instead (module docstring)."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    out = np.empty_like(values)
    compiled = _compiled_log()
    if compiled is not None:
        compiled(values.ravel(), out.ravel())
        return out
    positive = values > 0.0  # math.log is the C library's log, but raises at 0 where C gives -inf
    out[~positive] = -np.inf
    out[positive] = np.fromiter(map(math.log, values[positive].tolist()), dtype=np.float64, count=int(positive.sum()))
    return out


def _log_each(values, out):  # compiled by _compiled_log
    for index in range(values.size):
        out[index] = math.log(values[index])


@lru_cache(maxsize=1)
def _compiled_log():
    """`_log_each` compiled by numba (a loop of calls to the C library's log, ~40x faster than
    math.log from Python), or None where numba would vectorize the loop with Intel's SVML (its
    log is not the C library's) or is missing: then `scalar_log` calls math.log per value."""
    try:
        import numba
    except ImportError:
        return None
    if numba.config.USING_SVML:
        return None
    return numba.njit(cache=True, nogil=True)(_log_each)


# Pieces of the lattice on which a sampler's Q(k) is monotone; u = 0 is never used by laplace.
Pieces = tuple[tuple[int, int], ...]


def replay(sample: Callable, t: float, lattice_points: np.ndarray) -> np.ndarray:
    """Q(k / 2^53, t) for every k: the sampler `sample(values, rng)` fed those uniforms."""
    uniforms = lattice_points.astype(np.float64) * _UNIT  # exact: k < 2^53
    return np.asarray(sample(np.full(uniforms.shape, t), _ReplayUniforms(uniforms)), dtype=float)


def replay_mismatch(sample: Callable, draw: Callable, inputs: tuple[float, ...], seed: int = 0) -> str | None:
    """Why replaying `sample` on the uniforms a real Generator would give does not reproduce
    `draw`'s outputs bit for bit (None when it does, for every input). `draw(t, n, rng)` is the
    mechanism's public sampler."""
    for t in inputs:
        expected = draw(t, _REPLAY_DRAWS, np.random.default_rng(seed))
        uniforms = np.random.default_rng(seed).random(_REPLAY_DRAWS)
        try:
            got = np.asarray(sample(np.full(_REPLAY_DRAWS, t), _ReplayUniforms(uniforms)), dtype=float)
        except (AttributeError, TypeError, ValueError) as error:  # the sampler draws something else
            drawn = f"Generator.{error.name}" if isinstance(error, AttributeError) and error.name else str(error)
            return (
                f"its sampler draws with {drawn}, not one 53-bit uniform per output, so it cannot be "
                "inverted on the uniform lattice; the outputs-table and bit-pattern events test its floats"
            )
        if got.shape != expected.shape:
            return f"replaying its sampler gave shape {got.shape}, the generator {expected.shape}"
        differ = got.view(np.uint64) != expected.view(np.uint64)
        if differ.any():
            return (
                f"replaying its sampler differs from the generator in {int(differ.sum())} of {_REPLAY_DRAWS} "
                f"draws at t = {t:g} (this platform computes the sampler's floats in a way the replay does "
                "not reproduce), so an inversion could call producible outputs impossible"
            )
    return None


def replays_exactly(sample: Callable, draw: Callable, inputs: tuple[float, ...], seed: int = 0) -> bool:
    """Does replaying `sample` reproduce `draw` bit for bit (see `replay_mismatch`)?"""
    return replay_mismatch(sample, draw, inputs, seed) is None


@dataclass(frozen=True)
class LatticeInverter:
    """Decides exactly which floats `sample` can emit for an input t (see the module docstring)."""

    sample: Callable
    pieces: Pieces = ((0, LATTICE_SIZE),)

    def producible(self, y: np.ndarray, t: float) -> np.ndarray:
        """Boolean array: can input t produce each output y?"""
        y = np.asarray(y, dtype=float)
        found = np.zeros(y.shape, dtype=bool)
        for low, high in self.pieces:
            found |= self._on_piece(y, t, low, high)
        return found

    def _on_piece(self, y, t, low, high) -> np.ndarray:
        ends = replay(self.sample, t, np.array([low, high - 1]))
        sign = 1.0 if ends[0] <= ends[1] else -1.0  # Q increasing or decreasing on this piece
        target = sign * y
        # Smallest k in [low, high) with sign * Q(k) >= sign * y (high if none): 53 halvings.
        left = np.full(y.shape, low, dtype=np.int64)
        right = np.full(y.shape, high, dtype=np.int64)
        while True:
            active = left < right
            if not active.any():
                break
            middle = (left + right) // 2
            above = sign * replay(self.sample, t, np.minimum(middle, high - 1)) >= target
            right = np.where(active & above, middle, right)
            left = np.where(active & ~above, middle + 1, left)
        found = np.zeros(y.shape, dtype=bool)
        for offset in range(-_WINDOW, _WINDOW + 1):
            k = np.clip(left + offset, low, high - 1)
            found |= replay(self.sample, t, k) == y
        return found


def bit_pattern_classes(y: np.ndarray, low_bits: int = 4) -> np.ndarray:
    """Class of each float by its sign and exponent and its `low_bits` lowest mantissa bits: the
    features by which a float sampler's output lattice betrays its input (a DP-Sniper-style
    classifier is then fitted on these classes)."""
    bits = np.ascontiguousarray(y, dtype=np.float64).view(np.uint64)
    top = (bits >> np.uint64(52)).astype(np.int64)
    low = (bits & np.uint64((1 << low_bits) - 1)).astype(np.int64)
    return (top << low_bits) | low

"""Frozen numpy implementation of the floating-point-safe samplers as they were before the compiled
kernels: the reference that the kernels must
reproduce bit for bit from the same Generator state (tests/test_compiled_samplers.py).

Copied from ldpfed/mechanisms/{grid,grid_noise,discrete_laplace,discrete_gaussian}.py and base.py
at commit 79f2664; only the sampling code, as free functions of the (unchanged) sampler objects,
which provide the tables and constants. Do not "improve" it: its value is that it does not change.
"""

from __future__ import annotations

import numpy as np

from ldpfed.mechanisms.duchi import DuchiSafe
from ldpfed.samplers.discrete_gaussian import DiscreteGaussianSampler, _Proposal
from ldpfed.samplers.discrete_laplace import DiscreteLaplaceSampler
from ldpfed.samplers.grid import GridSampler, WindowLaw

BLOCK = 16384
Q_BITS = 8
TABLE_BITS = 64 - Q_BITS - 1
LN2 = float(np.log(2.0))
TRAILING_ONES = np.array([(~i & (i + 1)).bit_length() - 1 for i in range(256)], dtype=np.int64)


# --- grid.py ----------------------------------------------------------------------------------------
def round_to_grid(x, rng, shift=0.0):
    halves = rng.bit_generator.random_raw(x.size).view(np.uint32)
    dither = np.subtract(halves[0::2], halves[1::2], dtype=np.float64)
    dither *= 2.0**-32
    dither += x
    dither += 0.5 + shift
    return np.floor(dither, out=dither)


def uniform_below(total, size, rng):
    draws = rng.random(size)
    if total < 2**53 and size and draws.max() >= total * 2.0**-53:
        bad = np.flatnonzero(draws >= total * 2.0**-53)
        while bad.size:
            draws[bad] = rng.random(bad.size)
            bad = bad[draws[bad] >= total * 2.0**-53]
    return draws


def window_sample(law: WindowLaw, window_start, rng, step=1.0, atom_value=None):
    unit = 2.0**-53
    r = uniform_below(law.total, window_start.size, rng)
    if law.atom_total:
        atom = r >= law.window_total * unit
        plus_limit = window_start * (law.atom_slope * unit)
        plus_limit += (
            law.window_total + law.atom_base + law.atom_slope * (law.grid_steps + 1 + law.window_half)
        ) * unit
        plus = r < plus_limit
    slot = r / (law.high * unit)
    r -= law.width * (law.high - law.low) * unit
    r /= law.low * unit
    np.maximum(slot, r, out=slot)
    np.floor(slot, out=slot)
    slot += window_start
    np.multiply(slot, 1.0 / law.points, out=r)
    np.rint(r, out=r)
    r *= float(law.points)
    slot -= r
    slot *= step
    if law.atom_total:
        value = (law.half_range + 1) * step if atom_value is None else atom_value
        signed = np.multiply(plus, 2.0 * value)
        signed -= value
        slot = np.where(atom, signed, slot)
    return slot


def grid_sample(sampler: GridSampler, t, rng):
    start = round_to_grid(t * float(sampler.grid_steps), rng, shift=-sampler.law.window_half)
    return window_sample(sampler.law, start, rng, sampler.step, sampler.atom_value)


# --- grid_noise.py ----------------------------------------------------------------------------------
def trailing_ones(words, cap):
    lowest_zero = ~words & (words + np.uint64(1))
    count = np.frexp(lowest_zero.astype(np.float64))[1].astype(np.int64) - 1
    return np.where(lowest_zero == 0, cap, np.minimum(count, cap))


def geometric_half(raw, rng):
    q = TRAILING_ONES[(raw & np.uint64(255)).view(np.int64)]
    full = np.flatnonzero(q == Q_BITS)
    while full.size:
        more = trailing_ones(rng.bit_generator.random_raw(full.size), 64)
        q[full] += more
        full = full[more == 64]
    return q


def grid_noise_sample(sampler, t, rng):
    k = round_to_grid(t * float(sampler.grid_steps), rng)
    k += NOISES[type(sampler)](sampler, t.size, rng)
    k *= 1.0 / sampler.grid_steps
    return k


# --- discrete_laplace.py ----------------------------------------------------------------------------
def laplace_noise(sampler: DiscreteLaplaceSampler, size, rng):
    keep, alias, capacity = sampler._alias
    length = sampler._table[1]
    column_bits = (len(keep) - 1).bit_length()
    below_bits = TABLE_BITS - column_bits
    raw = rng.bit_generator.random_raw(size)
    column = (raw >> np.uint64(64 - column_bits)).view(np.int64)
    if sampler._wide:
        below_bits = 62
        below = (rng.bit_generator.random_raw(size) >> np.uint64(2)).view(np.int64)
    else:
        below = ((raw << np.uint64(column_bits)) >> np.uint64(column_bits + Q_BITS + 1)).view(np.int64)
    if size and below.max() >= capacity:
        bad = np.flatnonzero(below >= capacity)
        while bad.size:
            below[bad] = (rng.bit_generator.random_raw(bad.size) >> np.uint64(64 - below_bits)).view(np.int64)
            bad = bad[below[bad] >= capacity]
    g = np.where(below < keep[column], column, alias[column])
    q = geometric_half(raw, rng)
    q *= length
    g += q
    sign = ((raw << np.uint64(63 - Q_BITS)).view(np.int64)) >> 63
    g ^= sign
    redo = np.flatnonzero(g == -1)
    g -= sign
    noise = g.astype(np.float64)
    if redo.size:
        noise[redo] = laplace_noise(sampler, redo.size, rng)
    return noise


# --- discrete_gaussian.py ---------------------------------------------------------------------------
def gaussian_attempt(proposal: _Proposal, size, rng):
    raw = rng.bit_generator.random_raw(size)
    q = geometric_half(raw, rng)
    n = (
        ((raw << np.uint64(1)) >> np.uint64(64 - proposal.bits)).view(np.int64)
        if proposal.bits
        else np.zeros(size, np.int64)
    )
    n += q * proposal.length
    n ^= raw.view(np.int64) >> 63
    bound = n.astype(np.float64)
    bound *= bound
    bound *= -1.0 / (2.0 * proposal.sigma**2)
    bound += q * LN2
    bound -= proposal.log_envelope
    np.exp(bound, out=bound)
    return n[rng.random(size) < bound].astype(np.float64)


def gaussian_noise(sampler: DiscreteGaussianSampler, size, rng):
    proposal = sampler._proposal
    out = np.empty(size)
    filled = 0
    while filled < size:
        need = size - filled
        accepted = gaussian_attempt(proposal, int(need / proposal.acceptance * 1.05) + 16, rng)
        take = min(need, accepted.size)
        out[filled : filled + take] = accepted[:take]
        filled += take
    return out


NOISES = {DiscreteLaplaceSampler: laplace_noise, DiscreteGaussianSampler: gaussian_noise}


# --- base.py: a mechanism's safe perturb ------------------------------------------------------------
def sample(sampler, t, rng):
    """One block through the old sampler of `sampler`'s kind."""
    if isinstance(sampler, GridSampler):
        return grid_sample(sampler, t, rng)
    if isinstance(sampler, DuchiSafe):
        return sampler.sample(t, rng)
    return grid_noise_sample(sampler, t, rng)


def perturb(mechanism, values, rng):
    """The old `Mechanism.perturb` for a safe sampler (values already in [-1, 1])."""
    t = np.asarray(values, dtype=float)
    flat = t.reshape(-1)
    sampler = mechanism.safe_sampler
    if flat.size <= BLOCK:
        return np.asarray(sample(sampler, flat, rng), dtype=float).reshape(t.shape)
    out = np.empty(flat.shape)
    for start in range(0, flat.size, BLOCK):
        out[start : start + BLOCK] = sample(sampler, flat[start : start + BLOCK], rng)
    return out.reshape(t.shape)

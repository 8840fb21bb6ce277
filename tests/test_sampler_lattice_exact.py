"""Realized probabilities of the bounded safe samplers, computed exactly on their word lattices
(mechanisms.md, Floating-point safety): the guarantee is about what the sampler realizes, so each
test counts, with Python integers, the 53-bit draws that give each output, at the lattice points
next to every threshold (ties included), and checks the worst ratio against e^exact_epsilon in
mpmath (50 digits), for budgets across each mechanism's whole range.

The stand-in generator (`generator_yielding`) is a real numpy PCG64 Generator whose state is set
so that its next one or two raw words are chosen ones: PCG64 outputs a bijection of its new 128-bit
state's halves (XSL-RR), the state before a step is recovered with the multiplier's inverse, and
the odd increment is free, which leaves room for a second chosen word. The tests therefore run the
code that runs by default (`perturb_rows`: the compiled grid kernel with its inline PCG64 step, or
Duchi's numpy sampler), not a copy of its decision.

Why a few lattice points decide every count: each sampler's output is a monotone function of the
draw k on each piece of the lattice (Duchi: [k 2^-53 < p(t)]; the window map: the floor of the
larger of two correctly rounded quotients, then a cyclic shift that depends on the grid input K
only; Hybrid's atoms: [k < limit(K)]). Pinning the output on both sides of every intended boundary
therefore pins the number of draws behind every output exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import ldpfed.mechanisms as mech
from ldpfed.mechanisms.hybrid import EPSILON_STAR
from ldpfed.samplers import grid, words
from ldpfed.samplers.words import PCG64_MULTIPLIER

LATTICE = 2**53  # Generator.random() = (word >> 11) 2^-53
JUNK = 0x5A5  # low 11 bits of a word, which every sampler must ignore
_MASK64 = (1 << 64) - 1
_INVERSE = pow(PCG64_MULTIPLIER, -1, 1 << 128)
TOP = mech.get_class("duchi").epsilon_range[1]
DUCHI_EPSILONS = (1e-4, 0.3, 1.0, 10.0, 30.0, 35.0, 36.0, 36.5, 36.74, 36.8, 37.0, 40.0, 100.0, TOP)
WINDOW_EPSILONS = (1e-4, 0.3, 1.0, 4.0, 10.0, 20.0, 24.0, 30.0, 36.0, 36.74, 37.0, 40.0, 700.0, TOP)
WINDOW_CONFIGS = [
    ("piecewise", {}),
    ("square-wave", {"estimator": "raw"}),
    ("square-wave", {"estimator": "debiased"}),
    ("hybrid", {}),
]


def _state_emitting(word: int, high: int) -> int:
    """A 128-bit PCG64 state whose output (rotr64(high ^ low, high >> 58)) is `word`."""
    rotation = high >> 58
    folded = ((word << rotation) | (word >> (64 - rotation))) & _MASK64 if rotation else word
    return (high << 64) | (high ^ folded)


def generator_yielding(chosen: list[int], salt: int = 0x9E3779B97F4A7C15) -> np.random.Generator:
    """A PCG64 Generator whose next raw words are `chosen` (one or two 64-bit words)."""
    first = _state_emitting(chosen[0], salt & _MASK64)
    increment = 1
    if len(chosen) == 2:
        high = (salt * 3 + 1) & _MASK64
        second = _state_emitting(chosen[1], high)
        if (second - first * PCG64_MULTIPLIER) % 2 == 0:  # the increment must be odd
            second = _state_emitting(chosen[1], high ^ 1)
        increment = (second - first * PCG64_MULTIPLIER) % (1 << 128)
    bit_generator = np.random.PCG64()
    bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": ((first - increment) * _INVERSE) % (1 << 128), "inc": increment},
        "has_uint32": 0,
        "uinteger": 0,
    }
    return np.random.Generator(bit_generator)


def reports_for(mechanism, cases: list[tuple[float, list[int]]]) -> np.ndarray:
    """One report per (input, chosen words), each from its own stand-in, through perturb_rows."""
    values = np.array([[t] for t, _ in cases])
    return mechanism.perturb_rows(values, [generator_yielding(chosen) for _, chosen in cases])[:, 0]


def within(ratio: mpmath.mpf, epsilon: float) -> bool:
    return ratio <= mpmath.exp(mpmath.mpf(epsilon))


def test_the_stand_in_yields_the_chosen_words():
    for chosen in ([0], [_MASK64], [123456789 << 11, 7], [_MASK64, 0], [1 << 63, (1 << 63) + 1]):
        for salt in (0, 1, _MASK64, 0x123456789ABCDEF):
            assert list(generator_yielding(chosen, salt).bit_generator.random_raw(len(chosen))) == chosen
    assert generator_yielding([(LATTICE - 1) << 11 | JUNK]).random() == 1.0 - 2.0**-53


# --- Duchi (and Hybrid up to e_star, which uses the same sampler) --------------------------------
def duchi_inputs() -> np.ndarray:
    """The ends first (thresholds b' and 1 - b', lattice points), 0 (threshold 1/2), inputs whose
    threshold is a lattice point (every float in [1/2, 1) is one) or falls between two."""
    t = [-1.0, 1.0, math.nextafter(-1.0, 0.0), -0.5, -1e-9, 0.0, 0.3, math.nextafter(1.0, 0.0)]
    t += list(np.random.default_rng(3).uniform(-1.0, 1.0, 12))
    return np.array(t)


@pytest.mark.parametrize(
    ("name", "epsilon"),
    [("duchi", e) for e in DUCHI_EPSILONS] + [("hybrid", e) for e in (1e-4, 0.3, EPSILON_STAR)],
)
def test_duchi_realized_probabilities_are_exact_and_within_exact_epsilon(name, epsilon):
    """P(+B | t) is the number n(t) of draws k with k 2^-53 < p(t) (a tie gives -B): the report is
    +B at k = n - 1 and -B at k = n. The realized ratios at t = -1, +1 are then the worst, no
    probability is 0, and they are <= e^exact_epsilon (exactly; the claim is also tight)."""
    mechanism = mech.get(name, epsilon)
    sampler = mechanism.safe_sampler
    bound = sampler.output_bound
    t = duchi_inputs()
    thresholds = sampler.probability_plus(t)
    counts = [math.ceil(Fraction(float(p)) * LATTICE) for p in thresholds]
    cases, expected = [], []
    for value, n in zip(t, counts):
        if n >= 1:
            cases.append((value, [(n - 1) << 11 | JUNK]))
            expected.append(bound)
        if n < LATTICE:
            cases.append((value, [n << 11]))
            expected.append(-bound)
    assert np.array_equal(reports_for(mechanism, cases), expected)
    assert np.array_equal(sampler.realized_plus(t) * LATTICE, counts)  # log_mass states the realized law

    low, high = counts[0], counts[1]  # t = -1, +1
    assert 1 <= low <= min(counts) and max(counts) <= high <= LATTICE - 1
    worst = max(mpmath.mpf(high) / low, mpmath.mpf(LATTICE - low) / (LATTICE - high))
    assert mechanism.exact_epsilon <= epsilon and within(worst, mechanism.exact_epsilon)
    assert float(mpmath.log(worst)) >= mechanism.exact_epsilon * (1 - 1e-12)


# --- the window samplers: PM, SW raw and debiased, Hybrid above e_star ---------------------------
def window_law_cases():
    for name, options in WINDOW_CONFIGS:
        for epsilon in WINDOW_EPSILONS:
            if name != "hybrid" or epsilon > EPSILON_STAR:
                yield pytest.param(name, options, epsilon, id=f"{name}{''.join(options.values())}-{epsilon:g}")


def slot_starts(law) -> np.ndarray:
    """First draw k of each window-map slot z = 0..M-1, then T_w: A draws per window slot (z < W),
    B per background slot (int64: every count is below 2^53)."""
    z = np.arange(law.points, dtype=np.int64)
    starts = np.where(z <= law.width, z * law.high, law.width * law.high + (z - law.width) * law.low)
    return np.append(starts, law.window_total)


def mapped(sampler, draws: np.ndarray, grid_input) -> np.ndarray:
    """Reports of draws k (int64) given grid inputs K, through the compiled `window_report`
    (the function the fused sampling kernel inlines)."""
    words.compiled()
    law = sampler.law
    r = draws.astype(float) * 2.0**-53  # exact: k < 2^53
    start = np.broadcast_to(np.asarray(grid_input, dtype=float) - law.window_half, r.shape).copy()
    grid._map_kernel(r, start, law.map_constants(sampler.step, sampler.atom_value))
    return r


def model_report(sampler, k: int, grid_input: int) -> float:
    """The report the integer weights define for draw k given K (no floats but the last product)."""
    law = sampler.law
    if k >= law.window_total:
        plus = k - law.window_total < law.atom_base + law.atom_slope * (law.grid_steps + 1 + grid_input)
        return sampler.atom_value if plus else -sampler.atom_value
    spread = law.width * law.high
    slot = k // law.high if k < spread else law.width + (k - spread) // law.low
    index = (grid_input - law.window_half + slot + law.half_range) % law.points - law.half_range
    return float(index) * sampler.step


@pytest.mark.parametrize(("name", "options", "epsilon"), list(window_law_cases()))
def test_window_counts_are_exact_and_within_exact_epsilon(name, options, epsilon):
    """Every slot boundary of the window map, on both sides, at the extreme grid inputs K = +-(J+1)
    (which together reach every shifted slot v = K - P + z, so the cyclic shift is checked for all
    K) and at K = 0; Hybrid's atom boundary at every K. The counts so pinned give the realized worst
    ratio, <= e^exact_epsilon exactly; atoms never coincide with a window report."""
    mechanism = mech.get(name, epsilon, **options)
    sampler = mechanism.safe_sampler
    law = sampler.law
    extreme = law.grid_steps + 1
    starts = slot_starts(law)
    for k_input in (-extreme, 0, extreme):
        slots = np.arange(law.points)
        index = (k_input - law.window_half + slots + law.half_range) % law.points - law.half_range
        expected = index.astype(float) * sampler.step
        assert np.array_equal(mapped(sampler, starts[:-1], k_input), expected), k_input  # first draw of each slot
        assert np.array_equal(mapped(sampler, starts[1:] - 1, k_input), expected), k_input  # last draw of each slot
    slot_counts = np.diff(starts)
    assert slot_counts.min() >= 1 and slot_counts.sum() == law.window_total
    worst = mpmath.mpf(int(slot_counts.max())) / int(slot_counts.min())

    if law.atom_total:
        inputs = np.arange(-extreme, extreme + 1)
        limit = law.window_total + law.atom_base + law.atom_slope * (law.grid_steps + 1 + inputs)
        for draws, sign in ((limit - 1, 1.0), (limit, -1.0), (np.full_like(limit, law.window_total), 1.0)):
            assert np.all(mapped(sampler, draws, inputs) == sign * sampler.atom_value)
        assert np.all(mapped(sampler, np.full_like(limit, law.total - 1), inputs) == -sampler.atom_value)
        plus, minus = limit - law.window_total, law.total - limit
        assert plus.min() >= 1 and minus.min() >= 1
        worst = max(
            worst, mpmath.mpf(int(plus.max())) / int(plus.min()), mpmath.mpf(int(minus.max())) / int(minus.min())
        )
        code = round(sampler.atom_value / sampler.step)
        assert abs(code) > law.half_range or code * sampler.step != sampler.atom_value
    assert mechanism.exact_epsilon <= epsilon and within(worst, mechanism.exact_epsilon)
    assert float(mpmath.log(worst)) >= mechanism.exact_epsilon * (1 - 1e-12)


def dither_word(low: int, high: int) -> int:
    """A dither word: U1 = low / 2^32 (low half), U2 = high / 2^32 (high half)."""
    return (high << 32) | low


# dithers: the extremes of U1 - U2, a tie of the floor (U1 - U2 = +-1/2) and its neighbours, 0
DITHERS = [(2**32 - 1, 0), (0, 2**32 - 1), (2**31, 0), (2**31 - 1, 0), (0, 2**31), (0, 2**31 - 1), (0, 0)]


@pytest.mark.parametrize(
    ("name", "options", "epsilon"), [(n, o, e) for n, o in WINDOW_CONFIGS for e in (1.0, 30.0, TOP)]
)
def test_default_path_follows_the_integer_weights_at_every_threshold(name, options, epsilon):
    """perturb_rows with stand-in words: the dither's extremes and floor ties at inputs on the grid
    (K from exact rationals: floor(t J + 1/2 + U1 - U2), which must stay in [-J-1, J+1]), and draws
    at the lattice points on both sides of the window, background, atom and rejection thresholds.
    Each report equals the integer-weight model's; a rejected draw (k >= T) takes the next word."""
    mechanism = mech.get(name, epsilon, **options)
    sampler = mechanism.safe_sampler
    law = sampler.law
    j = law.grid_steps
    spread = law.width * law.high
    inputs = [-1.0, 1.0, 0.0, 37.0 / j, -(2.0**-16), 1.0 - 2.0**-16]
    cases, expected = [], []
    for t in inputs:
        for low, high in DITHERS:
            k_input = math.floor(Fraction(t) * j + Fraction(1, 2) + Fraction(low - high, 2**32))
            assert -j - 1 <= k_input <= j + 1
            limit = law.window_total + law.atom_base + law.atom_slope * (j + 1 + k_input)
            draws = {0, law.high - 1, law.high, spread - 1, spread, spread + law.low, law.window_total - 1}
            if law.atom_total:
                draws |= {law.window_total, limit - 1, limit}
            draws |= {law.total - 1, law.total, LATTICE - 1}
            for k in sorted(d for d in draws if 0 <= d < LATTICE):
                chosen = [dither_word(low, high), k << 11 | JUNK]
                if k < law.total:
                    want = model_report(sampler, k, k_input)
                else:  # rejected: the kernel draws again from the generator's next word
                    following = int(generator_yielding(chosen).bit_generator.random_raw(3)[2]) >> 11
                    assert following < law.total  # (a second rejection is not expected at these seeds)
                    want = model_report(sampler, following, k_input)
                cases.append((t, chosen))
                expected.append(want)
    got = reports_for(mechanism, cases)
    assert np.array_equal(got.view(np.uint64), np.array(expected).view(np.uint64))

"""The safe grid samplers' integer maps, checked exhaustively on small laws:
every integer draw r in [0, T) is fed through `WindowLaw.sample`, so each output code must be hit
by exactly its integer weight (A, B, or the atoms' E0 + E1 (J + 1 +- K)) for every grid input K.
This is the exactness the eps'-LDP guarantee rests on; a sampling test could only see it roughly.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.samplers.grid import WindowLaw, round_to_grid, rounding_weights


class _EveryDraw:
    """A stand-in Generator whose random(T) returns k / 2^53 for k = 0..T-1: every r once."""

    def random(self, size):
        return np.arange(size, dtype=float) / 2.0**53


LAWS = [
    WindowLaw(grid_steps=4, window_half=1, high=7, low=2),
    WindowLaw(grid_steps=4, window_half=0, high=5, low=3),
    WindowLaw(grid_steps=8, window_half=3, high=11, low=4),
    WindowLaw(grid_steps=4, window_half=1, high=7, low=2, atom_base=3, atom_slope=2),
]


@pytest.mark.parametrize("law", LAWS, ids=repr)
def test_every_draw_maps_to_an_output_with_its_exact_integer_weight(law):
    codes = np.arange(-law.half_range - 1, law.half_range + 2, dtype=float)
    for k in range(-law.grid_steps - 1, law.grid_steps + 2):
        start = np.full(law.total, float(k - law.window_half))
        out = law.sample(start, _EveryDraw())
        counts = np.array([np.count_nonzero(out == c) for c in codes])
        expected = np.rint(law.probability(codes, float(k)) * law.total)
        assert counts.sum() == law.total and np.array_equal(counts, expected), k


def test_the_exhaustive_check_can_fail():
    """A map that swaps the window and background branches is caught."""
    law = LAWS[0]
    wrong = WindowLaw(law.grid_steps, law.window_half, law.low, law.high)  # weights swapped
    start = np.zeros(law.total)
    assert not np.array_equal(
        np.sort(law.sample(start, _EveryDraw())), np.sort(wrong.sample(start[: wrong.total], _EveryDraw()))
    )


def test_one_word_dither_rounds_with_the_triangular_law():
    """round_to_grid: P(K = floor(x) + d) matches rounding_weights within sampling error, E[K] = x
    within 4 standard errors, and the integer shift is exact."""
    rng = np.random.default_rng(11)
    n = 400_000
    for x in (0.0, 0.3, 0.5, 0.81, -2.25):
        k = round_to_grid(np.full(n, x), rng)
        shifted = round_to_grid(np.full(n, x), np.random.default_rng(12), shift=-7.0)
        again = round_to_grid(np.full(n, x), np.random.default_rng(12))
        assert np.array_equal(shifted, again - 7.0)
        low, weights = rounding_weights(x)
        for d, w in zip((-1, 0, 1, 2), weights):
            p = np.mean(k == low + d)
            assert abs(p - w) <= 5 * np.sqrt(max(w * (1 - w), 1e-12) / n) + 1e-12
        assert abs(k.mean() - x) <= 4 * 0.5 / np.sqrt(n)

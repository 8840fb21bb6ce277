"""A prediction's per-dimension arithmetic (predictor.py's formulas and berry_esseen.py's bound)
in as few array passes as the dimension count pays for.

Every per-dimension output of `predict` is an elementwise function of the column moments (mean,
mean square, S_j^2, and the mean fourth power from an array) and a few scalars: the mechanism's
bias and variance coefficients, its third-moment polynomial, and, without given counts, the
report law (r, P(r_j = 0), E[1/r_j | r_j > 0]), the same in every dimension. numpy evaluates it as
about 35 array passes, one temporary per operation (~4 ms at d = 10^5 on a loaded 2-core machine).
From COMPILED_DIMS dimensions on, with one report law for every dimension, one compiled loop
(numba) runs over cache-sized blocks of dimensions, reading each moment from memory once and
writing each of the ten outputs once, doing the same IEEE operations in the same order as numpy
(no fused multiply-add, no reassociation: numba without fastmath): the outputs are the numpy ones
bit for bit (tested), 3-5x faster at d = 10^5. They are the rows of one (10, d) block, so holding
any one of them keeps all ten.

Below COMPILED_DIMS, or with per-dimension counts, numpy runs, so a small prediction never
imports numba (~0.65 s of CPU on a loaded machine). The compiled loop is loaded from numba's
on-disk cache (cache=True) on its first call in a process, or compiled there (~1 s) once.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ldpfed.analysis.berry_esseen import (
    LYAPUNOV_CONSTANT,
    SHEVTSOVA_CONSTANT,
    SHEVTSOVA_SHIFT,
    bound_from_moments,
    column_third_moment,
    third_moment_law,
)
from ldpfed.analysis.moments import ColumnMoments
from ldpfed.mechanisms.base import Mechanism

# From this many dimensions on (and one report law for every dimension) the compiled loop runs.
COMPILED_DIMS = 1 << 16
_BLOCK = 2048  # dimensions per block of the compiled loop (14 arrays x 16 KiB: in L2)
_NO_FOURTH = np.zeros(0)  # stands for "no mean fourth power" in the compiled loop (summary moments)


class DimensionTerms(NamedTuple):
    """The per-dimension arrays a Prediction holds (names as in predictor.py's docstring)."""

    report_bias: np.ndarray  # delta_j = b0 + b1 mean_j
    report_variance: np.ndarray  # s_j^2 = max(v0 + v1 mean_j + v2 mean_sq_j, 0)
    sampling_coefficient: np.ndarray  # (1 + b1)^2 S_j^2
    bias: np.ndarray  # (1 - P0) delta_j - P0 mean_j
    noise_variance: np.ndarray  # (1 - P0) s_j^2 h
    sampling_variance: np.ndarray  # (1 - P0) (1 + b1)^2 S_j^2 max(h - 1/n, 0)
    no_report_variance: np.ndarray  # P0 (1 - P0) (delta_j + mean_j)^2
    third_moment: np.ndarray  # rho_j (berry_esseen.column_third_moment)
    bound: np.ndarray  # Berry–Esseen, the spec's form
    non_identical: np.ndarray  # Berry–Esseen, the Lyapunov-fraction form


def dimension_terms(
    mechanism: Mechanism, moments: ColumnMoments, reports, no_report, inverse, users: int
) -> tuple[DimensionTerms, str]:
    """The per-dimension terms of a prediction and the source of its third moments.

    reports, no_report, inverse: r_j, P(r_j = 0) and E[1/r_j | r_j > 0], scalars (one report law
    for every dimension) or (dims,) arrays (given counts)."""
    scalar_law = all(np.ndim(x) == 0 for x in (reports, no_report, inverse))
    if scalar_law and moments.dims >= COMPILED_DIMS:
        return _compiled_terms(mechanism, moments, float(reports), float(no_report), float(inverse), users)
    return _numpy_terms(mechanism, moments, reports, no_report, inverse, users)


def mean_report_variance(mechanism: Mechanism, moments: ColumnMoments) -> np.ndarray:
    """(1/n) sum_i V(t_ij) = max(v0 + v1 mean_j + v2 mean_sq_j, 0) per dimension (the predictor's
    E[V], `berry_esseen`'s s_j^2)."""
    v0, v1, v2 = mechanism.variance_coefficients
    variance = v1 * moments.mean
    variance += v0  # the same sums as v0 + v1 mean + v2 mean_sq, in place
    variance += v2 * moments.mean_sq
    return np.maximum(variance, 0.0, out=variance)


def _numpy_terms(mechanism, moments, reports, no_report, inverse, users) -> tuple[DimensionTerms, str]:
    """The terms in numpy, one operation per pass (the reference the compiled loop matches)."""
    b0, b1 = mechanism.bias_coefficients
    mean, dims = moments.mean, moments.dims
    report_bias = _per_dimension(b0 + b1 * mean, dims)
    report_variance = mean_report_variance(mechanism, moments)
    sampling_coefficient = (1.0 + b1) ** 2 * moments.variance
    reported = 1.0 - no_report  # P(r_j > 0)
    rho, source = column_third_moment(mechanism, moments)
    berry_esseen = bound_from_moments(report_variance, rho, reports, source)
    terms = DimensionTerms(
        report_bias=report_bias,
        report_variance=report_variance,
        sampling_coefficient=sampling_coefficient,
        bias=reported * report_bias - no_report * mean,
        noise_variance=reported * report_variance * inverse,
        sampling_variance=reported * sampling_coefficient * np.maximum(inverse - 1.0 / users, 0.0),
        no_report_variance=no_report * reported * (report_bias + mean) ** 2,
        third_moment=rho,
        bound=berry_esseen.bound,
        non_identical=berry_esseen.non_identical,
    )
    return terms, source


def _per_dimension(values, dims: int) -> np.ndarray:
    """A (dims,) float array of `values` (a fresh result of the arithmetic above: not copied)."""
    values = np.asarray(values, dtype=float)
    return values if values.shape == (dims,) else np.broadcast_to(values, (dims,)).astype(float)


def _compiled_terms(mechanism, moments, reports, no_report, inverse, users) -> tuple[DimensionTerms, str]:
    """The terms in one compiled pass (one report law for every dimension; reports > 0)."""
    b0, b1 = mechanism.bias_coefficients
    v0, v1, v2 = mechanism.variance_coefficients
    law = third_moment_law(mechanism, moments.exponents)
    reported = 1.0 - no_report
    # The scalars numpy forms before its array passes, formed the same way here.
    excess = float(np.maximum(inverse - 1.0 / users, 0.0))
    shift = float(SHEVTSOVA_SHIFT / np.sqrt(np.asarray(reports, float)))
    mean = np.asarray(moments.mean, dtype=float)
    fourth = _NO_FOURTH if moments.mean_fourth is None else np.asarray(moments.mean_fourth, dtype=float)
    # One allocation for the ten outputs (rows of one block): ten separate arrays of 10^5 values
    # cost ~3 ms more in page faults whenever the previous prediction is still held.
    out = DimensionTerms(*np.empty((len(DimensionTerms._fields), mean.shape[0])))
    _compiled_loop()(
        mean,
        np.asarray(moments.mean_sq, dtype=float),
        np.asarray(moments.variance, dtype=float),
        fourth,
        np.array([b0, b1, v0, v1, v2, (1.0 + b1) ** 2, reported, no_report, inverse, excess, no_report * reported]),
        np.array([reports, shift, SHEVTSOVA_CONSTANT, LYAPUNOV_CONSTANT]),
        np.asarray(law.coefficients, dtype=float),
        law.cap,
        law.constant,
        *out,
    )
    return out, law.source


def _terms_loop(mean, mean_sq, variance, fourth, scalars, bound_scalars, rho_c, cap, constant, *out):
    """`_numpy_terms`'s operations, in its order, per element; compiled by `_compiled_loop`.

    Blocks of _BLOCK dimensions, so what one loop writes the next reads from cache. Within a block,
    a few loops, each touching at most five arrays: the compiler vectorizes a loop only when it
    can check at run time that its arrays do not overlap, and it checks few pairs (LLVM: 8). The
    branches are selects (np.maximum(x, 0) and np.minimum(x, c) written as the comparisons numpy
    uses, so a NaN or a -0.0 is kept as numpy keeps it); `reports` > 0 (one law: n m / d)."""
    b0, b1, v0, v1, v2, spread, reported, no_report, inverse, excess, lost = scalars
    reports, shift, shevtsova, lyapunov = bound_scalars
    for start in range(0, mean.shape[0], _BLOCK):
        block = slice(start, start + _BLOCK)  # views: indices from 0 (no negative-index check)
        t, t2 = mean[block], mean_sq[block]
        delta, s2, coefficient, bias, noise = out[0][block], out[1][block], out[2][block], out[3][block], out[4][block]
        sampling, lost_variance, rho, bound, non_identical = (
            out[5][block],
            out[6][block],
            out[7][block],
            out[8][block],
            out[9][block],
        )
        for j in range(t.shape[0]):  # s_j^2 = max(v0 + v1 mean_j + v2 mean_sq_j, 0), and the noise term
            v = v1 * t[j] + v0 + v2 * t2[j]
            s2[j] = 0.0 if v < 0.0 else v
        for j in range(t.shape[0]):
            noise[j] = reported * s2[j] * inverse
        spread_j = variance[block]
        for j in range(t.shape[0]):  # the sampling term
            c = spread * spread_j[j]
            coefficient[j] = c
            sampling[j] = reported * c * excess
        if constant:
            rho[:] = rho_c[0]
        elif rho_c.shape[0] == 3:  # rho_j's polynomial bound in 1, t, t^2 (summary moments)
            for j in range(t.shape[0]):
                q = rho_c[0] + rho_c[1] * t[j]
                q += rho_c[2] * t2[j]
                rho[j] = cap if q > cap else q
        else:  # in 1, t, t^2, t^4 (moments from an array)
            t4 = fourth[block]
            for j in range(t.shape[0]):
                q = rho_c[0] + rho_c[1] * t[j]
                q += rho_c[2] * t2[j]
                q += rho_c[3] * t4[j]
                rho[j] = cap if q > cap else q
        for j in range(t.shape[0]):  # the Berry–Esseen bounds (0 where s_j = 0: nothing random)
            fraction = rho[j] / (s2[j] * math.sqrt(s2[j] * reports))
            b = shevtsova * (fraction + shift)
            n = lyapunov * fraction
            defined = s2[j] > 0.0
            bound[j] = (1.0 if b > 1.0 else b) if defined else 0.0
            non_identical[j] = (1.0 if n > 1.0 else n) if defined else 0.0
        for j in range(t.shape[0]):  # delta_j, the deviation's mean, the no-report variance
            d = b0 + b1 * t[j]
            delta[j] = d
            bias[j] = reported * d - no_report * t[j]
            shifted = d + t[j]
            lost_variance[j] = lost * (shifted * shifted)


@lru_cache(maxsize=1)
def _compiled_loop():
    """`_terms_loop` compiled (numba, no fastmath: IEEE operations as written; error_model="numpy":
    x/0 is inf or nan as in numpy, no check that would keep a loop from vectorizing). numba is
    imported here, on the first large prediction; the machine code is kept on disk (cache=True)."""
    import numba

    try:
        return numba.njit(cache=True, nogil=True, error_model="numpy")(_terms_loop)
    except RuntimeError:  # no writable cache directory anywhere: compile in memory, once per process
        return numba.njit(nogil=True, error_model="numpy")(_terms_loop)

"""Per-dimension column moments: all the CLT predictor needs from the data (analysis.md).

Every bias b(t) is linear and every variance V(t) quadratic in t (mechanisms.md), so a column
enters the prediction only through its mean, its mean square and its population variance S_j^2.
`ColumnMoments` holds them, built from a (users, dims) array in one O(nd) pass or given directly
as summary statistics (a JSON/CSV file of per-dimension moments), after which prediction is O(d).

S_j^2 uses the divisor n - 1 (Cochran's finite-population variance): with it the sampling term
S_j^2 (1/r_j - 1/n) of analysis.md is the exact variance of a mean of r_j of the n values drawn
without replacement (with divisor n it is off by the factor n/(n-1)).

The Berry–Esseen bound needs the column mean of E|t* - E t*|^3, which is not polynomial in t for
bounded mechanisms; berry_esseen.py bounds it from above by a polynomial in 1, t, t^2 and t^4
(every registered mechanism's third moment is even in t), so from an array the same pass also
keeps the mean fourth power of each column (and, on request, its range, for region checks).
Summary moments give a quadratic bound (looser, still valid).

The data pass (`from_array`) is the predictor's only O(nd) work: it reads each
value once and keeps per column the sums of t, t^2 and t^4 and the extremes (the domain check), in
column strips on a thread pool. Each sum is added in row order, so the result is the same bit for
bit on any number of threads and in either implementation of a strip: a compiled kernel (numba,
`_accumulate_rows`) for large arrays, numpy below _COMPILED_MINIMUM values, where importing numba
would cost more than the pass. The kernel is compiled on its first call in a process unless
numba's on-disk cache (cache=True) already holds it: 1-3 s to compile per dtype (measured on a
loaded machine), else ~0.4 s of CPU to import numba plus ~0.2 s to start it and load the kernel,
once per process (docs/decisions.md, Prediction, "The data pass"). S_j^2 then comes from the power sums,
(sum t^2 - n mean^2)/(n - 1): for values in [-1, 1] its absolute rounding error is at most about
3 n u (u = 2^-53; 3e-10 at n = 10^6), far below any LDP noise variance. Each strip's power means
and S_j^2 are formed right after its sums (`_finish_columns`, compiled beside the kernel), while
they are in cache, in place in the one (6, d) array the pass allocates: the same numbers bit for
bit as numpy's arithmetic over whole columns, which at d = 10^5 cost 4-10 ms (its temporaries,
~2,500 page faults a call) beside a ~45 ms read of 10^8 values.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ldpfed.validation import LDPValueError, check_positive_int, check_values

# Rounding slack when checking mean_sq >= mean^2 and |mean| <= 1 on user-supplied summaries.
_TOLERANCE = 1e-9
MOMENT_COLUMNS = ("mean", "mean_sq", "variance")
# Below this many values the data pass runs on one thread (starting threads would cost more than they save).
_PARALLEL_MINIMUM = 1 << 20
# From this many values on the data pass runs the compiled kernel; below it numpy (2^20 values take
# 10-50 ms there, 20-50x the kernel's time but far less than numba's ~1 s start-up in a new process),
# so small inputs, such as the CLI's default data set, never import or compile numba.
_COMPILED_MINIMUM = 1 << 20
# Columns of a converted tile (arrays the kernel cannot read in place, e.g. Fortran-ordered ones as
# pandas returns): 512 copies ~3x faster from column-major data than 4096 (measured).
_TILE_WIDTH = 512


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform reports it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True, eq=False)
class ColumnMoments:
    """n values per column; per-column mean, mean square and population variance S_j^2 (divisor n-1).

    From an array also the mean fourth power (for the Berry–Esseen third moments) and, on request,
    each column's minimum and maximum; None for summary moments.
    """

    users: int
    mean: np.ndarray
    mean_sq: np.ndarray
    variance: np.ndarray
    mean_fourth: np.ndarray | None = field(default=None, repr=False)
    minimum: np.ndarray | None = field(default=None, repr=False)
    maximum: np.ndarray | None = field(default=None, repr=False)

    @property
    def dims(self) -> int:
        return self.mean.shape[0]

    @property
    def has_values(self) -> bool:
        """Built from the values themselves (the mean fourth power is known)."""
        return self.mean_fourth is not None

    @property
    def exponents(self) -> tuple[int, ...]:
        """The powers k whose column means (1/n) sum t^k are known: (0, 1, 2), and 4 from an array."""
        return (0, 1, 2, 4) if self.has_values else (0, 1, 2)

    def power_means(self) -> list[np.ndarray]:
        """(1/n) sum t^k per column for k in `exponents`."""
        powers = [np.ones_like(self.mean), self.mean, self.mean_sq]
        return powers + ([self.mean_fourth] if self.has_values else [])

    def summary(self) -> ColumnMoments:
        """Only the summary moments (mean, mean square, variance), as a moments file would give."""
        return ColumnMoments(self.users, self.mean, self.mean_sq, self.variance)

    # --- constructors -----------------------------------------------------------------------------
    @classmethod
    def from_array(
        cls,
        values,
        *,
        ranges: bool = False,
        block: int = 1 << 18,
        width: int = 8192,
        workers: int | None = None,
    ) -> ColumnMoments:
        """Moments of a (users, dims) array of values in [-1, 1] (rows = users), in one pass.

        Per column the pass keeps the sums of t, t^2 and t^4 and the minimum and maximum: the
        domain check (NaN and inf make a sum non-finite; the extremes must lie in [-1, 1]; the
        validation's own message is raised). `ranges=True` also returns each column's minimum and
        maximum, which personalized-LDP groups check against their regions.

        Column strips of `width` columns go to `workers` threads (default: the usable cores from
        _PARALLEL_MINIMUM values on, else one); each strip's sums stay in L1/L2 while the rows
        stream past. From _COMPILED_MINIMUM values on a strip is one call of the compiled kernel
        (numba, nogil; its first call in a process loads or compiles it, see the module
        docstring), below it a few numpy operations. An array that is not an aligned, writeable,
        C-ordered float64/float32 array is converted in tiles of `block` values (no full copy).

        Accuracy contract: each column sum is the float64 sum of its terms added in row order,
        ((s_1 + s_2) + s_3) + ..., with s_i = t_i, t_i^2 or (t_i^2)^2, whatever `workers`,
        `width`, `block` or implementation: the result is the same bit for bit (tested). Its error
        is at most (n - 1) u sum_i |s_i| with u = 2^-53 (Higham 2002, eq. 4.4), i.e. below
        n * 1.2e-16 on each power mean for values in [-1, 1]: far below any LDP noise variance,
        so no compensated summation is needed.
        """
        table = np.asarray(values)
        if table.ndim == 1:
            table = table[:, None]
        if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
            raise LDPValueError(f"data must be a 2-D (users, dims) array, got shape {np.shape(values)}")
        if not np.issubdtype(table.dtype, np.number) or np.iscomplexobj(table):
            table = check_values(table)  # a clear error for non-numeric data
        users, dims = table.shape
        width, tile_values = min(dims, width), block
        # One array for every per-column output, rows: sum t, t^2, t^4 (divided by n in place once a
        # strip is summed: the power means), minimum, maximum, S_j^2. One allocation of >= 4 MiB at
        # large d (numpy asks for huge pages), and no temporaries: the pass's only fresh memory.
        result = np.empty((6, dims))
        result[:3] = 0.0
        result[3], result[4] = np.inf, -np.inf
        compiled = users * dims >= _COMPILED_MINIMUM
        kernel, finish = (_compiled_kernel(), _compiled_finish()) if compiled else (None, _numpy_finish)
        flags = table.flags
        in_place = table.dtype in (np.float64, np.float32) and flags.c_contiguous and flags.writeable and flags.aligned
        tile_width = min(width, _TILE_WIDTH)
        rows = max(1, tile_values // tile_width)

        def outputs(columns: slice) -> tuple[np.ndarray, ...]:
            return tuple(result[k, columns] for k in range(5))

        def strip_pass(first: int) -> bool:
            """Sums and extremes of columns [first, first + width), written only to those columns,
            then their power means and S_j^2 while they are in cache; False if a value is out of domain."""
            columns = slice(first, first + width)
            if not compiled:
                _numpy_strip(table[:, columns], *outputs(columns))
            elif in_place:
                kernel(table, first, *outputs(columns))
            else:  # converted in narrow tiles (they copy fast from any layout); each column's row order is kept
                end = min(first + width, dims)
                for left in range(first, end, tile_width):
                    tile_columns = slice(left, min(left + tile_width, end))
                    for start in range(0, users, rows):
                        tile = np.array(table[start : start + rows, tile_columns], dtype=float, order="C")
                        kernel(tile, 0, *outputs(tile_columns))
            return finish(result[:, columns], float(users))

        strips = range(0, dims, width)
        if workers is None:
            workers = usable_cores() if users * dims >= _PARALLEL_MINIMUM else 1
        workers = min(len(strips), check_positive_int(workers, "workers"))
        if workers == 1:
            in_domain = all([strip_pass(first) for first in strips])
        else:
            pool = ThreadPoolExecutor(workers)
            try:
                in_domain = all(list(pool.map(strip_pass, strips)))
            finally:  # on an error or Ctrl-C, drop the strips not started yet
                pool.shutdown(cancel_futures=True)
        if not in_domain:
            check_values(table)  # raises the validation's own message (NaN/inf or out of domain)
        mean, mean_sq, mean_fourth, low, high, variance = result
        return cls(users, mean, mean_sq, variance, mean_fourth, *((low, high) if ranges else (None, None)))

    @classmethod
    def from_summary(cls, users: int, mean, mean_sq=None, variance=None) -> ColumnMoments:
        """Moments given directly: `mean` and `mean_sq` (1/n sum t^2) or `variance` (S^2, divisor n-1), or both."""
        users = check_positive_int(users, "users")
        mean = _finite_vector(mean, "mean")
        if mean_sq is None and variance is None:
            raise LDPValueError("give mean_sq or variance (S_j^2 with divisor n-1) besides mean")
        if np.any(np.abs(mean) > 1 + _TOLERANCE):
            raise LDPValueError(f"column means must lie in [-1, 1]; found max |mean| = {np.abs(mean).max():.6g}")
        correction = (users - 1) / users  # S^2 (n-1)/n = mean_sq - mean^2
        if mean_sq is not None and variance is not None:  # both given (as `to_dict` writes): must agree
            mean_sq = _finite_vector(mean_sq, "mean_sq", like=mean)
            variance = _finite_vector(variance, "variance", like=mean)
            if not np.allclose(mean_sq, mean**2 + variance * correction, rtol=1e-6, atol=1e-9):
                raise LDPValueError("mean_sq and variance disagree (mean_sq = mean^2 + variance (n-1)/n)")
        elif variance is None:
            mean_sq = _finite_vector(mean_sq, "mean_sq", like=mean)
            spread = np.maximum(mean_sq - mean**2, 0.0)
            variance = spread / correction if users > 1 else np.zeros_like(mean)
        else:
            variance = _finite_vector(variance, "variance", like=mean)
            if np.any(variance < 0):
                raise LDPValueError("variance (S_j^2) must be >= 0")
            mean_sq = mean**2 + variance * correction
        if np.any(mean_sq < mean**2 - _TOLERANCE) or np.any(mean_sq > 1 + _TOLERANCE):
            raise LDPValueError(
                "mean_sq must lie in [mean^2, 1] for values in [-1, 1]; check the moments (and their domain)"
            )
        return cls(users, mean, np.minimum(mean_sq, 1.0), variance)

    @classmethod
    def read(cls, path: str | Path, *, users: int | None = None) -> ColumnMoments:
        """Summary moments from a .json ({"users": n, "mean": [...], "mean_sq"|"variance": [...]})
        or a .csv with columns mean and mean_sq or variance (one row per dimension; give `users`)."""
        path = Path(path)
        if not path.is_file():
            raise LDPValueError(f"moments file {path} does not exist")
        try:
            if path.suffix.lower() == ".json":
                payload = json.loads(path.read_text())
            elif path.suffix.lower() == ".csv":
                import pandas as pd

                payload = {k: v.to_numpy() for k, v in pd.read_csv(path).items()}
            else:
                raise LDPValueError(f"moments file {path} must end in .json or .csv")
        except (OSError, ValueError) as error:
            if isinstance(error, LDPValueError):
                raise
            raise LDPValueError(f"cannot read moments from {path}: {error}") from None
        if not isinstance(payload, dict) or "mean" not in payload:
            raise LDPValueError(f"{path} must hold per-dimension 'mean' and 'mean_sq' or 'variance'")
        stored = payload.get("users")
        if users is None:
            users = stored
        if users is None:
            raise LDPValueError(f"{path} does not say how many users it summarizes: give users")
        return cls.from_summary(users, payload["mean"], payload.get("mean_sq"), payload.get("variance"))

    # --- views ------------------------------------------------------------------------------------
    def with_users(self, users: int) -> ColumnMoments:
        """The same column distribution for a population of `users` (S_j^2 re-scaled to divisor users-1)."""
        users = check_positive_int(users, "users")
        if users == self.users:
            return self
        return ColumnMoments.from_summary(users, self.mean, mean_sq=self.mean_sq)

    def rescaled(self, low: float, high: float) -> ColumnMoments:
        """Moments of t = (x - c)/h for x in the region [low, high] (c centre, h half-width): the
        scale a personalized-LDP group randomizes on (mechanisms.md, PLDP). The power means follow
        from the binomial expansion of ((x - c)/h)^k."""
        centre, half = (low + high) / 2.0, (high - low) / 2.0
        mean = (self.mean - centre) / half
        mean_sq = (self.mean_sq - 2.0 * centre * self.mean + centre**2) / half**2
        ranges = (
            (None, None) if self.minimum is None else ((self.minimum - centre) / half, (self.maximum - centre) / half)
        )
        # ((x - c)/h)^4 needs the mean cube, which is not kept: only a centred region keeps the fourth power.
        fourth = self.mean_fourth / half**4 if self.has_values and centre == 0.0 else None
        return ColumnMoments(self.users, mean, mean_sq, self.variance / half**2, fourth, *ranges)

    def to_dict(self) -> dict:
        return {
            "users": self.users,
            "mean": self.mean.tolist(),
            "mean_sq": self.mean_sq.tolist(),
            "variance": self.variance.tolist(),
        }


def _finite_vector(values, name: str, like: np.ndarray | None = None) -> np.ndarray:
    try:
        vector = np.atleast_1d(np.asarray(values, dtype=float))
    except (TypeError, ValueError):
        raise LDPValueError(f"{name} must be a list of numbers") from None
    if vector.ndim != 1 or not np.all(np.isfinite(vector)):
        raise LDPValueError(f"{name} must be a 1-D list of finite numbers (one per dimension)")
    if like is not None and vector.shape != like.shape:
        raise LDPValueError(f"{name} has {vector.size} entries but mean has {like.size}")
    return vector


# --- the data pass's strip kernels: both compute the same sums in the same order (from_array) ------
def _accumulate_rows(values, first, sum_t, sum_t2, sum_t4, low, high):
    """Adds rows of values[:, first:first + len(sum_t)] to the column sums of t, t^2, (t^2)^2 (each
    in row order) and updates the column minimum and maximum. Compiled by `_compiled_kernel`.

    Eight rows per sweep over the strip, so the sums are loaded and stored once per eight values
    (the vectorized loop runs over columns; no sum is reassociated, so the bits are those of
    adding row by row; ~25% faster than four rows, measured at 10^8 values). The value is read
    once, as float64.
    """
    width = sum_t.shape[0]
    stop = first + width
    rows = values.shape[0]
    grouped = rows - rows % 8
    for i in range(0, grouped, 8):
        row0, row1 = values[i, first:stop], values[i + 1, first:stop]
        row2, row3 = values[i + 2, first:stop], values[i + 3, first:stop]
        row4, row5 = values[i + 4, first:stop], values[i + 5, first:stop]
        row6, row7 = values[i + 6, first:stop], values[i + 7, first:stop]
        for j in range(width):
            t0, t1 = np.float64(row0[j]), np.float64(row1[j])
            t2, t3 = np.float64(row2[j]), np.float64(row3[j])
            t4, t5 = np.float64(row4[j]), np.float64(row5[j])
            t6, t7 = np.float64(row6[j]), np.float64(row7[j])
            q0, q1, q2, q3 = t0 * t0, t1 * t1, t2 * t2, t3 * t3
            q4, q5, q6, q7 = t4 * t4, t5 * t5, t6 * t6, t7 * t7
            p0, p1, p2, p3 = q0 * q0, q1 * q1, q2 * q2, q3 * q3
            p4, p5, p6, p7 = q4 * q4, q5 * q5, q6 * q6, q7 * q7
            sum_t[j] = (((((((sum_t[j] + t0) + t1) + t2) + t3) + t4) + t5) + t6) + t7
            sum_t2[j] = (((((((sum_t2[j] + q0) + q1) + q2) + q3) + q4) + q5) + q6) + q7
            sum_t4[j] = (((((((sum_t4[j] + p0) + p1) + p2) + p3) + p4) + p5) + p6) + p7
            low[j] = min(low[j], min(min(min(t0, t1), min(t2, t3)), min(min(t4, t5), min(t6, t7))))
            high[j] = max(high[j], max(max(max(t0, t1), max(t2, t3)), max(max(t4, t5), max(t6, t7))))
    for i in range(grouped, rows):
        row = values[i, first:stop]
        for j in range(width):
            t = np.float64(row[j])
            q = t * t
            sum_t[j] += t
            sum_t2[j] += q
            sum_t4[j] += q * q
            low[j] = min(low[j], t)
            high[j] = max(high[j], t)


@lru_cache(maxsize=1)
def _compiled_kernel():
    """`_accumulate_rows` compiled (numba; no fastmath: IEEE arithmetic, the accuracy contract).

    numba is imported here, on the first large pass. cache=True keeps the machine code on disk, so
    later processes load it instead of compiling (one signature per dtype, float64 and float32)."""
    import numba

    try:
        return numba.njit(cache=True, nogil=True)(_accumulate_rows)
    except RuntimeError:  # no writable cache directory anywhere: compile in memory, once per process
        return numba.njit(nogil=True)(_accumulate_rows)


def _numpy_strip(strip, sum_t, sum_t2, sum_t4, low, high) -> None:
    """`_accumulate_rows` on a whole strip (starting from zero sums) in numpy, for small inputs.

    ufunc.accumulate adds in row order by definition (r_i = r_(i-1) + s_i), the kernel's order.
    It keeps every partial sum: fine below _COMPILED_MINIMUM values."""
    t = np.asarray(strip, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):  # out-of-domain data: from_array's check reports it
        squares = t * t
        sum_t[:] = np.add.accumulate(t, axis=0)[-1]
        sum_t2[:] = np.add.accumulate(squares, axis=0)[-1]
        sum_t4[:] = np.add.accumulate(squares * squares, axis=0)[-1]
    np.minimum(low, t.min(axis=0), out=low)
    np.maximum(high, t.max(axis=0), out=high)


def _finish_columns(columns, users):
    """A summed strip's power means and S_j^2, in place: rows 0-2 of `columns` (sums of t, t^2,
    t^4) become sum / n, row 5 becomes max(sum t^2 - (n mean) mean, 0) / (n - 1) (0 for n = 1),
    the same IEEE operations in the same order as `_numpy_finish`. Returns whether every sum is
    finite and the extremes (rows 3, 4) lie in [-1, 1]. Compiled by `_compiled_finish`."""
    in_domain = True
    for j in range(columns.shape[1]):
        s1, s2, s4 = columns[0, j], columns[1, j], columns[2, j]
        finite = (s1 - s1 == 0.0) and (s2 - s2 == 0.0) and (s4 - s4 == 0.0)  # False for NaN and inf
        in_domain = in_domain and finite and columns[3, j] >= -1.0 and columns[4, j] <= 1.0
        mean = s1 / users
        spread = s2 - users * mean * mean
        spread = 0.0 if spread < 0.0 else spread  # np.maximum(spread, 0.0): NaN stays NaN
        columns[0, j], columns[1, j], columns[2, j] = mean, s2 / users, s4 / users
        columns[5, j] = spread / (users - 1.0) if users > 1.0 else 0.0
    return in_domain


@lru_cache(maxsize=1)
def _compiled_finish():
    """`_finish_columns` compiled (numba, no fastmath; error_model="numpy": IEEE division)."""
    import numba

    try:
        return numba.njit(cache=True, nogil=True, error_model="numpy")(_finish_columns)
    except RuntimeError:  # no writable cache directory anywhere: compile in memory, once per process
        return numba.njit(nogil=True, error_model="numpy")(_finish_columns)


def _numpy_finish(columns: np.ndarray, users: float) -> bool:
    """`_finish_columns` in numpy (small inputs): the same operations, array by array."""
    sums = columns[:3]
    with np.errstate(over="ignore", invalid="ignore"):  # out-of-domain data: from_array's check reports it
        in_domain = bool(np.isfinite(sums).all() and columns[3].min() >= -1.0 and columns[4].max() <= 1.0)
        mean = sums[0] / users
        spread = np.maximum(sums[1] - users * mean * mean, 0.0)
        sums /= users
        columns[5] = spread / (users - 1.0) if users > 1.0 else 0.0
    return in_domain

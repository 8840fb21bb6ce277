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

The data pass (`from_array`) is the predictor's only O(nd) work: one blocked pass over
cache-sized tiles computes the per-column power sums, column strips on a thread pool
(issue 11 item 9; the result is the same bit for bit on any number of threads). S_j^2 then
comes from the power sums, (sum t^2 - n mean^2)/(n - 1): for values in [-1, 1] its absolute
rounding error is about 1e-16, far below any LDP noise variance.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ldpfed.validation import LDPValueError, check_positive_int, check_values

# Rounding slack when checking mean_sq >= mean^2 and |mean| <= 1 on user-supplied summaries.
_TOLERANCE = 1e-9
MOMENT_COLUMNS = ("mean", "mean_sq", "variance")
# Below this many values the data pass runs on one thread (starting threads would cost more than they save).
_PARALLEL_MINIMUM = 1 << 20


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

    def summary(self) -> "ColumnMoments":
        """Only the summary moments (mean, mean square, variance), as a moments file would give."""
        return ColumnMoments(self.users, self.mean, self.mean_sq, self.variance)

    # --- constructors -----------------------------------------------------------------------------
    @classmethod
    def from_array(
        cls, values, *, ranges: bool = False, block: int = 1 << 18, width: int = 8192, workers: int | None = None
    ) -> "ColumnMoments":
        """Moments of a (users, dims) array of values in [-1, 1] (rows = users), in one pass.

        The array goes in tiles of `width` columns by `block / width` rows (cache-sized, with a
        preallocated temporary), a few vectorized operations per tile: the column sums of t, t^2
        and t^4, and the largest t^2 (the domain check: |t| <= 1, and no NaN). Tall tiles keep
        the per-tile column accumulations small next to the tile's own work, also for wide data.
        `ranges=True` also keeps each column's minimum and maximum (two more operations per
        tile), which personalized-LDP groups check against their regions. The default tile,
        32 x 8192 (2 MiB), is the fastest measured that OpenBLAS still sums on the calling thread:
        from about 460,800 values a matrix-vector product spreads over OpenBLAS's own threads, which
        on a busy machine costs 10x in waiting.

        Column strips of `width` columns go to `workers` threads (default: the usable cores;
        numpy releases the GIL in ufuncs and BLAS). Each strip's sums are written only to its
        own columns and summed in the same order as by one thread, so the result does not depend
        on `workers`, bit for bit.
        """
        table = np.asarray(values)
        if table.ndim == 1:
            table = table[:, None]
        if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
            raise LDPValueError(f"data must be a 2-D (users, dims) array, got shape {np.shape(values)}")
        if not np.issubdtype(table.dtype, np.number) or np.iscomplexobj(table):
            table = check_values(table)  # a clear error for non-numeric data
        users, dims = table.shape
        width = min(dims, width)
        rows = max(1, block // width)
        sums = np.zeros((3, dims))  # sum t, sum t^2, sum t^4
        low, high = (np.full(dims, np.inf), np.full(dims, -np.inf)) if ranges else (None, None)

        def strip_pass(first: int) -> float:
            """Sums of columns [first, first + width) into `sums` (and the range); returns the largest t^2."""
            columns = slice(first, first + width)
            largest_square = 0.0
            square = np.empty((rows, min(width, dims - first)))
            ones = np.ones(rows)
            for start in range(0, users, rows):
                tile = np.asarray(table[start : start + rows, columns], dtype=float)
                t2 = square[: tile.shape[0]]
                np.multiply(tile, tile, out=t2)
                # column sums as products with a ones vector (BLAS): ~1.7x cheaper than sum(axis=0)
                sums[0, columns] += ones[: tile.shape[0]] @ tile
                sums[1, columns] += ones[: tile.shape[0]] @ t2
                sums[2, columns] += np.einsum("ij,ij->j", t2, t2)
                largest_square = np.maximum(largest_square, t2.max())  # propagates NaN (builtin max would not)
                if ranges:
                    np.minimum(low[columns], tile.min(axis=0), out=low[columns])
                    np.maximum(high[columns], tile.max(axis=0), out=high[columns])
            return largest_square

        strips = range(0, dims, width)
        if workers is None:
            workers = usable_cores() if users * dims >= _PARALLEL_MINIMUM else 1
        workers = min(len(strips), check_positive_int(workers, "workers"))
        if workers == 1:
            largest = [strip_pass(first) for first in strips]
        else:
            pool = ThreadPoolExecutor(workers)
            try:
                largest = list(pool.map(strip_pass, strips))
            finally:  # on an error or Ctrl-C, drop the strips not started yet
                pool.shutdown(cancel_futures=True)
        if not np.max(largest) <= 1.0:  # also NaN (np.max propagates it; every comparison with it is False)
            check_values(table)  # raises the validation's own message (NaN/inf or out of domain)
        mean, mean_sq, mean_fourth = sums / users
        spread = np.maximum(sums[1] - users * mean * mean, 0.0)
        variance = spread / (users - 1) if users > 1 else np.zeros(dims)
        return cls(users, mean, mean_sq, variance, mean_fourth, low, high)

    @classmethod
    def from_summary(cls, users: int, mean, mean_sq=None, variance=None) -> "ColumnMoments":
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
    def read(cls, path: str | Path, *, users: int | None = None) -> "ColumnMoments":
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
    def with_users(self, users: int) -> "ColumnMoments":
        """The same column distribution for a population of `users` (S_j^2 re-scaled to divisor users-1)."""
        users = check_positive_int(users, "users")
        if users == self.users:
            return self
        return ColumnMoments.from_summary(users, self.mean, mean_sq=self.mean_sq)

    def rescaled(self, low: float, high: float) -> "ColumnMoments":
        """Moments of t = (x - c)/h for x in the region [low, high] (c centre, h half-width): the
        scale a personalized-LDP group randomizes on (mechanisms.md, PLDP). The power means follow
        from the binomial expansion of ((x - c)/h)^k."""
        centre, half = (low + high) / 2.0, (high - low) / 2.0
        mean = (self.mean - centre) / half
        mean_sq = (self.mean_sq - 2.0 * centre * self.mean + centre**2) / half**2
        ranges = (None, None) if self.minimum is None else ((self.minimum - centre) / half, (self.maximum - centre) / half)
        # ((x - c)/h)^4 needs the mean cube, which is not kept: only a centred region keeps the fourth power.
        fourth = self.mean_fourth / half**4 if self.has_values and centre == 0.0 else None
        return ColumnMoments(self.users, mean, mean_sq, self.variance / half**2, fourth, *ranges)

    def to_dict(self) -> dict:
        return {"users": self.users, "mean": self.mean.tolist(), "mean_sq": self.mean_sq.tolist(),
                "variance": self.variance.tolist()}


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

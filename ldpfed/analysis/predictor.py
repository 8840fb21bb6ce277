"""The CLT utility predictor: the collector's error per dimension before running anything
(analysis.md, "Per-dimension parameters"; thesis Theorem 1).

theta_hat_j - theta_bar_j ~ N(delta_j, sigma_j^2) with, for the per-value mechanism (budget eps/m)
with b(t) = b0 + b1 t and V(t) = v0 + v1 t + v2 t^2:

    delta_j   = b0 + b1 mean_j                                    (mean bias over the column)
    sigma_j^2 = (v0 + v1 mean_j + v2 mean_sq_j) / r_j             (randomizer noise)
              + (1 + b1)^2 S_j^2 (1/r_j - 1/n)                    (averaging r_j of n users)
    MSE       = (1/d) sum_j (sigma_j^2 + delta_j^2),   r_j = n m / d unless counts are given.

The sampling term is the exact variance of the mean of E[t*|t] = b0 + (1+b1) t over r_j users
drawn without replacement. The spec writes S_j^2 without the factor (1+b1)^2: the same for every
unbiased mechanism, but a biased one (square wave, raw estimator) shrinks the data spread by
(1+b1), and leaving the factor out over-predicts the error for m < d. With S_j^2 on divisor n-1
(moments.py) the term is exact given r_j; using E[r_j] = nm/d for the random r_j ~ Bin(n, m/d)
under-states E[1/r_j] by a relative (1 - m/d)/r_j (0.1% at r_j = 1000).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpfed.analysis.berry_esseen import BerryEsseenBound, berry_esseen
from ldpfed.analysis.moments import ColumnMoments
from ldpfed.data import load_tuples
from ldpfed.data.tabular import TABLE_SUFFIXES
from ldpfed.deviation import DeviationModel
from ldpfed.mechanisms.base import Mechanism
from ldpfed.multidim import per_value_mechanism
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int, check_report_dims


@dataclass(frozen=True, eq=False)
class Prediction:
    """Predicted deviation N(bias_j, sigma2_j) of every dimension, and what it adds up to.

    `bias` is analysis.md's delta_j (named so to keep it apart from the privacy delta).
    """

    mechanism: dict  # description of the per-value randomizer(s)
    epsilon: float | None  # a user's total budget (eps/m per reported value)
    delta: float | None
    users: int
    dims: int
    report_dims: int
    r: np.ndarray  # reports per dimension
    bias: np.ndarray  # delta_j
    noise_variance: np.ndarray  # E[V]/r_j
    sampling_variance: np.ndarray  # (1+b1)^2 S_j^2 (1/r_j - 1/n)
    mean_report_variance: np.ndarray  # E[V] over the column (the per-report s^2)
    sampling_coefficient: np.ndarray  # (1+b1)^2 S_j^2
    berry_esseen: BerryEsseenBound
    data_source: str

    @property
    def sigma2(self) -> np.ndarray:
        return self.noise_variance + self.sampling_variance

    @property
    def bias_sq(self) -> float:
        """Mean squared bias (1/d) sum_j delta_j^2."""
        return float(np.mean(self.bias**2))

    @property
    def variance(self) -> float:
        """Mean variance (1/d) sum_j sigma_j^2."""
        return float(np.mean(self.sigma2))

    @property
    def mse(self) -> float:
        return self.bias_sq + self.variance

    def deviation_model(self) -> DeviationModel:
        """N(delta_j, sigma_j^2) per dimension, for confidence statements and HDR4ME* recalibration."""
        return DeviationModel(self.bias, np.sqrt(self.sigma2), source="model")

    def to_dict(self, per_dimension: bool = True) -> dict:
        summary = {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "users": self.users,
            "dims": self.dims,
            "report_dims": self.report_dims,
            "data": self.data_source,
            "mse": self.mse,
            "bias_sq": self.bias_sq,
            "variance": self.variance,
            "noise_variance": float(np.mean(self.noise_variance)),
            "sampling_variance": float(np.mean(self.sampling_variance)),
            "berry_esseen": self.berry_esseen.max,
            "berry_esseen_detail": self.berry_esseen.summary(),
        }
        if per_dimension:
            summary["per_dimension"] = {
                "r": self.r,
                "delta": self.bias,
                "sigma2": self.sigma2,
                "noise_variance": self.noise_variance,
                "sampling_variance": self.sampling_variance,
                "berry_esseen": self.berry_esseen.bound,
                "berry_esseen_non_identical": self.berry_esseen.non_identical,
            }
        return summary


def predict(
    mechanism: str | Mechanism,
    epsilon: float | None = None,
    users: int | None = None,
    dims: int | None = None,
    report_dims: int | None = None,
    data=None,
    *,
    delta: float | None = None,
    counts=None,
    seed: int | np.random.Generator | None = None,
    domain: tuple[float, float] = (-1.0, 1.0),
    **mechanism_options,
) -> Prediction:
    """Predict the collector's error for `mechanism` with a user's budget `epsilon` over m of d dims.

    mechanism: a registry name (the per-value randomizer gets eps/m and delta/m) or a Mechanism
      instance, taken as the per-value randomizer itself (then `epsilon`, if given, must be m times
      its budget).
    data: a (users, dims) array in [-1, 1]; a synthetic set name or a .csv/.npy/.parquet path
      (`ldpfed.data.load_tuples`, generated from `seed`; a file's values are mapped from `domain`);
      a .json file of summary moments; a ColumnMoments; or None for mechanisms whose bias and
      variance do not depend on t (Laplace, Gaussian). Without data and m < d the sampling term
      takes its worst case S_j^2 = n/(n-1), so the prediction is an upper bound (said in
      `data_source`).
    counts: actual reports per dimension r_j (default E[r_j] = n m / d). Where r_j = 0 the
      estimator outputs 0, so the deviation is exactly -theta_bar_j (bias -mean_j, variance 0).
    """
    moments, data_source = load_moments(data, users, dims, seed, domain)
    users = check_positive_int(users if users is not None else moments.users, "users")
    dims = check_positive_int(dims if dims is not None else moments.dims, "dims")
    m = check_report_dims(dims if report_dims is None else report_dims, dims)
    per_value, epsilon, delta = _resolve_mechanism(mechanism, epsilon, delta, m, mechanism_options)

    if moments is None:
        if not _independent_of_t(per_value):
            raise LDPValueError(
                f"the error of {per_value.name} depends on the data: give data "
                "(a synthetic set name, a data file, or per-dimension moments)"
            )
        worst_spread = users / (users - 1) if users > 1 else 0.0
        moments = ColumnMoments.from_summary(users, np.zeros(dims), variance=np.full(dims, worst_spread))
        if m < dims:
            data_source = "none: sampling term at its worst case S_j^2 = n/(n-1) (an upper bound)"
    moments = _match_shape(moments, users, dims)
    r = _reports(counts, users, dims, m)

    b0, b1 = per_value.bias_coefficients
    v0, v1, v2 = per_value.variance_coefficients
    bias = b0 + b1 * moments.mean  # analysis.md: delta_j = (1/n) sum_i b(t_ij)
    mean_variance = np.maximum(v0 + v1 * moments.mean + v2 * moments.mean_sq, 0.0)  # (1/n) sum_i V(t_ij)
    sampling_coefficient = (1.0 + b1) ** 2 * moments.variance
    reported = r > 0  # given counts may hold r_j = 0: the estimate is then 0, off by -theta_bar_j
    inverse_r = np.divide(1.0, r, out=np.zeros_like(r), where=reported)
    sampling_variance = np.where(reported, np.maximum(sampling_coefficient * (inverse_r - 1.0 / users), 0.0), 0.0)
    bias = np.where(reported, bias, -moments.mean)
    return Prediction(
        mechanism=per_value.describe(),
        epsilon=epsilon,
        delta=delta,
        users=users,
        dims=dims,
        report_dims=m,
        r=r,
        bias=np.broadcast_to(bias, (dims,)).astype(float),
        noise_variance=np.where(reported, mean_variance * inverse_r, 0.0),
        sampling_variance=sampling_variance,
        mean_report_variance=np.broadcast_to(mean_variance, (dims,)).astype(float),
        sampling_coefficient=sampling_coefficient,
        berry_esseen=berry_esseen(per_value, moments, r),  # 0 where r_j = 0 (nothing random)
        data_source=data_source,
    )


def _independent_of_t(mechanism: Mechanism) -> bool:
    _, b1 = mechanism.bias_coefficients
    _, v1, v2 = mechanism.variance_coefficients
    return b1 == 0 and v1 == 0 and v2 == 0


def _resolve_mechanism(mechanism, epsilon, delta, m, options) -> tuple[Mechanism, float, float | None]:
    """The per-value randomizer and the user's total (epsilon, delta)."""
    if isinstance(mechanism, Mechanism):
        if options:
            raise LDPValueError("mechanism options apply to a mechanism name, not to a Mechanism instance")
        total = mechanism.epsilon * m
        if epsilon is not None and not math.isclose(check_epsilon(epsilon), total, rel_tol=1e-9):
            raise LDPValueError(
                f"a Mechanism instance is the per-value randomizer: its budget {mechanism.epsilon:g} "
                f"times report_dims={m} is {total:g}, but epsilon={epsilon!r} was given"
            )
        total_delta = None if mechanism.delta is None else mechanism.delta * m
        return mechanism, total, total_delta
    if epsilon is None:
        raise LDPValueError("epsilon (a user's total budget) is required with a mechanism name")
    per_value = per_value_mechanism(mechanism, epsilon, m, delta, **options)
    return per_value, check_epsilon(epsilon), None if per_value.delta is None else per_value.delta * m


def load_moments(data, users=None, dims=None, seed=None, domain=(-1.0, 1.0)) -> tuple[ColumnMoments | None, str]:
    """Column moments of any accepted `data` (see `predict`) and a label of where they came from.

    Load once and pass the moments to several predictions (e.g. to compare mechanisms).
    """
    if data is None:
        return None, "none (the error does not depend on the data)"
    if isinstance(data, ColumnMoments):
        return data, "summary moments"
    if isinstance(data, (str, Path)):
        if Path(data).suffix.lower() == ".json":
            return ColumnMoments.read(data, users=None), f"summary moments from {data}"
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        values = load_tuples(data, users=users, dims=dims, rng=rng, domain=domain)
        is_file = Path(data).suffix.lower() in TABLE_SUFFIXES
        return ColumnMoments.from_array(values), f"file {data}" if is_file else f"synthetic {data} (seed {seed})"
    return ColumnMoments.from_array(data), "array"


def _match_shape(moments: ColumnMoments, users: int, dims: int) -> ColumnMoments:
    if moments.dims != dims:
        raise LDPValueError(f"the data have {moments.dims} dimensions (columns) but dims={dims}")
    if moments.users != users:
        if moments.has_values:
            raise LDPValueError(f"the data have {moments.users} rows (users) but users={users}")
        moments = moments.with_users(users)  # the same column distribution, another population size
    return moments


def _reports(counts, users: int, dims: int, m: int) -> np.ndarray:
    if counts is None:
        return np.full(dims, users * m / dims)
    r = np.asarray(counts, dtype=float)
    if r.shape != (dims,) or not np.all(np.isfinite(r)) or np.any(r < 0) or np.any(r > users):
        raise LDPValueError(f"counts must hold {dims} report counts in [0, users={users}]")
    return r

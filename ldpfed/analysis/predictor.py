"""The CLT utility predictor: the collector's error per dimension before running anything
(analysis.md, "Per-dimension parameters"; thesis Theorem 1).

theta_hat_j - theta_bar_j ~ N(delta_j, sigma_j^2) with, for the per-value mechanism (budget eps/m)
with b(t) = b0 + b1 t and V(t) = v0 + v1 t + v2 t^2, given r_j > 0 reports:

    delta_j   = b0 + b1 mean_j                                    (mean bias over the column)
    sigma_j^2 = (v0 + v1 mean_j + v2 mean_sq_j) / r_j             (randomizer noise)
              + (1 + b1)^2 S_j^2 (1/r_j - 1/n)                    (averaging r_j of n users)
    MSE       = (1/d) sum_j (sigma_j^2 + delta_j^2)

The sampling term is the exact variance of the mean of E[t*|t] = b0 + (1+b1) t over r_j users
drawn without replacement. The spec writes S_j^2 without the factor (1+b1)^2: the same for every
unbiased mechanism, but a biased one (square wave, raw estimator) shrinks the data spread by
(1+b1), and leaving the factor out over-predicts the error for m < d. With S_j^2 on divisor n-1
(moments.py) the term is exact given r_j.

Random report counts (an ldpfed decision, docs/decisions.md). Unless actual counts are
given, r_j ~ Binomial(n, m/d): every user reports j with probability m/d, independently of the
others, and given r_j the reporters are a uniform subset. The conditional error above is then
averaged over r_j exactly, not evaluated at E[r_j] = nm/d (that under-states E[1/r_j]: the MSE was
1.26x the prediction at E[r_j] = 5):
- r_j > 0: 1/r_j becomes h = E[1/r_j | r_j > 0] (`inverse_report_moment`);
- r_j = 0 (probability P0 = (1 - m/d)^n): the estimator returns 0 (`multidim.mean_estimate`), so
  the deviation is exactly -theta_bar_j. This costs P0 theta_bar_j^2 in the MSE, and in the
  normal model the deviation's mean becomes (1 - P0) delta_j - P0 theta_bar_j and its variance
  gains P0 (1 - P0) (delta_j + theta_bar_j)^2 (`no_report_variance`).
So MSE_j = (1 - P0) [delta_j^2 + E[V] h + (1+b1)^2 S_j^2 (h - 1/n)] + P0 theta_bar_j^2 exactly.
With m = d (or given counts) r_j is fixed: h = 1/r_j and P0 is 0 (or 1 where r_j = 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.analysis.berry_esseen import POOR_NORMAL_APPROXIMATION, BerryEsseenBound
from ldpfed.analysis.moments import ColumnMoments
from ldpfed.analysis.terms import dimension_terms
from ldpfed.data import load_tuples
from ldpfed.data.tabular import TABLE_SUFFIXES
from ldpfed.mechanisms.base import Mechanism
from ldpfed.mechanisms.multidim import per_value_mechanism
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
    r: np.ndarray  # reports per dimension: E[r_j] = nm/d, or the given counts
    bias: np.ndarray  # E[theta_hat_j - theta_bar_j] = (1 - P0) delta_j - P0 theta_bar_j
    noise_variance: np.ndarray  # (1 - P0) E[V] h
    sampling_variance: np.ndarray  # (1 - P0) (1+b1)^2 S_j^2 (h - 1/n)
    mean_report_variance: np.ndarray  # E[V] over the column (the per-report s^2)
    sampling_coefficient: np.ndarray  # (1+b1)^2 S_j^2
    berry_esseen: BerryEsseenBound
    data_source: str
    report_bias: np.ndarray  # delta_j = b0 + b1 mean_j, the bias given r_j > 0
    inverse_reports: np.ndarray  # h = E[1/r_j | r_j > 0] (1/r_j for given counts; 0 where none)
    no_report_probability: np.ndarray  # P0 = P(r_j = 0)
    no_report_variance: np.ndarray  # P0 (1 - P0) (delta_j + theta_bar_j)^2

    @property
    def sigma2(self) -> np.ndarray:
        return self.noise_variance + self.sampling_variance + self.no_report_variance

    @property
    def normal_approximation_warning(self) -> str | None:
        """One line when the normal model of a dimension's deviation is poor (None otherwise): the
        Berry–Esseen bound above POOR_NORMAL_APPROXIMATION, or dimensions likely to get no report.
        The MSE stays exact; confidence statements and HDR4ME*'s weights rest on the normal model."""
        reasons = []
        if self.berry_esseen.max > POOR_NORMAL_APPROXIMATION:
            reasons.append(f"Berry–Esseen bound {self.berry_esseen.max:.3g} > {POOR_NORMAL_APPROXIMATION:g}")
        no_report = float(np.max(self.no_report_probability))
        if 0.0 < no_report and no_report > POOR_NORMAL_APPROXIMATION / 10:
            reasons.append(f"P(r_j = 0) up to {no_report:.3g} (the estimate is then 0)")
        if not reasons:
            return None
        return (
            "normal approximation poor (" + "; ".join(reasons) + "): the MSE is exact, but confidence "
            "intervals and HDR4ME* weights from N(delta_j, sigma_j^2) may be off"
        )

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

    def mse_of_average(self, rounds: int) -> float:
        """MSE of the average of `rounds` independent collections' estimates of the same data: the
        bias stays, the variance is divided, (1/d) sum_j (delta_j^2 + sigma_j^2 / rounds)."""
        return float(np.mean(self.bias**2 + self.sigma2 / rounds))

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
            "no_report_variance": float(np.mean(self.no_report_variance)),
            "no_report_probability": float(np.max(self.no_report_probability)),
            "inverse_reports": float(np.mean(self.inverse_reports)),
            "berry_esseen": self.berry_esseen.max,
            "berry_esseen_detail": self.berry_esseen.summary(),
            "normal_approximation_warning": self.normal_approximation_warning,
        }
        if per_dimension:
            summary["per_dimension"] = {
                "r": self.r,
                "delta": self.bias,
                "sigma2": self.sigma2,
                "noise_variance": self.noise_variance,
                "sampling_variance": self.sampling_variance,
                "no_report_variance": self.no_report_variance,
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
    counts: actual reports per dimension r_j. Default: r_j ~ Binomial(n, m/d), averaged over
      exactly (module docstring). Where r_j = 0 the estimator outputs 0, so the deviation is
      exactly -theta_bar_j (given counts: bias -mean_j, variance 0).
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
    # Without counts, r_j, P(r_j = 0) and E[1/r_j | r_j > 0] are the same in every dimension: they
    # stay scalars in the per-dimension arithmetic (terms.py: one compiled pass at large d) and are
    # spread to arrays as read-only views.
    if counts is None:
        r = users * m / dims
        no_report, inverse_r = inverse_report_moment(users, m / dims)
    else:
        r = _reports(counts, users, dims, m)
        no_report, inverse_r = _report_count_law(counts, r, users, m / dims)

    terms, source = dimension_terms(per_value, moments, r, no_report, inverse_r, users)
    return Prediction(
        mechanism=per_value.describe(),
        epsilon=epsilon,
        delta=delta,
        users=users,
        dims=dims,
        report_dims=m,
        r=_spread(r, dims),
        bias=terms.bias,
        noise_variance=terms.noise_variance,
        sampling_variance=terms.sampling_variance,
        mean_report_variance=terms.report_variance,
        sampling_coefficient=terms.sampling_coefficient,
        berry_esseen=BerryEsseenBound(  # 0 where r_j = 0
            terms.bound,
            terms.non_identical,
            np.broadcast_to(terms.report_variance, terms.bound.shape),
            terms.third_moment,
            source,
        ),
        data_source=data_source,
        report_bias=terms.report_bias,
        inverse_reports=_spread(inverse_r, dims),
        no_report_probability=_spread(no_report, dims),
        no_report_variance=terms.no_report_variance,
    )


def _spread(value, dims: int) -> np.ndarray:
    """A per-dimension array: `value` itself, or a scalar as a read-only (dims,) view."""
    return value if isinstance(value, np.ndarray) else np.broadcast_to(np.float64(value), (dims,))


def inverse_report_moment(users: int, fraction: float) -> tuple[float, float]:
    """(P(r = 0), E[1/r | r > 0]) for r ~ Binomial(n, q), q = m/d (module docstring).

    E[1/r; r > 0] = sum_k pmf(k)/k, summed as one vectorized pass over the k that carry mass:
    within 40 (sd + 1) of the mean n q, where the binomial tail beyond is below e^-50 (Bernstein),
    so the sum is exact to float precision; at most ~80 sqrt(nq) + 80 terms whatever n. Cached
    per (n, q): a prediction asks for the same pair again and again (scipy's pmf costs ~2 ms).
    """
    return _inverse_report_moment(check_positive_int(users, "users"), float(fraction))


@lru_cache(maxsize=256)
def _inverse_report_moment(users: int, fraction: float) -> tuple[float, float]:
    if fraction >= 1.0:
        return 0.0, 1.0 / users
    log_none = users * math.log1p(-fraction)
    reported = -math.expm1(log_none)  # P(r > 0), accurate also when it is tiny
    mean = users * fraction
    width = 40.0 * (math.sqrt(mean * (1.0 - fraction)) + 1.0)
    k = np.arange(max(1, math.floor(mean - width)), min(users, math.ceil(mean + width)) + 1, dtype=float)
    from scipy.stats import binom  # here: scipy.stats' import (~0.6 s) only where m < d reports per user

    partial = float(np.sum(binom.pmf(k, users, fraction) / k))
    return math.exp(log_none), partial / reported


def _report_count_law(counts, r: np.ndarray, users: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Per dimension (P(r_j = 0), E[1/r_j | r_j > 0]): from the binomial law, or the given counts
    (then P0 is 1 where r_j = 0 and h = 1/r_j elsewhere, 0 where r_j = 0)."""
    if counts is None:
        none, inverse = inverse_report_moment(users, fraction)
        return np.full(r.shape, none), np.full(r.shape, inverse)
    reported = r > 0
    return (~reported).astype(float), np.divide(1.0, r, out=np.zeros_like(r), where=reported)


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

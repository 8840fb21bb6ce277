"""Consistency post-processing of frequency estimates (Wang, Lopuhaä-Zwakenberg, Li, Skoric & Li,
"Locally Differentially Private Frequency Estimation with Consistency", NDSS 2020): the unbiased
estimates f~ of one attribute's k categories are made non-negative and/or summing to one. Each is
post-processing of released estimates (no privacy cost), applied per attribute (`categories`: the
attributes' sizes; empty: one attribute), vectorized over attributes by padding.

- base-pos: f_v = max(f~_v, 0) (non-negative; the sum is not fixed).
- norm: f_v = f~_v + (1 - sum f~) / k (sums to one; may stay negative).
- norm-mul: negatives to 0, then the positives scaled to sum to one (uniform if none is positive).
- norm-cut: negatives to 0, then the smallest threshold theta with sum_{f~_v >= theta} f~_v <= 1 and
  every estimate below theta to 0 (non-negative, sums to at most one).
- norm-sub: the Euclidean projection onto the simplex, `simplex` (`ldpfed.aggregation.simplex`).
- mle-apx: the maximum of the Gaussian approximate likelihood prod_v N(f~_v; f_v, sigma_v^2) over
  the simplex, sigma_v from the deviation model: f_v = max(f~_v - lambda sigma_v^2, 0) with lambda
  such that they sum to one (a projection weighted by 1/sigma_v^2; with equal sigma it is norm-sub).
  The paper's variance depends on the unknown f_v; ldpfed evaluates it where the deviation model
  does (plug-in: from the reports), which is the approximation of this reading.
- power: the posterior mean E[f_v | f~_v] under a power-law prior fitted to the estimates: the
  prior puts mass 1/k on each of the k Zipf frequencies a_i = i^-s / sum_j j^-s, f~_v ~ N(f_v,
  sigma_v^2), and s (in [0, 8]) maximizes the likelihood of the k estimates under that mixture.
  (ldpfed's reading of the paper's "fit a power-law distribution, then minimize the expected
  squared error"; non-negative, the sum is not fixed.)
- power-ns: power, then norm-sub.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import logsumexp

from ldpfed.aggregation.base import Aggregator
from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.aggregation.simplex import project_to_simplex

POWER_EXPONENTS = (0.0, 8.0)  # the range of the fitted Zipf exponent s
POWER_ATOMS = 1024  # above this many categories, consecutive Zipf ranks are pooled into this many atoms


def pad_blocks(values, categories) -> tuple[np.ndarray, np.ndarray]:
    """(blocks, width) array of the concatenated blocks (padding 0) and its validity mask."""
    sizes = np.asarray(categories, dtype=np.int64)
    valid = np.arange(int(sizes.max()))[None, :] < sizes[:, None]
    padded = np.zeros(valid.shape)
    padded[valid] = np.asarray(values, dtype=float)
    return padded, valid


def base_pos(values) -> np.ndarray:
    return np.maximum(np.asarray(values, dtype=float), 0.0)


def norm(values, categories) -> np.ndarray:
    padded, valid = pad_blocks(values, categories)
    shift = (1.0 - padded.sum(axis=1)) / valid.sum(axis=1)
    return (padded + shift[:, None])[valid]


def norm_mul(values, categories) -> np.ndarray:
    padded, valid = pad_blocks(base_pos(values), categories)
    total = padded.sum(axis=1, keepdims=True)
    uniform = valid / valid.sum(axis=1, keepdims=True)
    return np.where(total > 0, padded / np.where(total > 0, total, 1.0), uniform)[valid]


def norm_cut(values, categories) -> np.ndarray:
    """Keep the positive estimates whose 'sum of the estimates at least as large' is <= 1."""
    padded, valid = pad_blocks(base_pos(values), categories)
    order = np.argsort(-padded, axis=1, kind="stable")
    ordered = np.take_along_axis(padded, order, axis=1)
    cumulative = np.cumsum(ordered, axis=1)
    width = padded.shape[1]
    # the last position of each run of equal values: ties are kept or cut together
    boundary = np.ones_like(ordered, dtype=bool)
    boundary[:, :-1] = ordered[:, :-1] != ordered[:, 1:]
    last = np.minimum.accumulate(np.where(boundary, np.arange(width), width)[:, ::-1], axis=1)[:, ::-1]
    at_least = np.take_along_axis(cumulative, last, axis=1)
    keep_sorted = (ordered > 0) & (at_least <= 1.0)
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=1)
    return np.where(keep, padded, 0.0)[valid]


def weighted_simplex_projection(values, weights, categories) -> np.ndarray:
    """argmin sum_v (f_v - x_v)^2 / w_v over the simplex, per block: f_v = max(x_v - lambda w_v, 0).

    The breakpoints of lambda are x_v / w_v; sorted descending, the active set is a prefix, and
    lambda = (sum_active x - 1) / sum_active w at the largest prefix whose last entry stays positive.
    """
    x, valid = pad_blocks(values, categories)
    w, _ = pad_blocks(np.broadcast_to(np.asarray(weights, dtype=float), np.shape(values)), categories)
    w = np.where(valid, np.maximum(w, np.finfo(float).tiny), 1.0)
    ratio = np.where(valid, x / w, -np.inf)
    order = np.argsort(-ratio, axis=1, kind="stable")
    x_sorted = np.take_along_axis(np.where(valid, x, 0.0), order, axis=1)
    w_sorted = np.take_along_axis(np.where(valid, w, 0.0), order, axis=1)
    r_sorted = np.take_along_axis(ratio, order, axis=1)
    lam = (np.cumsum(x_sorted, axis=1) - 1.0) / np.cumsum(w_sorted, axis=1)
    active = (r_sorted - lam > 0) & np.isfinite(r_sorted)
    rho = np.maximum(active.sum(axis=1), 1)  # the condition holds on a prefix, and at j = 1
    multiplier = lam[np.arange(x.shape[0]), rho - 1]
    return np.maximum(x - multiplier[:, None] * w, 0.0)[valid]


def _zipf_atoms(exponent: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(atoms, log weights) of the Zipf prior: mass 1/k on each a_i = i^-s / sum_j j^-s; above
    POWER_ATOMS categories, runs of consecutive ranks are pooled at their mean (mass: run / k)."""
    frequencies = np.arange(1, k + 1, dtype=float) ** -exponent
    frequencies /= frequencies.sum()
    if k <= POWER_ATOMS:
        return frequencies, np.full(k, -np.log(k))
    runs = np.array_split(np.arange(k), POWER_ATOMS)
    starts = np.array([run[0] for run in runs])
    sizes = np.array([run.size for run in runs], dtype=float)
    return np.add.reduceat(frequencies, starts) / sizes, np.log(sizes / k)


def _mixture_log_density(estimates: np.ndarray, sigma: np.ndarray, prior) -> np.ndarray:
    """(k, atoms) log of weight_i N(estimate_v; atom_i, sigma_v^2), rows v, columns i."""
    atoms, log_weights = prior
    z = (estimates[:, None] - atoms[None, :]) / sigma[:, None]
    return -0.5 * z**2 - np.log(sigma)[:, None] - 0.5 * np.log(2 * np.pi) + log_weights[None, :]


def power_posterior_mean(estimates, sigma) -> tuple[np.ndarray, float]:
    """(E[f_v | f~_v] under the fitted Zipf prior, the fitted exponent s) for one attribute."""
    from scipy.optimize import minimize_scalar  # heavy (about 1 s): only where the power prior is fitted

    estimates = np.asarray(estimates, dtype=float)
    sigma = np.maximum(np.asarray(sigma, dtype=float), np.finfo(float).tiny)
    k = estimates.size

    def negative_log_likelihood(exponent: float) -> float:
        return -float(logsumexp(_mixture_log_density(estimates, sigma, _zipf_atoms(exponent, k)), axis=1).sum())

    exponent = minimize_scalar(negative_log_likelihood, bounds=POWER_EXPONENTS, method="bounded").x
    prior = _zipf_atoms(exponent, k)
    log_density = _mixture_log_density(estimates, sigma, prior)
    posterior = np.exp(log_density - logsumexp(log_density, axis=1, keepdims=True))
    return posterior @ prior[0], float(exponent)


@dataclass(frozen=True)
class _Consistency(Aggregator):
    """Per-attribute post-processing of frequency estimates (frequency task only)."""

    tasks: ClassVar[tuple[str, ...]] = ("frequency",)
    uses_deviation: ClassVar[bool] = False
    elementwise: ClassVar[bool] = False
    categories: tuple[int, ...] = ()

    def blocks(self, theta_hat: np.ndarray) -> tuple[int, ...]:
        return self.categories or (theta_hat.size,)

    def options(self) -> dict:
        return {}  # the block sizes are the data's layout, not an option of the estimate


@dataclass(frozen=True)
class BasePos(_Consistency):
    name: ClassVar[str] = "base-pos"
    elementwise: ClassVar[bool] = True

    def _recalibrate(self, theta_hat, deviation, halfwidth):
        return base_pos(theta_hat), {}


@dataclass(frozen=True)
class _Blockwise(_Consistency):
    """A consistency step that is one function fix(theta_hat, blocks) of the estimates."""

    fix: ClassVar[staticmethod]

    def _recalibrate(self, theta_hat, deviation, halfwidth):
        return self.fix(theta_hat, self.blocks(theta_hat)), {}


def _blockwise(class_name: str, name: str, fix) -> type[_Blockwise]:
    """The aggregator `name` that applies `fix` per attribute block (a row of the table below)."""
    namespace = {"name": name, "fix": staticmethod(fix), "__module__": __name__, "__qualname__": class_name}
    return dataclass(frozen=True)(type(class_name, (_Blockwise,), namespace))


_BLOCKWISE = (("Norm", "norm", norm), ("NormMul", "norm-mul", norm_mul), ("NormCut", "norm-cut", norm_cut))
Norm, NormMul, NormCut = (_blockwise(*row) for row in _BLOCKWISE)


@dataclass(frozen=True)
class MLEApx(_Consistency):
    name: ClassVar[str] = "mle-apx"
    uses_deviation: ClassVar[bool] = True

    def _recalibrate(self, theta_hat, deviation: DeviationModel, halfwidth):
        variance = np.broadcast_to(deviation.sigma, theta_hat.shape) ** 2
        return weighted_simplex_projection(theta_hat, variance, self.blocks(theta_hat)), {}


@dataclass(frozen=True)
class Power(_Consistency):
    name: ClassVar[str] = "power"
    uses_deviation: ClassVar[bool] = True
    then_simplex: ClassVar[bool] = False

    def _recalibrate(self, theta_hat, deviation: DeviationModel, halfwidth):
        sizes = self.blocks(theta_hat)
        sigma = np.broadcast_to(deviation.sigma, theta_hat.shape)
        edges = np.cumsum((0, *sizes))
        fitted = [power_posterior_mean(theta_hat[a:b], sigma[a:b]) for a, b in zip(edges[:-1], edges[1:])]
        values = np.concatenate([mean for mean, _ in fitted])
        if self.then_simplex:
            values = project_to_simplex(values, sizes)
        return values, {"power_exponent": np.array([exponent for _, exponent in fitted])}


@dataclass(frozen=True)
class PowerNS(Power):
    name: ClassVar[str] = "power-ns"
    then_simplex: ClassVar[bool] = True


CONSISTENCY_AGGREGATORS = (BasePos, Norm, NormMul, NormCut, MLEApx, Power, PowerNS)

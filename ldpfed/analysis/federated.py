"""Predicting the noise of a federated round (analysis.md, "Federated rounds"; thesis Theorems
12-13, corrected).

A round updates w_new = sum_k p_k w_k - eta sum_k p_k n_k, where n_k is client k's LDP noise with
per-coordinate mean mu_k and variance v_kz, independent of everything else. Then

    E||w_new* - w_opt||^2 - E||w_new - w_opt||^2
        = eta^2 sum_k p_k^2 sum_z v_kz + eta^2 ||sum_k p_k mu_k||^2 - 2 eta <E[w_new] - w_opt, sum_k p_k mu_k>

(the thesis prints the cross terms without eta). By the CLT the aggregate noise sum_k p_k n_k is
about N(sum_k p_k mu_k, diag(sum_k p_k^2 v_kz)), a DeviationModel like the tuple predictor's.

Numeric per-coordinate mechanisms see each coordinate u clipped to [-C, C] and divided by C, so a
coordinate's noise has mean C b(u/C) and variance C^2 V(u/C) (`clipped_coordinate_noise`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.aggregation.plugin import worst_case_variance
from ldpfed.deviation import DeviationModel
from ldpfed.mechanisms.base import Mechanism
from ldpfed.validation import LDPValueError, check_positive


@dataclass(frozen=True, eq=False)
class RoundPrediction:
    """The aggregate noise sum_k p_k n_k per coordinate and the extra squared distance it costs."""

    learning_rate: float
    noise_mean: np.ndarray  # sum_k p_k mu_k
    noise_variance: np.ndarray  # sum_k p_k^2 v_kz
    cross_term: float | None  # -2 eta <E[w_new] - w_opt, sum_k p_k mu_k>; None when not computable

    @property
    def variance_term(self) -> float:
        return float(self.learning_rate**2 * np.sum(self.noise_variance))

    @property
    def bias_term(self) -> float:
        return float(self.learning_rate**2 * np.sum(self.noise_mean**2))

    @property
    def extra_squared_distance(self) -> float | None:
        """E||w_new* - w_opt||^2 - E||w_new - w_opt||^2 (None if biased noise and no reference given)."""
        if self.cross_term is None:
            return None
        return self.variance_term + self.bias_term + self.cross_term

    def noise_model(self) -> DeviationModel:
        """N(mean, variance) of the aggregate noise sum_k p_k n_k, per coordinate."""
        return DeviationModel(self.noise_mean, np.sqrt(self.noise_variance), source="model")

    def parameter_noise_model(self) -> DeviationModel:
        """N(.) of the noise the round adds to the model, -eta sum_k p_k n_k."""
        return DeviationModel(-self.learning_rate * self.noise_mean,
                              self.learning_rate * np.sqrt(self.noise_variance), source="model")

    def to_dict(self) -> dict:
        return {
            "learning_rate": self.learning_rate,
            "variance_term": self.variance_term,
            "bias_term": self.bias_term,
            "cross_term": self.cross_term,
            "extra_squared_distance": self.extra_squared_distance,
            "noise_mean": self.noise_mean,
            "noise_variance": self.noise_variance,
        }


def predict_round(
    weights,
    noise_variances,
    learning_rate: float,
    noise_means=None,
    expected_offset=None,
) -> RoundPrediction:
    """Predict one round from client weights p_k (K), noise variances v_kz (K x D) and means mu_k.

    expected_offset: E[w_new] - w_opt (D), needed only for the cross term of biased noise.
    """
    p = np.asarray(weights, float)
    variances = np.atleast_2d(np.asarray(noise_variances, float))
    if p.ndim != 1 or variances.shape[0] != p.size:
        raise LDPValueError(f"noise_variances must have one row per client ({p.size}), got shape {variances.shape}")
    if np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise LDPValueError("client weights must be >= 0 and sum to 1")
    if np.any(variances < 0) or not np.all(np.isfinite(variances)):
        raise LDPValueError("noise variances must be finite and >= 0")
    learning_rate = check_positive(learning_rate, "learning_rate")
    means = np.zeros_like(variances) if noise_means is None else np.broadcast_to(np.asarray(noise_means, float), variances.shape)
    noise_mean = p @ means
    noise_variance = (p**2) @ variances
    if not np.any(noise_mean):
        cross = 0.0
    elif expected_offset is None:
        cross = None
    else:
        cross = float(-2.0 * learning_rate * np.dot(np.asarray(expected_offset, float), noise_mean))
    return RoundPrediction(learning_rate, noise_mean, noise_variance, cross)


def clipped_coordinate_noise(
    mechanism: Mechanism, clip: float, dims: int, update_mean=None, update_mean_sq=None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-coordinate noise (mean, variance) of `mechanism` (per value) on updates clipped to [-C, C].

    With the updates' per-coordinate mean and mean square (after clipping) the noise mean is
    C (b0 + b1 E[u]/C) and the variance C^2 (v0 + v1 E[u]/C + v2 E[u^2]/C^2); without them, the
    worst case over u in [-C, C]: max |b| and max V (a quadratic: ends or vertex).
    """
    clip = check_positive(clip, "clip")
    b0, b1 = mechanism.bias_coefficients
    v0, v1, v2 = mechanism.variance_coefficients
    if update_mean is None:
        worst_bias = max(abs(b0 - b1), abs(b0 + b1))
        return np.full(dims, clip * worst_bias), np.full(dims, clip**2 * worst_case_variance(mechanism))
    mean = np.broadcast_to(np.asarray(update_mean, float), (dims,)) / clip
    mean_sq = np.broadcast_to(np.asarray(update_mean_sq, float), (dims,)) / clip**2
    if np.any(np.abs(mean) > 1 + 1e-9) or np.any(mean_sq > 1 + 1e-9):
        raise LDPValueError("update moments must describe coordinates clipped to [-clip, clip]")
    return clip * (b0 + b1 * mean), clip**2 * np.maximum(v0 + v1 * mean + v2 * mean_sq, 0.0)

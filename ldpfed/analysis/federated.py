"""Predicting the noise of a federated round (analysis.md, "Federated rounds"; thesis Theorems
12-13, corrected).

A round updates w_new = sum_k p_k w_k - eta sum_k p_k n_k, where n_k is client k's LDP noise with
per-coordinate mean mu_k and variance v_kz, independent of everything else. Then

    E||w_new* - w_opt||^2 - E||w_new - w_opt||^2
        = eta^2 sum_k p_k^2 sum_z v_kz + eta^2 ||sum_k p_k mu_k||^2 - 2 eta <E[w_new] - w_opt, sum_k p_k mu_k>

(the thesis prints the cross terms without eta). By the CLT the aggregate noise sum_k p_k n_k is
about N(sum_k p_k mu_k, diag(sum_k p_k^2 v_kz)), a DeviationModel like the tuple predictor's.

Numeric per-coordinate mechanisms see each coordinate u clipped to [-C, C] and divided by C. The
client reports m of its d coordinates, each with eps/m, and the server rescales them by p = d/m
and puts 0 on the others (`ldpfed.training.privatize`), so with t = clip(u)/C a coordinate's noise
privatize(u) - clip(u) has (`clipped_coordinate_noise`)
    mean      C b(t)
    variance  C^2 [p V(t) + (p - 1) (t + b(t))^2]
where b, V are the per-value mechanism's (budget eps/m). The second term is the report mask: with
probability 1 - m/d the coordinate is sent as 0 although its conditional mean is t + b(t).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.aggregation.updates import check_privatizer
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError, check_positive, check_positive_int

# A round prediction's record: its figures, in this order.
ROUND_RECORD = (
    "learning_rate",
    "variance_term",
    "bias_term",
    "cross_term",
    "extra_squared_distance",
    "noise_mean",
    "noise_variance",
)


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
        return DeviationModel(
            -self.learning_rate * self.noise_mean, self.learning_rate * np.sqrt(self.noise_variance), source="model"
        )

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in ROUND_RECORD}


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
    means = (
        np.zeros_like(variances)
        if noise_means is None
        else np.broadcast_to(np.asarray(noise_means, float), variances.shape)
    )
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
    privatizer: UpdatePrivatizer, dims: int, update_mean=None, update_mean_sq=None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-coordinate (mean, variance) of the noise privatize(u) - clip(u) of `privatizer` on a
    d-coordinate update (module docstring: m-of-d reporting, d/m rescaling, eps/m per value).

    update_mean, update_mean_sq: the clipped coordinates' mean E[u] and mean square E[u^2] over the
    updates the prediction is for (one client's exact update u: mean u, mean square u^2). Both
    b and V are polynomials in t, so the noise mean and the average conditional variance
    E_u[Var(noise | u)] need only these two moments:
        mean     C (b0 + b1 E[t])
        variance C^2 [p (v0 + v1 E[t] + v2 E[t^2]) + (p - 1) (b0^2 + 2 b0 (1+b1) E[t] + (1+b1)^2 E[t^2])].
    Without them: the worst case over u in [-C, C] (`UpdatePrivatizer.per_coordinate_noise`).
    """
    privatizer = check_privatizer(privatizer)
    dims = check_positive_int(dims, "dims")
    if update_mean is None or update_mean_sq is None:
        if (update_mean is None) != (update_mean_sq is None):
            raise LDPValueError("give both update_mean and update_mean_sq, or neither (worst case)")
        return privatizer.per_coordinate_noise(dims)
    clip = privatizer.clip
    mean = np.broadcast_to(np.asarray(update_mean, float), (dims,)) / clip
    mean_sq = np.broadcast_to(np.asarray(update_mean_sq, float), (dims,)) / clip**2
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(mean_sq))):
        raise LDPValueError("update moments must be finite")
    if np.any(np.abs(mean) > 1 + 1e-9) or np.any(mean_sq > 1 + 1e-9) or np.any(mean_sq < mean**2 - 1e-9):
        raise LDPValueError(
            "update moments must describe coordinates clipped to [-clip, clip] (|mean| <= clip, "
            "mean^2 <= mean_sq <= clip^2)"
        )
    if not privatizer.private:
        return np.zeros(dims), np.zeros(dims)
    mechanism = privatizer.per_value_mechanism(dims)
    p = dims / privatizer.dims_reported(dims)
    (b0, b1), (v0, v1, v2) = mechanism.bias_coefficients, mechanism.variance_coefficients
    report_variance = v0 + v1 * mean + v2 * mean_sq  # E[V(t)]
    mask_variance = b0**2 + 2.0 * b0 * (1.0 + b1) * mean + (1.0 + b1) ** 2 * mean_sq  # E[(t + b(t))^2]
    variance = clip**2 * np.maximum(p * report_variance + (p - 1.0) * mask_variance, 0.0)
    return clip * (b0 + b1 * mean), variance

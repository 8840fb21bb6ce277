"""The CLT predictor for frequency estimation, per (attribute, category) entry (analysis.md applied
to the one-hot entries of `ldpfed.frequency.categorical`).

Entry e of attribute j has true frequency f_e over the n users. Each reporting user's contribution
is unbiased for her one-hot bit x_ie, with variance V_in (x = 1) or V_out (x = 0)
(`AttributeOracles.entry_variances`; for GRR/OUE p(1-p)/(p-q)^2 and q(1-q)/(p-q)^2, Wang et al.
2017 Theorem 2; for histogram encoding V(+-1)/(4 (1 + b1)^2)). So the mean per-report noise is
E[V]_e = f_e V_in + (1 - f_e) V_out (the frequency-dependent term), the data spread is
S_e^2 = n f_e (1 - f_e) / (n - 1), and with r_j ~ Binomial(n, m/d), h = E[1/r_j | r_j > 0],
P0 = P(r_j = 0) (the estimate is then 0), exactly as `ldpfed.analysis.predictor`:

    bias_e     = -P0 f_e
    variance_e = (1 - P0) [E[V]_e h + S_e^2 (h - 1/n)] + P0 (1 - P0) f_e^2
    MSE_e      = (1 - P0) [E[V]_e h + S_e^2 (h - 1/n)] + P0 f_e^2

With m = d: h = 1/n, P0 = 0 and the variance is the oracle's exact `variance(f, n)`.

`recalibrated_mse` predicts the MSE of any element-wise aggregator from the same normal model
(Gauss–Hermite quadrature of E[(g(f_hat_e) - f_e)^2] with f_hat_e ~ N(f_e + bias_e, variance_e)
and the aggregator's weights from a fixed deviation model): HDR4ME*'s "own prediction".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.analysis.predictor import inverse_report_moment
from ldpfed.frequency.categorical import AttributeOracles
from ldpfed.validation import LDPValueError, check_positive_int

QUADRATURE_NODES = 80


@dataclass(frozen=True, eq=False)
class FrequencyPrediction:
    """Per entry: truth, bias, variance (and their parts); averages over the D entries."""

    oracles: AttributeOracles
    users: int
    frequencies: np.ndarray
    bias: np.ndarray
    noise_variance: np.ndarray
    sampling_variance: np.ndarray
    no_report_variance: np.ndarray
    no_report_probability: float
    inverse_reports: float

    @property
    def variance(self) -> np.ndarray:
        return self.noise_variance + self.sampling_variance + self.no_report_variance

    @property
    def mse_per_entry(self) -> np.ndarray:
        return self.bias**2 + self.variance

    @property
    def mse(self) -> float:
        """Mean over the D entries of the squared error of the frequencies."""
        return float(np.mean(self.mse_per_entry))

    def mse_of_average(self, rounds: int) -> float:
        """MSE of the average of `rounds` collections' estimates. Fresh collections are independent:
        mean_e(bias_e^2 + variance_e / rounds). A memoized one (`AttributeOracles.memoized`) reports the
        same users' permanent reports of the same attributes every round: only the instantaneous
        randomization averages away, so its noise is (1 - P0) h (f_e W_in + (1 - f_e) W_out) with one
        user's T-round variances W (`memoized_entry_variances`), and the sampling and no-report terms
        stay whole."""
        rounds = check_positive_int(rounds, "rounds")
        if not self.oracles.memoized:
            return float(np.mean(self.bias**2 + self.variance / rounds))
        w_in, w_out = memoized_entry_variances(self.oracles, rounds)
        f = self.frequencies
        noise = (1.0 - self.no_report_probability) * (f * w_in + (1.0 - f) * w_out) * self.inverse_reports
        return float(np.mean(self.bias**2 + noise + self.sampling_variance + self.no_report_variance))

    def deviation_model(self) -> DeviationModel:
        return DeviationModel(self.bias, np.sqrt(self.variance), source="model")

    def to_dict(self, per_entry: bool = True) -> dict:
        summary = {
            "mechanism": self.oracles.describe(),
            "users": self.users,
            "entries": self.oracles.entries,
            "mse": self.mse,
            "bias_sq": float(np.mean(self.bias**2)),
            "variance": float(np.mean(self.variance)),
            "noise_variance": float(np.mean(self.noise_variance)),
            "sampling_variance": float(np.mean(self.sampling_variance)),
            "no_report_variance": float(np.mean(self.no_report_variance)),
            "no_report_probability": self.no_report_probability,
            "inverse_reports": self.inverse_reports,
        }
        if per_entry:
            summary["per_entry"] = {
                "frequency": self.frequencies,
                "bias": self.bias,
                "variance": self.variance,
                "mse": self.mse_per_entry,
            }
        return summary


def memoized_entry_variances(oracles: AttributeOracles, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """(W_in, W_out) per entry: the variance of the average of one user's `rounds` contributions from
    one memo (`variance_of_average` at f = 1 and f = 0 with n = 1), as `entry_variances` for one round."""
    per_attribute = np.array([o.variance_of_average(np.eye(o.k)[0], 1, rounds)[:2] for o in oracles.oracles])
    sizes = [o.k for o in oracles.oracles]
    return np.repeat(per_attribute[:, 0], sizes), np.repeat(per_attribute[:, 1], sizes)


def predict_frequency(oracles: AttributeOracles, frequencies, users: int) -> FrequencyPrediction:
    """The prediction of the module docstring for n = `users` with true entry `frequencies` (D,)."""
    users = check_positive_int(users, "users")
    f = np.asarray(frequencies, dtype=float)
    if f.shape != (oracles.entries,) or not np.all((f >= 0) & (f <= 1)):
        raise LDPValueError(f"frequencies must be {oracles.entries} numbers in [0, 1] (one per entry)")
    none, h = inverse_report_moment(users, oracles.report_dims / oracles.attributes)
    v_in, v_out = oracles.entry_variances()
    mean_noise = f * v_in + (1.0 - f) * v_out
    spread = users * f * (1.0 - f) / (users - 1) if users > 1 else np.zeros_like(f)
    reported = 1.0 - none
    return FrequencyPrediction(
        oracles=oracles,
        users=users,
        frequencies=f,
        bias=-none * f,
        noise_variance=reported * mean_noise * h,
        sampling_variance=reported * spread * max(h - 1.0 / users, 0.0),
        no_report_variance=none * reported * f**2,
        no_report_probability=none,
        inverse_reports=h,
    )


def recalibrated_mse(
    aggregator,
    frequencies,
    prediction_model: DeviationModel,
    weights_model: DeviationModel | None = None,
    halfwidth: float = 1.0,
) -> float:
    """E[(g(f_hat) - f)^2] averaged over entries, f_hat_e ~ N(f_e + delta_e, sigma_e^2)
    (`prediction_model`), g the aggregator with its weights from `weights_model` (default the same
    model: the server's "model" deviation). Exact for element-wise aggregators (all of
    `ldpfed.aggregation`) under the normal model; Gauss–Hermite with QUADRATURE_NODES nodes."""
    f = np.asarray(frequencies, dtype=float)
    weights_model = prediction_model if weights_model is None else weights_model
    nodes, weights = np.polynomial.hermite_e.hermegauss(QUADRATURE_NODES)
    weights = weights / weights.sum()
    draws = (f + prediction_model.delta)[None, :] + prediction_model.sigma[None, :] * nodes[:, None]  # (K, D)
    tiled = DeviationModel(
        np.tile(weights_model.delta, len(nodes)), np.tile(weights_model.sigma, len(nodes)), source=weights_model.source
    )
    estimates = np.asarray(aggregator(draws.ravel(), tiled, halfwidth).estimate).reshape(draws.shape)
    return float(np.mean(weights @ (estimates - f[None, :]) ** 2))

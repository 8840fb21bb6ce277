"""The CLT prediction of one training round's aggregate noise, written beside what was measured
(analysis.md, "Federated rounds").

A simulation knows the clients' clipped updates c_k, so it knows both the noisy aggregate
sum_k p_k u_k (what the server received) and the noise-free one sum_k p_k c_k. Their difference
is the aggregate noise sum_k p_k n_k, predicted per coordinate as N(sum_k p_k mu_kz,
sum_k p_k^2 v_kz) from the EXACT noise moments of each client's clipped update
(`UpdatePrivatizer.noise_moments`). Then

    E||noisy - clean||^2 = sum_z (var_z + mean_z^2)

exactly (no CLT needed); the CLT is only needed for the z-score summary (~5% of coordinates beyond
1.96 sd when each coordinate sums enough reports; with m << d few clients report a coordinate and
the tails are heavier).

Learning rate: if the server applied w_new = w - eta * aggregate, the new weights' extra squared
distance would be eta^2 times these figures (analysis.md: eta^2 sum_k p_k^2 sum_z v_kz + ...).
ldpfed's FedAvg adds the aggregate update directly, so eta = 1 and the figures are those of the
new weights. The cross term -2 eta <E[w_new] - w_opt, sum_k p_k mu_k> of analysis.md concerns the
distance to an optimum w_opt, not to the noise-free aggregate, and does not appear here.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from ldpfed.aggregation.updates import check_updates, normalized_weights
from ldpfed.analysis.federated import predict_round
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError

Z_CRITICAL = 1.96
EXPECTED_FRACTION_BEYOND = float(2.0 * ndtr(-Z_CRITICAL))  # 0.04999579 under N(0, 1)


def predicted_aggregate_noise(clipped_updates, weights, privatizer: UpdatePrivatizer) -> tuple[np.ndarray, np.ndarray]:
    """(mean (d,), variance (d,)) of sum_k p_k n_k: (sum_k p_k mu_kz, sum_k p_k^2 v_kz) from each
    client's exact noise moments at its clipped update (analysis.md, Federated rounds).

    `clipped_updates` (K, d) are the clients' updates before noise (clipped here if they are not);
    `weights` (K,) are normalized here.
    """
    clipped = check_updates(clipped_updates, "clipped_updates")
    p = normalized_weights(weights, clipped.shape[0])
    if not hasattr(privatizer, "noise_moments"):
        raise LDPValueError(
            f"privatizer {type(privatizer).__name__} has no noise moments to predict a round's noise with"
        )
    means, variances = privatizer.noise_moments(clipped)
    prediction = predict_round(p, variances, learning_rate=1.0, noise_means=means)
    return prediction.noise_mean, prediction.noise_variance


def _vector(values, name: str, dims: int | None = None) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0 or (dims is not None and array.size != dims):
        expected = "(d,)" if dims is None else f"({dims},)"
        raise LDPValueError(f"{name} must have shape {expected}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise LDPValueError(f"{name} contains NaN or inf")
    return array


def round_noise_report(noisy_mean, clean_mean, predicted_variance, predicted_mean=None) -> dict:
    """Measured vs predicted aggregate noise of one round (JSON-ready scalars).

    measured_squared_distance   ||noisy - clean||^2
    predicted_squared_distance  sum_z (var_z + mean_z^2) = predicted_variance_trace + predicted_bias_squared
    ratio                       measured / predicted (None when predicted is 0)
    z_coordinates               coordinates with var_z > 0, where z_z = (noise_z - mean_z) / sd_z
    fraction_abs_z_above_1_96   share of them with |z| > 1.96 (CLT: expected_fraction, ~5%)
    z_mean_square, z_max_abs    mean z^2 (~1) and the largest |z|
    unexplained_coordinates     coordinates with var_z = 0 whose noise differs from mean_z beyond float
                                rounding (should be 0)
    """
    noisy = _vector(noisy_mean, "noisy_mean")
    dims = noisy.size
    clean = _vector(clean_mean, "clean_mean", dims)
    variance = _vector(predicted_variance, "predicted_variance", dims)
    if np.any(variance < 0):
        raise LDPValueError("predicted_variance must be >= 0")
    mean = np.zeros(dims) if predicted_mean is None else _vector(predicted_mean, "predicted_mean", dims)

    noise = noisy - clean
    measured = float(np.sum(noise**2))
    trace, bias_squared = float(np.sum(variance)), float(np.sum(mean**2))
    predicted = trace + bias_squared
    random = variance > 0
    # float rounding of the two weighted sums is not noise
    rounding = 1e-10 * (np.max(np.abs(noisy)) + np.max(np.abs(clean)))
    z = (noise[random] - mean[random]) / np.sqrt(variance[random])
    return {
        "measured_squared_distance": measured,
        "predicted_squared_distance": predicted,
        "predicted_variance_trace": trace,
        "predicted_bias_squared": bias_squared,
        "ratio": measured / predicted if predicted > 0 else None,
        "z_coordinates": int(z.size),
        "fraction_abs_z_above_1_96": float(np.mean(np.abs(z) > Z_CRITICAL)) if z.size else None,
        "expected_fraction": EXPECTED_FRACTION_BEYOND,
        "z_mean_square": float(np.mean(z**2)) if z.size else None,
        "z_max_abs": float(np.max(np.abs(z))) if z.size else None,
        "unexplained_coordinates": int(np.count_nonzero(np.abs(noise[~random] - mean[~random]) > rounding)),
    }

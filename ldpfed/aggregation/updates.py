"""Re-calibrated aggregation of privatized model updates (spec: recalibration.md applied to
federated LDP-SGD, analysis.md "Federated rounds").

Averaging K perturbed updates is a d-dimensional mean estimation, so the tuple aggregators apply
unchanged: the server forms the FedAvg mean sum_k p_k u_k, builds the per-coordinate deviation
model N(delta_z, sigma_z^2) of that mean, and re-calibrates it with mean | l1 | l2 | hdr4me |
james-stein. The domain half-width of the thresholds is the per-coordinate clipping bound C
(recalibration.md, HDR4ME*: the thresholds scale with the half-width).

    result = aggregate_updates(updates, num_examples, "hdr4me", privatizer=privatizer)
    weights = weights + result.estimate      # ldpfed's FedAvg applies the aggregate directly (eta = 1)

Deviation models of the aggregate noise sum_k p_k n_k (analysis.md, Federated rounds):
- "plug-in" (default; the server needs only what it received):
      sigma_z^2 = sum_k p_k^2 * s_z^2,  s_z^2 = sum_k p_k (u_kz - ubar_z)^2 / (1 - sum_k p_k^2),
  the weighted ("reliability weights") sample variance, which is unbiased for a common per-client
  variance. It is exactly unbiased for sum_k p_k^2 v_kz with equal weights even when the clients'
  noise variances differ; with unequal weights it assumes a common variance. It also absorbs the
  spread of the clean (clipped) updates, sum_k p_k (c_kz - cbar_z)^2 / (1 - sum p^2), so it
  over-estimates the noise: conservative, like the tuple plug-in (`plugin.py`), and it is not 0 for
  mechanism "none" unless the clean updates agree.
      delta_z = C b(t_z), t_z = clip((ubar_z / C - b0) / (1 + b1)), the mechanism's bias at the
  inverted estimate (0 for unbiased ones; `plugin.plugin_bias`): E[ubar_z] = C (b0 + (1 + b1) tbar_z)
  with tbar_z = sum_k p_k c_kz / C, so t_z estimates tbar_z and, b being affine, C b(tbar_z) =
  sum_k p_k C b(c_kz / C) is the exact noise mean (recalibration.md, plug-in erratum: b at ubar / C
  itself is off by the factor 1 + b1).
  With fewer than 2 clients of positive weight there is no spread: the model is used instead, and
  the record says so.
- "model": the worst case over coordinate values in [-C, C] (`UpdatePrivatizer.per_coordinate_noise`):
      sigma_z^2 = sum_k p_k^2 v_z,  delta_z = sum_k p_k mu_z = mu_z.
  Exactly 0 for mechanism "none", so every aggregator then returns the plain mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ldpfed.aggregation import DEFAULT_ALPHA, Aggregator, accepted_options, get
from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.aggregation.plugin import plugin_bias
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError

UPDATE_DEVIATIONS = ("plug-in", "model")


# --- validation at the boundary ------------------------------------------------------------------
def check_updates(updates, name: str = "updates") -> np.ndarray:
    """A finite (clients, d) float array with at least one client and one coordinate."""
    array = np.asarray(updates, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise LDPValueError(f"{name} must be a (clients, d) array with clients, d >= 1, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise LDPValueError(f"{name} contain NaN or inf (diverged local training?)")
    return array


def normalized_weights(weights, clients: int) -> np.ndarray:
    """FedAvg weights p_k = w_k / sum w: one finite weight >= 0 per client, positive sum."""
    array = np.asarray(weights, dtype=np.float64)
    if array.shape != (clients,):
        raise LDPValueError(f"weights must have shape ({clients},), one per client, got {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise LDPValueError("weights must be finite and >= 0 (e.g. the clients' sample counts)")
    total = array.sum()
    if not total > 0:
        raise LDPValueError("weights must have a positive sum")
    return array / total


def check_privatizer(privatizer) -> UpdatePrivatizer:
    if not getattr(privatizer, "per_value_noise_model", False):
        raise LDPValueError(
            f"privatizer must be the one the clients used, with a per-value noise model (UpdatePrivatizer: "
            f"C and the mechanism), got {type(privatizer).__name__}"
        )
    return privatizer


# --- deviation models ----------------------------------------------------------------------------
def plugin_update_deviation(updates: np.ndarray, p: np.ndarray, privatizer: UpdatePrivatizer) -> DeviationModel:
    """N(delta_z, sigma_z^2) of the weighted mean from the spread of the received updates (module
    docstring). Needs >= 2 clients of positive weight (1 - sum p^2 > 0)."""
    mean = p @ updates
    concentration = float(np.sum(p**2))  # 1 / effective number of clients
    spread = p @ (updates - mean) ** 2
    per_client = spread / (1.0 - concentration)  # unbiased s_z^2 for a common per-client variance
    sigma = np.sqrt(concentration * per_client)
    if privatizer.private:
        delta = plugin_bias(privatizer.per_value_mechanism(updates.shape[1]), mean, privatizer.clip)
    else:
        delta = np.zeros_like(mean)
    return DeviationModel(delta=delta, sigma=sigma, source="plug-in")


def model_update_deviation(p: np.ndarray, dims: int, privatizer: UpdatePrivatizer) -> DeviationModel:
    """N(delta_z, sigma_z^2) of the weighted mean from the mechanism's worst-case noise moments at
    coordinate values in [-C, C]: sigma^2 = sum p^2 v, delta = sum p mu (module docstring)."""
    mu, v = privatizer.per_coordinate_noise(dims)
    return DeviationModel(delta=mu, sigma=np.sqrt(np.sum(p**2) * v), source="model")  # sum_k p_k = 1


# --- the server's round aggregation --------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class AggregatedUpdate:
    """The plain FedAvg mean of the received updates, its re-calibration, and how it was made.

    estimate: the re-calibrated mean update (d,) the server applies; plain_mean: sum_k p_k u_k;
    deviation: the DeviationModel used; weights: the normalized p_k; record: JSON-ready choices;
    diagnostics: per-coordinate intermediate arrays of the aggregator (e.g. HDR4ME*'s p1, p2, p3).
    """

    estimate: np.ndarray
    plain_mean: np.ndarray
    deviation: DeviationModel
    weights: np.ndarray
    record: dict
    diagnostics: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """JSON-ready scalars for a per-round row: the record plus the deviation model's trace
        sum_z sigma_z^2, its squared bias sum_z delta_z^2, and ||estimate - plain_mean||^2."""
        return {
            **self.record,
            "deviation_variance_trace": float(np.sum(self.deviation.sigma**2)),
            "deviation_bias_squared": float(np.sum(np.broadcast_to(self.deviation.delta, self.estimate.shape) ** 2)),
            "recalibration_shift_squared": float(np.sum((self.estimate - self.plain_mean) ** 2)),
        }


def _aggregator(aggregator, alpha, options) -> Aggregator:
    """The aggregator by name (alpha given to those that take it), or an instance as it is."""
    if isinstance(aggregator, Aggregator):
        if alpha is not None or options:
            raise LDPValueError("give alpha and options to the aggregator's constructor, not with an instance")
        return aggregator
    if not isinstance(aggregator, str):
        raise LDPValueError(f"aggregator must be a name or an Aggregator, got {type(aggregator).__name__}")
    if "alpha" in accepted_options(aggregator):
        options = {"alpha": DEFAULT_ALPHA if alpha is None else alpha, **options}
    elif alpha is not None:
        raise LDPValueError(f"aggregator {aggregator!r} does not take alpha")
    return get(aggregator, **options)


def aggregate_updates(
    updates,
    weights,
    aggregator: str | Aggregator = "mean",
    *,
    privatizer: UpdatePrivatizer,
    deviation: str = "plug-in",
    alpha: float | None = None,
    **options,
) -> AggregatedUpdate:
    """Re-calibrated FedAvg mean of the received privatized updates (K, d) with weights (K,).

    `weights` (e.g. sample counts) are normalized here. `privatizer` is the one the clients used:
    it gives the clipping bound C (the aggregators' half-width) and the mechanism's noise moments.
    `alpha` (default 0.95) and `options` (e.g. l2_reference) go to the aggregator constructed by
    name; an error if the aggregator does not take them. Everything is validated before any work.
    """
    updates = check_updates(updates)
    clients, dims = updates.shape
    p = normalized_weights(weights, clients)
    privatizer = check_privatizer(privatizer)
    if deviation not in UPDATE_DEVIATIONS:
        raise LDPValueError(f"deviation must be one of {UPDATE_DEVIATIONS}, got {deviation!r}")
    recalibrate = _aggregator(aggregator, alpha, options)
    privatizer.per_coordinate_noise(dims)  # LDPValueError if report_dims > d

    contributing = int(np.count_nonzero(p))
    fallback = None
    if deviation == "plug-in" and contributing < 2:
        fallback = f"plug-in needs >= 2 clients with positive weight, got {contributing}; used the model"
    if deviation == "plug-in" and fallback is None:
        model = plugin_update_deviation(updates, p, privatizer)
    else:
        model = model_update_deviation(p, dims, privatizer)

    plain_mean = p @ updates
    result = recalibrate(plain_mean, model, privatizer.clip)
    record = {
        **result.record,
        "deviation_requested": deviation,
        "deviation_fallback": fallback,
        "clients": clients,
        "clients_weighted": contributing,
        "effective_clients": float(1.0 / np.sum(p**2)),
        "dims": dims,
        "mechanism": privatizer.mechanism,
        "epsilon_per_round": privatizer.epsilon,
        "clip": privatizer.clip,
        "report_dims": privatizer.dims_reported(dims),
    }
    return AggregatedUpdate(result.estimate, plain_mean, model, p, record, result.diagnostics)

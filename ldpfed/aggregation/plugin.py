"""The plug-in deviation model: delta_j and sigma_j from the reports alone (recalibration.md,
"Where sigma_j and delta_j come from").

sigma_j^2 = (sample variance of the r_j reports in dimension j) / r_j, and
delta_j = b(t_j) with t_j = (theta_hat_j - b0) / (1 + b1), the mechanism's affine bias
b(t) = b0 + b1 t at the inverted estimate (0 for unbiased mechanisms). The server needs no
knowledge of the users' data.

Why inverted (recalibration.md, plug-in erratum): E[theta_hat_j] = b0 + (1 + b1) theta_bar_j, so
t_j estimates theta_bar_j without bias, while b(theta_hat_j) is off by the factor (1 + b1) (0.37 of
the true bias for Square wave's raw estimator at eps = 1 per value).

Decisions where the spec is silent:
- t_j is clipped to the domain before b is evaluated (theta_bar_j lies in the domain, and b
  is only defined there).
- Dimensions with fewer than 2 reports have no sample variance; they get the mechanism's worst-case
  per-report variance max_{t in [-1, 1]} V(t) divided by max(r_j, 1), a data-free upper bound.
- The sample variance of the reports also contains the data's spread S_j^2, so the plug-in sigma_j^2
  exceeds the predictor's (analysis.md) by S_j^2 / n: conservative, and negligible next to LDP noise.
- `halfwidth` h: reports and estimate on [-h, h] (values were divided by h before perturbation and
  multiplied back after); the bias is then h * b(t) with t = (theta_hat / h - b0) / (1 + b1).
"""

from __future__ import annotations

import numpy as np

from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.mechanisms.base import Mechanism
from ldpfed.mechanisms.multidim import ReportSums, mean_estimate


def worst_case_variance(mechanism: Mechanism) -> float:
    """max over t in [-1, 1] of V(t) = v0 + v1 t + v2 t^2 (endpoints, or the vertex if inside)."""
    v0, v1, v2 = mechanism.variance_coefficients
    candidates = [-1.0, 1.0]
    if v2 != 0 and -1.0 < -v1 / (2.0 * v2) < 1.0:
        candidates.append(-v1 / (2.0 * v2))
    return float(np.max(mechanism.variance(np.array(candidates))))


def plugin_bias(mechanism: Mechanism, estimate, halfwidth: float = 1.0) -> np.ndarray:
    """h b(t) at t = clip((estimate / h - b0) / (1 + b1), -1, 1): the bias of an estimate whose
    expectation is h (b0 + (1 + b1) t) (module docstring). 0 for unbiased mechanisms."""
    estimate = np.asarray(estimate, dtype=float)
    if mechanism.unbiased:
        return np.zeros_like(estimate)
    b0, b1 = mechanism.bias_coefficients
    inverted = np.clip((estimate / halfwidth - b0) / (1.0 + b1), -1.0, 1.0)
    return halfwidth * mechanism.bias(inverted)


def plugin_deviation(sums: ReportSums, mechanism: Mechanism, halfwidth: float = 1.0) -> DeviationModel:
    """N(delta_j, sigma_j^2) estimated from the collected report sums of `mechanism`."""
    count = np.asarray(sums.count, dtype=float)
    theta_hat = mean_estimate(sums)
    sample_variance = sums.sample_variance()
    fallback = halfwidth**2 * worst_case_variance(mechanism)
    per_report = np.where(count >= 2, sample_variance, fallback)
    sigma = np.sqrt(per_report / np.maximum(count, 1.0))
    return DeviationModel(delta=plugin_bias(mechanism, theta_hat, halfwidth), sigma=sigma, source="plug-in")

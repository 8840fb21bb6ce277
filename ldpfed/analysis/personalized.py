"""Prediction for personalized LDP (analysis.md, "Personalized LDP"; thesis Theorem 3).

Users are split into groups z of equal (mechanism, budget, region tau = [a, b]). A group rescales
its values from tau to [-1, 1] (t = (x - c)/h, c = (a+b)/2, h = (b-a)/2), randomizes, and maps
back, so on the data scale its bias is h b(t) and its variance h^2 V(t) (mechanisms.md, PLDP).
The collector averages all r_j = sum_z r_jz reports of dimension j:

    delta_j   = sum_z (r_jz / r_j) (xbar_jz + delta_jz) - xbar_j
    sigma_j^2 = sum_z r_jz Var_jz / r_j^2  +  (sampling term, zero when m = d)

The first variance term is Theorem 3. The sampling term is predictor.py's, for the conditional
mean u = x + h_z b_z(t) of a report:
- expected counts (default): every user reports j with probability m/d whatever her group, so the
  reporters are a uniform subset of all n users and the term is S_u^2 (1/r_j - 1/n) with S_u^2 the
  pooled variance of u, *including the spread between the groups' means* (random group shares
  r_jz/r_j move the estimate between groups whose data differ). Weights are n_z/n and delta_j is
  the thesis' sum_z r_jz delta_jz / r_j.
- given counts for every group (the collector's actual r_jz): conditional on them the groups are
  strata, and the term is sum_z (r_jz/r_j)^2 (1 + b1_z)^2 S_jz^2 (1/r_jz - 1/n_z); delta_j then
  also carries the mismatch between r_jz/r_j and n_z/n.
Groups are described here by plain values (mechanism, budget, region, moments, counts),
independent of how ldpfed.mechanisms.personalized simulates them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ldpfed.analysis.berry_esseen import bound_from_moments, column_third_moment
from ldpfed.analysis.moments import ColumnMoments
from ldpfed.analysis.predictor import Prediction, _reports, _resolve_mechanism, inverse_report_moment
from ldpfed.mechanisms.base import Mechanism
from ldpfed.validation import LDPValueError, check_positive_int, check_report_dims

_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class PersonalizedGroup:
    """One homogeneous group: its randomizer, a user's total budget, privacy region and data.

    `moments` describe the group's values on the common [-1, 1] scale (they must lie in `region`:
    checked value by value for moments built with `ColumnMoments.from_array(values, ranges=True)`,
    only through the column means otherwise).
    `mechanism` is a registry name (per-value budget epsilon/m) or a per-value Mechanism instance.
    """

    mechanism: str | Mechanism
    epsilon: float | None
    moments: ColumnMoments
    region: tuple[float, float] = (-1.0, 1.0)
    delta: float | None = None
    counts: np.ndarray | None = None
    options: dict = field(default_factory=dict)


def _check_region(group: PersonalizedGroup, index: int) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in group.region)
    except (TypeError, ValueError):
        raise LDPValueError(f"group {index}: region must be (low, high)") from None
    if not (-1.0 <= low < high <= 1.0):
        raise LDPValueError(f"group {index}: region must satisfy -1 <= low < high <= 1, got {group.region!r}")
    moments = group.moments
    ranged = moments.minimum is not None  # ColumnMoments.from_array(values, ranges=True): every value is checked
    lowest, highest = (moments.minimum, moments.maximum) if ranged else (moments.mean, moments.mean)
    if np.any(lowest < low - _TOLERANCE) or np.any(highest > high + _TOLERANCE):
        raise LDPValueError(f"group {index}: values must lie in its region [{low:g}, {high:g}]")
    return low, high


def predict_personalized(groups: list[PersonalizedGroup], report_dims: int | None = None) -> Prediction:
    """Combine the groups' per-dimension bias and variance into one Prediction (Theorem 3)."""
    if not groups:
        raise LDPValueError("give at least one PLDP group")
    dims = groups[0].moments.dims
    if any(group.moments.dims != dims for group in groups):
        raise LDPValueError("every PLDP group must describe the same number of dimensions")
    m = check_report_dims(dims if report_dims is None else report_dims, dims)
    users = sum(check_positive_int(group.moments.users, "group users") for group in groups)
    given = [group.counts is not None for group in groups]
    if any(given) and not all(given):
        raise LDPValueError("give report counts for every PLDP group or for none")

    reports, weighted_mean, weighted_variance, sampling = [], [], [], []
    third_moment, descriptions, sources = [], [], []
    for index, group in enumerate(groups):
        low, high = _check_region(group, index)
        half = (high - low) / 2.0
        mechanism, epsilon, delta = _resolve_mechanism(group.mechanism, group.epsilon, group.delta, m, group.options)
        scaled = group.moments.rescaled(low, high)  # the group's values on the randomizer's scale
        r = _reports(group.counts, group.moments.users, dims, m)
        b0, b1 = mechanism.bias_coefficients
        v0, v1, v2 = mechanism.variance_coefficients
        bias = half * (b0 + b1 * scaled.mean)  # delta_jz on the data scale
        variance = half**2 * np.maximum(v0 + v1 * scaled.mean + v2 * scaled.mean_sq, 0.0)  # Var_jz
        rho, source = column_third_moment(mechanism, scaled)
        reports.append(r)
        weighted_mean.append(r * (group.moments.mean + bias))
        weighted_variance.append(r * variance)
        within = (1.0 + b1) ** 2 * group.moments.variance  # S^2 of u inside the group (divisor n_z - 1)
        sampling.append((group.moments.users, group.moments.mean + bias, within, r))
        third_moment.append(r * half**3 * rho)
        sources.append(source)
        descriptions.append(
            {
                **mechanism.describe(),
                "total_epsilon": epsilon,
                "total_delta": delta,
                "region": [low, high],
                "users": group.moments.users,
            }
        )

    r = np.sum(reports, axis=0)
    if np.any(r <= 0):
        raise LDPValueError("every dimension needs at least one report across the PLDP groups")
    if all(given):  # fixed counts, all positive
        no_report, inverse_r = np.zeros(dims), 1.0 / r
    else:  # r_j ~ Binomial(n, m/d), averaged over exactly as in predictor.py
        none, inverse = inverse_report_moment(users, m / dims)
        no_report, inverse_r = np.full(dims, none), np.full(dims, inverse)
    truth = sum(group.moments.users * group.moments.mean for group in groups) / users
    report_bias = np.sum(weighted_mean, axis=0) / r - truth
    mean_report_variance = np.sum(weighted_variance, axis=0) / r  # sum_z r_jz Var_jz / r_j
    reported = 1.0 - no_report
    noise_variance = reported * mean_report_variance * inverse_r  # Theorem 3: sum_z r_jz Var_jz / r_j^2
    sampling_variance = reported * _sampling_variance(sampling, users, r, inverse_r, stratified=all(given))
    source = sources[0] if len(set(sources)) == 1 else next((s for s in sources if s.startswith("worst case")), "data")
    berry_esseen = bound_from_moments(mean_report_variance, np.sum(third_moment, axis=0) / r, r, source)
    return Prediction(
        mechanism={"name": "personalized", "groups": descriptions},
        epsilon=None,
        delta=None,
        users=users,
        dims=dims,
        report_dims=m,
        r=r,
        bias=reported * report_bias - no_report * truth,
        noise_variance=noise_variance,
        sampling_variance=sampling_variance,
        mean_report_variance=mean_report_variance,
        sampling_coefficient=np.full(dims, np.nan),  # no single line in 1/n: no break-even
        berry_esseen=berry_esseen,
        data_source="per-group moments",
        report_bias=report_bias,
        inverse_reports=inverse_r,
        no_report_probability=no_report,
        no_report_variance=no_report * reported * (report_bias + truth) ** 2,
    )


def _sampling_variance(groups, users: int, r: np.ndarray, inverse_r: np.ndarray, *, stratified: bool) -> np.ndarray:
    """Variance of averaging r_j of the n users' conditional means u (see the module docstring),
    given r_j > 0; inverse_r is E[1/r_j | r_j > 0] for random counts.

    groups: per group (n_z, mean of u, within-group S^2 of u, r_jz).
    """
    if stratified:
        # r_z^2 (1/r_z - 1/n_z) = r_z (1 - r_z/n_z): no division, and 0 for a group without reports.
        return sum(within * r_z * np.maximum(1.0 - r_z / n_z, 0.0) for n_z, _, within, r_z in groups) / r**2
    if users < 2:
        return np.zeros_like(r)
    pooled_mean = sum(n_z * mean_u for n_z, mean_u, _, _ in groups) / users
    pooled = sum((n_z - 1) * within + n_z * (mean_u - pooled_mean) ** 2 for n_z, mean_u, within, _ in groups)
    return pooled / (users - 1) * np.maximum(inverse_r - 1.0 / users, 0.0)

"""Personalized LDP (mechanisms.md, Personalized LDP; analysis.md, thesis Theorem 3).

Each user i has a budget e_i and a privacy region tau_i = [a_i, b_i] inside [-1, 1] that contains
her value x_i. She is e_i-LDP among the inputs of her region: x is rescaled from tau to [-1, 1]
(u = (x - c) / h with centre c = (a + b) / 2 and half-width h = (b - a) / 2), perturbed by the
scalar mechanism at budget e_i, and mapped back (y = c + h u*). The collector knows every user's
(budget, region) and groups users by it; each group is one homogeneous population.

API:
- `PLDPGroup(mechanism, low, high)`: one group; `to_unit`/`from_unit`, `perturb`, `debias`, and
  per-value `bias` and `variance` on the data scale (bias scales by h, variance by h^2). The
  guarantee is the mechanism's on the unit scale: rescaling is a bijection of the region onto
  [-1, 1], so density ratios between inputs of the region are unchanged.
- `perturb_personalized(values, budgets, regions_low, regions_high, mechanism, rng, ...) -> reports`:
  each user's side.
- `group_users(budgets, regions_low, regions_high, mechanism, ..., users=None) -> Population`: the
  collector's side, the groups and each user's group (unpacks as `groups, labels`);
  `Population.estimate_mean(reports, debiased=True)`: sum_z n_z mean_z / n over groups; unbiased
  when `debiased` (each report's linear bias E[u*] = b0 + (1 + b1) u inverted on its group's
  scale), the thesis' plain mean otherwise. `Population.statistics(values, debiased=True) ->
  list[GroupStatistics]`: per group the count r_z, the bias delta_z and the mean per-report
  variance Var_z of that estimator on the data scale, so the predictor computes Theorem 3:
  delta = sum_z r_z delta_z / r, sigma^2 = sum_z r_z Var_z / r^2.

Regions are closed intervals [a, b] with -1 <= a < b <= 1 (the spec's "[-1, 0)" is treated as
[-1, 0]); a value outside its own region is an error, never clipped. Mechanism options (e.g.
square wave's `estimator`) and `delta` (approximate mechanisms) are the same for every user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

import ldpfed.mechanisms as mechanisms
from ldpfed.mechanisms.base import Mechanism
from ldpfed.validation import LDPValueError, check_generator, check_values


@dataclass(frozen=True)
class PLDPGroup:
    """Users sharing one budget (`mechanism.epsilon`) and one privacy region [low, high]."""

    mechanism: Mechanism
    low: float
    high: float

    @property
    def epsilon(self) -> float:
        return self.mechanism.epsilon

    @property
    def centre(self) -> float:
        return (self.low + self.high) / 2

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def to_unit(self, x) -> np.ndarray:
        """Rescale from the region to [-1, 1] (clipped: only floating-point rounding can leave it)."""
        return np.clip((np.asarray(x, dtype=float) - self.centre) / self.half_width, -1.0, 1.0)

    def from_unit(self, u) -> np.ndarray:
        return self.centre + self.half_width * np.asarray(u, dtype=float)

    def perturb(self, x, rng: np.random.Generator) -> np.ndarray:
        """Reports on the data scale for values x in this region."""
        x = check_values(x, low=self.low, high=self.high, name="values in their privacy region")
        return self.from_unit(self.mechanism.perturb(self.to_unit(x), rng))

    def debias(self, reports) -> np.ndarray:
        """Per-report unbiased estimates of x: invert E[u*] = b0 + (1 + b1) u on this group's scale."""
        b0, b1 = self.mechanism.bias_coefficients
        unit = (np.asarray(reports, dtype=float) - self.centre) / self.half_width
        return self.from_unit((unit - b0) / (1.0 + b1))

    def bias(self, x, *, debiased: bool = True) -> np.ndarray:
        """E[estimate | x] - x on the data scale: h b(u), or 0 once debiased."""
        if debiased:
            return np.zeros(np.shape(x))
        return self.half_width * self.mechanism.bias(self.to_unit(x))

    def variance(self, x, *, debiased: bool = True) -> np.ndarray:
        """Var(estimate | x) on the data scale: h^2 V(u), divided by (1 + b1)^2 once debiased."""
        _, b1 = self.mechanism.bias_coefficients
        scale = self.half_width**2 / ((1.0 + b1) ** 2 if debiased else 1.0)
        return scale * self.mechanism.variance(self.to_unit(x))


@dataclass(frozen=True)
class GroupStatistics:
    """One group's r_z, delta_z and Var_z (mean per-report variance), on the data scale."""

    epsilon: float
    low: float
    high: float
    count: int
    bias: float
    variance: float


def _check_population(budgets, regions_low, regions_high, users: int | None = None):
    """Budgets and regions as (n,) float arrays (scalars broadcast), validated."""
    budgets, low, high = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (budgets, regions_low, regions_high))
    )
    if budgets.ndim == 0 and users is None:
        raise LDPValueError("scalar budgets and regions need the number of users (users=n)")
    if budgets.ndim == 0:
        budgets, low, high = (np.full(users, a) for a in (budgets, low, high))
    if budgets.ndim != 1 or (users is not None and budgets.shape[0] != users):
        raise LDPValueError(
            f"budgets and regions must be scalars or 1-D arrays with one entry per user ({users}), "
            f"got shape {budgets.shape}"
        )
    if not np.all(np.isfinite(budgets)) or np.any(budgets <= 0):
        raise LDPValueError("budgets must be finite numbers > 0")
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise LDPValueError("privacy regions contain NaN or inf")
    if np.any(low < -1.0) or np.any(high > 1.0) or np.any(low >= high):
        raise LDPValueError("privacy regions must satisfy -1 <= regions_low < regions_high <= 1")
    return budgets, low, high


def _check_user_values(values) -> np.ndarray:
    x = check_values(values)
    if x.ndim != 1 or x.size == 0:
        raise LDPValueError(f"values must be a non-empty 1-D array (one value per user), got shape {x.shape}")
    return x


class Population(NamedTuple):
    """The users grouped by (budget, region): the distinct groups and each user's group index
    (labels, shape (n,)). The collector estimates from the reports group by group; `perturb`
    simulates the users' side, vectorized over each group."""

    groups: list[PLDPGroup]
    labels: np.ndarray

    def _members(self, array: np.ndarray):
        """(group, its users' entries of `array`) for each group: a loop over groups, never over users."""
        if array.size != self.labels.size:
            raise LDPValueError(f"give one entry per user ({self.labels.size}), got {array.size}")
        return ((group, array[self.labels == z]) for z, group in enumerate(self.groups))

    def _values_in_regions(self, values) -> np.ndarray:
        """The users' values (one per user), each checked to lie in its privacy region (never clipped)."""
        x = _check_user_values(values)
        if x.size != self.labels.size:
            raise LDPValueError(f"give one entry per user ({self.labels.size}), got {x.size}")
        low = np.array([group.low for group in self.groups])[self.labels]
        high = np.array([group.high for group in self.groups])[self.labels]
        outside = (x < low) | (x > high)
        if outside.any():
            i = int(np.argmax(outside))
            raise LDPValueError(
                f"values must lie in their privacy region; {int(outside.sum())} do not "
                f"(e.g. user {i}: {x[i]:.6g} outside [{low[i]:.6g}, {high[i]:.6g}])"
            )
        return x

    def perturb(self, values, rng: np.random.Generator) -> np.ndarray:
        """Each user's report on the data scale, perturbed within her region at her budget (what the
        users send; simulated here group by group)."""
        check_generator(rng)
        x = self._values_in_regions(values)
        reports = np.empty_like(x)
        for z, group in enumerate(self.groups):  # a loop over groups, never over users
            members = self.labels == z
            reports[members] = group.perturb(x[members], rng)
        return reports

    def estimate_mean(self, reports, debiased: bool = True) -> float:
        """Overall mean sum_z n_z mean_z / n; unbiased when `debiased`, the thesis' plain mean otherwise."""
        y = np.asarray(reports, dtype=float)
        if y.ndim != 1 or y.size == 0 or not np.all(np.isfinite(y)):
            raise LDPValueError(f"reports must be a non-empty 1-D array of finite numbers, got shape {y.shape}")
        total = sum(
            members.size * float(np.mean(group.debias(members) if debiased else members))
            for group, members in self._members(y)
        )
        return total / y.size

    def statistics(self, values, debiased: bool = True) -> list[GroupStatistics]:
        """Per group: r_z, delta_z = mean bias and Var_z = mean per-report variance (data scale)."""
        return [
            GroupStatistics(
                epsilon=group.epsilon,
                low=group.low,
                high=group.high,
                count=int(members.size),
                bias=float(np.mean(group.bias(members, debiased=debiased))),
                variance=float(np.mean(group.variance(members, debiased=debiased))),
            )
            for group, members in self._members(self._values_in_regions(values))
        ]


def group_users(
    budgets,
    regions_low,
    regions_high,
    mechanism: str,
    *,
    delta: float | None = None,
    users: int | None = None,
    **options,
) -> Population:
    """The users grouped by (budget, region); `users` broadcasts scalar budgets and regions."""
    budgets, low, high = _check_population(budgets, regions_low, regions_high, users)
    keys, labels = np.unique(np.column_stack([budgets, low, high]), axis=0, return_inverse=True)
    groups = [PLDPGroup(mechanisms.get(mechanism, e, delta, **options), float(a), float(b)) for e, a, b in keys]
    return Population(groups, labels.reshape(-1))


def perturb_personalized(
    values,
    budgets,
    regions_low,
    regions_high,
    mechanism: str,
    rng: np.random.Generator,
    *,
    delta: float | None = None,
    **options,
) -> np.ndarray:
    """Each user's report on the data scale, perturbed within her region at her budget."""
    x = _check_user_values(values)
    population = group_users(budgets, regions_low, regions_high, mechanism, delta=delta, users=x.size, **options)
    return population.perturb(x, rng)

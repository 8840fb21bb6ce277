"""Clipping and LDP perturbation of a client's model update (spec: federated.md, Federated
LDP-SGD; analysis.md, Federated rounds; mechanisms.md, Several dimensions).

Per-coordinate mechanisms need each value in [-1, 1], so the update u (a flat vector of d
coordinates) is clipped coordinate-wise to [-C, C], divided by C, perturbed, and multiplied by C
(analysis.md, Federated rounds). The Gaussian mechanism is used the same way, per coordinate
(sensitivity 2 on [-1, 1]); the spec's alternative of L2 clipping to C is not offered here.

BUDGET DECISION. `epsilon` (and `delta`) is the client's budget per ROUND for its whole update.
A sound per-coordinate report cannot spend the full eps on each of d coordinates (that would be
d*eps), so the client samples m = `report_dims` of the d coordinates uniformly without
replacement and perturbs each with eps/m (delta/m for Gaussian); by basic composition the round
costs (eps, delta). The default m is Wang et al.'s max(1, min(d, floor(eps / 2.5)))
(`ldpfed.mechanisms.multidim.wang_report_dims`); report_dims = d gives eps/d to every coordinate. The
coordinate sample does not depend on the data, so it costs nothing. The server's unbiased
reconstruction, scaling each reported coordinate by d/m and putting 0 on the others, is done
here, so `privatize` returns an estimate with E[privatize(u)] = clip(u) for unbiased mechanisms.
It is post-processing of the report.

"none" clips each coordinate to [-C, C] and adds no noise (no privacy; the ledger records eps =
inf). The thesis variant that perturbs only the last local step is not provided (not LDP).

Noise moments (for the CLT round prediction, analysis.md): with t = clip(u_j)/C, p = d/m and the
mechanism's b(t), V(t), the privatized coordinate minus the clipped one has
    mean     C * b(t)
    variance C^2 * [p * V(t) + (p - 1) * (t + b(t))^2]
(the second term is the Bernoulli(m/d) report mask times the d/m scale). Coordinates are
slightly negatively correlated when m < d (exactly m are reported); the marginal variances are
what the trace in analysis.md needs.
"""

from __future__ import annotations

import math
from typing import ClassVar, Protocol

import numpy as np

import ldpfed.mechanisms as mechanisms
from ldpfed.accounting import CalibratedDpEvent, EpsilonDeltaDpEvent, gaussian_mechanism_event, not_private
from ldpfed.mechanisms.base import Mechanism
from ldpfed.mechanisms.multidim import per_value_mechanism, sample_report_mask, sample_report_masks, wang_report_dims
from ldpfed.validation import (
    LDPValueError,
    canonical_name,
    check_delta,
    check_epsilon,
    check_generator,
    check_positive,
    check_positive_int,
    check_report_dims,
)

UPDATE_MECHANISMS = ("none",) + tuple(mechanisms.available())
GAUSSIAN = "gaussian"
SENSITIVITY = 2.0  # width of [-1, 1], the per-coordinate domain after dividing by C


def check_row_rngs(rngs, rows: np.ndarray) -> list[np.random.Generator]:
    """One numpy Generator per row of a (clients, d) block (each client's own noise stream)."""
    rngs = list(rngs)
    if rows.ndim != 2 or len(rngs) != rows.shape[0]:
        raise LDPValueError(
            f"give a (clients, d) block and one generator per client, got shape {rows.shape} and {len(rngs)} generators"
        )
    check_generator(*rngs)
    return rngs


class Privatizer(Protocol):
    """What a client's round calls to release its model update, whatever perturbs it: the scalar
    mechanisms (`UpdatePrivatizer`), a gradient noise (`NoisePrivatizer`, ldpfed.training.noise_privatizer)
    or LDPVec (ldpfed.directional's `DirectionalPrivatizer`).

    `per_value_noise_model`: the release has a scalar mechanism's exact bias and variance per
    coordinate value (`noise_moments`, `per_coordinate_noise` at every value), the model the
    re-calibrating aggregators need; the vector noises give the worst-case per-coordinate noise only.
    """

    mechanism: str
    per_value_noise_model: ClassVar[bool]

    @property
    def private(self) -> bool: ...
    def clip_only(self, update) -> np.ndarray: ...
    def privatize(self, update, rng: np.random.Generator) -> np.ndarray: ...
    def privatize_rows(self, updates, rngs, broadcast: dict | None = None) -> np.ndarray: ...
    def per_coordinate_noise(self, dims: int) -> tuple[np.ndarray, np.ndarray]: ...
    def event(self, dims: int): ...
    def describe(self, dims: int | None = None) -> dict: ...


def round_record(privatizer, clipping: str) -> dict:
    """What every privatizer's record starts with: its mechanism, its per-round budget and how it
    clips (`clipping`, in words)."""
    return {
        "mechanism": privatizer.mechanism,
        "epsilon_per_round": privatizer.epsilon,
        "delta_per_round": privatizer.delta,
        "clip": privatizer.clip,
        "clipping": clipping,
    }


class UpdatePrivatizer:
    """Clip a flat update to [-C, C] per coordinate and perturb m sampled coordinates with eps/m each.

    `epsilon`/`delta` are the client's per-round budget and `options` go to the scalar mechanism
    (e.g. estimator="debiased", calibration="classic"); for "none" all three are ignored.
    """

    per_value_noise_model = True

    def __init__(
        self,
        mechanism: str,
        epsilon: float | None,
        clip: float,
        delta: float | None = None,
        report_dims: int | None = None,
        **options,
    ) -> None:
        key = canonical_name(mechanism)
        self.mechanism = key
        self.clip = check_positive(clip, "clip")
        self.options = dict(options)
        self.report_dims = None if report_dims is None else check_positive_int(report_dims, "report_dims")
        self._per_value: dict[int, Mechanism] = {}
        if key == "none":
            # No noise: epsilon, delta and options do not apply (a config may carry them for the
            # other mechanisms) and are not recorded.
            self.epsilon, self.delta, self.options = None, None, {}
            return
        cls = mechanisms.get_class(key)  # LDPValueError for an unknown name
        self.mechanism = cls.name
        # Validate epsilon, delta and options now, on the per-value mechanism of report_dims (or
        # of Wang's m before its cap by d, which only lowers m): options such as the classic
        # Gaussian calibration constrain the per-value budget eps/m.
        epsilon = check_epsilon(epsilon)
        probe_dims = self.report_dims or max(1, math.floor(epsilon / 2.5))
        per_value_mechanism(cls.name, epsilon, probe_dims, delta, **options)
        self.epsilon = epsilon
        self.delta = check_delta(delta, approximate=cls.approximate, mechanism=cls.name)

    # --- the per-value mechanism -----------------------------------------------------------------
    @property
    def private(self) -> bool:
        return self.mechanism != "none"

    def dims_reported(self, dims: int) -> int:
        """m for an update of d = `dims` coordinates (LDPValueError if report_dims > d)."""
        dims = check_positive_int(dims, "dims")
        if self.report_dims is not None:
            return check_report_dims(self.report_dims, dims)
        if not self.private:
            return dims
        return wang_report_dims(self.epsilon, dims)

    def per_value_mechanism(self, dims: int) -> Mechanism:
        """The scalar mechanism each reported coordinate goes through (eps/m, delta/m)."""
        if not self.private:
            raise LDPValueError("mechanism 'none' perturbs nothing")
        m = self.dims_reported(dims)
        if m not in self._per_value:
            self._per_value[m] = per_value_mechanism(self.mechanism, self.epsilon, m, self.delta, **self.options)
        return self._per_value[m]

    # --- sampling --------------------------------------------------------------------------------
    def _check_update(self, update) -> np.ndarray:
        array = np.asarray(update, dtype=np.float64)
        if array.ndim not in (1, 2) or array.shape[-1] == 0:
            raise LDPValueError(f"update must be a flat vector (d,) or a batch (clients, d), got shape {array.shape}")
        if not np.all(np.isfinite(array)):
            raise LDPValueError("update contains NaN or inf (diverged local training?)")
        return array

    def clip_only(self, update) -> np.ndarray:
        """The clipped, noise-free update: each coordinate clipped to [-C, C]."""
        return np.clip(self._check_update(update), -self.clip, self.clip)

    def privatize(self, update, rng: np.random.Generator) -> np.ndarray:
        """Unbiased reconstruction of the clipped update from one LDP report (see module docstring).

        `update` is one flat vector (d,) or a batch (clients, d) privatized row by row.
        """
        check_generator(rng)
        clipped = self.clip_only(update)
        if not self.private:
            return clipped
        rows = np.atleast_2d(clipped)
        clients, dims = rows.shape
        m = self.dims_reported(dims)
        mechanism = self.per_value_mechanism(dims)
        mask = sample_report_mask(clients, dims, m, rng)
        estimate = np.zeros_like(rows)
        scale = self.clip * dims / m
        estimate[mask] = scale * mechanism.perturb(rows[mask] / self.clip, rng, out_of_domain="clip")
        return estimate.reshape(clipped.shape)

    def privatize_rows(self, updates, rngs, broadcast: dict | None = None) -> np.ndarray:
        """Row k of `updates` (clients, d) privatized with its own generator `rngs[k]`: bit for bit
        `privatize(updates[k], rngs[k])`, so a client's noise and coordinate sample come from its
        stream whichever clients share the block (spec: scale.md). Clipping, the m-of-d masks'
        selection, scaling and assembly run over the whole block; each row's draws come from its
        generator (`sample_report_masks`, `Mechanism.perturb_rows`). `broadcast`: unused here."""
        rows = self.clip_only(updates)
        rngs = check_row_rngs(rngs, rows)
        if not self.private:
            return rows
        clients, dims = rows.shape
        m = self.dims_reported(dims)
        mask = sample_report_masks(dims, m, rngs)
        estimate = np.zeros_like(rows)
        scale = self.clip * dims / m
        reported = rows[mask].reshape(clients, m)  # each row's m reported coordinates, in order
        reported /= self.clip
        estimate[mask] = (scale * self.per_value_mechanism(dims).perturb_rows(reported, rngs)).ravel()
        return estimate

    # --- noise moments (analysis.md, Federated rounds) -------------------------------------------
    def noise_moments(self, clipped_update) -> tuple[np.ndarray, np.ndarray]:
        """Exact per-coordinate (mean, variance) of privatize(u) - clip(u), given clip(u)."""
        clipped = self.clip_only(clipped_update)
        if not self.private:
            return np.zeros_like(clipped), np.zeros_like(clipped)
        dims = clipped.shape[-1]
        m = self.dims_reported(dims)
        mechanism = self.per_value_mechanism(dims)
        t = clipped / self.clip
        bias = mechanism.bias(t)
        p = dims / m
        variance = p * mechanism.variance(t) + (p - 1.0) * (t + bias) ** 2
        return self.clip * bias, self.clip**2 * variance

    def per_coordinate_noise(self, dims: int) -> tuple[np.ndarray, np.ndarray]:
        """Worst-case per-coordinate (mean, variance) of the noise over coordinate values in [-C, C].

        The variance is the maximum of the quadratic above over t in [-1, 1]; the mean is the
        mechanism's bias C*b(t) at the end of [-1, 1] where |b| is largest (0 for unbiased ones).
        """
        dims = check_positive_int(dims, "dims")
        if not self.private:
            return np.zeros(dims), np.zeros(dims)
        m = self.dims_reported(dims)
        mechanism = self.per_value_mechanism(dims)
        (v0, v1, v2), (b0, b1), p = mechanism.variance_coefficients, mechanism.bias_coefficients, dims / m
        # q(t) = A t^2 + B t + c0, the bracket of the variance formula expanded.
        a = p * v2 + (p - 1.0) * (1.0 + b1) ** 2
        b = p * v1 + 2.0 * (p - 1.0) * b0 * (1.0 + b1)
        c0 = p * v0 + (p - 1.0) * b0**2
        candidates = np.array([-1.0, 1.0, np.clip(-b / (2 * a), -1.0, 1.0) if a != 0 else 0.0])
        worst_variance = float(np.max(c0 + candidates * (b + a * candidates)))
        ends = np.array([b0 - b1, b0 + b1])
        worst_mean = float(ends[np.argmax(np.abs(ends))])
        return np.full(dims, self.clip * worst_mean), np.full(dims, self.clip**2 * worst_variance)

    # --- privacy ---------------------------------------------------------------------------------
    def round_cost(self) -> tuple[float, float]:
        """(eps, delta) one client spends per round: the full budget (basic composition over m)."""
        if not self.private:
            return math.inf, 0.0
        return self.epsilon, (self.delta or 0.0)

    def noise_multiplier(self, dims: int) -> float | None:
        """Gaussian only: the round's noise multiplier for RDP accounting, else None.

        Each of the m reported values has noise multiplier z = noise parameter / sensitivity
        (`Gaussian.noise_multiplier`: sigma/2 for the continuous sampler, s/(2J + 2) in grid steps
        for the safe discrete one, whose RDP is at most the continuous curve's). Composing m of
        them is, in RDP, one Gaussian with z/sqrt(m) (gradient-noise.md, Accounting across rounds).
        Not the noise sd: the safe sampler's variance includes the grid rounding.
        """
        if self.mechanism != GAUSSIAN:
            return None
        return self.per_value_mechanism(dims).noise_multiplier / math.sqrt(self.dims_reported(dims))

    def mechanism_event(self, dims: int):
        """Gaussian only: the round's privacy event for RDP/PLD (`gaussian_mechanism_event`: m
        discrete Gaussians for the safe sampler, whose PLD the continuous one does not bound),
        else None."""
        if self.mechanism != GAUSSIAN:
            return None
        return gaussian_mechanism_event(self.per_value_mechanism(dims), self.dims_reported(dims))

    def event(self, dims: int):
        """One client's round as a privacy event (ldpfed.accounting): the Gaussian's own event
        (`mechanism_event`) calibrated to (eps, delta), eps-DP for the pure mechanisms, and a
        not-private event for the mechanism none."""
        if not self.private:
            return not_private(f"mechanism {self.mechanism}: clients send their clipped model updates without noise")
        mechanism_event = self.mechanism_event(dims)
        if mechanism_event is not None:
            return CalibratedDpEvent(mechanism_event, self.epsilon, self.delta)
        return EpsilonDeltaDpEvent(self.epsilon, self.delta or 0.0)

    def describe(self, dims: int | None = None) -> dict:
        """JSON-ready record of the privatizer (and, given d, of m and the per-value mechanism)."""
        record = round_record(self, "per coordinate to [-clip, clip]")
        record.update(report_dims=self.report_dims, options=self.options)
        if dims is not None and self.private:
            m = self.dims_reported(dims)
            record.update(dims=int(dims), report_dims=m, per_value=self.per_value_mechanism(dims).describe())
        return record

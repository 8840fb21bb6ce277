"""The interface every server-side aggregator implements (spec: recalibration.md).

An aggregator re-calibrates the collector's plain per-dimension estimate theta_hat using the
deviation model theta_hat_j - theta_bar_j ~ N(delta_j, sigma_j^2) (`ldpfed.aggregation.deviation`). It is
post-processing of released data, so it costs no privacy. Aggregators are immutable, constructed
once with their options (alpha, l2 reference), and return a `Recalibrated` result that records
every choice that shaped it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np

from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.validation import LDPValueError, check_fraction, check_positive

DEFAULT_ALPHA = 0.95
L2_REFERENCES = ("bound", "estimate")


def check_alpha(alpha: float) -> float:
    """A confidence level strictly between 0 and 1."""
    return check_fraction(alpha, "alpha")


def check_halfwidth(halfwidth: float) -> float:
    """The half-width h of the data domain [-h, h] (1 for tuples; the clipping bound C for gradients)."""
    return check_positive(halfwidth, "halfwidth")


@dataclass(frozen=True)
class Recalibrated:
    """A re-calibrated estimate and the record of how it was made.

    `record` holds the aggregator name, its options, the deviation source and the domain
    half-width; `diagnostics` holds per-dimension intermediate values (e.g. HDR4ME*'s weights).
    """

    estimate: np.ndarray
    record: dict
    diagnostics: dict = field(default_factory=dict)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.estimate, dtype=dtype)


@dataclass(frozen=True)
class Aggregator(ABC):
    """Maps (theta_hat, deviation model, domain half-width) to a re-calibrated estimate."""

    name: ClassVar[str]
    tasks: ClassVar[tuple[str, ...]] = ("mean", "frequency")  # the tasks whose estimates it applies to
    uses_deviation: ClassVar[bool] = True  # False: the estimate ignores the deviation model (the plain mean)
    # True: each entry's output depends on that entry (and its deviation) alone, so its error can be
    # predicted entry by entry (`ldpfed.analysis.frequency.recalibrated_mse`); False for the steps
    # that couple an attribute's categories (simplex projection, the consistency family, IBU)
    elementwise: ClassVar[bool] = True
    # True: built by the frequency server with each attribute's channel (p, q) of its oracles (IBU)
    needs_channel: ClassVar[bool] = False

    def __call__(self, theta_hat, deviation: DeviationModel, halfwidth: float = 1.0) -> Recalibrated:
        """Re-calibrate `theta_hat` (shape (d,)) given the deviation model of its d dimensions."""
        estimate = np.asarray(theta_hat, dtype=float)
        if estimate.ndim != 1:
            raise LDPValueError(f"theta_hat must be a 1-D (dims,) array, got shape {estimate.shape}")
        if not np.all(np.isfinite(estimate)):
            raise LDPValueError("theta_hat contains NaN or inf")
        if deviation.sigma.shape not in ((), estimate.shape):
            raise LDPValueError(f"deviation model has shape {deviation.sigma.shape}, theta_hat has {estimate.shape}")
        halfwidth = check_halfwidth(halfwidth)
        values, diagnostics = self._recalibrate(estimate, deviation, halfwidth)
        record = {
            "aggregator": self.name,
            **self.options(),
            "deviation_source": deviation.source,
            "halfwidth": halfwidth,
        }
        return Recalibrated(values, record, diagnostics)

    @abstractmethod
    def _recalibrate(
        self, theta_hat: np.ndarray, deviation: DeviationModel, halfwidth: float
    ) -> tuple[np.ndarray, dict]:
        """(re-calibrated vector, diagnostics) on validated inputs."""

    def options(self) -> dict:
        """Constructor options (for records and `get`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ConfidenceAggregator(Aggregator, ABC):
    """An aggregator whose regularization weight is the confidence supremum xi_j(alpha)."""

    alpha: float = DEFAULT_ALPHA

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", check_alpha(self.alpha))

    def supremum(self, deviation: DeviationModel, shape: tuple) -> np.ndarray:
        """xi_j(alpha) per dimension, broadcast to the estimate's shape."""
        return np.broadcast_to(deviation.supremum(self.alpha), shape)


def check_l2_reference(reference: str) -> str:
    if reference not in L2_REFERENCES:
        raise LDPValueError(f"l2_reference must be one of {L2_REFERENCES}, got {reference!r}")
    return reference

"""The interface every scalar randomizer implements (spec: mechanisms.md).

A mechanism is immutable: constructed once with its budget, it perturbs whole arrays and carries
its own exact statistics. Its conditional bias b(t) = E[t*|t] - t is a polynomial of degree <= 1
and its conditional variance V(t) = Var(t*|t) one of degree <= 2 in t (on the [-1, 1] scale of
the estimate), so they are exposed as coefficients: the predictor then needs only each column's
first two moments (analysis.md).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from ldpfed.validation import OutOfDomain, check_delta, check_epsilon, check_values


@dataclass(frozen=True)
class Mechanism(ABC):
    """A scalar LDP randomizer on [-1, 1] with budget `epsilon` per value."""

    epsilon: float
    delta: float | None = None

    name: ClassVar[str]
    approximate: ClassVar[bool] = False  # (eps, delta)-LDP rather than pure eps-LDP

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(
            self, "delta", check_delta(self.delta, approximate=self.approximate, mechanism=self.name)
        )

    # --- sampling -------------------------------------------------------------------------------
    def perturb(
        self, values, rng: np.random.Generator, *, out_of_domain: OutOfDomain = "raise"
    ) -> np.ndarray:
        """Randomize every entry of `values` (any shape) independently; returns the same shape."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed))")
        t = check_values(values, out_of_domain=out_of_domain)
        return self._sample(t, rng)

    @abstractmethod
    def _sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Vectorized sampler on validated inputs in [-1, 1]."""

    # --- exact statistics -----------------------------------------------------------------------
    @property
    @abstractmethod
    def bias_coefficients(self) -> tuple[float, float]:
        """(b0, b1) with b(t) = E[t*|t] - t = b0 + b1 t."""

    @property
    @abstractmethod
    def variance_coefficients(self) -> tuple[float, float, float]:
        """(v0, v1, v2) with V(t) = Var(t*|t) = v0 + v1 t + v2 t^2."""

    def bias(self, t) -> np.ndarray:
        """Conditional bias b(t) = E[t*|t] - t, vectorized over t."""
        b0, b1 = self.bias_coefficients
        return b0 + b1 * np.asarray(t, dtype=float)

    def variance(self, t) -> np.ndarray:
        """Conditional variance V(t) = Var(t*|t), vectorized over t."""
        v0, v1, v2 = self.variance_coefficients
        t = np.asarray(t, dtype=float)
        return v0 + t * (v1 + v2 * t)

    @abstractmethod
    def third_abs_central_moment(self, t) -> np.ndarray:
        """E|t* - E[t*|t]|^3 given t, vectorized (the Berry–Esseen rho; analysis.md)."""

    # --- privacy --------------------------------------------------------------------------------
    @property
    def output_bound(self) -> float:
        """Largest |t*| the mechanism can output (inf for unbounded noise)."""
        return math.inf

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.output_bound)

    @property
    def unbiased(self) -> bool:
        return all(c == 0 for c in self.bias_coefficients)

    @property
    def guarantee(self) -> str:
        if self.approximate:
            return f"({self.epsilon:g}, {self.delta:g})-LDP per value"
        return f"{self.epsilon:g}-LDP per value (density ratio <= e^eps)"

    @abstractmethod
    def log_density(self, y, t) -> np.ndarray:
        """log of the output density (or mass, for discrete outputs) at y given input t.

        Used to check the guarantee: max over y, t, t' of log p(y|t) - log p(y|t') <= epsilon.
        Returns -inf outside the support.
        """

    def options(self) -> dict:
        """Constructor options beyond epsilon/delta (for records and `get`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("epsilon", "delta")}

    def describe(self) -> dict:
        """A JSON-ready summary: name, parameters, guarantee and properties."""
        return {
            "name": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "options": self.options(),
            "guarantee": self.guarantee,
            "privacy": "approximate (eps, delta)" if self.approximate else "pure eps",
            "bounded": self.bounded,
            "output_bound": self.output_bound if self.bounded else None,
            "unbiased": self.unbiased,
        }

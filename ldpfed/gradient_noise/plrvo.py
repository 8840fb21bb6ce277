"""PLRV-O: Laplace noise with a Gamma-distributed inverse scale (spec: gradient-noise.md, PLRV-O).

Per coordinate u ~ Gamma(shape k, scale theta) and z ~ Laplace(0, 1/u); marginally |z| is Lomax,
P(|z| > s) = E[e^(-u s)] = (1 + theta s)^(-k), so the one-step sampler is
    |z| = expm1(-log1p(-U) / k) / theta   with a random sign   (U uniform on [0, 1)).
E|z| = 1/((k-1) theta) (k > 1), Var z = E z^2 = 2/((k-1)(k-2) theta^2) (k > 2). The noise is added
to the SUM of clipped per-example gradients, in absolute units (clip C per example).

The privacy curve and its accountants ("joint", sound; "paper", as published, which understates eps)
are in ldpfed.accounting.plrvo.

Samplers. "safe" (default): scale atoms, a per-atom grid and exact integer discrete Laplace noise
(plrvo_safe.py); both accountants then use G_safe, the bound of plrvo_safe.py for what is sampled
(`law`). "continuous": the one-step float sampler above, NOT floating-point safe (Mironov 2012).
"""

from __future__ import annotations

import math

import numpy as np

from ldpfed.accounting import PlrvoDpEvent
from ldpfed.accounting.plrvo import PlrvoStep
from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.samplers.plrvo_safe import SafeLaw, release_safe, safe_variance, sample_safe
from ldpfed.samplers.safe_grid import check_sampler
from ldpfed.validation import LDPValueError, check_fraction, check_positive, check_positive_int


class PLRVO(GradientNoise):
    """Per-coordinate z = sign * expm1(-log1p(-U)/k)/theta (Laplace with a Gamma inverse scale)."""

    name = "plrvo"
    samplers = ("safe", "continuous")

    def __init__(
        self,
        dims: int,
        *,
        k: float,
        theta: float,
        clip: float = 1.0,
        sample_rate: float = 1.0,
        steps: int = 1,
        delta: float = 1e-5,
        sampler: str = "safe",
    ) -> None:
        self.dims = check_positive_int(dims, "dims")
        self.k, self.theta = check_positive(k, "k"), check_positive(theta, "theta")
        if self.k <= 1:
            raise LDPValueError(f"plrvo needs k > 1 (finite E|z|), got {k!r}")
        self.clip = check_positive(clip, "clip")
        rate = float(sample_rate)
        if not (0.0 < rate <= 1.0):
            raise LDPValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
        self.sample_rate, self.steps = rate, check_positive_int(steps, "steps")
        self.delta = check_fraction(delta, "delta")
        self.sampler = check_sampler(sampler)
        self.law = SafeLaw.for_params(self.dims) if self.floating_point_safe else None

    def sample(self, count, rng):
        if self.floating_point_safe:
            steps, noise = sample_safe(count, self.dims, self.k, self.theta, self.law, rng)
            return steps * noise
        u = rng.random((count, self.dims))
        magnitude = np.expm1(-np.log1p(-u) / self.k) / self.theta
        return np.where(rng.random((count, self.dims)) < 0.5, -magnitude, magnitude)

    def mean_abs(self) -> float:
        """E|z| = 1/((k-1) theta)."""
        return 1.0 / ((self.k - 1.0) * self.theta)

    def _release(self, rows, rng):
        if not self.floating_point_safe:
            return super()._release(rows, rng)
        return release_safe(rows, self.k, self.theta, self.law, rng)

    def coordinate_variance(self):
        if self.floating_point_safe:  # the atoms' mean of g^2 (E N^2 + 1/4): exact at the worst input
            return np.full(self.dims, safe_variance(self.k, self.theta, self.law))
        variance = 2.0 / ((self.k - 1.0) * (self.k - 2.0) * self.theta**2) if self.k > 2 else math.inf
        return np.full(self.dims, variance)

    def release_variance(self, rows):
        """The worst-input variance (the rounding's g^2 f(1 - f) depends on the atom; <= g^2/4)."""
        return np.broadcast_to(self.coordinate_variance(), np.shape(rows)).copy()

    def epsilon(self, accountant: str = "joint") -> tuple[float, int]:
        """(eps, lam) of `steps` steps at rate q and delta (joint: the guarantee) for what is sampled."""
        step = PlrvoStep(self.k, self.theta, self.clip, self.dims, self.sample_rate, self.law)
        return step.epsilon(self.steps, self.delta, accountant)

    def parameters(self):
        joint, _ = self.epsilon("joint")
        paper, _ = self.epsilon("paper")
        return {
            "k": self.k,
            "theta": self.theta,
            "clip": self.clip,
            "mean_abs": self.mean_abs(),
            "sample_rate": self.sample_rate,
            "steps": self.steps,
            "delta": self.delta,
            "epsilon_joint": joint,
            "epsilon_paper": paper,
            **(
                {
                    "table_length": self.law.table._table[1],
                    "step_ratio": self.law.step_ratio,
                    "table_error": self.law.table_error,
                    "scale_atoms": 2**12,
                }
                if self.law is not None
                else {}
            ),
        }

    @property
    def claim(self):
        return "(eps, delta)-DP by the moments accountant; ldpfed reports the joint accountant's eps"

    def _private_event(self):
        return PlrvoDpEvent(self.k, self.theta, self.clip, self.dims, self.sample_rate, self.sampler)

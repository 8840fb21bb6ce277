"""Product noise (spherically symmetric noise with a product-measure radius), as published (spec:
gradient-noise.md, Product noise). Its published (eps, delta)-DP guarantee does NOT hold (the
proof drops the polar-coordinate Jacobian: at M = 1000, D = 1, eps = 1 calibrated for delta =
1e-5, the ball of radius D/2 around f(x) alone shows delta >= 0.028).

n = sigma_M R h with R = |N(0, 1)| and h uniform on the unit sphere of R^M; sigma_M = D t / eps,
    t^2 = 2 k^(4/M) (M/4 + 3/2)^(1 + 4/M) / e^(1 + 2/M),
and, with lam = eps / t and x = lam^2 / 2,
    delta(k) = e^(-x) / (k sqrt(pi)) [1F1(M/4 + 1/2; 1/2; x) + sqrt(2) lam 1F1(M/4 + 1; 3/2; x)]
               * sqrt(M - 1) / (sqrt(M/2 - 3/2) sqrt(M/2 + 3/4)).
The confluent hypergeometric functions are evaluated by mpmath (the first parameter reaches 10^5
and more, where scipy's hyp1f1 loses accuracy), the whole of delta in log space. delta(k)
decreases in k (1/k, and lam falls as t grows), so the smallest k > 1 with delta(k) <= the target
is found by bisection on log k. Its DP-SGD accounting (subsampling and composition of the per-step
claim) is not offered: it would only mean something if the per-step claim held.
Moments: E[n] = 0, Cov(n) = (sigma_M^2 / M) I, E||n||^2 = sigma_M^2, E||n|| = sigma_M sqrt(2/pi).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.validation import LDPValueError, check_epsilon, check_fraction, check_positive, check_positive_int

MAX_LOG_K = 700.0  # k up to e^700: beyond, no target delta is reachable in double precision


def log_t(k: float, dims: int) -> float:
    """ln t with t^2 = 2 k^(4/M) (M/4 + 3/2)^(1 + 4/M) / e^(1 + 2/M)."""
    m = float(dims)
    return 0.5 * (math.log(2.0) + 4.0 / m * math.log(k) + (1.0 + 4.0 / m) * math.log(m / 4 + 1.5) - (1.0 + 2.0 / m))


def log_delta(k: float, dims: int, epsilon: float) -> float:
    """ln delta(k) of the published calibration (mpmath for 1F1 at large parameters)."""
    m = mpmath.mpf(dims)
    with mpmath.workdps(30):
        lam = mpmath.mpf(epsilon) / mpmath.exp(log_t(k, dims))
        x = lam**2 / 2
        bracket = mpmath.hyp1f1(m / 4 + mpmath.mpf(1) / 2, mpmath.mpf(1) / 2, x) + mpmath.sqrt(2) * lam * mpmath.hyp1f1(
            m / 4 + 1, mpmath.mpf(3) / 2, x
        )
        log_value = (
            -x
            - mpmath.log(k)
            - mpmath.log(mpmath.pi) / 2
            + mpmath.log(bracket)
            + mpmath.log(m - 1) / 2
            - mpmath.log(m / 2 - mpmath.mpf(3) / 2) / 2
            - mpmath.log(m / 2 + mpmath.mpf(3) / 4) / 2
        )
        return float(log_value)


def search_k(dims: int, epsilon: float, delta: float) -> float:
    """The smallest k > 1 with delta(k) <= delta (bisection on ln k, relative precision 1e-10)."""
    target = math.log(delta)
    if log_delta(1.0 + 1e-12, dims, epsilon) <= target:
        return 1.0 + 1e-12
    low, high = 0.0, 1.0
    while log_delta(math.exp(high), dims, epsilon) > target:
        low, high = high, 2.0 * high
        if high > MAX_LOG_K:
            raise LDPValueError(f"product noise: no k reaches delta = {delta:g} at eps = {epsilon:g}, M = {dims}")
    while high - low > 1e-10 * max(1.0, high):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if log_delta(math.exp(middle), dims, epsilon) > target else (low, middle)
    return math.exp(high)


class ProductNoise(GradientNoise):
    """n = sigma_M R h (published guarantee does not hold); k given, or searched for `delta`."""

    name = "product-noise"
    guarantee_holds = False

    def __init__(
        self, dims: int, *, epsilon: float, delta: float | None = None, k: float | None = None, sensitivity: float = 1.0
    ) -> None:
        self.dims = check_positive_int(dims, "dims", minimum=4)
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_positive(sensitivity, "sensitivity (clip)")
        if k is None:
            if delta is None:
                raise LDPValueError("product-noise needs k or a target delta (to search k)")
            self.k = search_k(self.dims, self.epsilon, check_fraction(delta, "delta"))
            self.k_searched = True
        else:
            self.k = check_positive(k, "k")
            if self.k <= 1:
                raise LDPValueError(f"product-noise needs k > 1, got {k!r}")
            self.k_searched = False
        self.t = math.exp(log_t(self.k, self.dims))
        self.delta = math.exp(log_delta(self.k, self.dims, self.epsilon))
        self.target_delta = None if delta is None else float(delta)
        self.sigma_m = self.sensitivity * self.t / self.epsilon

    def sample(self, count, rng):
        directions = rng.standard_normal((count, self.dims))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        directions *= self.sigma_m * np.abs(rng.standard_normal((count, 1)))
        return directions

    def coordinate_variance(self):
        return np.full(self.dims, self.sigma_m**2 / self.dims)

    def parameters(self):
        return {
            "t": self.t,
            "k": self.k,
            "k_searched": self.k_searched,
            "delta": self.delta,
            "target_delta": self.target_delta,
            "sigma_M": self.sigma_m,
            "epsilon": self.epsilon,
            "sensitivity": self.sensitivity,
        }

    @property
    def claim(self):
        return f"({self.epsilon:g}, {self.delta:.4g})-DP per release (published; does not hold)"

"""The optimal composition of T identical (eps, delta)-DP rounds in closed form.

Kairouz, Oh & Viswanath 2015 (Thm 3.3): T rounds of any (eps, delta)-DP mechanism are dominated
by T rounds of the generic (eps, delta) pair (randomized response with an extra delta atom), whose
privacy loss is eps * (T - 2J) with J ~ Binomial(T, q), q = 1 / (1 + e^eps) (the rounds whose
loss is -eps). Its hockey-stick divergence at e^eps' gives the composed delta for any eps':

    delta_T(eps') = 1 - (1 - delta)^T + (1 - delta)^T * sum_j P(J = j) (1 - e^(eps' - eps(T - 2j)))_+

This is what the pld accountant computes for such rounds (dp_accounting's `from_privacy_parameters`
self-composed T times), without the PLD's array of 2T + 1 losses: the binomial is summed over a
window of about 20 standard deviations around its mean and the probability outside the window (its
exact tails) is added to delta, so the result is never below the exact one; the cost grows like
sqrt(T), capped at WINDOW_CAP terms.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

WINDOW_SDS = 10.0
WINDOW_CAP = 1 << 22
SUM_SLACK = 1e-9  # relative float error allowed for in a summed delta (far above ~n * 2^-53)


def composed_delta(epsilon: float, delta: float, count: int):
    """delta_T(eps') (module docstring) as a function of eps', upper-bounded by the dropped tails."""
    from scipy.stats import binom  # here: scipy.stats costs a process' start about 0.5 s

    # In j = T - K ~ Binomial(T, q), q = 1 / (1 + e^eps) <= 1/2 is exact to the last bit (expit),
    # where 1 - p would lose digits for a large eps.
    q = float(special.expit(-epsilon))
    mean, sd = count * q, math.sqrt(count * q * (1.0 - q))
    half = min(WINDOW_SDS * sd + 10.0, WINDOW_CAP / 2)
    low, high = max(0, math.floor(mean - half)), min(count, math.ceil(mean + half))
    j = np.arange(low, high + 1, dtype=np.float64)
    pmf = binom.pmf(j, count, q)
    dropped = float(binom.cdf(low - 1, count, q) + binom.sf(high, count, q))
    losses = epsilon * (count - 2.0 * j)
    kept = -math.expm1(count * math.log1p(-delta)) if delta else 0.0  # 1 - (1 - delta)^T

    def delta_at(eps_prime: float) -> float:
        above = losses > eps_prime
        randomized = float(np.sum(pmf[above] * -np.expm1(eps_prime - losses[above]))) + dropped
        return min(1.0, (kept + (1.0 - kept) * randomized) * (1.0 + SUM_SLACK))

    return delta_at


def composed_epsilon(epsilon: float, delta: float, count: int, target_delta: float) -> float:
    """The smallest eps' (to 1e-12 relative, rounded up) with delta_T(eps') <= target_delta; inf when
    the rounds' own delta already exceeds it."""
    delta_at = composed_delta(epsilon, delta, count)
    if delta_at(0.0) <= target_delta:
        return 0.0
    high = epsilon * count
    if delta_at(high) > target_delta:
        return math.inf
    low = 0.0
    while high - low > 1e-12 * high:  # delta_at decreases in eps': keep delta_at(high) <= target
        middle = 0.5 * (low + high)
        if delta_at(middle) <= target_delta:
            high = middle
        else:
            low = middle
    return high

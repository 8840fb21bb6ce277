"""Exact confidence bounds behind the audit's epsilon lower bound (audit.md).

For an event S, two neighbouring inputs x, x' and a claimed delta,
    eps_lower = ln((p_low - delta) / q_high),
where p_low is the exact (Clopper–Pearson) lower confidence bound on P[M(x) in S] and q_high the
exact upper bound on P[M(x') in S], each at one-sided level `alpha`. If both bounds hold, every
(eps, delta)-DP mechanism has P[M(x) in S] <= e^eps P[M(x') in S] + delta, hence eps_lower <= eps.
"""

from __future__ import annotations

import numpy as np

# scipy.stats is imported in the functions that use it: every `ldpfed simulate` loads this module
# (through the train task's canaries) and most never audit (~0.6 s of CPU).


def clopper_pearson_lower(successes, trials, alpha: float) -> np.ndarray:
    """Exact lower bound on a binomial probability at one-sided level alpha (0 when no success)."""
    from scipy.stats import beta

    k, n = np.broadcast_arrays(np.asarray(successes, dtype=float), np.asarray(trials, dtype=float))
    bound = beta.ppf(alpha, np.maximum(k, 1.0), n - k + 1.0)
    return np.where(k > 0, bound, 0.0)


def clopper_pearson_upper(successes, trials, alpha: float) -> np.ndarray:
    """Exact upper bound on a binomial probability at one-sided level alpha (1 when all succeed)."""
    from scipy.stats import beta

    k, n = np.broadcast_arrays(np.asarray(successes, dtype=float), np.asarray(trials, dtype=float))
    bound = beta.ppf(1.0 - alpha, k + 1.0, np.maximum(n - k, 1.0))
    return np.where(k < n, bound, 1.0)


def epsilon_lower_bound(
    hits_numerator, trials_numerator, hits_denominator, trials_denominator, delta: float, alpha: float
) -> np.ndarray:
    """ln((p_low - delta) / q_high) with each Clopper–Pearson bound at level alpha (vectorized).

    -inf where p_low <= delta (the event certifies nothing).
    """
    p_low = clopper_pearson_lower(hits_numerator, trials_numerator, alpha)
    q_high = clopper_pearson_upper(hits_denominator, trials_denominator, alpha)
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(p_low - delta, 0.0)) - np.log(q_high)

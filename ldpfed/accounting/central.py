"""Client-level central DP in a federation (spec: trust-models.md, Central DP in a federation).

Each round the sampled clients' clipped updates (L2 norm C) are summed and Gaussian noise of
standard deviation z C is added to the sum (Flower's DP strategy wrappers add z C / m to the mean of
m expected clients, the same release). Clients are sampled by Poisson at rate q, so T rounds cost
`PoissonSampledDpEvent(q, GaussianDpEvent(z))` T times under add/remove-one-client adjacency,
composed by dp-accounting's RDP accountant (`central_epsilon`); `calibrate_noise_multiplier` finds
the smallest z (to 1e-6 relative) whose T rounds stay within a target (eps, delta).

Adaptive clipping (Andrew et al. 2021) also releases a noisy count of the clients whose update
was within the clipping bound. Flower's adaptive wrappers count bits b in {0, 1} with noise
N(0, sigma_b^2): under add/remove adjacency that count has sensitivity 1 (Andrew et al. centre the
bits to +-1/2, sensitivity 1/2, and calibrate to that). The round is one Gaussian mechanism on
(sum / C, count) with L2 sensitivity sqrt(z_u^-2 + sigma_b^-2) per unit of noise, i.e. effective
z = (z_u^-2 + sigma_b^-2)^-1/2 for update noise multiplier z_u (`adaptive_effective_multiplier`);
ldpfed accounts that, not the multiplier Flower was given.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ldpfed.accounting.library import dp_event
from ldpfed.validation import LDPValueError, check_epsilon, check_fraction, check_positive_int

ORDERS = [
    1.25,
    1.5,
    1.75,
    *range(2, 257),
]  # RDP orders (dp-accounting's fractional orders < 1.25 do not converge at large q)
NEIGHBOURING = "add/remove one client (all of its data), Poisson sampling of clients"
Z_LIMIT = 1e4  # a larger noise multiplier than this is refused (the budget is then out of reach)


def central_event(sample_rate: float, noise_multiplier: float, rounds: int) -> dp_event.SelfComposedDpEvent:
    """T rounds of the Poisson-sampled Gaussian mechanism on the clients' clipped sum."""
    if not (0.0 < sample_rate <= 1.0):
        raise LDPValueError(f"client sampling rate q must be in (0, 1], got {sample_rate!r}")
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise LDPValueError(f"noise multiplier must be a finite number > 0, got {noise_multiplier!r}")
    rounds = check_positive_int(rounds, "rounds")
    gaussian = dp_event.GaussianDpEvent(noise_multiplier)
    return dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(sample_rate, gaussian), rounds)


@lru_cache(maxsize=256)
def central_epsilon(sample_rate: float, noise_multiplier: float, rounds: int, delta: float) -> float:
    """eps at `delta` of `central_event(q, z, T)` by dp-accounting's RdpAccountant. Cached (~0.1 s
    each): every run of the same budget repeats its calibration's bisection, and its plan asks
    again for the calibrated z's figure."""
    delta = check_fraction(delta, "delta")
    from dp_accounting.rdp import RdpAccountant

    accountant = RdpAccountant(ORDERS)
    accountant.compose(central_event(sample_rate, noise_multiplier, rounds))
    return float(accountant.get_epsilon(delta))


def calibrate_noise_multiplier(epsilon: float, delta: float, sample_rate: float, rounds: int) -> float:
    """The smallest z (bisection, from above, relative 1e-6) with central_epsilon(q, z, T, delta) <= epsilon."""
    epsilon = check_epsilon(epsilon, "central epsilon budget")
    low, high = 1e-3, 1.0
    while central_epsilon(sample_rate, high, rounds, delta) > epsilon:
        low, high = high, 2 * high
        if high > Z_LIMIT:
            raise LDPValueError(
                f"no noise multiplier up to {Z_LIMIT:g} keeps {rounds} rounds at q = {sample_rate:g} within "
                f"eps = {epsilon:g}, delta = {delta:g}"
            )
    while high - low > 1e-6 * high:
        middle = 0.5 * (low + high)
        if central_epsilon(sample_rate, middle, rounds, delta) <= epsilon:
            high = middle
        else:
            low = middle
    return high


def flower_adaptive_multiplier(target: float, count_stddev: float) -> float:
    """The `noise_multiplier` to give Flower's adaptive wrappers so that the round's effective
    multiplier (`adaptive_effective_multiplier` of what Flower then uses) is `target`: Flower sets
    z_u^-2 = z^-2 - (2 sigma_b)^-2 (Andrew et al.'s centred bits), ldpfed needs z_u^-2 = target^-2 - sigma_b^-2."""
    remaining = target**-2 - 0.75 * count_stddev**-2
    if remaining <= 0:
        raise LDPValueError(
            f"adaptive clipping: the count noise (stddev {count_stddev:g}) alone costs more than the budget allows "
            f"(noise multiplier {target:.4g}); sample more clients per round or use --clipping fixed"
        )
    return remaining**-0.5


def adaptive_effective_multiplier(update_multiplier: float, count_stddev: float) -> float:
    """The noise multiplier of one adaptive-clipping round as a single Gaussian mechanism: update
    noise z_u (sensitivity 1 in units of C) and count noise sigma_b (sensitivity 1, bits in {0, 1})."""
    if not (update_multiplier > 0 and count_stddev > 0):
        raise LDPValueError("adaptive clipping needs an update noise multiplier > 0 and a count stddev > 0")
    return (update_multiplier**-2 + count_stddev**-2) ** -0.5

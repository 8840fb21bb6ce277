"""Client-level central DP in a federation (spec: trust-models.md, Central DP in a federation).

Each round the sampled clients' clipped updates (L2 norm C) are summed and the trusted server adds
noise of standard deviation z C to the sum, drawn by ldpfed's floating-point-safe sampler: the sum
is rounded to a grid and discrete Gaussian noise is added (ldpfed.protocols.central, `CentralNoise`;
ldpfed.samplers.safe_grid). Clients are sampled by Poisson at rate q, so one round is
`DiscreteGaussianVectorDpEvent(z, slack, sampling_prob=q)` under add/remove-one-client adjacency:
the sampled Gaussian's RDP curve at integer orders, plus the sampler's float slack
(ldpfed.accounting.events), composed over T rounds by ldpfed's rdp accountant
(`central_epsilon`); `calibrate_noise_multiplier` finds the smallest z (to 1e-6 relative) whose T
rounds stay within a target (eps, delta).

Adaptive clipping (Andrew et al. 2021, Algorithm 1) also releases a noisy count of the clients
whose update was NOT clipped. ldpfed centres the bits (b - 1/2, sensitivity 1/2 under add/remove;
the count is released as the integer 2 sum b - n, sensitivity 1, plus discrete Gaussian noise of
standard deviation 2 sigma_b), so the round is one Gaussian mechanism on (sum / C, centred count)
of effective multiplier z = (z_u^-2 + (2 sigma_b)^-2)^-1/2 for update multiplier z_u
(`adaptive_effective_multiplier`), the spec's formula and the split Flower's
`compute_adaptive_noise_params` makes (`adaptive_update_multiplier`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from ldpfed.accounting.accountants import create_accountant
from ldpfed.accounting.library import dp_event
from ldpfed.validation import LDPValueError, check_epsilon, check_fraction, check_positive_int

NEIGHBOURING = "add/remove one client (all of its data), Poisson sampling of clients"
ACCOUNTANT = "rdp"  # the central rounds' accountant (the sampled discrete Gaussian has no PLD here)
Z_LIMIT = 1e4  # a larger noise multiplier than this is refused (the budget is then out of reach)
Z_FLOOR = 1e-3  # the calibration's smallest multiplier: a budget loose enough for less gets this much noise


def central_epsilon(event: dp_event.DpEvent, rounds: int, delta: float) -> float:
    """eps at `delta` of `rounds` rounds of `event`, as the run's ledger states it (ldpfed's rdp
    accountant: dp-accounting's curves plus the sampler's float slack)."""
    delta = check_fraction(delta, "delta")
    rounds = check_positive_int(rounds, "rounds")
    return _epsilon(event, rounds, delta)


@lru_cache(maxsize=512)
def _epsilon(event: dp_event.DpEvent, rounds: int, delta: float) -> float:
    """Cached (~0.05 s each): every run of the same budget repeats its calibration's bisection."""
    return float(create_accountant(ACCOUNTANT).compose(event, rounds).spent(delta).epsilon)


def calibrate_noise_multiplier(
    epsilon: float,
    delta: float,
    rounds: int,
    event_of: Callable[[float], dp_event.DpEvent],
    limit: float = Z_LIMIT,
    beyond: str = "",
) -> float:
    """The smallest z (bisection, from above, relative 1e-6) whose `rounds` rounds of `event_of(z)`
    stay within (epsilon, delta); `event_of` is called below `limit` only, and a budget that needs
    a larger z is refused (`beyond`: why there is a limit)."""
    epsilon = check_epsilon(epsilon, "central epsilon budget")

    def fits(z: float) -> bool:
        return central_epsilon(event_of(z), rounds, delta) <= epsilon

    low, high = Z_FLOOR, min(1.0, 0.5 * limit)  # a budget met at the floor gets (at most) z = Z_FLOOR
    while not fits(high):
        low, high = high, 2 * high
        if high >= limit:
            high = limit * (1.0 - 1e-9)
            if fits(high):
                break
            raise LDPValueError(
                f"no noise multiplier below {limit:.6g} keeps {rounds} rounds within eps = {epsilon:g}, "
                f"delta = {delta:g}{beyond}"
            )
    while high - low > 1e-6 * high:
        middle = 0.5 * (low + high)
        if fits(middle):
            high = middle
        else:
            low = middle
    return high


def adaptive_update_multiplier(target: float, count_stddev: float) -> float:
    """z_u with (z_u^-2 + (2 sigma_b)^-2)^-1/2 = `target`: the update noise of an adaptive round
    whose effective multiplier is `target` (the split of Flower's `compute_adaptive_noise_params`)."""
    remaining = target**-2 - (2.0 * count_stddev) ** -2
    if remaining <= 0:
        raise LDPValueError(
            f"adaptive clipping: the count noise (stddev {count_stddev:g}) alone costs more than the budget allows "
            f"(noise multiplier {target:.4g}); sample more clients per round or use --clipping fixed"
        )
    return remaining**-0.5


def adaptive_effective_multiplier(update_multiplier: float, count_stddev: float) -> float:
    """The noise multiplier of one adaptive-clipping round as a single Gaussian mechanism: update
    noise z_u (sensitivity 1 in units of C) and centred count noise sigma_b (sensitivity 1/2)."""
    if not (update_multiplier > 0 and count_stddev > 0):
        raise LDPValueError("adaptive clipping needs an update noise multiplier > 0 and a count stddev > 0")
    return (update_multiplier**-2 + (2.0 * count_stddev) ** -2) ** -0.5


def poisson_sampled_gaussian(sample_rate: float, noise_multiplier: float) -> dp_event.DpEvent:
    """dp-accounting's own event for one round of the continuous sampled Gaussian (the reference
    the discrete one is checked against)."""
    if not (0.0 < sample_rate <= 1.0):
        raise LDPValueError(f"client sampling rate q must be in (0, 1], got {sample_rate!r}")
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise LDPValueError(f"noise multiplier must be a finite number > 0, got {noise_multiplier!r}")
    gaussian = dp_event.GaussianDpEvent(noise_multiplier)
    return gaussian if sample_rate >= 1.0 else dp_event.PoissonSampledDpEvent(sample_rate, gaussian)

"""The distributed discrete Gaussian's privacy cost and its parameters (spec: trust-models.md, Secure
aggregation with distributed discrete Gaussian noise; Kairouz, Liu & Steinke, ICML 2021, arXiv
2102.06387, "KLS").

A round: each of n clients clips its vector to L2 norm c, rotates it (randomized Hadamard, D
coordinates), scales it by 1/gamma, rounds it to integers until the rounded norm is within the
bound of KLS Theorem 1 (`rounded_l2_norm_bound`), and adds a share N_Z(0, s^2) per coordinate,
s = sigma / gamma (sigma: the share's standard deviation in the data's units); secure aggregation
reveals only the sum (ldpfed.protocols.ddgauss). In grid steps the sum of one client's rounded
vector has L2 sensitivity Delta_2 = `rounded_l2_norm_bound(c / gamma, beta, D)` and L1
sensitivity Delta_1 = Delta_2 min(sqrt(D), Delta_2) (integers: |v_i| <= v_i^2).

RDP of the sum of n shares (KLS Proposition 14 / Eq. 17), with l2 = Delta_2 / (sqrt(n) s),
l1 = Delta_1 / (sqrt(n) s) and tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 s^2 k / (k + 1)) (the sum of n
discrete Gaussians is not one; tau bounds how far it is):

    eps(alpha) = min(alpha/2 l2^2 + tau D,  alpha/2 (l2^2 + 2 l1 tau + tau^2 D),  alpha/2 (l2 + sqrt(D) tau)^2).

Neighbouring rounds: one client's vector is replaced by zero (or added/removed) while n noise shares
are summed, as KLS Theorem 1 and the authors' accountant assume; `shares` is the number of shares
in the sum, so a round is accounted at the fewest the protocol admits (secure aggregation's
threshold: fewer shares would be less noise, more shares add independent noise, post-processing).

Poisson sampling at rate q (KLS's reference code, google-research/federated
`distributed_dp/accounting_utils.py`, `compute_rdp_dgaussian`): at integer orders alpha >= 2 the
general upper bound of Zhu & Wang 2019 (ICML, "Poisson subsampled Renyi differential privacy",
Theorem 5) on the curve above, and the unsampled curve where it is smaller:

    eps_q(alpha) = 1/(alpha-1) log[(1-q)^(alpha-1) (alpha q - q + 1) + C(alpha,2) q^2 (1-q)^(alpha-2) e^eps(2)
                                   + 3 sum_{l=3}^{alpha} C(alpha,l) q^l (1-q)^(alpha-l) e^((l-1) eps(l))];

only integer orders >= 2 are used, sampled or not (the reference's; the others get infinity). T
rounds add their curves; (eps, delta) comes from
dp-accounting's `compute_epsilon` (Canonne, Kamath & Steinke 2020, Proposition 12: the
conversion tensorflow-privacy's `get_privacy_spent` used for the reference), at ldpfed's rdp
accountant's orders unless others are given, so that `ddgauss_epsilon` is the ledger's figure.

Parameters (`ddgauss_params`, the reference's `ddgauss_params`): for a bit width b (modulus
m = 2^b), gamma solves 2^b = 2 k sqrt(rho c^2 n_f / D + (gamma^2/4 + sigma(gamma)^2) n) / gamma, the
sum's k standard deviations (signal bounded by sqrt(rho/D) c n per coordinate, n_f = n^2, or n
with `sqrtn_norm_growth`; rounding gamma^2/4 and noise sigma^2 per client) filling [-m/2, m/2);
sigma(gamma) is the smallest share standard deviation whose T rounds stay within (eps, delta).
The reference minimizes squared differences with scipy's Brent search; ldpfed finds the same roots
by bracketing and brentq, and rounds sigma up so that the budget is met.

The share sampler's float slack (ldpfed.samplers.float_slack: a relative error rho = 2^-36 per draw
in the accept decision, ldpfed.samplers.discrete_gaussian) is the event's `float_slack()`, over the
n D draws of the round's shares: the rdp accountant composes it into its result, and so does
`ddgauss_epsilon` (eps_ideal(delta_i) + slack, the same rule), so the calibration, the plan and
the ledger state the realized mechanism. About 5 rho n D per round: 2e-5 in eps over n = 1,000 x
D = 256, 2e-3 over 5 rounds of n = 20 x D = 262,144. The reference states the ideal law only.

dp-accounting is imported where an epsilon is computed: a Flower node that only encodes does not
load it (ldpfed.accounting.library).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import attr
import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

from ldpfed.accounting.library import dp_event
from ldpfed.samplers.discrete_gaussian import _log_gaussian_tail, _Proposal
from ldpfed.samplers.float_slack import FloatSlack
from ldpfed.validation import LDPValueError, check_epsilon, check_fraction, check_positive, check_positive_int

DEFAULT_BETA = math.exp(-0.5)  # the conditional rounding's bias, the reference experiments' choice
DEFAULT_K_STDDEVS = 4  # standard deviations of the noisy sum kept within the modulus (reference default)
REFERENCE_ORDERS = tuple(range(2, 129)) + (256,)  # the reference code's RDP orders
TAU_FACTOR = 10.0  # tau = 10 sum_k exp(-2 pi^2 s^2 k/(k+1)) (KLS Theorem 1)
SIGMA_LIMIT = 1e8  # a share standard deviation beyond this many clip norms is refused
MAX_BITS = 62  # the modular sum of int64 values needs m = 2^b below 2^63


def rounded_l2_norm_bound(l2_norm: float, beta: float, dims: int) -> float:
    """KLS Theorem 1: the L2 norm a vector of norm <= `l2_norm` (grid steps) may have after
    conditional randomized rounding with bias beta in D = `dims` coordinates:
    min(l2 + sqrt(D), sqrt(l2^2 + D/4 + sqrt(2 ln(1/beta)) (l2 + sqrt(D)/2))); beta = 0: the first."""
    deterministic = l2_norm + math.sqrt(dims)
    if beta == 0.0:
        return deterministic
    squared = l2_norm**2 + 0.25 * dims + math.sqrt(2.0 * math.log(1.0 / beta)) * (l2_norm + 0.5 * math.sqrt(dims))
    return min(deterministic, math.sqrt(squared))


def rounded_l1_norm_bound(l2_bound: float, dims: int) -> float:
    """L1 <= sqrt(D) L2, and for integer vectors L1 <= L2^2."""
    return l2_bound * min(math.sqrt(dims), l2_bound)


def sum_inflation(share_steps: float, shares: int) -> float:
    """tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 s^2 k/(k+1)) (KLS Theorem 1), s in grid steps."""
    k = np.arange(1, int(shares), dtype=float)
    return float(TAU_FACTOR * np.sum(np.exp(-2.0 * (math.pi * share_steps) ** 2 * k / (k + 1.0))))


@dataclass(frozen=True)
class ShareSampler(_Proposal):
    """ldpfed's discrete Gaussian proposal and acceptance (ldpfed.samplers.discrete_gaussian) for
    any s > 0: the acceptance rate Z = e^-c sum_n e^(-n^2/2s^2) / (4L) is summed exactly below
    s = 10, where the parent's closed form does not hold. Z sizes the batches of attempts and the float slack's
    2^-53 / Z term; the law is the same."""

    @cached_property
    def acceptance(self) -> float:
        if self.sigma >= 10.0:  # the closed form is exact to double precision (and any s is summed in O(1))
            return super().acceptance
        bound = math.ceil(40.0 * self.sigma) + 40  # the terms beyond are below e^-800
        n = np.arange(-bound, bound + 1, dtype=float)
        total = float(np.sum(np.exp(-(n * n) / (2.0 * self.sigma**2))))
        return math.exp(math.log(total) - self.log_envelope) / (4.0 * self.length)

    def slack(self) -> FloatSlack:
        """One draw's float slack (the terms of ldpfed.samplers.discrete_gaussian): over = ln r2,
        under = ln r1, mass = 2^-53 / (Z (1 - rho)) plus the ideal mass where exp may underflow."""
        r1, r2 = self.float_ratios
        mass = self.escape_mass + r2 * math.exp(min(0.0, _log_gaussian_tail(self.underflow_start - 1, self.sigma)))
        return FloatSlack(math.log(r2), math.log(r1), mass)


def _check_beta(beta: float) -> float:
    if not (isinstance(beta, (int, float)) and 0.0 <= beta < 1.0):
        raise LDPValueError(f"the rounding bias beta must be in [0, 1), got {beta!r}")
    return float(beta)


def _check_rate(sampling_prob: float) -> float:
    if not (isinstance(sampling_prob, (int, float)) and 0.0 < sampling_prob <= 1.0):
        raise LDPValueError(f"the client sampling rate q must be in (0, 1], got {sampling_prob!r}")
    return float(sampling_prob)


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DistributedDiscreteGaussianDpEvent(dp_event.DpEvent):
    """One round of the distributed discrete Gaussian (module docstring): granularity `gamma`,
    share standard deviation `local_stddev` (data units), `shares` noise shares in the sum, clip
    norm `clip`, `padded_dims` rotated coordinates, rounding bias `beta`, Poisson rate `sampling_prob`."""

    gamma: float
    local_stddev: float
    shares: int
    clip: float
    padded_dims: int
    beta: float = DEFAULT_BETA
    sampling_prob: float = 1.0

    def __attrs_post_init__(self) -> None:
        check_positive(self.gamma, "gamma")
        check_positive(self.local_stddev, "local_stddev")
        check_positive(self.clip, "clip norm c")
        check_positive_int(self.shares, "shares")
        check_positive_int(self.padded_dims, "padded_dims")
        _check_beta(self.beta)
        _check_rate(self.sampling_prob)

    @property
    def share_steps(self) -> float:
        """s = sigma / gamma: a share's standard deviation in grid steps."""
        return self.local_stddev / self.gamma

    @property
    def l2_sensitivity(self) -> float:
        """Delta_2 in grid steps (KLS Theorem 1)."""
        return rounded_l2_norm_bound(self.clip / self.gamma, self.beta, self.padded_dims)

    @property
    def tau(self) -> float:
        return sum_inflation(self.share_steps, self.shares)

    def float_slack(self) -> FloatSlack:
        """The round's float slack: every one of the n D share draws in the sum (module docstring)."""
        return ShareSampler.for_sigma(self.share_steps).slack().times(self.shares * self.padded_dims)

    def curve(self, orders) -> np.ndarray:
        """KLS Proposition 14 at `orders` (any real >= 1), without sampling."""
        alpha = np.asarray(orders, dtype=float)
        spread = math.sqrt(self.shares) * self.share_steps
        l2 = self.l2_sensitivity / spread
        l1 = rounded_l1_norm_bound(self.l2_sensitivity, self.padded_dims) / spread
        tau, dims = self.tau, self.padded_dims
        first = alpha / 2.0 * l2**2 + tau * dims
        second = alpha / 2.0 * (l2**2 + 2.0 * l1 * tau + tau**2 * dims)
        third = alpha / 2.0 * (l2 + math.sqrt(dims) * tau) ** 2
        return np.minimum(np.minimum(first, second), third)

    def rdp(self, orders) -> np.ndarray:
        """The round's RDP curve at the integer orders >= 2 (where the reference evaluates it;
        infinity at the others): `curve`, under Poisson sampling the smaller of it and Zhu & Wang's
        Theorem 5."""
        alpha = np.asarray(orders, dtype=float)
        out = np.full(alpha.shape, np.inf)
        integer = (alpha == np.round(alpha)) & (alpha >= 2)
        if not np.any(integer):
            return out
        wanted = alpha[integer]
        out[integer] = self.curve(wanted)
        if self.sampling_prob < 1.0:
            sampled = poisson_subsampled_rdp(self.curve, self.sampling_prob, wanted.astype(np.int64))
            out[integer] = np.minimum(sampled, out[integer])
        return out


def poisson_subsampled_rdp(curve, q: float, orders: np.ndarray) -> np.ndarray:
    """Zhu & Wang 2019, Theorem 5 (module docstring) at integer orders >= 2, for a mechanism whose
    RDP at order l is `curve(l)`; in log space, all orders at once."""
    orders = np.asarray(orders, dtype=np.int64)
    top = int(orders.max())
    inner = np.arange(2, top + 1, dtype=float)  # l
    at = np.asarray(curve(inner), dtype=float)
    alpha = orders.astype(float)[:, None]
    log_choose = gammaln(alpha + 1.0) - gammaln(inner + 1.0) - gammaln(alpha - inner + 1.0)
    terms = log_choose + inner * math.log(q) + (alpha - inner) * math.log1p(-q) + (inner - 1.0) * at
    terms[:, 1:] += math.log(3.0)  # l >= 3: the factor 3
    terms = np.where(inner[None, :] <= alpha, terms, -np.inf)
    first = (alpha[:, 0] - 1.0) * math.log1p(-q) + np.log(alpha[:, 0] * q - q + 1.0)
    total = logsumexp(np.column_stack([first, terms]), axis=1)
    return total / (alpha[:, 0] - 1.0)


def ledger_orders() -> tuple[float, ...]:
    """The orders of ldpfed's rdp accountant (dp-accounting's defaults)."""
    from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

    return tuple(DEFAULT_RDP_ORDERS)


def ddgauss_epsilon(event: DistributedDiscreteGaussianDpEvent, rounds: int, delta: float, orders=None) -> float:
    """eps at `delta` of `rounds` rounds of `event` (their RDP curves added, dp-accounting's
    conversion, and the share sampler's float slack composed as the rdp accountant composes it:
    the ideal eps at delta_i plus the slack's), at ldpfed's rdp accountant's orders unless
    `orders` are given."""
    rounds = check_positive_int(rounds, "rounds")
    slack = event.float_slack().times(rounds)
    return ideal_epsilon(event, rounds, slack.ideal_delta(check_fraction(delta, "delta")), orders) + slack.epsilon


def ideal_epsilon(event: DistributedDiscreteGaussianDpEvent, rounds: int, delta: float, orders=None) -> float:
    """eps at `delta` of `rounds` rounds of `event`'s ideal law (the exact discrete Gaussian): the
    reference's figure, without the sampler's float slack."""
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    orders = list(ledger_orders() if orders is None else orders)
    epsilon, _ = compute_epsilon(orders, list(rounds * event.rdp(np.asarray(orders))), delta)
    return float(epsilon)


# --- parameters: sigma for a budget, gamma for a bit width ----------------------------------------
def calibrate_local_stddev(epsilon: float, delta: float, rounds: int, event_of, clip: float, orders=None) -> float:
    """The smallest share standard deviation sigma (relative 1e-9, rounded up) whose `rounds`
    rounds of `event_of(sigma)` stay within (epsilon, delta); refused beyond SIGMA_LIMIT clip norms."""
    epsilon = check_epsilon(epsilon, "epsilon budget")

    def excess(log_sigma: float) -> float:
        # the conversion's eps reaches 0 at a finite sigma (its log((alpha-1)/alpha) term): a floor keeps the log finite
        spent = ddgauss_epsilon(event_of(math.exp(log_sigma)), rounds, delta, orders)
        return math.log(max(spent, 1e-300)) - math.log(epsilon)

    low = high = math.log(clip)
    while excess(high) > 0:
        low, high = high, high + math.log(4.0)
        if high > math.log(SIGMA_LIMIT * clip):
            raise LDPValueError(
                f"{rounds} rounds do not fit in eps = {epsilon:g}, delta = {delta:g}: the noise would exceed "
                f"{SIGMA_LIMIT:g} clip norms per share"
            )
    while excess(low) <= 0:
        low, high = low - math.log(4.0), low
    sigma = math.exp(brentq(excess, low, high, xtol=1e-10))
    while excess(math.log(sigma)) > 0:  # brentq may end just below the root
        sigma *= 1.0 + 1e-9
    return sigma


@dataclass(frozen=True)
class DdgParams:
    """What `ddgauss_params` chose: granularity `gamma` and share standard deviation
    `local_stddev` (data units), for the inputs it was given."""

    gamma: float
    local_stddev: float
    bits: int
    shares: int
    padded_dims: int
    clip: float
    beta: float
    sampling_prob: float
    rounds: int
    epsilon: float
    delta: float

    @cached_property
    def event(self) -> DistributedDiscreteGaussianDpEvent:
        return DistributedDiscreteGaussianDpEvent(
            self.gamma, self.local_stddev, self.shares, self.clip, self.padded_dims, self.beta, self.sampling_prob
        )

    @property
    def spent(self) -> float:
        """eps at delta of the `rounds` rounds (the ledger's figure, <= the budget)."""
        return ddgauss_epsilon(self.event, self.rounds, self.delta)


def _check_bits(bits: int, shares: int, k_stddevs: float) -> int:
    """b in [1, MAX_BITS], with 2^b > k sqrt(n): the rounding of n values alone spreads the sum by
    sqrt(n)/2 steps per coordinate, so a smaller modulus wraps whatever gamma."""
    bits = check_positive_int(bits, "bits")
    if bits > MAX_BITS:
        raise LDPValueError(f"bits must be at most {MAX_BITS} (the modular sum is int64), got {bits}")
    if 2.0**bits <= k_stddevs * math.sqrt(shares):
        raise LDPValueError(
            f"bits = {bits} is too few for the sum of {shares} clients: {k_stddevs:g} standard deviations of their "
            f"rounding alone need 2^bits > {k_stddevs * math.sqrt(shares):.4g}; give more bits or fewer clients per sum"
        )
    return bits


def ddgauss_params(
    epsilon: float,
    delta: float,
    shares: int,
    padded_dims: int,
    bits: int,
    clip: float,
    *,
    sampling_prob: float = 1.0,
    rounds: int = 1,
    beta: float = DEFAULT_BETA,
    k_stddevs: float = DEFAULT_K_STDDEVS,
    rho: float = 1.0,
    sqrtn_norm_growth: bool = False,
    orders=None,
) -> DdgParams:
    """gamma and the share standard deviation for `rounds` rounds of `shares` clients within
    (epsilon, delta) at `bits` bits per coordinate (module docstring, Parameters). One line
    (LDPValueError) when the bit width cannot hold the sum, or the noise the budget needs."""
    epsilon, delta = check_epsilon(epsilon, "epsilon budget"), check_fraction(delta, "delta")
    shares, padded_dims = check_positive_int(shares, "shares"), check_positive_int(padded_dims, "padded_dims")
    clip, rounds = check_positive(clip, "clip norm c"), check_positive_int(rounds, "rounds")
    beta, sampling_prob = _check_beta(beta), _check_rate(sampling_prob)
    k_stddevs, rho = check_positive(k_stddevs, "k_stddevs"), check_positive(rho, "rho")
    bits = _check_bits(bits, shares, k_stddevs)
    signal = rho / padded_dims * clip**2 * (shares if sqrtn_norm_growth else shares**2)
    sigmas: dict[float, float] = {}

    def sigma_at(gamma: float) -> float:
        if gamma not in sigmas:
            sigmas[gamma] = calibrate_local_stddev(
                epsilon,
                delta,
                rounds,
                lambda s: DistributedDiscreteGaussianDpEvent(gamma, s, shares, clip, padded_dims, beta, sampling_prob),
                clip,
                orders,
            )
        return sigmas[gamma]

    def excess(log_gamma: float) -> float:
        """log(2 k sqrt(signal + (gamma^2/4 + sigma^2) n) / gamma) - b ln 2: > 0 while the sum's
        spread exceeds the modulus."""
        gamma = math.exp(log_gamma)
        spread = 2.0 * k_stddevs * math.sqrt(signal + (gamma**2 / 4.0 + sigma_at(gamma) ** 2) * shares) / gamma
        return math.log(spread) - bits * math.log(2.0)

    low = math.log(2.0 * k_stddevs * math.sqrt(signal)) - bits * math.log(2.0)  # the signal alone fills m
    high = low
    fits = False
    for _ in range(80):  # gamma up to 2^40 times the smallest
        try:
            fits = excess(high) <= 0
        except LDPValueError:  # no noise below SIGMA_LIMIT meets the budget (nor at a coarser grid)
            break
        if fits:
            break
        low, high = high, high + 0.5 * math.log(2.0)
    if not fits:
        raise LDPValueError(
            f"bits = {bits} cannot hold the noise that {rounds} rounds within eps = {epsilon:g}, delta = {delta:g} "
            f"need for {shares} clients; give more bits, fewer rounds or a larger budget"
        )
    log_gamma = brentq(excess, low, high, xtol=1e-12) if high > low else high
    while excess(log_gamma) > 0:  # brentq may end just below the root: the spread must fit
        log_gamma += 1e-12
    gamma = math.exp(log_gamma)
    return DdgParams(
        gamma, sigma_at(gamma), bits, shares, padded_dims, clip, beta, sampling_prob, rounds, epsilon, delta
    )

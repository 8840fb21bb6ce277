"""The PLRV-O privacy curve and its accountants (spec: gradient-noise.md, PLRV-O).

PLRV-O adds Laplace noise with a Gamma(k, theta) inverse scale per coordinate (the sampler lives in
ldpfed.gradient_noise.plrvo; the law sampled by its safe sampler in ldpfed.samplers.plrvo_safe).

Accountant per DP-SGD step, at integer moment order lam (RDP order alpha = lam + 1), sampling
rate q, w_eta = binom(lam+1, eta) (1-q)^(lam+1-eta) q^eta, eta = 0..lam+1, and
    G(x, eta) = eta/(2eta-1) (1 - theta(eta-1)x)^(-k) + (eta-1)/(2eta-1) (1 + theta eta x)^(-k)
(needs lam C theta < 1), x_i = C (sqrt(i) - sqrt(i-1)), i = 1..n (n = parameters):
- "paper" (as published): alpha_step = sum_i log sum_eta w_eta G(x_i, eta). It treats each
  coordinate as if sampled on its own and UNDERSTATES eps: not a guarantee.
- "joint" (sound: one sampling decision covers all coordinates):
  alpha_step = log sum_eta w_eta prod_i G(x_i, eta).
alpha_total = T alpha_step; eps(delta) = min_lam [alpha_total/lam + log(lam/(lam+1))
- (log delta + log(lam+1))/lam]. Both are vectorized over coordinates and eta, in log space with
log1p/expm1 (G - 1 is tiny for most coordinates). The guarantee ldpfed reports is the joint one.
Orders: lam in ORDERS (every integer to 64, then a sparser grid); a subset of orders can only
raise eps, so the figure stays an upper bound.

Joint accountant, computed from above with no term dropped. Every eta = 0..lam+1 is summed (the
product over n coordinates can make a high-eta term dominate however small its weight). The
coordinates are grouped: the first HEAD one by one, then blocks [a, b] with b ~ a (1 + BLOCK_GROWTH).
On a block, with t -> x(t) = C (sqrt(t) - sqrt(t-1)) convex and decreasing on t >= 1, and G(., eta)
nondecreasing and convex on [0, C] (eta = 0, 1: G = 1; eta >= 2, with a = eta/(2eta-1), b = 1 - a:
    dG/dx = k theta eta (eta-1)/(2eta-1) [(1 - theta(eta-1)x)^(-k-1) - (1 + theta eta x)^(-k-1)] >= 0,
    d2G/dx2 = k(k+1) theta^2 [a (eta-1)^2 (1 - theta(eta-1)x)^(-k-2) + b eta^2 (1 + theta eta x)^(-k-2)] >= 0;
G_safe likewise, plrvo_safe.py), t -> G(x(t), eta) is convex, so it lies below its chord L(t)
between a and b; the chord's mean over the integers a..b is its endpoints' mean, and log is concave:
    sum_{i=a..b} log G(x_i, eta) <= sum log L(i) <= (b-a+1) log((G(x_a, eta) + G(x_b, eta)) / 2).
The accountant sums the right-hand side: an upper bound on log prod_i G, hence on alpha_step; what
it adds is second order in the block's spread (tests: against an mpmath term-by-term sum).
Cost: HEAD + 2 log(n / HEAD) / BLOCK_GROWTH distinct points x (lam_max + 2) etas, about 6000 x 1026 at n = 10^7.

Paper accountant: per coordinate, the terms with w_eta (1 - theta(eta-1)C)^(-k) (a bound on
w_eta G(x, eta) for every x <= C) below e^-TRUNCATION of the largest weight are not evaluated; the
sum of those bounds is added to every coordinate's sum, so the figure is the published formula
from above (by at most n (lam + 2) e^-TRUNCATION).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.special import gammainc, gammaincinv, gammaln, logsumexp

from ldpfed.samplers.plrvo_safe import SafeLaw, safe_g_minus_one
from ldpfed.validation import LDPValueError

STEP_FORMULAS = ("joint", "paper")  # the per-step RDP formulas above (not accountant classes)
ORDERS = tuple(range(1, 65)) + (80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 1024)
# Parameter-search constraints (gradient-noise.md, PLRV-O): P(1/u > 10) <= 1e-3 and (k-1) theta >= 0.1.
MAX_INVERSE_SCALE = 10.0
MIN_INVERSE_SCALE_FACTOR = (1.0 + 1e-9) / MAX_INVERSE_SCALE  # u >= 0.1, with a hair of slack
MAX_TAIL_PROBABILITY = 1e-3
MIN_MEAN_INVERSE = 0.1
TRUNCATION = 40.0  # paper accountant: a term bounded below e^-40 of the largest weight is charged its bound
HEAD = 256  # joint accountant: the first coordinates (largest shifts), one by one
BLOCK_GROWTH = 2.0**-8  # joint accountant: beyond HEAD, a block [a, b] of coordinates has b ~ a (1 + BLOCK_GROWTH)
_CHUNK = 1 << 20  # coordinates x etas per array


def coordinate_shifts(clip: float, params: int) -> np.ndarray:
    """x_i = C (sqrt(i) - sqrt(i-1)), i = 1..n."""
    return _shift(clip, np.arange(1, params + 1, dtype=float))


def _shift(clip: float, i: np.ndarray) -> np.ndarray:
    """x_i written C / (sqrt(i) + sqrt(i-1)) (no cancellation)."""
    i = np.asarray(i, dtype=float)
    return clip / (np.sqrt(i) + np.sqrt(i - 1.0))


def coordinate_blocks(clip: float, params: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x at each block's first coordinate, x at its last, its size): coordinates 1..HEAD one by one,
    then blocks [a, b] with b ~ a (1 + BLOCK_GROWTH) (module docstring; any partition gives a bound)."""
    starts = np.arange(1, min(params, HEAD) + 1, dtype=np.int64)
    if params > HEAD:
        growths = np.arange(math.ceil(math.log((params + 1) / (HEAD + 1)) / math.log1p(BLOCK_GROWTH)) + 1)
        tail = np.floor((HEAD + 1) * (1.0 + BLOCK_GROWTH) ** growths).astype(np.int64)
        starts = np.concatenate([starts, np.unique(tail[tail <= params])])
    ends = np.append(starts[1:] - 1, params)
    return _shift(clip, starts), _shift(clip, ends), (ends - starts + 1).astype(float)


def _log_terms(x: np.ndarray, eta: np.ndarray, k: float, theta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(eta column, log (1 - theta(eta-1)x)^(-k), log (1 + theta eta x)^(-k))."""
    eta = np.asarray(eta, dtype=float)[:, None]
    return eta, -k * np.log1p(-theta * (eta - 1.0) * x), -k * np.log1p(theta * eta * x)


def g_minus_one(x: np.ndarray, eta: np.ndarray, k: float, theta: float, law: SafeLaw | None = None) -> np.ndarray:
    """G(x, eta) - 1 for eta (column) x x (row), accurate where G is close to 1 (inf on overflow);
    G_safe - 1 for the safe sampler's `law`."""
    if law is not None:
        return safe_g_minus_one(x, eta, k, theta, law)
    eta, log_up, log_down = _log_terms(x, eta, k, theta)
    with np.errstate(over="ignore", invalid="ignore"):
        return (eta * np.expm1(log_up) + (eta - 1.0) * np.expm1(log_down)) / (2.0 * eta - 1.0)


def log_g(x: np.ndarray, eta: np.ndarray, k: float, theta: float, law: SafeLaw | None = None) -> np.ndarray:
    """log G(x, eta): log1p(G - 1) where G < 2, a log-sum-exp of the two terms where G is large."""
    if law is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.log1p(safe_g_minus_one(x, eta, k, theta, law))
    eta, log_up, log_down = _log_terms(x, eta, k, theta)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        minus_one = (eta * np.expm1(log_up) + (eta - 1.0) * np.expm1(log_down)) / (2.0 * eta - 1.0)
        small = np.log1p(np.minimum(minus_one, 1.0))
        if np.all(minus_one < 1.0):
            return small
        large = np.logaddexp(
            np.log(eta / (2.0 * eta - 1.0)) + log_up, np.log((eta - 1.0) / (2.0 * eta - 1.0)) + log_down
        )
    return np.where(minus_one < 1.0, small, large)


def log_weights(lam, q: float) -> np.ndarray:
    """log w_eta, eta = 0..lam+1 (binomial(lam+1, q) log-probabilities); for an array of orders, a
    row per order over eta = 0..max lam + 1, -inf beyond the row's lam + 1."""
    lam = np.asarray(lam, dtype=float)
    eta = np.arange(lam.max() + 2, dtype=float)
    lam = lam[..., None]
    with np.errstate(divide="ignore"):
        log_binom = np.where(
            eta <= lam + 1.0,
            gammaln(lam + 2.0) - gammaln(eta + 1.0) - gammaln(np.maximum(lam + 2.0 - eta, 1.0)),
            -np.inf,
        )
        return (
            log_binom + (lam + 1.0 - eta) * math.log1p(-q) + eta * math.log(q)
            if q < 1
            else np.where(eta == lam + 1, 0.0, -np.inf)
        )


def paper_etas(lam: int, q: float, k: float, theta: float, clip: float, law: SafeLaw | None = None):
    """(kept etas, D) for the paper accountant at order lam: w_eta G(x, eta) <= w_eta (1 - theta(eta-1)C)^(-k)
    for every x <= C, so the terms whose bound is below e^-TRUNCATION of the largest weight are not
    evaluated and D, the sum of their bounds, is added in their place (D >= their sum of w_eta (G - 1))."""
    eta = np.arange(lam + 2, dtype=float)
    log_w = log_weights(lam, q)
    bound = log_w - k * np.log1p(-theta * np.maximum(eta - 1.0, 0.0) * clip)
    if law is not None:  # G_safe <= 2 e^{(eta-1) gamma' + (2 eta - 1) tau} (1 + t^2) times that (plrvo_safe.py)
        bound = bound + math.log(2.0) + eta * (law.shift_ratio + 2.0 * law.table_error) + 1e-6
    keep = bound >= log_w.max() - TRUNCATION
    dropped = float(np.exp(logsumexp(bound[~keep]))) if not keep.all() else 0.0
    return np.flatnonzero(keep), dropped


def usable_orders(clip: float, theta: float, orders=ORDERS) -> np.ndarray:
    """The orders with lam C theta < 1 (the moment-domain condition)."""
    lams = np.asarray(orders, dtype=int)
    return lams[lams * clip * theta < 1.0]


def joint_log_products(
    k: float, theta: float, clip: float, params: int, etas: np.ndarray, law: SafeLaw | None = None
) -> np.ndarray:
    """log prod_i G(x_i, eta) for each eta, from above: sum over the blocks of coordinates of
    size x log((G(first) + G(last)) / 2) (module docstring)."""
    first, last, count = coordinate_blocks(clip, params)
    # A block of one coordinate has first == last, and the head is all such blocks: G is evaluated
    # once per distinct point.
    points, where = np.unique(np.concatenate([first, last]), return_inverse=True)
    at_first_column, at_last_column = where[: first.size], where[first.size :]
    rows = max(1, _CHUNK // points.size)
    products = []
    for start in range(0, etas.size, rows):
        at_points = log_g(points, etas[start : start + rows], k, theta, law)
        at_first, at_last = at_points[:, at_first_column], at_points[:, at_last_column]
        high, low = np.maximum(at_first, at_last), np.minimum(at_first, at_last)
        with np.errstate(invalid="ignore"):  # log((e^high + e^low) / 2), accurate where both are tiny
            mean = np.where(np.isposinf(high), np.inf, high + np.log1p(0.5 * np.expm1(low - high)))
        products.append(mean @ count)
    return np.concatenate(products)


def epsilon_from_alphas(lams: np.ndarray, alphas_total: np.ndarray, delta: float) -> tuple[float, int]:
    """(eps, best lam): min over lam of alpha/lam + log(lam/(lam+1)) - (log delta + log(lam+1))/lam."""
    lams = np.asarray(lams, dtype=float)
    eps = alphas_total / lams + np.log(lams / (lams + 1.0)) - (math.log(delta) + np.log(lams + 1.0)) / lams
    best = int(np.nanargmin(eps))
    return float(max(eps[best], 0.0)), int(lams[best])


def inverse_scale_tail(k: float, theta: float) -> float:
    """P(1/u > 10) = P(u < 0.1) for u ~ Gamma(k, theta)."""
    return float(gammainc(k, 1.0 / (MAX_INVERSE_SCALE * theta)))


def smallest_theta(k: float) -> float:
    """The smallest theta meeting (k-1) theta >= 0.1 and P(u < 0.1) <= 1e-3 (both grow with theta)."""
    tail = MIN_INVERSE_SCALE_FACTOR / gammaincinv(k, MAX_TAIL_PROBABILITY)
    return max(MIN_MEAN_INVERSE / (k - 1.0), tail)


@dataclass(frozen=True)
class PlrvoStep:
    """One Poisson-sampled DP-SGD step with PLRV-O noise as its accountants see it: Gamma(k, theta)
    inverse scale, clip C per example, `params` coordinates, sampling rate q; `law`: the law the
    safe sampler draws (ldpfed.samplers.plrvo_safe), None for the continuous one."""

    k: float
    theta: float
    clip: float
    params: int
    sample_rate: float = 1.0
    law: SafeLaw | None = None

    def alphas(self, accountant: str = "joint", orders=ORDERS) -> tuple[np.ndarray, np.ndarray]:
        """(lam, alpha_step(lam)) of one step for the usable orders."""
        if accountant not in STEP_FORMULAS:
            raise LDPValueError(f"plrvo accountant must be one of {STEP_FORMULAS}, got {accountant!r}")
        lams = usable_orders(self.clip, self.theta, orders)
        if lams.size == 0:
            raise LDPValueError(
                f"plrvo: no moment order satisfies lam C theta < 1 (C theta = {self.clip * self.theta:g})"
            )
        return lams, (self._joint_alphas(lams) if accountant == "joint" else self._paper_alphas(lams))

    def _joint_alphas(self, lams: np.ndarray) -> np.ndarray:
        # prod_i G(x_i, eta) does not depend on lam: one pass over every eta some order weighs (all
        # of 0..lam+1, except where q = 1 makes a weight exactly 0).
        weights = log_weights(lams, self.sample_rate)  # a row per order
        etas = np.flatnonzero(np.isfinite(weights).any(axis=0))
        log_products = joint_log_products(self.k, self.theta, self.clip, self.params, etas, self.law)
        weights = weights[:, etas]
        with np.errstate(invalid="ignore"):  # a zero weight (log: -inf) beside an overflowed product (inf): no term
            terms = np.where(np.isfinite(weights), weights + log_products, -np.inf)
        return logsumexp(terms, axis=1)

    def _paper_alphas(self, lams: np.ndarray) -> np.ndarray:
        x = coordinate_shifts(self.clip, self.params)
        alphas = np.empty(lams.size)
        for index, lam in enumerate(lams):  # a loop over orders; coordinates and eta are array ops
            kept, dropped = paper_etas(lam, self.sample_rate, self.k, self.theta, self.clip, self.law)
            weights = np.exp(log_weights(lam, self.sample_rate)[kept])[:, None]
            rows = max(1, _CHUNK // kept.size)
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow gives inf: that order is not used
                alphas[index] = sum(
                    np.log1p(
                        np.sum(
                            weights * g_minus_one(x[start : start + rows], kept, self.k, self.theta, self.law), axis=0
                        )
                        + dropped
                    ).sum()
                    for start in range(0, self.params, rows)
                )
        return alphas

    def epsilon(self, steps: int, delta: float, accountant: str = "joint", orders=ORDERS) -> tuple[float, int]:
        """(eps, lam) after `steps` steps at delta, by the joint (sound) or paper accountant."""
        lams, alphas = self.alphas(accountant, orders)
        return epsilon_from_alphas(lams, steps * alphas, delta)


@dataclass(frozen=True)
class SearchResult:
    k: float
    theta: float
    epsilon: float
    order: int


def search_parameters(
    target_epsilon: float,
    clip: float,
    params: int,
    sample_rate: float,
    steps: int,
    delta: float,
    ks=None,
    accountant: str = "joint",
    orders=ORDERS,
    law: SafeLaw | None = None,
) -> SearchResult:
    """(k, theta) maximising C (k-1) theta subject to eps <= target (by `accountant`), P(1/u > 10)
    <= 1e-3, k > 1, (k-1) theta >= 0.1 and the moment-domain condition (gradient-noise.md).

    For each k of a log grid, eps grows with theta (less noise), so the largest admissible theta
    is found by bisection on log theta; the best k of the grid wins.
    """
    ks = np.geomspace(2.0, 1e5, 18) if ks is None else np.asarray(ks, dtype=float)
    best = None
    for k in ks:  # a loop over a handful of candidate shapes
        candidate = _largest_theta(
            float(k), target_epsilon, clip, params, sample_rate, steps, delta, accountant, orders, law
        )
        if candidate is not None and (best is None or (candidate.k - 1) * candidate.theta > (best.k - 1) * best.theta):
            best = candidate
    if best is None:
        raise LDPValueError(
            f"plrvo: no (k, theta) reaches eps <= {target_epsilon:g} under the constraints (P(1/u > 10) <= 1e-3, "
            "(k-1) theta >= 0.1)"
        )
    return best


def _largest_theta(
    k: float, target_epsilon, clip, params, sample_rate, steps, delta, accountant, orders, law
) -> SearchResult | None:
    """At shape k, the largest admissible theta with eps <= target (bisection on log theta), or None."""

    @cache  # the result below reads the last feasible point again
    def feasible(log_theta: float) -> tuple[bool, float, int]:
        theta = math.exp(log_theta)
        if inverse_scale_tail(k, theta) > MAX_TAIL_PROBABILITY or usable_orders(clip, theta, orders).size == 0:
            return False, math.inf, 0
        eps, lam = PlrvoStep(k, theta, clip, params, sample_rate, law).epsilon(steps, delta, accountant, orders)
        return eps <= target_epsilon, eps, lam

    low = math.log(smallest_theta(k))
    if not feasible(low)[0]:
        return None
    high = low + 1.0
    while feasible(high)[0]:
        low, high = high, high + 2.0
    for _ in range(40):
        if high - low < 1e-6:
            break
        middle = 0.5 * (low + high)
        if feasible(middle)[0]:
            low = middle
        else:
            high = middle
    _, eps, lam = feasible(low)
    return SearchResult(k, math.exp(low), eps, lam)

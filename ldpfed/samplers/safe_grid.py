"""Floating-point-safe releases of the i.n.i.d. noises: every coordinate on its own grid, exact
integer noise (mechanisms.md, Floating-point safety; the rounding-plus-discrete-noise design of
Kairouz, Liu and Steinke 2021, "The distributed discrete Gaussian", and Canonne, Kamath and
Steinke 2020).

    release_i = g_i (K_i + N_i),   K_i = floor(x_i / g_i + U_i),   U_i uniform on [0, 1)

K_i is the unbiased two-point rounding of x_i / g_i (P(K = a + 1) = f, the fractional part) and
N_i an integer drawn by one of ldpfed.mechanisms' exact integer samplers, whose law does not
depend on x. Every release is an integer multiple of the coordinate's fixed step g_i, so the set
of possible outputs does not depend on the input (the floating-point event of audit.md cannot
fire), and the privacy argument is about integer laws only:

- Laplace (pure DP). N has adjacent log-ratios |log p(n+1)/p(n)| <= gamma (the discrete Laplace
  table of `ldpfed.samplers.discrete_laplace`, gamma = ln 2 / L up to its integer weights). For
  an output o, log P(o | x) = log((1 - f) p(o - a) + f p(o - a - 1)) lies between phi(x) and
  phi(x) + gamma^2/8, phi being the linear interpolation of log p(o - k) between the integers
  (Jensen below, Hoeffding's lemma above), and phi is gamma-Lipschitz. Hence per coordinate
  |log P(o|x)/P(o|x')| <= gamma |x - x'| / g + gamma^2 / 8: with g_i = b_i gamma the release costs
  sum_i |Delta_i| / b_i + d gamma^2 / 8 (+ the float slack below), the continuous condition plus
  a d gamma^2 / 8 that is ~4e-9 d.
- Gaussian (Renyi DP). Coupling the roundings of x and x' through the same U gives
  |K_i - K'_i| < |x_i - x'_i| / g_i + 1, so ||K - K'||_2 < ||Delta / g||_2 + sqrt(d). The product
  of discrete Gaussians N_Z(0, s^2) shifted by an integer vector v has Renyi divergence at most
  alpha ||v||^2 / (2 s^2) (CKS Proposition 5, composed over coordinates), and a mixture over the
  coupled roundings is at most its worst pair (joint quasi-convexity of D_alpha). So the release
  has the Renyi curve of the continuous Gaussian with noise multiplier s / (J + sqrt(d)), J being
  the grid steps per unit of Mahalanobis sensitivity; ldpfed converts it to (eps, delta) with
  dp_accounting's RdpAccountant, never with the continuous Gaussian's PLD (which does not bound
  the discrete one in general).

Float slack. x / g is a float division and x / g + U a float sum: with |x / g| < 2^bits they
move the rounding probability by at most 2^(bits - 52) (< 2^-10 at bits = 40, 2^-22 at 30), which
the bounds above include (`rounding_slack`). The discrete Gaussian's accept/reject decision has a
relative float error rho = 2^-36 (ldpfed.samplers.discrete_gaussian), charged per coordinate as
an eps and delta slack (`gaussian_float_slack`) before the calibration to an (eps, delta), and
carried by every release's event (`gaussian_sampler_slack`), so that the rdp accountant composes
it into its result whatever the releases (ldpfed.samplers.float_slack).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ldpfed.samplers.discrete_gaussian import _RHO, _log_gaussian_tail, _Proposal
from ldpfed.samplers.discrete_laplace import DiscreteLaplaceSampler
from ldpfed.samplers.float_slack import FloatSlack
from ldpfed.validation import LDPValueError, check_choice

SAFE = "safe"
CONTINUOUS_NAME = "continuous"
SAMPLERS = (SAFE, CONTINUOUS_NAME)
SAFE_DESCRIPTION = "safe (per-coordinate grid, exact integer noise; floating-point safe)"
# The discrete Laplace table with J = 2^24 grid steps and L = 4096 (ldpfed.samplers.discrete_laplace):
# gamma = ln2 / 4096 ~ 1.7e-4 per step, i.e. ~8,400 steps per Laplace scale.
LAPLACE_TABLE_BUDGET = math.log(2.0) * (2 * 2**24 + 2) / 4096
LAPLACE_INPUT_BITS = 30  # |x / g| < 2^30 for the Laplace grid (|x| < 1.8e5 b: never reached after clipping)
GAUSSIAN_INPUT_BITS = 40  # |x / g| < 2^40 for the Gaussian grid (sums of a batch's gradients included)
GAUSSIAN_GRID_FACTOR = 2**10  # J >= 2^10 sqrt(d): the rounding inflates the sensitivity by <= 2^-10


def check_sampler(sampler: str) -> str:
    return check_choice(sampler, SAMPLERS, "sampler")


def rounding_slack(bits: int) -> float:
    """Bound on how far the realized P(K = a + 1) is from the exact fractional part of x / g,
    for |x / g| < 2^bits: half an ulp of the division and of the sum, plus the 2^-53 lattice of U."""
    return 2.0 ** (bits - 52)


def grid_inputs(rows: np.ndarray, steps: np.ndarray, rng: np.random.Generator, bits: int) -> np.ndarray:
    """K = floor(x / g + U): unbiased two-point rounding of every coordinate to its grid (floats
    holding integers)."""
    scaled = rows / steps
    if np.any(np.abs(scaled) >= 2.0**bits):
        raise LDPValueError(
            f"an update coordinate is beyond 2^{bits} grid steps of the safe sampler "
            "(clip the update, or use sampler='continuous')"
        )
    dither = rng.random(scaled.shape)
    dither += scaled
    return np.floor(dither, out=dither)


def rounding_variance(rows: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Var(g K) = g^2 f (1 - f), f the fractional part of x / g (at most g^2 / 4)."""
    scaled = np.asarray(rows, dtype=float) / steps
    fraction = scaled - np.floor(scaled)
    return steps**2 * fraction * (1.0 - fraction)


# --- Laplace: the exact discrete Laplace table of ldpfed.mechanisms ---------------------------------
@lru_cache(maxsize=1)
def laplace_table() -> DiscreteLaplaceSampler:
    return DiscreteLaplaceSampler(LAPLACE_TABLE_BUDGET)


def laplace_step_ratio() -> float:
    """gamma: the largest |log p(n+1)/p(n)| of the integer noise (from its integer weights)."""
    table = laplace_table()
    return table.epsilon / (2 * table.grid_steps + 2)


def laplace_second_moment() -> float:
    """E[N^2] of the integer noise (exact, from its integer weights)."""
    return laplace_table()._noise_second_moment


def laplace_integers(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """i.i.d. integer noise (floats) with the exact discrete Laplace law of `laplace_table`."""
    return laplace_table()._signed_noise(int(np.prod(shape)), rng).reshape(shape)


# --- Gaussian: the discrete Gaussian rejection sampler of ldpfed.mechanisms -------------------------
def gaussian_integers(sigma: float, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """i.i.d. N_Z(0, sigma^2) (floats holding integers): the first accepted attempts, in order
    (`_Proposal.draw`: the batches this loop drew in Python, in one compiled call; same draws)."""
    return _Proposal.for_sigma(sigma).draw(int(np.prod(shape)), rng).reshape(shape)


def _sampler_error(sigma: float, shift: float) -> tuple[float, float, float]:
    """(r1, r2, e) of the discrete Gaussian sampler at sigma: each realized mass lies in
    [p / r1, r2 p + e(n)] (ldpfed.samplers.discrete_gaussian), e summed over n, plus the tail
    beyond the underflow (|n| >= its start - `shift`), where p / r1 may fail."""
    proposal = _Proposal.for_sigma(sigma)
    r2 = (1.0 + _RHO) / (1.0 - 2.0 * _RHO)
    r1 = (1.0 + _RHO + 2.0**-53 / proposal.acceptance) / (1.0 - _RHO)
    extra = 2.0**-53 / (proposal.acceptance * (1.0 - _RHO))
    extra += r2 * math.exp(min(0.0, _log_gaussian_tail(proposal.underflow_start - shift - 1, sigma)))
    return r1, r2, extra


def gaussian_float_slack(sigma: float, dims: int, shift: float, delta: float) -> tuple[float, float]:
    """(eps, delta) added by the float accept/reject decision over `dims` coordinates: each
    realized mass lies in [p / r1, r2 p + e(n)] (ldpfed.samplers.discrete_gaussian), so a release
    that is (eps, delta)-DP for the exact law is (eps + d ln(r1 r2), r2^d delta + d e_total + tails)
    for the realized one (hybrid argument over the coordinates). Returned: (d ln(r1 r2),
    (r2^d - 1) delta + 1.01 d e_total), e_total including the underflow tail beyond `shift`."""
    r1, r2, extra = _sampler_error(sigma, shift)
    eps = dims * math.log(r1 * r2)
    return eps, math.expm1(dims * math.log(r2)) * delta + 1.01 * dims * extra


def gaussian_sampler_slack(sigma: float, dims: int, shift: float, truncation: int | None = None) -> FloatSlack:
    """The release's float slack over `dims` draws for the accountants (ldpfed.samplers.float_slack):
    over = d ln r2, under = d ln r1, mass = d e_total (the terms of `gaussian_float_slack`, the factor
    r2^d left to the composition). `truncation`: the ideal law is the discrete Gaussian truncated to
    [-T, T] (dp-accounting's PLD): its tail tau moves mass <= tau out and the rest up by 1/(1 - tau)."""
    r1, r2, extra = _sampler_error(sigma, shift)
    under = math.log(r1)
    if truncation is not None:
        tau = math.exp(min(0.0, _log_gaussian_tail(truncation, sigma)))
        extra += r2 * tau
        under -= math.log1p(-tau) if tau < 1.0 else -math.inf
    return FloatSlack(dims * math.log(r2), dims * under, dims * extra)

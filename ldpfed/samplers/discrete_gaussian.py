"""Exact discrete Gaussian noise on the grid: the safe sampler of Gaussian (mechanisms.md, Gaussian
and Floating-point safety; Canonne, Kamath and Steinke 2020, "CKS").

Report = (K + N) / J: K is the input rounded to the grid K / J (`grid.round_to_grid`: unbiased,
Var(K) = 1/4, K in [-J - 1, J + 1]) and N ~ N_Z(0, s^2), the discrete Gaussian P(N = n) ∝
exp(-n^2 / (2 s^2)) on the integers. Reports are multiples of 1/J: a fixed set.

Privacy. Two grid inputs differ by at most D = 2J + 2 steps. The (eps, delta) condition of the
discrete Gaussian with integer shift D is computed by dp-accounting
(`DiscreteGaussianPrivacyLoss(s, sensitivity=D, truncation_bound=T)`); smaller shifts have a
smaller delta (a location family with monotone likelihood ratio: the Neyman-Pearson tests between
0 and d lose power as d shrinks), and a mixture over the rounding of t and t' (coupled) is at most
the worst pair (joint convexity of the hockey-stick divergence), so it bounds every pair t, t'.
s is the smallest value whose total bound `delta_bound` (below) is <= the requested delta.

Sampling (CKS Algorithm 3, vectorized, with a proposal drawn from exact random bits): G = L Q + R
with Q ~ Geometric(1/2) (trailing one-bits of raw words), R uniform in [0, L) (L = 2^l bits) and a
sign bit S, n = G or -G - 1, so the proposal is q(n) ∝ 2^-Q; the draw is accepted with
probability a(n) = exp(-n^2/(2 s^2) + Q ln2 - c) <= 1 (c = max_b (b ln2 - b^2 L^2/(2 s^2))),
which gives exactly N_Z(0, s^2) when a is exact. The one float decision is u < a with
u = k 2^-53: it realizes ceil(fl(a) 2^53) 2^-53, and fl(a) (an exp of an argument below ~10^3 in
magnitude) is within relative rho = 2^-36 of a, or below 2^-1074 where it underflows. Hence the
realized mass p'(n) lies in [p(n)/r1 - d(n), r2 p(n) + e(n)] with r2 = (1 + rho)/(1 - 2 rho),
r1 = (1 + rho + 2^-53/Z)/(1 - rho), sum e <= 2^-53/(Z (1 - rho)) (Z = the acceptance rate), and
d(n) = 0 wherever exp does not underflow. So the realized mechanism is (eps, delta_bound)-DP with
    delta_bound = r2 delta_DG(eps - ln(r1 r2)) + 2^-53/(Z (1 - rho)) + (1 + e^eps) tau(T)
                  + r2 P(|N| >= n_u - D),
tau(T) the mass beyond dp-accounting's truncation T (a Gaussian tail bound) and n_u the first |n|
where log a may fall below -700 (that last term is ~e^-400 unless s < D/8, i.e. eps >~ 50).

J: the largest 2^k (7 <= k <= 16) with s ~ J sigma_continuous / 2 <= 2^12, so the accounting arrays
stay small; the calibration for 2J + 2 grid steps instead of 2J costs (1 + 1/J)^2 in variance
(+0.2% at eps = 1, delta = 1e-5, J = 1024; +1.6% at most). Moments are exact sums over |n| <= T (the terms
beyond are below e^-100 relative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache

import numpy as np
from scipy.special import logsumexp

from ldpfed.samplers.grid import rounding_weights
from ldpfed.samplers.grid_noise import GridNoiseSampler, add_noise, geometric_half, round_block
from ldpfed.samplers.words import UNIT, compiled, draw_words, handles, kernel, locked

_LN2 = math.log(2.0)
_RHO = 2.0**-36  # relative error bound of the float acceptance probability (module docstring)
_TAIL_NATS = 100.0  # truncation T: the discrete Gaussian's mass beyond T is below ~e^-(eps + 100)
_UNDERFLOW_NATS = 700.0  # exp(-x) stays a normal float (relative accuracy) up to x ~ 708
_TARGET_SIGMA_BITS = 13
_MIN_GRID_BITS, _MAX_GRID_BITS = 7, 16
MIN_SAFE_DELTA = 1e-12  # the float terms of delta_bound (~2^-52) must stay far below delta
# raw word bits 0-7: trailing ones (Q); bit 63: sign; bits 62.. : R (l bits)


def _log_gaussian_tail(bound: float, sigma: float) -> float:
    """log of an upper bound on P(|N| > bound) for N ~ N_Z(0, s^2): 2 sum_{n > B} e^{-n^2/2s^2}
    over a normalizer >= 1, the sum <= s^2/B e^{-B^2/2s^2} (integral comparison)."""
    if bound <= 0:
        return 0.0
    return math.log(2.0 * sigma * sigma / bound) - bound * bound / (2.0 * sigma * sigma)


@dataclass(frozen=True)
class DiscreteGaussianSampler(GridNoiseSampler):
    """Report (K + N)/J, N ~ N_Z(0, s^2) with s calibrated so that `delta_bound` <= delta at
    `epsilon` (module docstring). `sigma` is s in grid steps."""

    epsilon: float
    delta: float
    continuous_sigma: float  # the continuous calibration on the t scale (chooses J and brackets s)
    classic: bool = False  # calibration="classic": s is at least the classic formula's, for comparison

    @classmethod
    @lru_cache(maxsize=256)
    def shared(
        cls, epsilon: float, delta: float, continuous_sigma: float, classic: bool = False
    ) -> DiscreteGaussianSampler:
        """One instance per parameters, so that its calibration, exact delta and support (~0.2 s
        together) are computed once however many mechanisms use it (it is immutable)."""
        return cls(epsilon, delta, continuous_sigma, classic)

    # --- the grid and the calibration -------------------------------------------------------------
    @cached_property
    def grid_steps(self) -> int:
        k = math.floor(math.log2(2.0**_TARGET_SIGMA_BITS / self.continuous_sigma))
        return 2 ** max(_MIN_GRID_BITS, min(_MAX_GRID_BITS, k))

    @property
    def sensitivity(self) -> int:
        """D = 2J + 2: the largest distance between grid inputs."""
        return 2 * self.grid_steps + 2

    def truncation(self, sigma: float) -> int:
        return math.ceil(sigma * math.sqrt(2.0 * (self.epsilon + _TAIL_NATS))) + self.sensitivity

    def delta_bound_for(self, sigma: float) -> float:
        """The realized mechanism's delta at eps for parameter s (module docstring)."""
        proposal = _Proposal.for_sigma(sigma)
        r1, r2 = proposal.float_ratios
        bound = self.truncation(sigma)
        from dp_accounting.pld.privacy_loss_mechanism import DiscreteGaussianPrivacyLoss

        library = DiscreteGaussianPrivacyLoss(sigma, sensitivity=self.sensitivity, truncation_bound=bound)
        delta = r2 * library.get_delta_for_epsilon(self.epsilon - math.log(r1 * r2))
        delta += proposal.escape_mass
        delta += math.exp(np.logaddexp(0.0, self.epsilon) + _log_gaussian_tail(bound, sigma))
        underflow = proposal.underflow_start - self.sensitivity
        delta += r2 * math.exp(min(0.0, _log_gaussian_tail(underflow - 1, sigma)))
        return float(delta)

    @cached_property
    def sigma(self) -> float:
        """Smallest s (to 1e-8 relative) with delta_bound(s) <= delta, from a bracket around the
        continuous sigma for sensitivity D (classic calibration: at least the classic formula's).
        Cached across instances with the same parameters: the search costs ~0.5 s, and the
        predictor and the runners build the same mechanism many times."""
        return _calibration(self)[0]

    @cached_property
    def delta_bound(self) -> float:
        """delta_bound_for(sigma), which the calibration computed last."""
        return _calibration(self)[1]

    @cached_property
    def noise_multiplier(self) -> float:
        """s / D: the Renyi divergence of N_Z shifted by d <= D is <= alpha d^2/(2 s^2) (CKS,
        Proposition 5), that of a continuous Gaussian with this noise multiplier."""
        return self.sigma / self.sensitivity

    @cached_property
    def _proposal(self) -> _Proposal:
        return _Proposal.for_sigma(self.sigma)

    # --- sampling (compiled: `_gaussian_noise`) -------------------------------------------------------
    def _sample_rows_kernel(self, t, out, rows, block):
        _gaussian_rows(t, out, rows, block, float(self.grid_steps), *self._proposal.kernel_arguments)

    def _noise_kernel(self, out, handle):
        """N ~ N_Z(0, s^2): i.i.d. attempts, the first accepted ones kept (their order does not
        depend on their values)."""
        _gaussian_fill(out, handle, *self._proposal.kernel_arguments)

    # --- exact law and statistics -----------------------------------------------------------------
    @cached_property
    def _support(self) -> tuple[np.ndarray, np.ndarray]:
        """(n, p(n)) for |n| <= T, p normalized over that range (the rest is below e^-100)."""
        n = np.arange(-self.truncation(self.sigma), self.truncation(self.sigma) + 1, dtype=float)
        return n, np.exp(-(n * n) / (2.0 * self.sigma**2) - self._log_normalizer)

    @cached_property
    def _log_normalizer(self) -> float:
        bound = self.truncation(self.sigma)
        n = np.arange(-bound, bound + 1, dtype=float)
        return float(logsumexp(-(n * n) / (2.0 * self.sigma**2)))

    def noise_log_mass(self, n) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        return -(n * n) / (2.0 * self.sigma**2) - self._log_normalizer

    @cached_property
    def noise_variance(self) -> float:
        """Var N = sum n^2 p(n) (< s^2 for the discrete Gaussian, CKS Proposition 19)."""
        n, p = self._support
        return float(p @ (n * n))

    @cached_property
    def _tail_moments(self) -> tuple[float, float]:
        """(sum_{n>=3} p(n) n, sum_{n>=3} p(n) n^3)."""
        n, p = self._support
        upper = n >= 3
        return float(p[upper] @ n[upper]), float(p[upper] @ n[upper] ** 3)

    def third_abs_central_moment(self, t) -> np.ndarray:
        """E|K + N - x|^3 / J^3 over the rounding offsets: with s = K - x in (-2, 2],
        E|N + s|^3 = 2 (A3 + 3 s^2 A1) + sum_{|n| <= 2} p(n) |n + s|^3 (N symmetric; the terms
        |n| >= 3 keep the sign of n)."""
        x = np.asarray(t, dtype=float) * self.grid_steps
        low, weights = rounding_weights(x)
        first, third = self._tail_moments
        near = np.arange(-2.0, 3.0)
        near_mass = np.exp(self.noise_log_mass(near))
        moment = 0.0
        for d, w in zip((-1, 0, 1, 2), weights):
            shift = np.asarray(low + d - x)
            centre = sum(m * np.abs(c + shift) ** 3 for c, m in zip(near, near_mass))
            moment = moment + w * (2.0 * (third + 3.0 * shift**2 * first) + centre)
        return moment / float(self.grid_steps) ** 3


@dataclass(frozen=True)
class _Proposal:
    """G = L Q + R with a sign (module docstring), and the acceptance that turns it into N_Z(0, s^2)."""

    sigma: float
    bits: int  # l, L = 2^l

    @classmethod
    def for_sigma(cls, sigma: float) -> _Proposal:
        """The L = 2^l (of the two around 0.7 s) with the higher acceptance rate."""
        around = math.log2(0.7 * sigma)
        options = [cls(sigma, max(0, b)) for b in (math.floor(around), math.ceil(around))]
        return max(options, key=lambda p: p.acceptance)

    @property
    def length(self) -> int:
        return 2**self.bits

    @cached_property
    def log_envelope(self) -> float:
        """c = max over blocks b >= 0 of b ln2 - (b L)^2/(2 s^2)."""
        scale = self.length**2 / (2.0 * self.sigma**2)
        b = np.arange(0, math.ceil(_LN2 / (2.0 * scale)) + 2, dtype=float)
        return float(np.max(b * _LN2 - b * b * scale))

    @cached_property
    def acceptance(self) -> float:
        """Z = P(an attempt is accepted) = e^-c sum_n e^{-n^2/2s^2} / (4L), the sum being
        s sqrt(2 pi) (1 + 2 sum_k e^{-2 pi^2 s^2 k^2}) (Poisson summation): s sqrt(2 pi) to double
        precision for s >= 10 (s is in the hundreds or more here)."""
        assert self.sigma >= 10.0
        return math.exp(math.log(self.sigma * math.sqrt(2.0 * math.pi)) - self.log_envelope) / (4.0 * self.length)

    @property
    def float_ratios(self) -> tuple[float, float]:
        """(r1, r2) of the realized mass p'(n) in [p(n)/r1 - d(n), r2 p(n) + e(n)] (module docstring)."""
        r2 = (1.0 + _RHO) / (1.0 - 2.0 * _RHO)  # 2 rho: also covers the normalizer's underflowed terms
        r1 = (1.0 + _RHO + 2.0**-53 / self.acceptance) / (1.0 - _RHO)
        return r1, r2

    @property
    def escape_mass(self) -> float:
        """The bound on sum e(n): 2^-53 / (Z (1 - rho)) (module docstring)."""
        return 2.0**-53 / (self.acceptance * (1.0 - _RHO))

    @cached_property
    def underflow_start(self) -> int:
        """Smallest |n| where log a(n) may drop below -700 (exp near the subnormal range, where
        its relative accuracy is lost)."""
        scale = 1.0 / (2.0 * self.sigma**2)
        # log a(n) >= -n^2 scale + ((|n| - 1)/L - 1) ln2 - c (|n| <= G + 1): the first n below -700
        a, b, c = scale, -_LN2 / self.length, _LN2 * (1.0 + 1.0 / self.length) + self.log_envelope - _UNDERFLOW_NATS
        return math.floor((-b + math.sqrt(b * b - 4 * a * c)) / (2 * a))

    @cached_property
    def kernel_arguments(self) -> tuple:
        """(l, L, -1/(2 s^2), c, acceptance Z) for the compiled attempts."""
        return self.bits, self.length, -1.0 / (2.0 * self.sigma**2), self.log_envelope, self.acceptance

    def draw(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """`size` draws of N_Z(0, s^2) (floats holding integers): batches of int(need / Z * 1.05)
        + 16 attempts, the first accepted values kept, in order (one compiled call)."""
        compiled()
        out = np.empty(int(size))
        with locked([rng]):
            _gaussian_fill(out, handles([rng])[0], *self.kernel_arguments)
        return out

    def attempt(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """The accepted values among `size` attempts, in order (`_attempts`)."""
        compiled()
        out = np.empty(int(size) + 1)  # a spare slot (_attempts)
        with locked([rng]):
            accepted = _attempt_fill(out, handles([rng])[0], *self.kernel_arguments)
        return out[:accepted].copy()


# --- compiled sampling --------------------------------------------------------------------------------
_EXP_BAND = 2.0**-16  # > the polynomial's 3.3e-7 + any float exp's 2^-48 + the roundings (exp_bounds)
_EXP_TABLE = np.array([math.exp(-j / 4.0) for j in range(123)])  # fl(e^(-j/4)), within 1 ulp
_EXP_RANGE = (-30.5, 0.125)


@kernel(inline=True)
def exp_bounds(b):
    """(low, high) with low < fl(exp(b)) < high for every float exp within relative 2^-48 of e^b
    (libm's and numpy's are within 1-2 ulp), or (-1, 2) outside -30.5 < b < 1/8 (b <= 0 here, up
    to rounding: a(n) <= 1).

    Why: the accept test u < fl(exp(b)) cost ~8 ns per attempt in libm, half the discrete
    Gaussian's time; u < low and u > high give the same verdict from a cheap bound, and only u in
    [low, high] (~1e-5 of the attempts) calls exp, so the decisions are the former ones exactly.
    p = e^(k/4) P4(f) with k = rint(4b) (table, 1 ulp), f = b - k/4 in [-1/8, 1/8] (exact,
    Sterbenz) and P4 the degree-4 Taylor polynomial of e^f (Horner): truncation <= (1/8)^5/5!
    e^(1/8) / e^(-1/8) = 3.3e-7 relative, float evaluation ~1e-15; so |p - e^b| <= 3.4e-7 e^b, and
    p (1 -+ 2^-16) lie below and above e^b (1 +- 2^-48) with room for their own rounding.
    """
    inside = (b > _EXP_RANGE[0]) & (b < _EXP_RANGE[1])  # selects, not branches
    quarters = np.rint(min(max(b, -30.5), 0.0) * 4.0)
    f = b - quarters * 0.25
    p = 1.0 + f * (1.0 + f * (0.5 + f * (1.0 / 6.0 + f * (1.0 / 24.0))))
    p *= _EXP_TABLE[int(-quarters)]
    return (p * (1.0 - _EXP_BAND) if inside else -1.0), (p * (1.0 + _EXP_BAND) if inside else 2.0)


@kernel
def _proposals(raw, q, values, exponents, size, bits, length, scale, log_envelope) -> None:
    """values[a] = n (the proposal) and exponents[a] = b = -n^2/2s^2 + Q ln2 - c, in the numpy
    sampler's order of float operations; scale = -1/(2 s^2)."""
    for a in range(size):
        n = np.int64((raw[a] << np.uint64(1)) >> np.uint64(64 - bits)) if bits else np.int64(0)
        n += q[a] * length  # G = R + L Q
        n ^= np.int64(raw[a]) >> np.int64(63)  # the sign: ~G = -G - 1 when the top bit is set
        values[a] = n
        exponent = np.float64(n)
        exponent *= exponent
        exponent *= scale
        exponent += np.float64(q[a]) * _LN2
        exponent -= log_envelope
        exponents[a] = exponent


@kernel
def _verdicts(words, exponents, verdicts, size) -> None:
    """verdicts[a] = [u < exp(b)], u = (word >> 11) 2^-53, b the exponents: decided by
    `exp_bounds`, and by the exp only where u lies within 2^-16 of exp(b) (~1e-5 of the
    attempts). The bound loop is kept free of calls and of the compaction: merged with either it
    ran 1.5-2x slower."""
    for a in range(size):
        u = np.float64(np.int64(words[a] >> np.uint64(11))) * UNIT
        low, high = exp_bounds(exponents[a])
        verdicts[a] = (u < low) + 2 * ((u >= low) & (u <= high))
    for a in range(size):
        if verdicts[a] == 2:  # u within 2^-16 of exp(b): the exp decides
            verdicts[a] = np.float64(np.int64(words[a] >> np.uint64(11))) * UNIT < math.exp(exponents[a])


@kernel
def _attempts(out, filled, wanted, size, handle, bits, length, scale, log_envelope, raw, q, values, chances, scratch):
    """`size` attempts; the accepted values go to out[filled:wanted] in order (the rest are
    dropped; out needs a spare slot out[wanted]); returns the new fill. raw: uint64 scratch; q,
    values, scratch: int64; chances: float64.

    One raw word per attempt: bits 0-7 count Q (trailing ones, continued on fresh words when all
    8 are ones), the top bit is the sign S and the next l bits R. G = L Q + R >= 0 gives n = G
    (S = 0) or n = -G - 1 = ~G (S = 1): every integer has exactly one way in, and (n + 1)^2 >= n^2
    on the negative side keeps a(n) <= 1 with the same c. Then one 53-bit uniform u per attempt
    (all of them, accepted or not), accepted when u < a(n) = exp(-n^2/2s^2 + Q ln2 - c). Words in
    the order of the numpy sampler: the raw words, the continuations, the uniforms; the float
    operations in its order too (the exp is libm's, as numpy's on x86-64 without AVX-512).
    """
    draw_words(handle, raw, size)
    geometric_half(raw, q, size, handle, scratch)
    _proposals(raw, q, values, chances, size, bits, length, scale, log_envelope)
    draw_words(handle, raw, size)  # the uniforms
    _verdicts(raw, chances, q, size)  # q is free now: the verdicts
    for a in range(size):  # branch-free: each value is written at the fill, which advances if accepted
        out[min(filled, wanted)] = np.float64(values[a])  # out[wanted]: a spare slot for the surplus
        filled += q[a]
    return min(filled, wanted)


@kernel
def _attempt_scratch(size):
    """Scratch for `size` attempts: raw words, Q, values, acceptance chances, indices."""
    return (
        np.empty(size, dtype=np.uint64),
        np.empty(size, dtype=np.int64),
        np.empty(size, dtype=np.int64),
        np.empty(size),
        np.empty(size, dtype=np.int64),
    )


@kernel
def _attempt_fill(out, handle, bits, length, scale, log_envelope, acceptance):
    size = out.size - 1  # out: one spare slot
    raw, q, values, chances, scratch = _attempt_scratch(size)
    return _attempts(out, 0, size, size, handle, bits, length, scale, log_envelope, raw, q, values, chances, scratch)


@kernel
def _gaussian_noise(out, size, handle, bits, length, scale, log_envelope, acceptance, raw, q, values, chances, scratch):
    """out[:size]: batches of int(need / Z * 1.05) + 16 attempts until `size` are accepted
    (scratch for the first batch, the largest)."""
    filled = 0
    while filled < size:
        batch = int((size - filled) / acceptance * 1.05) + 16
        filled = _attempts(
            out, filled, size, batch, handle, bits, length, scale, log_envelope, raw, q, values, chances, scratch
        )


@kernel
def _gaussian_fill(out, handle, bits, length, scale, log_envelope, acceptance):
    raw, q, values, chances, scratch = _attempt_scratch(int(out.size / acceptance * 1.05) + 16)
    noise = np.empty(out.size + 1)  # a spare slot (_attempts)
    _gaussian_noise(
        noise, out.size, handle, bits, length, scale, log_envelope, acceptance, raw, q, values, chances, scratch
    )
    out[:] = noise[: out.size]


@kernel
def _gaussian_rows(t, out, rows, block, grid, bits, length, scale, log_envelope, acceptance):
    """Per row and block: K (dither words), then N (attempt words); report (K + N) * (1/J)."""
    size = min(block, t.shape[1])
    noise = np.empty(size + 1)  # a spare slot (_attempts)
    raw, q, values, chances, scratch = _attempt_scratch(int(size / acceptance * 1.05) + 16)
    for row in range(t.shape[0]):
        for first in range(0, t.shape[1], block):
            count = min(block, t.shape[1] - first)
            round_block(t[row], out[row], first, count, rows[row], grid, raw)
            _gaussian_noise(
                noise, count, rows[row], bits, length, scale, log_envelope, acceptance, raw, q, values, chances, scratch
            )
            add_noise(out[row], first, count, noise, grid)


@lru_cache(maxsize=256)
def _calibration(self: DiscreteGaussianSampler) -> tuple[float, float]:
    """(s, delta_bound(s)): the smallest s (to 1e-8 relative) with delta_bound(s) <= delta, from a
    bracket around the continuous sigma for sensitivity D (classic calibration: at least the
    classic formula's)."""
    guess = self.continuous_sigma * self.sensitivity / 2.0
    # Memoized (each ~10 ms): brentq evaluates the bracket's ends again, the check below its root, and
    # the bound returned with s is that of the last s checked (unless the classic formula raises s).
    delta_bound = cache(self.delta_bound_for)
    from scipy.optimize import brentq  # here: scipy.optimize costs a process' start 0.3-0.4 s

    def excess(log_s: float) -> float:
        return math.log(delta_bound(math.exp(log_s))) - math.log(self.delta)

    low, high, step = math.log(guess) - 0.01, math.log(guess) + 0.01, 0.1
    while excess(low) <= 0:
        low -= step
    while excess(high) > 0:  # large eps: the underflow term needs s >~ D/8 (docstring)
        low, high, step = high, high + step, 2.0 * step
    sigma = math.exp(brentq(excess, low, high, xtol=1e-8))
    while delta_bound(sigma) > self.delta:  # brentq may end just below the root
        sigma *= 1.0 + 1e-8
    if self.classic:  # D sqrt(2 ln(1.25/delta))/eps in grid steps, when it is the larger
        sigma = max(sigma, self.sensitivity * math.sqrt(2.0 * math.log(1.25 / self.delta)) / self.epsilon)
    return sigma, delta_bound(sigma)

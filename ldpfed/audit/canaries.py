"""One-shot privacy estimation from canary directions (Andrew, Kairouz, Oh, Oprea, McMahan &
Suriyakumar, ICLR 2024, "One-shot Empirical Privacy Estimation for Federated Learning").

A canary client's update is a fixed random unit direction c (large enough that clipping sets its
norm). After training, the statistic of a canary is the cosine between c and the model delta
(final-model threat model) or the largest cosine with any round's delta (all-iterates threat
model). A canary never inserted is independent of the deltas, so its cosine follows the law of the
cosine between a uniform direction and a fixed vector: (1 + t) / 2 ~ Beta((d-1)/2, (d-1)/2),
essentially N(0, 1/d) for d >= 1000. eps is estimated by fitting N(mu, sigma^2) to the inserted
canaries' statistics and taking the eps of the pair (null, fit) at delta, as the reference code
does (google-research/federated, one_shot_epe/empirical_privacy_estimation_lib.py:
`epsilon_closed_form_null_gaussian_alt`, `epsilon_two_gaussians`):
- final model, d >= 1000: eps of N(0, 1/d) against N(mu, sigma^2), exact for two Gaussians
  (privacy loss of two Gaussians, Steinke 2022, "Composition of DP & privacy amplification by
  subsampling", arXiv:2210.00597);
- final model, d < 1000: the best threshold test between the exact cosine null and the fit, on the
  reference's grid of 10,000 thresholds;
- all iterates: the null of the maximum over rounds has no closed form, so a Gaussian is fitted to
  the never-inserted canaries' maxima as well, and eps is that of the two fits.
The estimate is a point estimate: it approximates eps, it does not bound it. `final_model_lower_limit`
adds a confidence limit on the same fit (not in the reference): the fitted eps at the lower
confidence limit of the mean and the least revealing std of its confidence interval, valid when the
canaries' cosines are independent Gaussian draws (approximately so for d much larger than the number
of canaries); unlike the one-run bound, it is a statement about the fit, not a proof about the run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

# scipy.stats is imported in the functions that use it: every `ldpfed simulate` loads this module
# (through the train task's canaries) and most never audit (~0.6 s of CPU).
from scipy.optimize import brentq
from scipy.special import log_ndtr

from ldpfed.validation import LDPValueError, check_fraction, check_positive_int

GAUSSIAN_NULL_DIMENSION = 1000  # from this dimension on the null is taken as N(0, 1/d) (reference)
THRESHOLD_GRID = 10_000  # thresholds of the exact-null test below that dimension (reference)


# --- canary directions and their statistics ---------------------------------------------------------
def canary_directions(root: np.random.SeedSequence, ids, dimension: int, dtype=np.float64) -> np.ndarray:
    """Unit vectors, one row per canary id, each drawn from its own stream SeedSequence(root's
    entropy, spawn_key=root's key + (id,)): a node that hosts canary i builds its direction from i
    alone. `root` must serve only for directions (its children (i,) are the canaries' streams)."""
    dimension = check_positive_int(dimension, "dimension", minimum=2)
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    directions = np.empty((ids.size, dimension), dtype=dtype)
    for row, canary in enumerate(ids):  # one stream per canary, so a direction depends on its id only
        stream = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, int(canary)))
        directions[row] = np.random.default_rng(stream).standard_normal(dimension, dtype=dtype)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions


def inclusion_coins(rng: np.random.Generator, count: int) -> np.ndarray:
    """Each canary's secret coin: True (inserted) with probability 1/2, independently."""
    return rng.integers(0, 2, size=check_positive_int(count, "count"), dtype=np.int8).astype(bool)


def canary_cosines(directions: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """cos(c_i, delta) for each canary direction (rows of `directions`) and each delta: shape
    (canaries,) for one delta of shape (d,), (rounds, canaries) for deltas of shape (rounds, d).

    Deltas must be oriented so that an inserted canary moves them along +c (the model delta when
    clients send new - old weights). A zero delta gives cosine 0 (the reference's divide_no_nan).
    """
    directions, deltas = np.asarray(directions, dtype=float), np.asarray(deltas, dtype=float)
    if deltas.shape[-1] != directions.shape[-1]:
        raise LDPValueError(f"deltas have dimension {deltas.shape[-1]}, canaries {directions.shape[-1]}")
    dots = deltas @ directions.T
    norms = np.linalg.norm(deltas, axis=-1, keepdims=deltas.ndim > 1) * np.linalg.norm(directions, axis=1)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def max_over_rounds(per_round_cosines: np.ndarray) -> np.ndarray:
    """Each canary's largest cosine over the rounds (all-iterates statistic), from (rounds, canaries)."""
    return np.max(np.asarray(per_round_cosines, dtype=float), axis=0)


# --- eps of two Gaussians ---------------------------------------------------------------------------
def _log_mass(mean: float, std: float, lower: float, upper: float) -> float:
    """log P[lower < Y < upper], Y ~ N(mean, std^2), accurate in both tails."""
    if lower == -math.inf:
        return float(log_ndtr((upper - mean) / std))
    if upper == math.inf:
        return float(log_ndtr((mean - lower) / std))
    high, low = float(log_ndtr((upper - mean) / std)), float(log_ndtr((lower - mean) / std))
    share = -math.expm1(low - high)  # 1 - e^(low - high), accurate when the two are close
    return high + math.log(share) if share > 0.0 else -math.inf


def _log_delta(mean1: float, std1: float, mean2: float, std2: float, epsilon: float) -> float:
    """log of delta(eps) = P1[L > eps] - e^eps P2[L > eps] for the privacy loss
    L(y) = log p1(y) - log p2(y) = a y^2 + b y + c (-inf where delta(eps) <= 0)."""
    a = 0.5 * (std2**-2 - std1**-2)
    b = mean1 / std1**2 - mean2 / std2**2
    c = 0.5 * ((mean2 / std2) ** 2 - (mean1 / std1) ** 2) + math.log(std2) - math.log(std1)
    if a == 0.0:  # equal stds: L is linear, {L > eps} is a half-line
        if b == 0.0:
            return -math.inf
        edge = (epsilon - c) / b
        sets = [(edge, math.inf)] if b > 0 else [(-math.inf, edge)]
    else:
        discriminant = b * b - 4.0 * a * (c - epsilon)
        if discriminant <= 0.0:  # L - eps keeps one sign: delta is 0 or negative
            return -math.inf
        q = -0.5 * (b + math.copysign(math.sqrt(discriminant), b))  # roots without cancellation
        left, right = sorted((q / a, (c - epsilon) / q))  # q != 0: the discriminant is > 0
        sets = [(-math.inf, left), (right, math.inf)] if a > 0 else [(left, right)]
    # a sum of one or two masses in logs (numpy's logaddexp: scipy's logsumexp costs a millisecond a call)
    log_p1 = float(np.logaddexp.reduce([_log_mass(mean1, std1, *part) for part in sets]))
    log_p2 = float(np.logaddexp.reduce([_log_mass(mean2, std2, *part) for part in sets]))
    if log_p1 == -math.inf:
        return -math.inf
    factor = epsilon + log_p2 - log_p1
    return -math.inf if factor >= 0.0 else float(log_p1 + math.log1p(-math.exp(factor)))


def epsilon_two_gaussians(mean1: float, std1: float, mean2: float, std2: float, delta: float) -> float:
    """Smallest eps with N(mean1, std1^2) and N(mean2, std2^2) (eps, delta)-indistinguishable in
    both directions; for equal stds, the Gaussian mechanism's eps at mu = |mean1 - mean2| / std."""
    log_target = math.log(check_fraction(delta, "delta"))

    def log_delta(epsilon: float) -> float:
        return max(_log_delta(mean1, std1, mean2, std2, epsilon), _log_delta(mean2, std2, mean1, std1, epsilon))

    if log_delta(0.0) <= log_target:
        return 0.0
    low, high = 0.0, 1.0
    while log_delta(high) > log_target:
        low, high = high, high * 10.0
    return float(brentq(lambda epsilon: log_delta(epsilon) - log_target, low, high))


# --- the estimators ---------------------------------------------------------------------------------
def _null_log_sf(thresholds: np.ndarray, dimension: int) -> np.ndarray:
    """log P[cos > t] for a uniform direction in dimension d: (1 + cos) / 2 ~ Beta((d-1)/2, (d-1)/2)."""
    from scipy.stats import beta as beta_law

    shape = (dimension - 1) / 2.0
    return beta_law.logsf((1.0 + thresholds) / 2.0, shape, shape)


def _threshold_epsilon(log_fprs: np.ndarray, fnrs: np.ndarray, delta: float) -> float:
    """Best eps over threshold tests: max(log(1 - delta - FNR) - log FPR, log(1 - delta - FPR) - log FNR),
    0 where no threshold certifies a positive value."""
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.log(1.0 - delta - fnrs) - log_fprs
        second = np.log(1.0 - delta - np.exp(log_fprs)) - np.log(fnrs)
    values = np.fmax(first, second)
    return float(max(np.nanmax(values, initial=0.0), 0.0))


def epsilon_exact_null(mean: float, std: float, dimension: int, delta: float) -> float:
    """eps between the exact cosine null (d < 1000) and N(mean, std^2), over the reference's grid
    of thresholds from the null's delta-quantile to the fit's (1 - delta)-quantile (0 if mean <= 0)."""
    from scipy.stats import beta as beta_law
    from scipy.stats import norm

    if mean <= 0.0:
        return 0.0
    shape = (dimension - 1) / 2.0
    lowest = 2.0 * beta_law.ppf(delta, shape, shape) - 1.0
    highest = norm.ppf(1.0 - delta, loc=mean, scale=std)
    thresholds = np.linspace(lowest, highest, THRESHOLD_GRID)
    return _threshold_epsilon(_null_log_sf(thresholds, dimension), norm.cdf(thresholds, mean, std), delta)


@dataclass(frozen=True)
class CosineEstimate:
    """An eps estimate from canary cosines, with the fits it came from."""

    epsilon: float
    delta: float
    threat_model: str  # "final model" or "all iterates"
    seen_mean: float
    seen_std: float
    null_mean: float
    null_std: float
    seen: int
    unseen: int
    dimension: int

    def to_dict(self) -> dict:
        return asdict(self)


def _fit(values, name: str) -> tuple[float, float]:
    values = np.asarray(values, dtype=float).reshape(-1)
    if values.size < 2 or not np.all(np.isfinite(values)):
        raise LDPValueError(f"{name} must hold at least 2 finite cosines, got {values.size}")
    return float(np.mean(values)), float(np.std(values))


def final_model_estimate(seen_cosines, dimension: int, delta: float, unseen: int = 0) -> CosineEstimate:
    """eps from the inserted canaries' cosines with the final model delta, against the closed-form
    null (N(0, 1/d) from d = 1000 on, the exact cosine law below)."""
    dimension = check_positive_int(dimension, "dimension", minimum=2)
    delta = check_fraction(delta, "delta")
    mean, std = _fit(seen_cosines, "seen_cosines")
    null_std = dimension**-0.5
    epsilon = math.inf if std == 0.0 else _fitted_epsilon(mean, std, dimension, delta)
    seen = np.size(seen_cosines)
    return CosineEstimate(epsilon, delta, "final model", mean, std, 0.0, null_std, seen, unseen, dimension)


def all_iterates_estimate(seen_max_cosines, unseen_max_cosines, dimension: int, delta: float) -> CosineEstimate:
    """eps from each canary's largest cosine over the rounds' deltas: Gaussian fits to the inserted
    and to the never-inserted canaries' maxima (the empirical null)."""
    delta = check_fraction(delta, "delta")
    mean, std = _fit(seen_max_cosines, "seen_max_cosines")
    null_mean, null_std = _fit(unseen_max_cosines, "unseen_max_cosines")
    if std == 0.0 or null_std == 0.0:
        epsilon = math.inf
    else:
        epsilon = epsilon_two_gaussians(null_mean, null_std, mean, std, delta)
    seen, unseen = np.size(seen_max_cosines), np.size(unseen_max_cosines)
    return CosineEstimate(epsilon, delta, "all iterates", mean, std, null_mean, null_std, seen, unseen, dimension)


def _fitted_epsilon(mean: float, std: float, dimension: int, delta: float) -> float:
    """The final-model estimate's eps for a fit N(mean, std^2) against the closed-form null."""
    if dimension >= GAUSSIAN_NULL_DIMENSION:
        return epsilon_two_gaussians(0.0, dimension**-0.5, mean, std, delta)
    return epsilon_exact_null(mean, std, dimension, delta)


def final_model_lower_limit(seen_cosines, dimension: int, delta: float, confidence: float) -> float:
    """Lower confidence limit of the final-model estimate: eps at the one-sided lower t-limit of the
    mean, minimized over the chi-square interval of the std (the level split evenly between the
    two), for independent Gaussian cosines."""
    from scipy.stats import chi2, t

    dimension = check_positive_int(dimension, "dimension", minimum=2)
    delta, alpha = check_fraction(delta, "delta"), 1.0 - check_fraction(confidence, "confidence")
    values = np.asarray(seen_cosines, dtype=float).reshape(-1)
    _fit(values, "seen_cosines")
    n, mean, std = values.size, float(np.mean(values)), float(np.std(values, ddof=1))
    if std == 0.0:  # identical cosines: the fit is degenerate, as in final_model_estimate
        return math.inf
    mean_low = mean - t.ppf(1.0 - alpha / 2.0, n - 1) * std / math.sqrt(n)
    std_low = std * math.sqrt((n - 1) / chi2.ppf(1.0 - alpha / 4.0, n - 1))
    std_high = std * math.sqrt((n - 1) / chi2.ppf(alpha / 4.0, n - 1))
    candidates = np.geomspace(std_low, std_high, 9)
    null_std = dimension**-0.5
    if std_low < null_std < std_high:  # equal stds: the least revealing pair for a given mean gap
        candidates = np.append(candidates, null_std)
    return min(_fitted_epsilon(mean_low, float(candidate), dimension, delta) for candidate in candidates)


# --- the final-model estimate's sampling law on one Gaussian mechanism ---------------------------------
# All k canaries inserted into Delta = S + sigma Z, S = sum_j c_j (unit directions, sensitivity 1). With
# A = ||S||^2 = k (1 + eta) (random directions: eta ~ N(0, 2 (k-1) / (k d)) from their pairwise dots;
# orthonormal ones: eta = 0) and w = sigma <S, Z> / k ~ N(0, sigma^2 / k), the mean inserted cosine is
# (A + sigma <S, Z>) / (k ||Delta||) and ||Delta||^2 = A + 2 sigma <S, Z> + sigma^2 d. In units of the
# null's sd 1/sqrt(d) the cosines have mean mu_obs = 1 / sqrt(sigma^2 + k/d) (the other canaries add
# k/d to the noise variance the estimator sees) and, to first order in (eta, w):
#   1/mu_obs_hat^2 - k/d = sigma^2 [1 - 2 w - eta (2 + k / (d sigma^2))],
# so the corrected mu_hat = mu [1 + w + eta (1 + k / (2 d sigma^2))] (`equal_variance_sd`), and the
# uncorrected fitted mean moves by sigma^2 / (sigma^2 + k/d) of that, relatively. The fitted std,
# relative to the null's, is sqrt((sigma^2 + pairwise (k-1)/d) / (sigma^2 + k/d)) with relative sd
# 1 / sqrt(2 k); the eps of two Gaussians at a small delta grows on both sides of equal stds (a kink:
# a std ratio r != 1 makes the privacy loss quadratic, unbounded in one tail), so Andrew et al.'s
# estimate, which fits the std, is biased up by about its slope times E|r - 1| (`fitted_estimate_law`).
def gaussian_mechanism_slope(mu: float, delta: float) -> float:
    """d eps / d mu of the Gaussian mechanism (eps at `delta` of N(0, 1) against N(mu, 1)), closed form
    from delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2): phi(-eps/mu + mu/2) / (e^eps Phi(-eps/mu - mu/2))
    (the densities' terms in d delta / d eps cancel)."""
    from scipy.stats import norm

    epsilon = epsilon_two_gaussians(0.0, 1.0, mu, 1.0, delta)
    upper, lower = -epsilon / mu + mu / 2.0, -epsilon / mu - mu / 2.0
    return float(math.exp(norm.logpdf(upper) - epsilon - norm.logcdf(lower)))


def equal_variance_estimate(seen_cosines, dimension: int, delta: float, inserted: int = 0) -> CosineEstimate:
    """The final-model estimate with the null's std 1/sqrt(d) on both sides (exact for a Gaussian
    mechanism's isotropic noise): mu = mean cosine x sqrt(d), then, when `inserted` canaries share the
    release, the k/d they add to the noise variance taken out: 1/mu^2 = 1/mu_obs^2 - k/d. No fitted
    std: no kink, so no upward bias (see `fitted_estimate_law`)."""
    dimension = check_positive_int(dimension, "dimension", minimum=2)
    delta = check_fraction(delta, "delta")
    inserted = check_positive_int(inserted, "inserted", minimum=0)
    mean, _ = _fit(seen_cosines, "seen_cosines")
    mu_obs = mean * math.sqrt(dimension)
    variance = 1.0 / mu_obs**2 - inserted / dimension if mu_obs > 0 else math.inf
    mu = 0.0 if variance == math.inf else (math.inf if variance <= 0 else variance**-0.5)
    epsilon = math.inf if mu == math.inf else epsilon_two_gaussians(0.0, 1.0, mu, 1.0, delta)
    null_std = dimension**-0.5
    seen = int(np.size(seen_cosines))
    return CosineEstimate(epsilon, delta, "final model, equal stds", mean, null_std, 0.0, null_std, seen, 0, dimension)


def _relative_sd(mu: float, canaries: int, dimension: int, pairwise: bool) -> float:
    """Relative sd of the corrected mu_hat: sqrt(sigma^2 / k + Var(eta) (1 + k / (2 d sigma^2))^2)."""
    k, d, variance = canaries, dimension, mu**-2
    spread = 2.0 * (k - 1) / (k * d) * (1.0 + k / (2.0 * d * variance)) ** 2 if pairwise else 0.0
    return math.sqrt(variance / k + spread)


def equal_variance_sd(mu: float, canaries: int, dimension: int, delta: float, pairwise: bool = True) -> float:
    """Sampling sd of `equal_variance_estimate`'s eps (inserted = canaries, all of them seen) on a
    Gaussian mechanism at mu = 1/sigma (delta method); `pairwise`: random directions (False:
    orthonormal ones, no pairwise dots)."""
    return gaussian_mechanism_slope(mu, delta) * mu * _relative_sd(mu, canaries, dimension, pairwise)


def fitted_estimate_law(
    mu: float, canaries: int, dimension: int, delta: float, pairwise: bool = True, nodes: int = 8
) -> tuple[float, float]:
    """(mean, sd) of Andrew et al.'s final-model estimate (`final_model_estimate`, mean and std fitted)
    from `canaries` inserted cosines of a Gaussian mechanism at mu = 1/sigma: the fitted mean (null sd
    units) ~ N(mu_obs, (mu_obs sigma^2 / (sigma^2 + k/d) x `_relative_sd`)^2) and the fitted std ratio
    ~ N(r, r^2 / (2k)), independent, integrated by Gauss-Hermite quadrature, `nodes` points per axis."""
    k, d, variance = canaries, dimension, mu**-2
    mu_obs = (variance + k / d) ** -0.5
    mean_sd = mu_obs * variance * mu_obs**2 * _relative_sd(mu, k, d, pairwise)
    ratio = math.sqrt((variance + (k - 1) / d if pairwise else variance) * mu_obs**2)
    points, weights = np.polynomial.hermite_e.hermegauss(nodes)
    weights = weights / weights.sum()
    values = np.array(
        [
            [
                epsilon_two_gaussians(0.0, 1.0, mu_obs + mean_sd * a, ratio * (1.0 + b / math.sqrt(2.0 * k)), delta)
                for b in points
            ]
            for a in points
        ]
    )
    grid = np.outer(weights, weights)
    mean = float(np.sum(grid * values))
    return mean, float(math.sqrt(max(np.sum(grid * values**2) - mean**2, 0.0)))

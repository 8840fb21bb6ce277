"""Iterative Bayesian update (IBU): the frequencies that maximize the likelihood of the observed
reports, by expectation-maximization (Agrawal & Aggarwal, PODS 2001; ElSalamouny & Palamidessi,
EuroS&P 2020; as multi-freq-ldpy 0.2.5 implements it, Arcolezi et al. 2023).

With the channel A[r, c] = P(report r | category c) and the observed report frequencies y:
    f <- f * A^T (y / (A f)),  starting from the uniform f = 1/k,
until the change between two iterates is below `tolerance` (the stop criterion `stop`: largest
absolute change "max-abs", "mae", "mse" or "max-squared"; the returned iterate is the new one) or
`iterations` updates are done. Each update keeps f >= 0 and, for a channel whose rows and columns
both sum to one (GRR) or a symmetric one, sum f = sum y.

Counting oracles (GRR, OUE and the other support-counting oracles) have a two-level channel: a
report supports its own category w.p. p, another one w.p. q. For GRR the report is one category, so
A = q + (p - q) I is the exact channel and y = counts / n. For unary encodings a report is k bits;
multi-freq-ldpy then runs the same update on the support counts normalized to sum one with the same
two-level matrix, which is what `two_level_ibu` does for every counting oracle. Either way y is a
function of the unbiased estimate: y_c = q + (p - q) f_hat_c (normalized per attribute), so IBU is
post-processing of the released estimate and costs no privacy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpfed.aggregation.base import Aggregator
from ldpfed.aggregation.deviation import DeviationModel
from ldpfed.frequency.base import CountingOracle
from ldpfed.validation import LDPValueError, check_choice, check_positive, check_positive_int

STOP_CRITERIA = ("max-abs", "mae", "mse", "max-squared")  # multi-freq-ldpy: max_abs, mae, mse, max_squared


def _change(new: np.ndarray, old: np.ndarray, stop: str, sizes) -> np.ndarray:
    """The stop criterion over the last axis (`sizes` entries each; padding contributes 0)."""
    difference = np.abs(new - old)
    if stop == "max-abs":
        return difference.max(axis=-1)
    if stop == "max-squared":
        return (difference**2).max(axis=-1)
    if stop == "mae":
        return difference.sum(axis=-1) / sizes
    return (difference**2).sum(axis=-1) / sizes  # mse


def _ratio(observed: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """observed / predicted, 0 where nothing was observed (also where predicted is 0 there)."""
    safe = np.where(observed > 0, predicted, 1.0)
    return np.where(observed > 0, observed / safe, 0.0)


def iterative_bayesian_update(
    observed, channel, *, iterations: int = 10_000, tolerance: float = 1e-12, stop: str = "max-abs"
) -> np.ndarray:
    """IBU of one attribute: `observed` (m,) report frequencies, `channel` (m, k) with
    channel[r, c] = P(report r | category c). Returns the (k,) estimate (module docstring)."""
    observed = np.asarray(observed, dtype=float)
    channel = np.asarray(channel, dtype=float)
    if channel.ndim != 2 or observed.shape != (channel.shape[0],):
        raise LDPValueError(
            f"channel must be (m, k) with observed of shape (m,), got {channel.shape}, {observed.shape}"
        )
    iterations, tolerance, stop = _check_options(iterations, tolerance, stop)
    k = channel.shape[1]
    estimate = np.full(k, 1.0 / k)
    for _ in range(iterations):
        updated = estimate * (channel.T @ _ratio(observed, channel @ estimate))
        if _change(updated, estimate, stop, k) < tolerance:
            return updated
        estimate = updated
    return estimate


def two_level_ibu(
    observed, p, q, categories, *, iterations: int = 10_000, tolerance: float = 1e-12, stop: str = "max-abs"
) -> np.ndarray:
    """IBU of every attribute at once with the channel q + (p - q) I of its (p, q).

    `observed`: the concatenated per-attribute report frequencies (blocks of sizes `categories`);
    `p`, `q`: one value per attribute. Each attribute stops on its own criterion, as if run alone;
    the loop is over iterations only (A f = q sum f + (p - q) f needs no k x k matrix).
    """
    iterations, tolerance, stop = _check_options(iterations, tolerance, stop)
    sizes = np.asarray(categories, dtype=np.int64)
    blocks, width = sizes.size, int(sizes.max())
    valid = np.arange(width)[None, :] < sizes[:, None]
    y = np.zeros((blocks, width))
    y[valid] = np.asarray(observed, dtype=float)
    p = np.asarray(p, dtype=float)[:, None]
    q = np.asarray(q, dtype=float)[:, None]
    estimate = np.where(valid, 1.0 / sizes[:, None], 0.0)
    running = np.ones(blocks, dtype=bool)
    for _ in range(iterations):
        predicted = q * estimate.sum(axis=1, keepdims=True) + (p - q) * estimate
        ratio = np.where(valid, _ratio(y, predicted), 0.0)
        updated = estimate * (q * ratio.sum(axis=1, keepdims=True) + (p - q) * ratio)
        converged = _change(updated, estimate, stop, sizes) < tolerance
        estimate = np.where(running[:, None], updated, estimate)
        running &= ~converged
        if not running.any():
            break
    return estimate[valid]


def _check_options(iterations, tolerance, stop) -> tuple[int, float, str]:
    return (
        check_positive_int(iterations, "iterations"),
        check_positive(tolerance, "tolerance"),
        check_choice(stop, STOP_CRITERIA, "stop"),
    )


def channel_of(oracle: CountingOracle) -> tuple[float, float]:
    """(p, q) of a counting oracle: P(its report supports the true category), P(supports another)."""
    if not isinstance(oracle, CountingOracle):
        raise LDPValueError(f"IBU needs a support-counting oracle (p, q), got {type(oracle).__name__}")
    return float(oracle.p), float(oracle.q)


def observed_frequencies(f_hat, p, q, categories) -> np.ndarray:
    """The per-attribute report frequencies behind unbiased estimates: q + (p - q) f_hat, clipped at
    0 (rounding) and normalized to sum one per attribute."""
    sizes = np.asarray(categories, dtype=np.int64)
    scale = np.repeat(np.asarray(p, dtype=float) - np.asarray(q, dtype=float), sizes)
    support = np.maximum(np.repeat(np.asarray(q, dtype=float), sizes) + scale * np.asarray(f_hat, dtype=float), 0.0)
    totals = np.add.reduceat(support, np.concatenate([[0], np.cumsum(sizes)[:-1]]))
    return support / np.repeat(np.where(totals > 0, totals, 1.0), sizes)


@dataclass(frozen=True)
class IterativeBayesianUpdate(Aggregator):
    """IBU per attribute from the plain estimate (frequency task only). `categories`: the attributes'
    sizes (empty: one attribute); `channel`: each attribute's (p, q), from `channel_of(oracle)`; the
    frequency server gives both from its oracles (`AttributeOracles.categories`, `.channels`)."""

    name: ClassVar[str] = "ibu"
    tasks: ClassVar[tuple[str, ...]] = ("frequency",)
    uses_deviation: ClassVar[bool] = False
    elementwise: ClassVar[bool] = False
    needs_channel: ClassVar[bool] = True
    categories: tuple[int, ...] = ()
    channel: tuple[tuple[float, float], ...] = ()
    iterations: int = 10_000
    tolerance: float = 1e-12
    stop: str = "max-abs"

    def __post_init__(self) -> None:
        iterations, tolerance, stop = _check_options(self.iterations, self.tolerance, self.stop)
        object.__setattr__(self, "iterations", iterations)
        object.__setattr__(self, "tolerance", tolerance)
        object.__setattr__(self, "stop", stop)
        channel = tuple((float(p), float(q)) for p, q in self.channel)
        if any(not 0.0 <= q < p <= 1.0 for p, q in channel):
            raise LDPValueError(f"ibu's channel is (p, q) per attribute with 0 <= q < p <= 1, got {self.channel}")
        if self.categories and channel and len(channel) != len(self.categories):
            raise LDPValueError(
                f"ibu needs one channel (p, q) per attribute: {len(self.categories)} attributes, {len(channel)} given"
            )
        object.__setattr__(self, "channel", channel)

    def _recalibrate(self, theta_hat: np.ndarray, deviation: DeviationModel, halfwidth: float):
        blocks = self.categories or (theta_hat.size,)
        if len(self.channel) != len(blocks):
            raise LDPValueError(
                f"ibu needs each attribute's channel (p, q) ({len(blocks)} attributes, got {len(self.channel)}); "
                "the frequency server gives it from its counting oracles (ldpfed.aggregation.ibu.channel_of)"
            )
        p, q = np.asarray(self.channel, dtype=float).T
        observed = observed_frequencies(theta_hat, p, q, blocks)
        options = {"iterations": self.iterations, "tolerance": self.tolerance, "stop": self.stop}
        return two_level_ibu(observed, p, q, blocks, **options), {}

    def options(self) -> dict:
        return {"iterations": self.iterations, "tolerance": self.tolerance, "stop": self.stop}

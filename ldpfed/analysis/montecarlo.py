"""The empirical counterpart of the predictor: run the actual mechanism with actual m-of-d
sampling many times and record each dimension's deviation theta_hat_j - theta_bar_j.

Used to check predictions (tests, scripts/predict_vs_montecarlo.py) and as the baseline the
benchmark times prediction against. Each repetition draws from its own stream,
SeedSequence(seed).spawn(repetitions), so any repetition can be reproduced on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldpfed.mechanisms.base import Mechanism
from ldpfed.mechanisms.multidim import mean_estimate, perturb_tuples, summarize
from ldpfed.validation import check_positive_int


@dataclass(frozen=True, eq=False)
class MonteCarloDeviations:
    """deviations[k, j] = theta_hat_j - theta_bar_j in repetition k; counts[k, j] = r_j there."""

    deviations: np.ndarray
    counts: np.ndarray

    @property
    def repetitions(self) -> int:
        return self.deviations.shape[0]

    def squared_error_per_repetition(self) -> np.ndarray:
        """(1/d) sum_j (theta_hat_j - theta_bar_j)^2 for each repetition (i.i.d. across repetitions)."""
        return np.mean(self.deviations**2, axis=1)

    @property
    def mse(self) -> float:
        return float(np.mean(self.squared_error_per_repetition()))

    @property
    def mse_standard_error(self) -> float:
        """Standard error of `mse`, from the spread of the i.i.d. per-repetition errors."""
        per_repetition = self.squared_error_per_repetition()
        return float(np.std(per_repetition, ddof=1) / np.sqrt(per_repetition.size))


def simulate_deviations(
    values: np.ndarray,
    mechanism: Mechanism,
    report_dims: int,
    repetitions: int,
    seed: int | np.random.SeedSequence,
    *,
    on_repetition: Callable[[], None] | None = None,
) -> MonteCarloDeviations:
    """Deviations of the thesis estimator (mean of the r_j reports) from the true column means.

    `mechanism` is the per-value randomizer (budget eps/m: `ldpfed.mechanisms.multidim.per_value_mechanism`).
    """
    repetitions = check_positive_int(repetitions, "repetitions")
    truth = np.mean(values, axis=0)
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    deviations = np.empty((repetitions, truth.size))
    counts = np.empty((repetitions, truth.size))
    for k, stream in enumerate(root.spawn(repetitions)):
        mask, reports = perturb_tuples(values, mechanism, report_dims, np.random.default_rng(stream))
        sums = summarize(mask, reports)
        deviations[k] = mean_estimate(sums) - truth
        counts[k] = sums.count
        if on_repetition is not None:
            on_repetition()
    return MonteCarloDeviations(deviations, counts)

"""HDR4ME* against each comparator, paired by repetition: the verdicts of the results pages
(scripts/thesis_recalibration.py, scripts/frequency_results.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import t as student_t


def paired_verdicts(runs: pd.DataFrame, keys: list[str], comparators: tuple[str, ...]) -> pd.DataFrame:
    """Per cell (`keys`), HDR4ME*'s MSE minus each comparator's, paired over the repetitions: the mean
    difference, its 95% Student-t half-width (infinite with one repetition) and the verdict, beats
    (the interval lies below 0), loses (above 0) or ties. `runs`: one row per (cell, repeat,
    aggregator) with its `mse`."""
    wide = runs.pivot_table(index=keys + ["repeat"], columns="aggregator", values="mse").reset_index()
    rows = []
    for cell, group in wide.groupby(keys, sort=False):
        for other in comparators:
            difference = (group["hdr4me"] - group[other]).to_numpy()
            count = difference.size
            half_width = (
                student_t.ppf(0.975, count - 1) * difference.std(ddof=1) / np.sqrt(count) if count > 1 else np.inf
            )
            mean_difference = difference.mean()
            verdict = "beats" if mean_difference < -half_width else "loses" if mean_difference > half_width else "ties"
            rows.append(
                {
                    **dict(zip(keys, cell)),
                    "versus": other,
                    "hdr4me_mse": group["hdr4me"].mean(),
                    "other_mse": group[other].mean(),
                    "ratio": group["hdr4me"].mean() / group[other].mean(),
                    "difference": mean_difference,
                    "half_width_95": half_width,
                    "verdict": verdict,
                }
            )
    return pd.DataFrame(rows)

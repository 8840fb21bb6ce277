"""How a partition spreads the labels: per-client label counts, as a table and a plot.

`label_counts(labels, parts)` is flwr-datasets' `metrics.compute_counts` for ldpfed's index arrays:
one row per client (partition id), one column per class, every class present in the data a column
(zero where a client has none). `label_count_files(counts)` gives the files a run writes beside
its results (`OutputDir.write`): `label_counts.csv` in long form (`partition_id`, `label`,
`count`: one row per client and class, so its columns do not depend on the data) and
`label_counts.png` (a stacked bar per client).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ldpfed.validation import LDPValueError

if TYPE_CHECKING:
    import pandas as pd

COUNTS_CSV, COUNTS_PNG = "label_counts.csv", "label_counts.png"
INDEX = "partition_id"


def label_counts(labels: np.ndarray, parts: list[np.ndarray], classes=None) -> pd.DataFrame:
    """(clients x classes) int64 counts of each client's labels; `classes` defaults to the data's."""
    import pandas as pd

    labels = np.asarray(labels)
    classes = np.unique(labels) if classes is None else np.asarray(classes)
    sizes = np.array([np.size(part) for part in parts], dtype=np.int64)
    held = labels[np.concatenate(parts).astype(np.int64)] if sizes.sum() else labels[:0]
    codes = np.searchsorted(classes, held)
    if held.size and (np.any(codes >= classes.size) or np.any(classes[np.minimum(codes, classes.size - 1)] != held)):
        raise LDPValueError("label_counts: a client holds a label outside `classes`")
    owner = np.repeat(np.arange(len(parts)), sizes)
    flat = np.bincount(owner * classes.size + codes, minlength=len(parts) * classes.size)
    frame = pd.DataFrame(flat.reshape(len(parts), classes.size), columns=classes.tolist())
    frame.index.name = INDEX
    return frame


def counts_figure(counts: pd.DataFrame, title: str = "label counts per client"):
    """A stacked bar per client, one colour per class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clients = counts.shape[0]
    figure, axis = plt.subplots(figsize=(min(14.0, max(6.0, 0.25 * clients + 2)), 4.0))
    bottom = np.zeros(clients)
    positions = counts.index.to_numpy()
    colours = plt.get_cmap("tab10" if counts.shape[1] <= 10 else "tab20")
    for number, cls in enumerate(counts.columns):  # loop over classes
        values = counts[cls].to_numpy()
        axis.bar(positions, values, bottom=bottom, width=0.9, color=colours(number % colours.N), label=str(cls))
        bottom += values
    axis.set_xlabel("client (partition id)")
    axis.set_ylabel("samples")
    axis.set_title(title)
    if counts.shape[1] <= 20:
        axis.legend(title="class", fontsize="small", ncol=2, bbox_to_anchor=(1.01, 1), loc="upper left")
    return figure


def label_count_files(counts: pd.DataFrame, title: str = "label counts per client") -> dict[str, object]:
    """{file name: content} for `OutputDir.write`: the counts as CSV and their plot."""
    table = counts.rename_axis(columns="label").stack().rename("count").reset_index()
    return {COUNTS_CSV: table, COUNTS_PNG: counts_figure(counts, title)}

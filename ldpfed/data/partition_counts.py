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

from ldpfed.outputs import FIXED_LAYOUT
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
    """Each client's counts stacked in one column, one colour per class (a legend up to 20 classes).

    One filled step patch per class, from the classes below it up to its own top: the figure holds
    `classes` artists whatever the number of clients, where a bar per client and class held
    clients x classes (10^4 clients, 10 classes: 10^5 patches, each built and drawn alone; minutes).
    Up to `GAPS_UP_TO` clients the bars stand apart (width 0.9); beyond `COLUMNS` clients, more
    than the axis has pixels, each column is the mean of that many consecutive clients (the x
    label says so), so drawing costs the same at 10^4 clients as at 10^6. A bare Figure on the Agg
    canvas (no pyplot, nothing registered globally), laid out from its legend's measured width and
    saved as laid out (`FIXED_LAYOUT`: no tight bounding box's extra draw)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import StepPatch
    from matplotlib.ticker import MaxNLocator

    order = np.argsort(counts.index.to_numpy(), kind="stable")
    positions = counts.index.to_numpy()[order].astype(float)
    clients, classes = counts.shape
    edges, values, group = _columns(positions, counts.to_numpy(dtype=float)[order])
    width = min(14.0, max(6.0, 0.25 * clients + 2))
    figure = Figure(figsize=(width, 4.0))
    setattr(figure, FIXED_LAYOUT, True)
    canvas = FigureCanvasAgg(figure)
    axis = figure.add_subplot()
    gaps = edges.size > values.shape[0] + 1  # [left, right] per bar: a gap step between bars
    bottom = np.zeros(values.shape[0])
    colours = matplotlib.colormaps["tab10" if classes <= 10 else "tab20"]
    for number, label in enumerate(counts.columns if clients else ()):  # loop over classes: one artist each
        top = bottom + values[:, number]
        steps, baseline = (_with_gaps(top, bottom), _with_gaps(bottom, bottom)) if gaps else (top, bottom)
        patch = StepPatch(steps, edges, baseline=baseline, fill=True, linewidth=0, label=str(label))
        patch.set_color(colours(number % colours.N))
        axis.add_artist(patch)  # not add_patch: its data limits walk the path in Python; set below
        bottom = top
    if clients:
        axis.set_xlim(edges[0] - 0.1 * group, edges[-1] + 0.1 * group)
    axis.set_ylim(0, max(1.0, float(bottom.max(initial=0.0))) * 1.05)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # partition ids are whole numbers
    axis.set_xlabel("client (partition id)" + (f"; each column the mean of {group} clients" if group > 1 else ""))
    axis.set_ylabel("samples")
    axis.set_title(title)
    right = 0.15  # inches right of the axes: with the legend's width when there is one
    if clients and 0 < classes <= LEGEND_CLASSES:
        legend = figure.legend(title="class", fontsize="small", ncol=2, loc="upper right", bbox_to_anchor=(1, 0.9))
        right += legend.get_window_extent(canvas.get_renderer()).width / figure.dpi
    figure.subplots_adjust(left=0.75 / width, right=1 - right / width, bottom=0.14, top=0.9)
    return figure


GAPS_UP_TO = 300  # up to this many clients a bar is 0.9 wide, a gap 0.1 (at least ~0.5 px at 14 in)
COLUMNS = 1000  # at most this many columns (~1,400 px of axis at 14 in and 120 dpi)
LEGEND_CLASSES = 20  # up to this many classes the figure has a legend (tab20's colours)


def _columns(positions: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(edges, per-column counts, clients per column) of the figure's columns from the clients'
    sorted positions and (clients, classes) counts: a bar per client with gaps ([left, right] per
    bar), contiguous bars, or up to `COLUMNS` columns of the mean of `group` consecutive clients."""
    clients = positions.size
    if clients <= GAPS_UP_TO:
        return np.stack([positions - 0.45, positions + 0.45], axis=1).ravel(), values, 1
    group = -(-clients // COLUMNS)
    starts = np.arange(0, clients, group)
    if group > 1:
        sizes = np.diff(np.append(starts, clients))
        values = np.add.reduceat(values, starts, axis=0) / sizes[:, None]
    middles = (positions[starts[1:] - 1] + positions[starts[1:]]) / 2  # between a column's last client and the next
    return np.concatenate([[positions[0] - 0.5], middles, [positions[-1] + 0.5]]), values, group


def _with_gaps(bars: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """The steps' heights: each client's bar, then the gap after it, [b0, g0, b1, g1, ..., b_n-1]
    (a gap's top and baseline both its client's bottom: an empty step)."""
    steps = np.empty(max(2 * bars.size - 1, 0))
    steps[0::2], steps[1::2] = bars, gaps[:-1]
    return steps


def label_count_files(
    counts: pd.DataFrame, title: str = "label counts per client", plot: bool = True
) -> dict[str, object]:
    """{file name: content} for `OutputDir.write`: the counts as CSV and, with `plot`, their figure."""
    table = counts.rename_axis(columns="label").stack().rename("count").reset_index()
    return {COUNTS_CSV: table, **({COUNTS_PNG: counts_figure(counts, title)} if plot else {})}

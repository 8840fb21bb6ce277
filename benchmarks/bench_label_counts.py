"""The label-counts figure (`ldpfed.data.partition_counts.counts_figure`) against the bar chart it
replaced (a bar per client and class through pyplot: clients x classes Rectangle patches, saved
with a tight bounding box), in CPU seconds measured in one run: building the figure and writing
label_counts.png (`ldpfed.outputs.write_content`), each the median of `--repeats` (one above 1,000 clients for
the bar chart), after a warm-up on a small figure (matplotlib's import and first uses paid there).

    python benchmarks/bench_label_counts.py                              # 200 and 10,000 clients
    python benchmarks/bench_label_counts.py --clients 200,1000,100000 --bars-up-to 1000

The bar chart takes minutes at 10^4 clients; `--bars-up-to` sets the largest federation it is
drawn for (the others print only the new figure's times). Measured 2026-11-29 on the shared 2-core
machine (load ~5), 10 classes, build + save CPU: 200 clients 0.27-0.31 s against 3.1-3.6 s
(11.4-11.6x), 1,000 clients 0.25 s against 17.4 s (71x), 10,000 clients 0.17 s against 138 s
(800x), 100,000 clients 0.25 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ldpfed.data.partition_counts import counts_figure, label_counts  # noqa: E402
from ldpfed.outputs import write_content  # noqa: E402


def bars_figure(counts, title: str = "label counts per client"):
    """The figure before: a stacked bar per client, one `axis.bar` call per class, via pyplot."""
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


def timed(make, counts, path: Path, repeats: int) -> tuple[float, float]:
    """Median CPU seconds of building the figure and of writing it."""
    build, save = [], []
    for _ in range(repeats):
        start = time.process_time()
        figure = make(counts)
        built = time.process_time()
        write_content(path, figure)
        build.append(built - start)
        save.append(time.process_time() - built)
    return statistics.median(build), statistics.median(save)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="200,10000")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--samples", type=int, default=50, help="samples per client")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bars-up-to", type=int, default=10_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as out:
        warm = label_counts(np.arange(4) % 2, [np.arange(2), np.arange(2, 4)])
        for make in (counts_figure, bars_figure):  # imports and first uses (fonts) outside the timings
            timed(make, warm, Path(out) / "warm.png", 1)
        for clients in (int(value) for value in args.clients.split(",")):
            labels = rng.integers(0, args.classes, args.samples * clients)
            counts = label_counts(labels, np.array_split(rng.permutation(labels.size), clients))
            build, save = timed(counts_figure, counts, Path(out) / "new.png", args.repeats)
            row = f"clients={clients} classes={args.classes} new_build_cpu_s={build:.3f} new_save_cpu_s={save:.3f}"
            if clients <= args.bars_up_to:
                repeats = args.repeats if clients <= 1000 else 1
                old_build, old_save = timed(bars_figure, counts, Path(out) / "old.png", repeats)
                row += f" bars_build_cpu_s={old_build:.3f} bars_save_cpu_s={old_save:.3f}"
                row += f" bars_over_new={(old_build + old_save) / (build + save):.1f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()

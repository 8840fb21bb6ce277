"""The thesis' recalibration comparison (its Figure 4.6 grid), scaled to this machine.

    python scripts/thesis_recalibration.py [--scale 0.5] [--repeats 4] [--seed 2024]
        [--out results/recalibration] [--doc docs/results/recalibration.md]

Writes every file to --out (runs.csv: every repetition), and the page --doc with its small files
(summary.csv, verdicts.csv, config.json, the plots) beside it in <doc stem>/, linked relatively.
Before overwriting, the page's previous <doc stem>/summary.csv is read: cells whose MSE changed by
more than CHANGE_THRESHOLD are listed on the new page with both values.

Grid (recalibration.md, "What to measure"; thesis Figure 4.6): data sets Gaussian 100000 x 100,
Poisson 150000 x 300, Uniform 120000 x 500 (users x dims); every user reports every dimension
(m = d); eps in {0.1, 0.2, 0.4, 0.8, 1.6, 3.2} for Laplace and Piecewise and
{0.1, 10, 100, 500, 1000, 5000} for Square wave (raw estimator, the thesis' setting, and the
debiased one). Aggregators mean, L1, L2, HDR4ME*, James-Stein with the plug-in deviation model,
alpha = 0.95, L2 reference = the domain bound (the ldpfed defaults; none tuned here).

`--scale` multiplies every n (d is kept): the noise sd of each dimension grows by 1/sqrt(scale).
Verdicts compare HDR4ME* with each other aggregator per (data set, mechanism, eps) cell by a paired
t-test over repetitions (the aggregators share each repetition's reports): "beats"/"loses" when the
95% interval of the mean MSE difference excludes 0, "ties" otherwise.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

import ldpfed.aggregation as aggregation
import ldpfed.mechanisms as mechanisms
from ldpfed.cli.common import progress_bar
from ldpfed.cli.mean import mse_figure
from ldpfed.data import generate
from ldpfed.experiments.mean import ExperimentResult, MechanismChoice, run_mean_experiment
from ldpfed.outputs import save_figure, write_json, write_table, write_text
from scripts.arguments import script_parser
from scripts.provenance import run_stamp
from scripts.verdicts import paired_verdicts

DATA_SETS = (("gaussian", 100_000, 100), ("poisson", 150_000, 300), ("uniform", 120_000, 500))
SMALL_EPS = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
SQUARE_WAVE_EPS = (0.1, 10.0, 100.0, 500.0, 1000.0, 5000.0)
MECHANISM_GROUPS = (
    ((MechanismChoice("laplace"), MechanismChoice("piecewise")), SMALL_EPS),
    (
        (
            MechanismChoice("square-wave", {"estimator": "raw"}),
            MechanismChoice("square-wave", {"estimator": "debiased"}),
        ),
        SQUARE_WAVE_EPS,
    ),
)
COMPARATORS = ("mean", "l1", "l2", "james-stein")
CHANGE_THRESHOLD = 0.01  # relative MSE change listed against the previous page
VERDICT_KEYS = ["data", "mechanism", "options", "epsilon"]  # a cell of the grid
CELL_KEYS = [*VERDICT_KEYS, "aggregator"]
CHANGE_NOTE = (
    "Regenerated after the rounding dither moved to one raw 64-bit word (docs/decisions.md, "
    'Randomizers and floating-point safety, "Rounding dither from one raw word"), which changes '
    "every sampler's random stream (and the rounding weights by at most 2^-32), not the laws the "
    "moments state. Every draw is new, so MSEs move within their sampling error and a verdict can "
    "flip only where it was a tie or near one. (Earlier versions: the randomizers moved to their "
    "floating-point-safe samplers; this page moved to `ldpfed simulate`'s seed scheme; the plug-in "
    "bias of Square wave's raw estimator was corrected.)"
)


def changed_cells(summary: pd.DataFrame, previous: pd.DataFrame | None) -> pd.DataFrame:
    """Every cell (data, mechanism, options, eps, aggregator) found in `previous` (an earlier
    summary.csv) with both mean MSEs and the relative change; the page lists those beyond
    CHANGE_THRESHOLD."""
    columns = CELL_KEYS + ["previous_mse", "mse", "relative_change"]
    if previous is None:
        return pd.DataFrame(columns=columns)
    old = previous.assign(options=previous["options"].fillna(""))[CELL_KEYS + ["mse"]]
    new = summary.assign(options=summary["options"].fillna(""))[CELL_KEYS + ["mse"]]
    both = new.merge(old.rename(columns={"mse": "previous_mse"}), on=CELL_KEYS, how="inner")
    both["relative_change"] = both["mse"] / both["previous_mse"] - 1.0
    return both[columns]


def change_section(changes: pd.DataFrame | None) -> list[str]:
    """The page's "What changed" lines: CHANGE_NOTE and the cells that moved beyond CHANGE_THRESHOLD
    (none when nothing moved or there was no previous page)."""
    if changes is None:
        return []
    moved = changes[changes["relative_change"].abs() > CHANGE_THRESHOLD]
    if not len(moved):
        return []
    others = changes["relative_change"].abs().drop(moved.index)
    lines = [
        "## What changed since the previous version of this page",
        "",
        CHANGE_NOTE,
        "",
        f"Cells whose mean MSE moved by more than {CHANGE_THRESHOLD:.0%} ({len(moved)} of "
        f"{len(changes)} compared; the largest relative change among the others is "
        f"{others.max() if len(others) else 0.0:.2g}):",
        "",
        "| data | mechanism | eps | aggregator | previous MSE | MSE now | change |",
        "|---|---|---|---|---|---|---|",
    ]
    for row, label in zip(moved.itertuples(), _labels(moved)):
        lines.append(
            f"| {row.data} | {label} | {row.epsilon:g} | {row.aggregator} | {row.previous_mse:.4g} | "
            f"{row.mse:.4g} | {row.relative_change:+.1%} |"
        )
    return lines + [""]


def markdown_report(
    summary: pd.DataFrame,
    verdicts: pd.DataFrame,
    config: dict,
    missing: list[str],
    seconds: float,
    changes: pd.DataFrame | None = None,
    files: str = "recalibration",
) -> str:
    lines = [
        "# HDR4ME* against mean, L1, L2 and James–Stein (thesis Figure 4.6 grid)",
        "",
        "Generated by `python scripts/thesis_recalibration.py "
        f"--scale {config['scale']:g} --repeats {config['repeats']} --seed {config['seed']}` "
        f"in {seconds / 60:.1f} minutes on a shared 2-core machine. {run_stamp()} Raw numbers: "
        f"[`summary.csv`]({files}/summary.csv) (per cell), [`verdicts.csv`]({files}/verdicts.csv), "
        f"[`config.json`]({files}/config.json) (copied from `{config['out']}/`; the script also writes "
        "`runs.csv`, every repetition); plots below.",
        "",
        "## Settings",
        "",
        "| data | users n (thesis) | users n (here) | dims d = m |",
        "|---|---|---|---|",
    ]
    for name, users, dims in DATA_SETS:
        lines.append(f"| {name} | {users} | {config['users'][name]} | {dims} |")
    lines += [
        "",
        f"n is scaled by {config['scale']:g} (d kept), so each dimension's noise sd is "
        f"{1 / np.sqrt(config['scale']):.2f}x the thesis'. Every user reports every dimension with eps/d per value. "
        "Plug-in deviation model (sample variance of the reports / r_j; the mechanism's bias b(t) at the "
        "inverted estimate t = (theta_hat - b0)/(1 + b1)), "
        f"alpha = {config['alpha']}, L2 reference = {config['l2_reference']} (domain bound), "
        f"{config['repeats']} repetitions per cell, all aggregators applied to the same reports.",
        "",
        "Verdict per cell: paired t-test over repetitions of MSE(HDR4ME*) − MSE(other); beats/loses when the "
        "95% interval excludes 0, ties otherwise. Ratio = MSE(HDR4ME*) / MSE(other) (below 1: HDR4ME* better).",
        "",
    ]
    if missing:
        lines += [f"Not run (mechanism not available): {', '.join(missing)}.", ""]
    lines += change_section(changes)

    lines += [
        "## Overall",
        "",
        "| HDR4ME* vs | beats | ties | loses | median ratio | min ratio | max ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for other in COMPARATORS:
        part = verdicts[verdicts["versus"] == other]
        counts = part["verdict"].value_counts()
        lines.append(
            f"| {other} | {counts.get('beats', 0)} | {counts.get('ties', 0)} | {counts.get('loses', 0)} | "
            f"{part['ratio'].median():.3g} | {part['ratio'].min():.3g} | {part['ratio'].max():.3g} |"
        )
    lines += [
        "",
        "By mechanism (beats / ties / loses):",
        "",
        "| mechanism | " + " | ".join(COMPARATORS) + " |",
        "|---" * (len(COMPARATORS) + 1) + "|",
    ]
    for label, part in verdicts.assign(label=_labels(verdicts)).groupby("label", sort=False):
        cells = []
        for other in COMPARATORS:
            counts = part[part["versus"] == other]["verdict"].value_counts()
            cells.append(f"{counts.get('beats', 0)} / {counts.get('ties', 0)} / {counts.get('loses', 0)}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    best = summary.loc[summary.groupby(["data", "mechanism", "options", "epsilon"], sort=False)["mse"].idxmin()]
    lines += [
        "",
        "Best aggregator per cell (count): "
        + ", ".join(f"{name} {count}" for name, count in best["aggregator"].value_counts().items())
        + ".",
        "",
    ]

    lines += [
        "## Per cell",
        "",
        "MSE averaged over repetitions; HDR4ME* ratio to each comparator with its verdict "
        "(b = beats, t = ties, l = loses).",
        "",
    ]
    aggregators = aggregation.available("mean")
    for (data_name, label), part in summary.assign(label=_labels(summary)).groupby(["data", "label"], sort=False):
        lines += [
            f"### {data_name}, {label}",
            "",
            "| eps | "
            + " | ".join(aggregators)
            + " | predicted mean | "
            + " | ".join(f"hdr4me/{o}" for o in COMPARATORS)
            + " |",
            "|---" * (len(aggregators) + 2 + len(COMPARATORS)) + "|",
        ]
        cell_verdicts = verdicts[(verdicts["data"] == data_name) & (_labels(verdicts) == label)]
        for epsilon, rows in part.groupby("epsilon", sort=True):
            mse = dict(zip(rows["aggregator"], rows["mse"]))
            predicted = rows.loc[rows["aggregator"] == "mean", "predicted_mse"].iloc[0]
            ratios = []
            for other in COMPARATORS:
                row = cell_verdicts[(cell_verdicts["epsilon"] == epsilon) & (cell_verdicts["versus"] == other)].iloc[0]
                ratios.append(f"{row['ratio']:.3g} {row['verdict'][0]}")
            lines.append(
                f"| {epsilon:g} | "
                + " | ".join(f"{mse[a]:.4g}" for a in aggregators)
                + f" | {predicted:.4g} | "
                + " | ".join(ratios)
                + " |"
            )
        lines.append("")
    lines += ["", "## Plots", ""] + [f"![{name}]({files}/mse_{name}.png)" for name, _, _ in DATA_SETS]
    return "\n".join(lines) + "\n"


def _labels(frame: pd.DataFrame) -> pd.Series:
    return pd.Series(
        [f"{m}[{o}]" if isinstance(o, str) and o else m for m, o in zip(frame["mechanism"], frame["options"])],
        index=frame.index,
    )


def main() -> None:
    parser = script_parser(
        __doc__, repeats=4, seed=2024, out=Path("results/recalibration"), doc=Path("docs/results/recalibration.md")
    )
    parser.add_argument("--scale", type=float, default=0.5, help="Fraction of the thesis' n (d kept).")
    args = parser.parse_args()
    if not (0 < args.scale <= 1):
        parser.error("--scale must be in (0, 1]")

    available = set(mechanisms.available())
    groups = [(tuple(c for c in choices if c.name in available), eps) for choices, eps in MECHANISM_GROUPS]
    missing = sorted({c.label for choices, _ in MECHANISM_GROUPS for c in choices if c.name not in available})
    users = {name: max(2, round(n * args.scale)) for name, n, _ in DATA_SETS}
    total = sum(len(choices) * len(eps) for choices, eps in groups) * len(DATA_SETS) * args.repeats

    started = time.perf_counter()
    results: list[tuple[str, ExperimentResult]] = []
    with progress_bar("{task.description}") as bar:
        task = bar.add_task("thesis grid", total=total)
        for index, (name, _, dims) in enumerate(DATA_SETS):
            data = generate(name, users[name], dims, np.random.default_rng([args.seed, index]))
            for choices, eps in groups:
                if not choices:
                    continue
                bar.update(task, description=f"{name} {'/'.join(c.label for c in choices)}")
                result = run_mean_experiment(
                    data,
                    list(choices),
                    list(eps),
                    aggregators=aggregation.available("mean"),
                    repeats=args.repeats,
                    seed=args.seed,
                    progress=lambda: bar.advance(task),
                )
                results.append((name, result))
            del data
    seconds = time.perf_counter() - started

    runs = pd.concat([r.runs.assign(data=name) for name, r in results], ignore_index=True)
    summary = pd.concat([r.summary.assign(data=name) for name, r in results], ignore_index=True)
    verdicts = paired_verdicts(runs, VERDICT_KEYS, COMPARATORS)
    config = {
        "scale": args.scale,
        "repeats": args.repeats,
        "seed": args.seed,
        "out": str(args.out),
        "users": users,
        "dims": {name: d for name, _, d in DATA_SETS},
        "alpha": aggregation.DEFAULT_ALPHA,
        "l2_reference": "bound",
        "deviation": "plug-in",
        "epsilons": {"laplace/piecewise": list(SMALL_EPS), "square-wave": list(SQUARE_WAVE_EPS)},
        "missing": missing,
        "seconds": seconds,
    }
    files = args.doc.parent / args.doc.stem  # the page's own copies, linked relatively
    previous_path = files / "summary.csv"
    previous = pd.read_csv(previous_path) if previous_path.is_file() else None
    changes = changed_cells(summary, previous)
    write_table(args.out / "runs.csv", runs)
    for folder in (args.out, files):
        write_table(folder / "summary.csv", summary)
        write_table(folder / "verdicts.csv", verdicts)
        write_json(folder / "config.json", config)
    for name, _, _ in DATA_SETS:
        parts = [r for data_name, r in results if data_name == name]
        combined = ExperimentResult(pd.concat([r.runs for r in parts]), pd.concat([r.summary for r in parts]), {})
        figure = save_figure(args.out / f"mse_{name}.png", mse_figure(combined))
        shutil.copyfile(figure, files / f"mse_{name}.png")
    write_text(args.doc, markdown_report(summary, verdicts, config, missing, seconds, changes, args.doc.stem))
    print(f"wrote {args.out}/ and {args.doc} in {seconds:.0f} s")


if __name__ == "__main__":
    main()

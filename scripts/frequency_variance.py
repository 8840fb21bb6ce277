"""Frequency oracles: measured per-count variance against Wang et al.'s closed forms, on their two grids.

    python scripts/frequency_variance.py [--users 100000] [--seed 2026] [--pooled 1024]
        [--oracles grr,oue,...] [--out docs/results/frequency_oracles] [--doc docs/results/frequency_oracles.md]
        [--resume]  (keep the cells already in OUT/variance.csv)  [--skip-crossover]
        [--page-only]  (write the page from the tables in OUT, e.g. merged from runs of parts of the grid)

Wang, Blocki, Li and Jha (USENIX Security 2017) compare the variance of frequency oracles over
d = 2^2 .. 2^14 categories at eps = 4 and over eps = 0.5 .. 5 at d = 2^10, n = 10^5 users. Here every
oracle of ldpfed's registry (histogram encoding on Laplace is SHE) is run on users spread evenly over
the first half of the d categories, so that
- the empty half (f = 0) measures Wang et al.'s closed form (their per-oracle formulas drop the f
  term; for Hadamard response and subset selection it is Theorem 2 with the mechanism's nominal p, q;
  HCMS and CMS have no closed form there and are compared with their exact variances);
- the populated half (f = 2/d) measures the exact variance (Theorem 2 with the realized p, q and f;
  `FrequencyOracle.variance`).
Per (oracle, eps, d): R = ceil(pooled / (d/2)) repetitions of n users (fresh noise, and for HCMS
and CMS fresh public hash functions), each estimated chunk by chunk (`estimate_in_chunks`).

Standard error (one half, m = R d/2 squared errors, true frequencies known): the errors have
variance V in the half and correlation |rho| <= 1/(d-1) between categories (fixed-size reports: GRR,
subset selection; 0 for the independent-entry ones), so the mean squared error has
SE = V sqrt((kurtosis - 1)(1 + 1/(d-1)) / m): Var(e^2) = E e^4 - V^2, with the kurtosis E e^4 / (E e^2)^2
measured in the cell (`standard_error`; (d-1) pairs of correlation 1/(d-1) add at most 1/(d-1) to the
variance of a row's sum of squares). Sums of n = 10^5 independent users are nearly Gaussian (kurtosis
3: SE = V sqrt(2 (1 + 1/(d-1)) / m), normal theory); a sketch's errors add the public hash draw's
collisions, a few large jumps at small d (CMS at d = 4 and 8: kurtosis 3.3-3.5 measured), for which normal theory
understates the SE. A cell passes when |measured - expected| <= 3 SE. Cells measured before the
kurtosis was recorded (no `*_kurtosis` value) keep normal theory's SE.

`--recheck` reruns the cells with a |z| beyond 3 (`recheck.csv`, shown on the page; variance.csv is
left as measured): with the grid's own seed (the same errors, their z with the SE from their own
kurtosis) and from an independent seed with 16 times the repetitions: a cell whose formula is wrong
stays beyond 3 there, a chance excursion does not.

The GRR/OLH crossover: Wang et al. predict GRR better below d = 3 e^eps + 2; the page finds the
crossing of the measured GRR and OLH curves (log-linear interpolation between grid points) per eps.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

import ldpfed.frequency as frequency
from ldpfed.frequency.base import estimate_in_chunks
from ldpfed.frequency.categorical import takes_hash_seed
from ldpfed.frequency.hashing import OptimizedLocalHashing
from ldpfed.frequency.subset import SubsetSelection
from ldpfed.frequency.thresholding import optimal_threshold
from ldpfed.outputs import save_figure, write_table, write_text
from scripts.arguments import script_parser
from scripts.provenance import run_stamp

ORACLES = ("grr", "oue", "sue", "olh", "blh", "hadamard", "subset-selection", "she", "the", "hcms")
# cms (a row of 1,024 bits per report) is measured with `--oracles cms`: at Wang et al.'s n = 10^5 and
# R = 512 repetitions for small d it draws ~5e10 bits a cell, too long for the default grid
DIMENSIONS = tuple(2**j for j in range(2, 15))  # Wang et al.'s first grid, eps = 4
EPSILONS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0)  # their second grid, d = 2^10
GRID_EPSILON, GRID_DIMENSION = 4.0, 2**10
DENSE = ("oue", "sue", "she", "the", "cms")  # k numbers per report: the costly ones, run last
Z_LIMIT = 3.0


def build(name: str, epsilon: float, d: int, repetition: int) -> frequency.FrequencyOracle:
    """The oracle; HCMS and CMS get fresh public hash functions per repetition (their variance is over
    them)."""
    options = {"seed": repetition} if takes_hash_seed(name) else {}
    return frequency.get(name, epsilon, d, **options)


def closed_form(name: str, epsilon: float, d: int) -> float | None:
    """n Var(f_hat_c) at f_c = 0: Wang et al. 2017's per-oracle closed forms (nominal p and q)."""
    e = math.exp(epsilon)

    def theorem_2(p, q):
        return q * (1 - q) / (p - q) ** 2

    if name == "grr":
        return (e + d - 2) / (e - 1) ** 2
    if name in ("oue", "olh"):
        return 4 * e / (e - 1) ** 2
    if name == "sue":  # basic RAPPOR: e^(eps/2) / (e^(eps/2) - 1)^2
        return math.exp(epsilon / 2) / (math.exp(epsilon / 2) - 1) ** 2
    if name in ("blh", "hadamard"):
        return (e + 1) ** 2 / (e - 1) ** 2
    if name in ("she", "histogram"):
        return 8 / epsilon**2
    if name == "the":
        theta = optimal_threshold(epsilon)
        return theorem_2(1 - 0.5 * math.exp(epsilon * (theta - 1) / 2), 0.5 * math.exp(-epsilon * theta / 2))
    if name == "subset-selection":
        w = SubsetSelection(epsilon, d).omega
        p = w * e / (w * e + d - w)
        return theorem_2(p, (p * (w - 1) + (1 - p) * w) / (d - 1))
    return None


def categories(n: int, d: int) -> np.ndarray:
    """n users spread evenly over the first d/2 categories (the other half is empty)."""
    return np.arange(n, dtype=np.int64) % max(1, d // 2)


def measure(name: str, epsilon: float, d: int, n: int, repetitions: int, seed: int) -> dict:
    """Mean squared error of the empty and of the populated half, over `repetitions` runs."""
    users = categories(n, d)
    truth = np.bincount(users, minlength=d) / n
    squared, fourth = np.zeros(d), np.zeros(d)
    for r in range(repetitions):
        rng = np.random.default_rng(np.random.SeedSequence([seed, r, d, round(epsilon * 1000)]))
        oracle = build(name, epsilon, d, r)
        error = estimate_in_chunks(oracle, users, rng) - truth
        squared += error**2
        fourth += error**4
    squared /= repetitions
    fourth /= repetitions
    exact = oracle.variance(truth, n)
    empty = truth == 0
    form = closed_form(name, epsilon, d)
    inflation = 1.0 + 1.0 / (d - 1)
    row = {"oracle": name, "epsilon": epsilon, "d": d, "n": n, "repetitions": repetitions}
    for label, mask, expected in (
        ("empty", empty, exact[empty].mean() if form is None else form / n),
        ("populated", ~empty, exact[~empty].mean()),
    ):
        m = repetitions * int(mask.sum())
        measured = float(squared[mask].mean())
        kurtosis = float(fourth[mask].mean()) / measured**2
        row |= {
            f"{label}_measured": measured,
            f"{label}_expected": float(expected),
            f"{label}_exact": float(exact[mask].mean()),
            f"{label}_kurtosis": kurtosis,
            f"{label}_z": (measured - expected) / standard_error(expected, kurtosis, m, inflation),
        }
    return row


def standard_error(expected: float, kurtosis: float, m: int, inflation: float) -> float:
    """SE of the mean of m squared errors of variance `expected`: Var(e^2) = E e^4 - V^2 = (kurtosis - 1) V^2
    with the measured kurtosis E e^4 / (E e^2)^2 (2 V^2 only for Gaussian errors, kurtosis 3; a sketch's
    errors mix the client's noise with the public hash draw's collisions and can be heavier-tailed)."""
    return expected * math.sqrt(max(kurtosis - 1.0, 0.0) * inflation / m)


RECHECK_FACTOR, RECHECK_SEED = 16, 7919  # the recheck's repetitions (x the grid's) and its seed offset


def flagged(table: pd.DataFrame) -> pd.DataFrame:
    """The cells with a z-score beyond Z_LIMIT in either half."""
    return table[(table.empty_z.abs() > Z_LIMIT) | (table.populated_z.abs() > Z_LIMIT)]


def recheck(table: pd.DataFrame, n: int, seed: int, done: pd.DataFrame | None = None, log=print) -> pd.DataFrame:
    """The flagged cells of `table`, each rerun from the grid's seed (the same errors: its z with the SE
    from their measured kurtosis, for cells measured before it was recorded) and from an independent
    seed with RECHECK_FACTOR times the repetitions; cells already in `done` (an earlier recheck's table)
    are kept, not rerun. `table` is left as measured: only the flagged cells are rerun, so replacing
    their z alone would bias the count beyond 3 downwards."""
    rechecked = [] if done is None else done.to_dict("records")
    seen = {(r["oracle"], float(r["epsilon"]), int(r["d"])) for r in rechecked}
    for _, row in flagged(table).iterrows():
        name, epsilon, d, repetitions = row.oracle, float(row.epsilon), int(row.d), int(row.repetitions)
        if (name, epsilon, d) in seen:
            continue
        again = measure(name, epsilon, d, n, repetitions, seed)
        independent = measure(name, epsilon, d, n, RECHECK_FACTOR * repetitions, seed + RECHECK_SEED)
        rechecked.append(
            independent
            | {f"grid_{label}_z": row[f"{label}_z"] for label in ("empty", "populated")}
            | {f"grid_{label}_kurtosis_z": again[f"{label}_z"] for label in ("empty", "populated")}
        )
        log(
            f"{name} eps={epsilon:g} d={d}: grid z {row.empty_z:+.2f} / {row.populated_z:+.2f} (with its kurtosis "
            f"{again['empty_z']:+.2f} / {again['populated_z']:+.2f}); independent x{RECHECK_FACTOR}: "
            f"{independent['empty_z']:+.2f} / {independent['populated_z']:+.2f}"
        )
    return pd.DataFrame(rechecked)


def repetitions_for(d: int, pooled: int) -> int:
    return max(1, math.ceil(pooled / max(1, d // 2)))


def run_grid(oracles, n: int, seed: int, pooled: int, log=print, done: pd.DataFrame | None = None, save=None):
    """Every (oracle, cell) of both grids, the cells with fewer repetitions first; rows already in `done`
    are kept, and `save(table)` is called after each cell (a long run leaves its finished cells on disk)."""
    rows = [] if done is None else done.to_dict("records")
    cells = grid_cells()
    cells.sort(key=lambda cell: repetitions_for(cell[1], pooled))  # stable: the grid's order within a count
    for name in oracles:
        finished = {(r["epsilon"], r["d"]) for r in rows if r["oracle"] == name}
        for epsilon, d in cells:
            if (epsilon, d) in finished:
                continue
            start = time.perf_counter()
            rows.append(measure(name, epsilon, d, n, repetitions_for(d, pooled), seed) | {"seconds": 0.0})
            rows[-1]["seconds"] = time.perf_counter() - start
            log(
                f"{name} eps={epsilon:g} d={d}: z empty {rows[-1]['empty_z']:+.2f}, "
                f"populated {rows[-1]['populated_z']:+.2f} ({rows[-1]['seconds']:.1f} s)"
            )
            if save is not None:
                save(pd.DataFrame(rows))
    return pd.DataFrame(rows)


def crossover(table: pd.DataFrame, epsilon: float, column: str = "empty_measured") -> tuple[float | None, str]:
    """(d where the GRR and OLH variances in `column` cross, interpolated in log d; the two grid
    points around it)."""
    rows = table[table.epsilon == epsilon]
    grr = rows[rows.oracle == "grr"].set_index("d")[column]
    olh = rows[rows.oracle == "olh"].set_index("d")[column]
    ratio = np.log(grr / olh).dropna().sort_index()
    for (d0, r0), (d1, r1) in zip(ratio.items(), list(ratio.items())[1:]):
        if r0 <= 0 < r1:
            return float(np.exp(np.log(d0) + (np.log(d1) - np.log(d0)) * (-r0) / (r1 - r0))), f"{d0}..{d1}"
    return None, ""


CROSSOVER_EPSILONS = (0.5, 1.0, 2.0, 3.0, 4.0)
CROSSOVER_DIMENSIONS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def crossover_rows(n: int, seed: int, pooled: int) -> pd.DataFrame:
    """GRR and OLH measured on d = 2..2^8 (denser than the grid) at each crossover eps."""
    rows = []
    for epsilon in CROSSOVER_EPSILONS:
        for name in ("grr", "olh"):
            for d in CROSSOVER_DIMENSIONS:
                rows.append(measure(name, epsilon, d, n, repetitions_for(d, pooled), seed + 1))
    return pd.DataFrame(rows)


def crossover_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per eps: the measured crossing against 3 e^eps + 2 (and with OLH's integer g)."""
    found = []
    for epsilon in sorted(table.epsilon.unique()):
        g = OptimizedLocalHashing(epsilon, 2).g
        e = math.exp(epsilon)
        measured, bracket = crossover(table, epsilon)
        from_forms, _ = crossover(table, epsilon, "empty_expected")
        found.append(
            {
                "epsilon": epsilon,
                "predicted_3e^eps+2": 3 * e + 2,
                "predicted_integer_g": (e + g - 1) ** 2 / (g - 1) - e + 2,  # GRR = OLH with the integer g
                "interpolated_closed_forms": from_forms,
                "measured": measured,
                "measured_between": bracket,
            }
        )
    return pd.DataFrame(found)


def markdown_table(frame: pd.DataFrame, index: bool = True) -> str:
    """A pipe table (no tabulate dependency); floats with 4 significant digits."""
    frame = frame.reset_index() if index else frame

    def cell(value):
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    rows = [[str(c) for c in frame.columns]] + [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows[1:]])


def figure(table: pd.DataFrame):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    markers = "os^Dv"  # with 10 colours: 50 oracles told apart
    for index, (name, rows) in enumerate(table.groupby("oracle", sort=False)):
        by_d = rows[rows.epsilon == GRID_EPSILON].sort_values("d")
        by_e = rows[rows.d == GRID_DIMENSION].sort_values("epsilon")
        marker = markers[index // 10 % len(markers)]
        line = axes[0].plot(by_d.d, by_d.empty_measured * by_d.n, marker, label=name)[0]
        axes[0].plot(by_d.d, by_d.empty_expected * by_d.n, "-", color=line.get_color(), alpha=0.6)
        axes[1].plot(by_e.epsilon, by_e.empty_measured * by_e.n, marker, color=line.get_color(), label=name)
        axes[1].plot(by_e.epsilon, by_e.empty_expected * by_e.n, "-", color=line.get_color(), alpha=0.6)
    axes[0].set(xscale="log", yscale="log", xlabel="d", ylabel="n Var(f_hat) at f = 0", title="eps = 4")
    axes[1].set(yscale="log", xlabel="eps", title="d = 2^10")
    axes[0].legend(fontsize=8)
    fig.suptitle("Measured (points) vs closed form (lines), n = 10^5")
    fig.tight_layout()
    return fig


def grid_cells() -> list[tuple[float, int]]:
    """Both grids' (eps, d) cells, once each."""
    return [(GRID_EPSILON, d) for d in DIMENSIONS] + [(e, GRID_DIMENSION) for e in EPSILONS if e != GRID_EPSILON]


def not_run_lines(table: pd.DataFrame) -> list[str]:
    """The page's line on the grid cells an oracle of `table` has not been run on, if any."""
    missing = []
    for name in table.oracle.unique():
        done = {(float(e), int(d)) for e, d in zip(table.epsilon[table.oracle == name], table.d[table.oracle == name])}
        cells = [f"eps {e:g}, d {d}" for e, d in grid_cells() if (e, d) not in done]
        if cells:
            missing.append(f"{name} ({len(cells)}: {'; '.join(cells)})")
    if not missing:
        return []
    return [f"Not run yet (`--resume` runs them into the same table): {', '.join(missing)}.", ""]


def poisson_tail(count: int, mean: float) -> float:
    """P(X >= count) for X ~ Poisson(mean): the chance of that many z-scores beyond the limit."""
    return 1.0 - sum(math.exp(-mean) * mean**j / math.factorial(j) for j in range(count))


def recheck_lines(rechecked: pd.DataFrame | None) -> list[str]:
    """The page's section on the flagged cells rerun (`recheck`), if any."""
    if rechecked is None or rechecked.empty:
        return []
    shown = pd.DataFrame(
        {
            "oracle": rechecked.oracle,
            "epsilon": rechecked.epsilon,
            "d": rechecked.d,
            "grid z (empty / populated)": [
                f"{a:+.2f} / {b:+.2f}" for a, b in zip(rechecked.grid_empty_z, rechecked.grid_populated_z)
            ],
            "grid z, SE from its kurtosis": [
                f"{a:+.2f} / {b:+.2f}"
                for a, b in zip(rechecked.grid_empty_kurtosis_z, rechecked.grid_populated_kurtosis_z)
            ],
            "repetitions": rechecked.repetitions,
            "z (empty / populated)": [f"{a:+.2f} / {b:+.2f}" for a, b in zip(rechecked.empty_z, rechecked.populated_z)],
            "kurtosis (empty / populated)": [
                f"{a:.3f} / {b:.3f}" for a, b in zip(rechecked.empty_kurtosis, rechecked.populated_kurtosis)
            ],
        }
    )
    return [
        "",
        "## Cells beyond 3 standard errors, rerun",
        "",
        f"Each cell with a |z| beyond {Z_LIMIT:g} on the grid, rerun from an independent seed with {RECHECK_FACTOR} "
        "times its repetitions (`--recheck`; the kurtosis shown is that rerun's, measured on "
        f"{RECHECK_FACTOR} times the squared errors). A wrong formula would stay beyond 3 there (its bias in SE "
        f"units grows with sqrt({RECHECK_FACTOR}) = {RECHECK_FACTOR**0.5:g}); a chance excursion does not. The "
        "grid's own rerun (same seed, the same errors) gives the cell's z with the SE from the kurtosis of its own "
        "errors; the grid's count above keeps each cell's z as measured (only flagged cells are rerun, so "
        "rescoring them alone would bias the count down).",
        "",
        markdown_table(shown, index=False),
    ]


def page(table: pd.DataFrame, crossings: pd.DataFrame, args, seconds: float, rechecked=None) -> str:
    passed = (table.empty_z.abs() <= Z_LIMIT) & (table.populated_z.abs() <= Z_LIMIT)
    worst = table.assign(worst=np.maximum(table.empty_z.abs(), table.populated_z.abs()))
    z_all = np.concatenate([table.empty_z, table.populated_z])
    beyond = np.sum(np.abs(z_all) > Z_LIMIT)
    expected_beyond = z_all.size * math.erfc(Z_LIMIT / math.sqrt(2))
    lines = [
        "# Frequency oracles: variance against Wang et al.'s closed forms",
        "",
        run_stamp(),
        "",
        "Command: `python scripts/frequency_variance.py "
        f"--users {args.users} --seed {args.seed} --pooled {args.pooled}` ({seconds / 60:.1f} min of wall-clock time "
        "summed over the cells, on a shared machine; parts of the grid can run as separate processes with "
        "`--oracles`, `--skip-crossover` and `--resume` into one `--out`, and `--page-only` writes this page "
        "from their tables).",
        "",
        "HCMS's and CMS's expected values are their exact variances over the client's noise and the public hash "
        "draw (checked by enumerating every hash draw and report on a small prime: "
        "tests/test_frequency_sketch_variance_exact.py): at small d (concentrated data) the hash-collision term "
        "~n sum f^2 / (s m) adds to the noise, ((e^eps + 1)/(e^eps - 1))^2 for HCMS's one bit and "
        "e^(eps/2)/(e^(eps/2) - 1)^2 for CMS's row (s = 256 hash functions, m = 1024 columns). CMS and SUE were "
        "measured with `--oracles cms,sue --resume` (CMS reports 1,024 bits a user: ~10^8 bits a repetition).",
        "",
        __doc__.split("\n\n", 2)[2].split("\n\nThe GRR/OLH")[0],
        "",
        f"**{int(passed.sum())} of {len(table)} cells within {Z_LIMIT:g} standard errors** on both halves "
        f"({int(beyond)} of {2 * len(table)} z-scores beyond {Z_LIMIT:g}, against {expected_beyond:.1f} expected by "
        f"chance when every formula is right, P(that many or more) = {poisson_tail(int(beyond), expected_beyond):.3f}; "
        f"largest |z| {worst.worst.max():.2f}, "
        f"{worst.loc[worst.worst.idxmax(), 'oracle']}; mean z {z_all.mean():+.3f}, sd {z_all.std():.3f}, "
        "for N(0, 1) scores 0 and 1).",
        "",
        *not_run_lines(table),
        "![variance](frequency_oracles/variance.png)",
        "",
        "## n Var(f_hat) at f = 0, eps = 4 (measured / closed form)",
        "",
    ]
    for title, rows, key in (
        ("eps = 4", table[table.epsilon == GRID_EPSILON], "d"),
        ("d = 2^10", table[table.d == GRID_DIMENSION], "epsilon"),
    ):
        pivot = rows.assign(
            cell=[f"{m * n:.4g} / {e * n:.4g}" for m, e, n in zip(rows.empty_measured, rows.empty_expected, rows.n)]
        ).pivot(index=key, columns="oracle", values="cell")
        if title != "eps = 4":
            lines += ["", f"## n Var(f_hat) at f = 0, {title} (measured / closed form)", ""]
        lines.append(markdown_table(pivot[list(table.oracle.unique())].fillna("not run")))
    lines += [
        "",
        "## z-scores (measured - expected) / SE, empty half | populated half",
        "",
        markdown_table(
            table.assign(z=[f"{a:+.2f} / {b:+.2f}" for a, b in zip(table.empty_z, table.populated_z)])
            .pivot_table(index=["epsilon", "d"], columns="oracle", values="z", aggfunc="first")[
                list(table.oracle.unique())
            ]
            .fillna("not run")
        ),
        "",
        "## GRR / OLH crossover",
        "",
        "Measured crossing of GRR's and OLH's per-count variance (f = 0) on d = 2, 3, 4, 6, ..., 256 "
        "(interpolated in log d between the two grid points where the measured ratio changes sign), against "
        "Wang et al.'s d = 3 e^eps + 2, the same equation with OLH's integer g = round(e^eps + 1), and the "
        "same interpolation applied to the closed forms themselves (what the grid's spacing alone gives). "
        "Each measured point has a relative SE of ~4%, which moves an interpolated crossing by ~10-20%.",
        "",
        markdown_table(crossings, index=False),
        *recheck_lines(rechecked),
        "",
        "Data: `frequency_oracles/variance.csv` (every cell), `frequency_oracles/crossover.csv`"
        + (", `frequency_oracles/recheck.csv`." if rechecked is not None and not rechecked.empty else "."),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = script_parser(
        __doc__,
        users=100_000,
        seed=2026,
        pooled=1024,
        oracles=",".join(ORACLES),
        out="docs/results/frequency_oracles",
        resume=False,
        skip_crossover=False,
        page_only=False,
        doc="docs/results/frequency_oracles.md",
        recheck=False,
    )
    args = parser.parse_args()
    start = time.perf_counter()
    out = Path(args.out)
    if args.recheck:  # the flagged cells of OUT/variance.csv, then the page from the tables
        done = pd.read_csv(out / "recheck.csv") if (out / "recheck.csv").exists() else None
        write_table(out / "recheck.csv", recheck(pd.read_csv(out / "variance.csv"), args.users, args.seed, done))
        args.page_only = True
    if args.page_only:  # the page from the tables a run (or runs, merged) left in OUT
        table = pd.read_csv(out / "variance.csv")
        if (out / "crossover.csv").exists():
            cross_rows = pd.read_csv(out / "crossover.csv")
        else:  # the crossover from the main grid alone (eps = 4, d = 2^2..2^14)
            cross_rows = table[table.oracle.isin(["grr", "olh"]) & (table.epsilon == GRID_EPSILON)]
        crossings = crossover_summary(cross_rows)
        write_table(out / "crossover_summary.csv", crossings)
        save_figure(out / "variance.png", figure(table))
        cross_seconds = float(cross_rows["seconds"].iloc[0]) if "seconds" in cross_rows else 0.0
        rechecked = pd.read_csv(out / "recheck.csv") if (out / "recheck.csv").exists() else None
        write_text(args.doc, page(table, crossings, args, table.seconds.sum() + cross_seconds, rechecked))
        return
    done = pd.read_csv(out / "variance.csv") if args.resume and (out / "variance.csv").exists() else None
    names = args.oracles.split(",")
    save = lambda frame: write_table(out / "variance.csv", frame)  # noqa: E731
    table = run_grid([n for n in names if n not in DENSE], args.users, args.seed, args.pooled, done=done, save=save)
    if not args.skip_crossover:
        cross_start = time.perf_counter()
        cross_rows = crossover_rows(args.users, args.seed, args.pooled)
        crossings = crossover_summary(cross_rows)
        write_table(out / "crossover.csv", cross_rows.assign(seconds=time.perf_counter() - cross_start))
        write_table(out / "crossover_summary.csv", crossings)
    table = run_grid([n for n in names if n in DENSE], args.users, args.seed, args.pooled, done=table, save=save)
    if not args.skip_crossover:
        save_figure(out / "variance.png", figure(table))
        write_text(args.doc, page(table, crossings, args, time.perf_counter() - start))
        print(crossings.to_string(index=False))


if __name__ == "__main__":
    main()

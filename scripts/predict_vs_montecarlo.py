"""Predicted vs measured MSE at full size (the predictor's correctness bar): every registered randomizer
(square wave with both estimators), every synthetic data set, m = d and m < d, r_j >= 1000.

For each configuration: one data set (seeded), the CLT prediction (ldpfed.analysis.predict) and a
Monte Carlo of the actual mechanism with actual m-of-d sampling (ldpfed.analysis.montecarlo, one
SeedSequence.spawn stream per repetition). The table reports both MSEs, the relative difference,
the Monte Carlo standard error (from the i.i.d. per-repetition errors), and, against the
Berry–Esseen bound, the Kolmogorov distance of the pooled standardized deviations
(dev - delta_j)/sigma_j from N(0, 1) (the pooled distance is at most the largest per-dimension one,
so it is covered by max_j bound when m = d).

    python scripts/predict_vs_montecarlo.py [--users 5000] [--dims 10] [--small-m 2]
        [--epsilon 4] [--repetitions 1500] [--seed 2024] [--out results/predict_vs_montecarlo]

Writes table.csv, table.md and summary.json to --out; progress on stderr.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from scipy import stats

import ldpfed.mechanisms as registry
from ldpfed.analysis import predict
from ldpfed.analysis.montecarlo import simulate_deviations
from ldpfed.data import available_synthetic, generate
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.outputs import write_json, write_table, write_text
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int, check_report_dims
from scripts.arguments import script_parser
from scripts.provenance import run_stamp

ESTIMATOR_VARIANTS = {"square-wave": ({"estimator": "raw"}, {"estimator": "debiased"})}
DELTA = 1e-5  # a user's total delta for approximate mechanisms
BAR = 0.10  # the predictor's correctness bar: relative tolerance


def variants() -> list[tuple[str, dict]]:
    return [(name, options) for name in registry.available() for options in ESTIMATOR_VARIANTS.get(name, ({},))]


def pooled_kolmogorov_distance(deviations: np.ndarray, prediction) -> float:
    standardized = (deviations - prediction.bias) / np.sqrt(prediction.sigma2)
    return float(stats.kstest(standardized.ravel(), stats.norm.cdf).statistic)


def run_configuration(values, name, options, epsilon, report_dims, repetitions, seed, advance) -> dict:
    users, dims = values.shape
    delta = DELTA if registry.get_class(name).approximate else None
    started = time.perf_counter()
    prediction = predict(name, epsilon, users, dims, report_dims, values, delta=delta, **options)
    predict_seconds = time.perf_counter() - started
    mechanism = per_value_mechanism(name, epsilon, report_dims, delta, **options)
    started = time.perf_counter()
    measured = simulate_deviations(values, mechanism, report_dims, repetitions, seed, on_repetition=advance)
    seconds = time.perf_counter() - started
    relative = prediction.mse / measured.mse - 1
    return {
        "mechanism": name + "".join(f" ({v})" for v in options.values()),
        "report_dims": report_dims,
        "r_j": users * report_dims / dims,
        "predicted_mse": prediction.mse,
        "measured_mse": measured.mse,
        "relative_difference": relative,
        "mc_relative_se": measured.mse_standard_error / measured.mse,
        "z": (prediction.mse - measured.mse) / measured.mse_standard_error,
        "within_10pct": abs(relative) < BAR,
        "bias_share": prediction.bias_sq / prediction.mse,
        "sampling_share": float(np.mean(prediction.sampling_variance)) / prediction.mse,
        "ks_pooled": pooled_kolmogorov_distance(measured.deviations, prediction),
        # 95% critical value of the KS statistic for this many draws: below it the distance is noise.
        "ks_noise_95": 1.358 / np.sqrt(measured.deviations.size),
        "berry_esseen_max": prediction.berry_esseen.max,
        "predict_seconds": predict_seconds,
        "mc_seconds_per_repetition": seconds / repetitions,
    }


def markdown(frame: pd.DataFrame, header: str) -> str:
    columns = [
        "dataset",
        "mechanism",
        "report_dims",
        "r_j",
        "predicted_mse",
        "measured_mse",
        "relative_difference",
        "mc_relative_se",
        "z",
        "ks_pooled",
        "ks_noise_95",
        "berry_esseen_max",
    ]
    lines = [header, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, row in frame[columns].iterrows():
        cells = []
        for column in columns:
            value = row[column]
            if column in ("relative_difference", "mc_relative_se"):
                cells.append(f"{100 * value:+.2f}%" if column == "relative_difference" else f"{100 * value:.2f}%")
            elif column in ("report_dims",):
                cells.append(str(int(value)))
            elif column == "r_j":
                cells.append(f"{value:,.0f}")
            elif isinstance(value, float):
                cells.append(f"{value:.4g}" if column != "z" else f"{value:+.2f}")
            else:
                cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = script_parser(
        __doc__, users=5000, dims=10, repetitions=1500, seed=2024, out=Path("results/predict_vs_montecarlo")
    )
    parser.add_argument("--small-m", type=int, default=2, help="the m < d case (r_j = n m / d)")
    parser.add_argument("--epsilon", type=float, default=4.0, help="a user's total budget (eps/m per value)")
    args = parser.parse_args()
    console = Console(stderr=True)
    try:
        users, dims = check_positive_int(args.users, "users"), check_positive_int(args.dims, "dims")
        small_m = check_report_dims(args.small_m, dims)
        epsilon = check_epsilon(args.epsilon)
        repetitions = check_positive_int(args.repetitions, "repetitions", minimum=2)
        if users * small_m / dims < 1000:
            console.print(f"[yellow]note:[/] r_j = {users * small_m / dims:g} < 1000 for m = {small_m}")
    except LDPValueError as error:
        console.print(f"[bold red]error:[/] {error}")
        raise SystemExit(2) from None

    configurations = [
        (dataset, name, options, m)
        for dataset in available_synthetic()
        for name, options in variants()
        for m in sorted({dims, small_m}, reverse=True)
    ]
    data_streams = dict(zip(available_synthetic(), np.random.SeedSequence(args.seed).spawn(len(available_synthetic()))))
    run_streams = np.random.SeedSequence([args.seed, 1]).spawn(len(configurations))
    data = {name: generate(name, users, dims, np.random.default_rng(stream)) for name, stream in data_streams.items()}

    rows = []
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("Monte Carlo repetitions", total=len(configurations) * repetitions)
        for (dataset, name, options, m), stream in zip(configurations, run_streams):
            progress.update(task, description=f"{dataset} / {name}{''.join(f' {v}' for v in options.values())} / m={m}")
            row = run_configuration(
                data[dataset], name, options, epsilon, m, repetitions, stream, lambda: progress.advance(task)
            )
            rows.append({"dataset": dataset, **row})

    frame = pd.DataFrame(rows)
    header = (
        f"# Predicted vs Monte Carlo MSE\n\nn = {users:,} users, d = {dims}, eps = {epsilon:g} per user "
        f"(eps/m per value; Gaussian delta = {DELTA:g}), {repetitions} repetitions per row, seed {args.seed}. "
        "z = (predicted - measured) / MC standard error; ks_pooled = Kolmogorov distance of the "
        "standardized deviations from N(0,1) (covered by the Berry–Esseen bound when m = d), "
        "ks_noise_95 = its 95% critical value for this many draws (distances below it are sampling noise). "
        f"{run_stamp()}"
    )
    summary = {
        "users": users,
        "dims": dims,
        "epsilon": epsilon,
        "repetitions": repetitions,
        "seed": args.seed,
        "configurations": len(frame),
        "all_within_10pct": bool(frame["within_10pct"].all()),
        "max_abs_relative_difference": float(frame["relative_difference"].abs().max()),
        "max_abs_z": float(frame["z"].abs().max()),
        "ks_within_bound_plus_noise_m_eq_d": bool(
            (
                frame.loc[frame.report_dims == dims, "ks_pooled"]
                <= frame.loc[frame.report_dims == dims, "berry_esseen_max"]
                + frame.loc[frame.report_dims == dims, "ks_noise_95"]
            ).all()
        ),
    }
    write_table(args.out / "table.csv", frame)
    write_text(args.out / "table.md", markdown(frame, header))
    write_json(args.out / "summary.json", summary)
    Console().print(summary)
    Console().print(f"written to {args.out}/ (table.csv, table.md, summary.json)", highlight=False)


if __name__ == "__main__":
    main()

"""`ldpfed compare --task train`: federated LDP-SGD runs per aggregator x mechanism x budget x
repetition, tabulated (final/best accuracy, final loss: mean +- sd over repetitions) and plotted
(accuracy per round).

Wiring (dependencies point one way): `ldpfed compare` lives in the core library, which never
imports Flower or `simulations`. Its `--task train` branch looks up the `train` entry point of
the group `ldpfed.compare_tasks` (pyproject.toml), i.e. `compare_train` below, and hands it the
raw option values; everything else (validation, federations, tables, files) happens here.

Design decisions:
- Every federation of a sweep is one `ldpfed.config.Config` run by the simulate harness
  (simulations.federation, the same seed scheme); aggregators are compared on the SAME run seed
  within a repetition (same partition, initial model, minibatches and, in round 1, the same
  noise), so differences between aggregators are paired. Repetition r uses the run seed
  `SeedSequence(seed).spawn(R)[r]` (as a 32-bit integer): another partition, initial model and
  noise. The clients' noise root is that run seed too (`noise_seed`), so a sweep is reproducible
  from `--seed` and the pairing holds: it compares utility, and its noise is not secret from
  anyone who knows `--seed` (it makes no privacy statement beyond each mechanism's epsilon).
- Mechanism `none` (no privacy) is run once, not per epsilon; its rows have epsilon None.
- `engine` flower (default: each federation is a Flower simulation on Ray, ~10 s of start-up on
  this machine) or local (the same client and server functions in this process, no Flower).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from ldpfed.cli.common import parse_list, progress_steps, show_results
from ldpfed.config import NO_MECHANISM, Config, TrainingConfig
from ldpfed.outputs import OutputDir
from ldpfed.protocols.train import check_device
from ldpfed.tasks import validated
from ldpfed.tasks.train import COMPARE_OPTIONS as TRAIN_ONLY
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int
from simulations.progress import RowCollector

DEFAULTS = {
    "mechanism": "laplace",
    "epsilons": "1.5,4.9,15.3",
    "aggregators": "mean,l1,l2,hdr4me,james-stein",
    "data": "digits",
    "repeats": 2,
    "seed": 0,
}
# compare's options that are simulate options of the same name (ldpfed.config.OPTIONS; checked
# by tests/test_config.py).
PASS_THROUGH = (*TRAIN_ONLY, "deviation", "alpha", "delta", "report_dims", "data")
RUN_COLUMNS = [
    "mechanism",
    "epsilon",
    "aggregator",
    "repeat",
    "seed",
    "final_accuracy",
    "best_accuracy",
    "final_loss",
    "noise_measured_over_predicted",
    "mean_predicted_squared_distance",
    "mean_measured_squared_distance",
    "mean_applied_squared_distance",
    "engine",
    "seconds",
]


# ---- the plan ----------------------------------------------------------------------------------
def repeat_seeds(seed: int, repeats: int) -> list[int]:
    """One 32-bit seed per repetition from `SeedSequence(seed).spawn(repeats)`."""
    return [int(child.generate_state(1)[0]) for child in np.random.SeedSequence(seed).spawn(repeats)]


def plan(
    base: Config, mechanisms: list[str], epsilons: list[float], aggregators: list[str], repeats: int, seed: int
) -> list[tuple[dict, Config]]:
    """[(labels, config)] for every federation of the sweep, each config validated. Each clip bound
    goes to the runs it applies to (`Config.update_clip`); one that applies to none is an error."""
    defaults, runs, used = TrainingConfig(), [], set()
    for repeat, run_seed in enumerate(repeat_seeds(seed, repeats)):
        for mechanism in mechanisms:
            budgets = [None] if mechanism == NO_MECHANISM else epsilons
            for epsilon in budgets:
                for aggregator in aggregators:
                    config = base.with_options(
                        {"task": "train", "mechanism": mechanism, "aggregator": aggregator, "seed": run_seed}
                    )
                    other = "coordinate_clip" if config.l2_clipped else "clip"
                    used.add("clip" if config.l2_clipped else "coordinate_clip")
                    config = validated(config.with_options({other: getattr(defaults, other), "epsilon": epsilon}))
                    labels = {
                        "mechanism": mechanism,
                        "epsilon": epsilon,
                        "aggregator": aggregator,
                        "repeat": repeat,
                        "seed": run_seed,
                    }
                    runs.append((labels, config))
    for name in ("clip", "coordinate_clip"):
        if getattr(base.training, name) != getattr(defaults, name) and name not in used:
            flag = "--" + name.replace("_", "-")
            raise LDPValueError(f"{flag} applies to none of the mechanisms {', '.join(mechanisms)}")
    return runs


# ---- running -----------------------------------------------------------------------------------
def run_one(labels: dict, config: Config) -> tuple[dict, list[dict]]:
    """One federation: (its runs.csv row, its per-round rows labelled)."""
    from simulations.federation import run

    collector = RowCollector()
    summary = run(config, collector, noise_seed=config.run.seed)
    row = {**labels, **{key: summary.get(key) for key in RUN_COLUMNS if key not in labels}}
    rounds = [{**labels, **round_row} for round_row in collector.rows]
    return row, rounds


def run_sweep(runs: list[tuple[dict, Config]], on_done: Callable[[], None] | None = None):
    """Run every federation in order; (runs frame, per-round frame)."""
    rows, rounds = [], []
    for labels, config in runs:
        row, round_rows = run_one(labels, config)
        rows.append(row)
        rounds.extend(round_rows)
        if on_done is not None:
            on_done()
    return pd.DataFrame(rows, columns=RUN_COLUMNS), pd.DataFrame(rounds)


# ---- tables ------------------------------------------------------------------------------------
def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over repetitions of final/best accuracy and final loss per (mechanism, eps, aggregator)."""
    keys = ["mechanism", "epsilon", "aggregator"]
    frame = runs.assign(epsilon=runs["epsilon"].astype(float).fillna(-1.0))  # groupby drops NaN keys
    columns = {}
    for name in ("final_accuracy", "best_accuracy", "final_loss"):
        columns.update({name: (name, "mean"), f"{name}_std": (name, "std")})
    for name in ("noise_measured_over_predicted", "mean_predicted_squared_distance", "mean_applied_squared_distance"):
        columns[name] = (name, "mean")
    summary = frame.groupby(keys, sort=False).agg(**columns, repeats=("final_accuracy", "size")).reset_index()
    summary["epsilon"] = summary["epsilon"].where(summary["epsilon"] >= 0)
    return summary


def _number(value):
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def json_rows(summary: pd.DataFrame) -> list[dict]:
    """One row per (mechanism, epsilon, aggregator); sd is None with a single repetition."""
    return [
        {
            "mechanism": row.mechanism,
            "epsilon": _number(row.epsilon),
            "aggregator": row.aggregator,
            "final_accuracy": float(row.final_accuracy),
            "final_accuracy_std": _number(row.final_accuracy_std),
            "final_loss": float(row.final_loss),
            "final_loss_std": _number(row.final_loss_std),
            "best_accuracy": float(row.best_accuracy),
            "best_accuracy_std": _number(row.best_accuracy_std),
            "repeats": int(row.repeats),
            "noise_measured_over_predicted": _number(row.noise_measured_over_predicted),
            "mean_predicted_squared_distance": _number(row.mean_predicted_squared_distance),
        }
        for row in summary.itertuples(index=False)
    ]


def _cell(mean: float, sd: float) -> str:
    return f"{mean:.3f}" if not math.isfinite(sd) else f"{mean:.3f} ±{sd:.3f}"


def results_table(summary: pd.DataFrame, title: str):
    from rich.table import Table

    table = Table(title=title, caption="final accuracy (best accuracy) \\[final loss]; mean ± sd over repetitions")
    table.add_column("mechanism")
    table.add_column("eps", justify="right")
    aggregators = list(dict.fromkeys(summary["aggregator"]))
    for name in aggregators:
        table.add_column(name, justify="right")
    for (mechanism, epsilon), group in summary.groupby(["mechanism", "epsilon"], sort=False, dropna=False):
        by_name = {row.aggregator: row for row in group.itertuples(index=False)}
        cells = []
        for name in aggregators:
            row = by_name.get(name)
            cells.append(
                "-"
                if row is None
                else f"{_cell(row.final_accuracy, row.final_accuracy_std)}\n"
                f"({row.best_accuracy:.3f}) [{row.final_loss:.3g}]"
            )
        table.add_row(mechanism, "-" if pd.isna(epsilon) else f"{epsilon:g}", *cells)
    return table


def accuracy_figure(rounds: pd.DataFrame, title: str = ""):
    """Test accuracy per round (mean over repetitions), one panel per (mechanism, eps), one line per
    aggregator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    frame = rounds.assign(epsilon=rounds["epsilon"].astype(float))
    panels = list(dict.fromkeys(zip(frame["mechanism"], frame["epsilon"].fillna(-1.0))))
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False, sharey=True)
    for axis, (mechanism, epsilon) in zip(axes.flat, panels):
        panel = frame[(frame["mechanism"] == mechanism) & (frame["epsilon"].fillna(-1.0) == epsilon)]
        for name, group in panel.groupby("aggregator", sort=False):
            curve = group.groupby("round")["accuracy"].mean()
            axis.plot(curve.index, curve.to_numpy(), marker="o", ms=2, label=name)
        axis.set_title(mechanism if epsilon < 0 else f"{mechanism}, eps/round={epsilon:g}", fontsize=9)
        axis.set_xlabel("round")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole numbers
        axis.grid(True, alpha=0.3)
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    for axis in axes[:, 0]:
        axis.set_ylabel("test accuracy")
    axes.flat[0].legend(fontsize=7)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return figure


# ---- the CLI branch ----------------------------------------------------------------------------
def resolve(options: dict) -> tuple[Config, list[str], list[float], list[str], int, int]:
    """Validate every option (LDPValueError, nothing written) and return the sweep's parts."""
    given = {key: value for key, value in options.items() if value is not None}
    merged = {**DEFAULTS, **given}
    mechanisms = parse_list(merged["mechanism"], str, "--mechanism")
    epsilons = [check_epsilon(e, "--epsilons") for e in parse_list(merged["epsilons"], float, "--epsilons")]
    aggregators = parse_list(merged["aggregators"], str, "--aggregators")
    repeats = check_positive_int(merged["repeats"], "--repeats")
    seed = check_positive_int(merged["seed"], "--seed", minimum=0)
    overrides = {name: given[name] for name in PASS_THROUGH if name in given}
    base = Config().with_options({"task": "train", "data": merged["data"], **overrides})
    clips = TrainingConfig()  # each clip bound is checked with the runs it applies to (`plan`)
    validated(base.with_options({"clip": clips.clip, "coordinate_clip": clips.coordinate_clip}))
    check_device(base)
    return base, mechanisms, epsilons, aggregators, repeats, seed


def compare_train(options: dict) -> None:
    """Entry point `ldpfed.compare_tasks:train` (see the module docstring). `options` holds the
    values of `ldpfed compare`'s flags, None where not given; `out` is the `ldpfed.outputs.OutputDir`
    that `ldpfed compare` prepared (checked before any federation starts), or a path / None."""

    out = options.pop("out", None)
    if not isinstance(out, OutputDir):
        out = OutputDir.prepare(out, command="compare --task train")
    as_json = options.pop("as_json", False)
    base, mechanisms, epsilons, aggregators, repeats, seed = resolve(options)
    runs = plan(base, mechanisms, epsilons, aggregators, repeats, seed)  # validates every federation

    # A bar on a terminal, else one line per federation (ldpfed.cli.common.progress_steps).
    texts = iter(
        " ".join(
            [labels["mechanism"]]
            + ([f"eps={labels['epsilon']:g}"] if labels["epsilon"] is not None else [])
            + [labels["aggregator"], f"repeat {labels['repeat']} done"]
        )
        for labels, _ in runs
    )
    with progress_steps("compare --task train", len(runs)) as advance:
        frame, rounds = run_sweep(runs, lambda: advance(next(texts)))
    summary = summarize(frame)
    rows = json_rows(summary)
    title = describe(base, repeats)
    written = out.write(output_files(frame, rounds, summary, rows, base, repeats, seed, title)) if out.enabled else []
    show_results(rows, lambda: results_table(summary, title), as_json=as_json, out=out.path, files=written)


def describe(base: Config, repeats: int) -> str:
    training = base.training
    return (
        f"{base.data_name} {training.model}: {base.federation.clients} clients, {base.run.rounds} rounds, "
        f"E={training.local_steps}, lr={training.lr:g}, C={training.coordinate_clip:g}, {base.data.partition}, "
        f"fraction={base.federation.fraction:g}, deviation={base.aggregation.deviation}, {repeats} repetition(s), "
        f"engine {base.run.engine}"
    )


def output_files(frame, rounds, summary, rows, base, repeats, seed, title) -> dict:
    """The files of `--out` by name, for `OutputDir.write` (all or none)."""
    config = {**base.to_flat(), "repeats": repeats, "seed": seed, "repeat_seeds": repeat_seeds(seed, repeats)}
    for key in ("privacy.mechanism", "privacy.epsilon", "aggregation.aggregator", "output.out", "run.seed"):
        config.pop(key)
    return {
        "runs.csv": frame,
        "rounds.csv": rounds,
        "summary.csv": summary,
        "summary.json": {"config": config, "rows": rows},
        "accuracy_per_round.png": accuracy_figure(rounds, title),
    }

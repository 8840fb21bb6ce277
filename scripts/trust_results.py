"""The trust-models results page's runs (docs/results/trust_models.md): `ldpfed compare --trust` on
the grid of total budgets, for the mean task and for federated logistic regression and an MLP on
digits and mnist-5k. Each comparison writes trust.csv/json/png under results/trust/NAME/; the
page's tables are read from them (`python scripts/trust_results.py --tables`).

Training's secagg rows are run one total at a time (`ldpfed compare --trust secagg --epsilons E`,
written to results/trust/NAME/secagg-E/; `python scripts/trust_results.py --resume` skips the ones
already written), at the central rows' L2 clip C = 1 (`compare --trust` passes --clip to secagg
runs). A total not yet run shows `ldpfed plan --trust secagg`'s prediction instead, labelled
"secagg (planned)" (ldpfed.planning.trust_plan, written to results/trust/NAME/secagg_plan.csv by
`python scripts/trust_results.py plans`). Their bits per value are the modulus's.

Sizes are chosen for a shared 2-core machine (every central run starts its own Ray: about a
minute there): the mean task at 10,000 users x 10 dimensions (the default job's size, smaller than
the thesis' 100,000 users), 10 clients, 5 rounds; training with 20 clients, 5 rounds, 10 local steps.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd

FLOAT_BITS = {"mean": 64, "train": 32}  # the float arrays of runs made before compare had the column
BUDGETS = "1,2,4,8"
DELTA = "1e-5"
RUNS = {
    "mean": [
        "--task", "mean", "--trust", "local,shuffle,secagg", "--users", "10000", "--dims", "10", "--clients", "10",
    ],
    **{
        f"{data}-{model}": [
            "--task", "train", "--trust", "local,central", "--data", data, "--model", model,
            "--clients", "20", "--clip", "1", "--engine", "local", "--nodes", "2",
        ]
        for data in ("digits", "mnist-5k")
        for model in ("logreg", "mlp")
    },
}  # fmt: skip
ROOT = Path("results/trust")
# the training comparisons, whose secagg rows run one total at a time (module docstring)
PLANNED = tuple(name for name, run in RUNS.items() if "secagg" not in run[run.index("--trust") + 1])
SECAGG = "secagg"


def command(name: str) -> list[str]:
    return ["ldpfed", "compare", *RUNS[name], "--rounds", "5", "--epsilons", BUDGETS, "--delta", DELTA,
            "--seed", "0", "--out", str(ROOT / name), "--overwrite"]  # fmt: skip


def secagg_dir(name: str, total: str) -> Path:
    return ROOT / name / f"{SECAGG}-{total}"


def secagg_command(name: str, total: str) -> list[str]:
    """The secagg comparison of training run `name` at total eps `total` alone (its own directory,
    so that an interrupted series resumes at the first total not written)."""
    run = list(RUNS[name])
    run[run.index("--trust") + 1] = SECAGG
    return ["ldpfed", "compare", *run, "--rounds", "5", "--epsilons", total, "--delta", DELTA, "--seed", "0",
            "--out", str(secagg_dir(name, total)), "--overwrite"]  # fmt: skip


def plan_command(name: str, total: str) -> list[str]:
    """The `ldpfed plan` line of a training comparison's secagg row at total eps `total`."""
    data, model = name.rsplit("-", 1)
    return ["ldpfed", "plan", "--task", "train", "--trust", "secagg", "--data", data, "--model", model,
            "--clients", "20", "--clip", "1", "--rounds", "5", "--budget", f"{total},{DELTA}"]  # fmt: skip


def plans() -> None:
    """The training comparisons' secagg rows, predicted (module docstring)."""
    from dataclasses import replace

    from ldpfed.planning.calibration import TotalBudget
    from ldpfed.planning.trust_plan import plan_trust
    from ldpfed.tasks import get, resolve

    for name in PLANNED:
        data, model = name.rsplit("-", 1)
        config = resolve(None, {"task": "train", "data": data, "model": model, "clients": 20, "rounds": 5})
        config = replace(config, training=replace(config.training, clip=1.0))
        rows = []
        for total in BUDGETS.split(","):
            (row,) = plan_trust(get("train"), config, TotalBudget(float(total), float(DELTA)), ["secagg"])
            rows.append({**row.to_dict(), "command": " ".join(plan_command(name, total))})
            print(rows[-1]["command"], flush=True)
        (ROOT / name).mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(ROOT / name / "secagg_plan.csv", index=False)


def markdown(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return "-" if pd.isna(value) else f"{value:.4g}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def tables() -> str:
    parts = []
    for name in RUNS:
        path = ROOT / name / "trust.csv"
        if not path.exists():
            parts.append(f"### {name}\n\n(not run)\n")
            continue
        frame = pd.read_csv(path)
        metric = "mse" if "mse" in frame else "final_accuracy"
        if "bits_per_value" not in frame:
            frame["bits_per_value"] = FLOAT_BITS[RUNS[name][RUNS[name].index("--task") + 1]]
        note = ""
        if name in PLANNED:
            frame, note = _with_secagg(name, frame, metric)
        if "modular_wraps" not in frame:  # runs made before compare reported the modular clip
            frame["modular_wraps"] = float("nan")
        shown = frame[
            ["total_epsilon", "trust", "local_epsilon_per_round", metric, "noise_sd", "noise_sd_on_mean",
             "epsilon_spent_run", "epsilon_against_server", "bits_per_value", "modular_wraps"]
        ]  # fmt: skip
        parts.append(f"### {name}\n\n`{' '.join(command(name))}`\n\n{markdown(shown)}\n{note}")
    return "\n".join(parts)


def _with_secagg(name: str, frame: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, str]:
    """`frame` with training run `name`'s secagg rows: measured where its run at that total was
    written, planned (labelled so) elsewhere; and the note under the table saying which."""
    measured, planned_totals = [], []
    for total in BUDGETS.split(","):
        path = secagg_dir(name, total) / "trust.csv"
        if path.exists():
            measured.append(pd.read_csv(path))
        else:
            planned_totals.append(float(total))
    parts = [frame, *measured]
    plan = ROOT / name / "secagg_plan.csv"
    if planned_totals and plan.exists():
        rows = pd.read_csv(plan)
        parts.append(_planned_rows(rows[rows["total_epsilon"].isin(planned_totals)], metric))
    frame = pd.concat(parts, ignore_index=True).sort_values("total_epsilon", kind="stable")
    note = "\n\nsecagg rows: `" + " ".join(secagg_command(name, "E")) + "` (E the total eps)."
    if planned_totals:
        totals = ", ".join(f"{total:g}" for total in planned_totals)
        note += (
            f" Not run at total {totals}: those rows are predicted by `"
            + " ".join(plan_command(name, "E"))
            + "`, labelled planned."
        )
    return frame, note + "\n"


def _planned_rows(plan: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The planned secagg rows in the comparison's columns (no measured figure: not run)."""
    return pd.DataFrame(
        {
            "total_epsilon": plan["total_epsilon"],
            "trust": "secagg (planned)",
            "local_epsilon_per_round": float("nan"),
            metric: "not run",
            "noise_sd": plan["noise_sd"],
            "noise_sd_on_mean": plan["noise_sd_on_mean"],
            "epsilon_spent_run": plan["spent_epsilon"],
            "epsilon_against_server": plan["epsilon_against_server"],
            "bits_per_value": plan["bits_per_value"],
        }
    )


def _sigint_default() -> None:
    """In each comparison's process: SIGINT at its default, so that a SIGINT sent to it stops it
    (with the finished runs written) even when this script was started in the background with
    SIGINT ignored, which the comparison would otherwise keep (simulations.stopping)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run(command_line: list[str]) -> None:
    print(" ".join(command_line), flush=True)
    code = subprocess.run(command_line, preexec_fn=_sigint_default).returncode
    if code:  # the comparison said why (bad input: 2; stopped: 130, 143); the later ones are not run
        print(f"stopped at {' '.join(command_line)} (exit {code})", file=sys.stderr)
        sys.exit(code)


def secagg_runs(names, resume: bool) -> None:
    """The training comparisons' secagg rows, one total at a time (module docstring)."""
    for name in names:
        for total in BUDGETS.split(","):
            if resume and (secagg_dir(name, total) / "trust.csv").exists():
                continue
            run(secagg_command(name, total))


if __name__ == "__main__":
    arguments = [argument for argument in sys.argv[1:] if argument != "--resume"]
    resume = "--resume" in sys.argv
    if "--tables" in arguments:
        print(tables())
    elif arguments == ["plans"]:
        plans()
    elif arguments[:1] == [SECAGG]:  # secagg [NAME...]: the training secagg rows only
        secagg_runs(arguments[1:] or PLANNED, resume)
    else:
        for name in arguments or RUNS:
            if not (resume and (ROOT / name / "trust.csv").exists()):
                run(command(name))
        if not arguments:
            plans()
            secagg_runs(PLANNED, resume)

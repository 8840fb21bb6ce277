"""The trust-models results page's runs (docs/results/trust_models.md): `ldpfed compare --trust` on
the grid of total budgets, for the mean task and for federated logistic regression and an MLP on
digits and mnist-5k. Each comparison writes trust.csv/json/png under results/trust/NAME/; the
page's tables are read from them (`python scripts/trust_results.py --tables`).

Training's secagg rows are predicted, not run (`ldpfed plan --trust secagg`, in this process:
ldpfed.planning.trust_plan, written to results/trust/NAME/secagg_plan.csv by `python
scripts/trust_results.py plans`): `simulate --task train --trust secagg` cannot clip the update to
the L2 norm central clips it to (`--clip` is refused beside the default scalar mechanism there), so
a run would clip at the default 0.05 and compare nothing. Their bits per value are the modulus's.

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
# the training comparisons, whose secagg rows are planned (module docstring): those run without secagg
PLANNED = tuple(name for name, run in RUNS.items() if "secagg" not in run[run.index("--trust") + 1])


def command(name: str) -> list[str]:
    return ["ldpfed", "compare", *RUNS[name], "--rounds", "5", "--epsilons", BUDGETS, "--delta", DELTA,
            "--seed", "0", "--out", str(ROOT / name), "--overwrite"]  # fmt: skip


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
        planned = ROOT / name / "secagg_plan.csv"
        note = ""
        if name in PLANNED and planned.exists():
            frame = pd.concat([frame, _planned_rows(pd.read_csv(planned), metric)], ignore_index=True)
            frame = frame.sort_values("total_epsilon", kind="stable")
            note = (
                "\n\nsecagg rows: predicted by `"
                + " ".join(plan_command(name, "E"))
                + '` (E the total eps; not run: see "Training under secagg" above).\n'
            )
        shown = frame[
            ["total_epsilon", "trust", "local_epsilon_per_round", metric, "noise_sd", "noise_sd_on_mean",
             "epsilon_spent_run", "epsilon_against_server", "bits_per_value"]
        ]  # fmt: skip
        parts.append(f"### {name}\n\n`{' '.join(command(name))}`\n\n{markdown(shown)}\n{note}")
    return "\n".join(parts)


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


if __name__ == "__main__":
    if "--tables" in sys.argv:
        print(tables())
    elif sys.argv[1:] == ["plans"]:
        plans()
    else:
        for name in sys.argv[1:] or RUNS:
            print(" ".join(command(name)), flush=True)
            code = subprocess.run(command(name), preexec_fn=_sigint_default).returncode
            if code:  # the comparison said why (bad input: 2; stopped: 130, 143); the later ones are not run
                print(f"stopped at {name} (exit {code})", file=sys.stderr)
                sys.exit(code)
        if not sys.argv[1:]:
            plans()

"""The trust-models results page's runs (docs/results/trust_models.md): `ldpfed compare --trust` on
the grid of total budgets, for the mean task and for federated logistic regression and an MLP on
digits and mnist-5k. Each comparison writes trust.csv/json/png under results/trust/NAME/; the
page's tables are read from them (`python scripts/trust_results.py --tables`).

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

BUDGETS = "1,2,4,8"
DELTA = "1e-5"
RUNS = {
    "mean": ["--task", "mean", "--trust", "local,shuffle", "--users", "10000", "--dims", "10", "--clients", "10"],
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


def command(name: str) -> list[str]:
    return ["ldpfed", "compare", *RUNS[name], "--rounds", "5", "--epsilons", BUDGETS, "--delta", DELTA,
            "--seed", "0", "--out", str(ROOT / name), "--overwrite"]  # fmt: skip


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
        shown = frame[
            ["total_epsilon", "trust", "local_epsilon_per_round", metric, "noise_sd", "noise_sd_on_mean",
             "epsilon_spent_run", "epsilon_against_server"]
        ]  # fmt: skip
        parts.append(f"### {name}\n\n`{' '.join(command(name))}`\n\n{markdown(shown)}\n")
    return "\n".join(parts)


def _sigint_default() -> None:
    """In each comparison's process: SIGINT at its default, so that a SIGINT sent to it stops it
    (with the finished runs written) even when this script was started in the background with
    SIGINT ignored, which the comparison would otherwise keep (simulations.stopping)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


if __name__ == "__main__":
    if "--tables" in sys.argv:
        print(tables())
    else:
        for name in sys.argv[1:] or RUNS:
            print(" ".join(command(name)), flush=True)
            code = subprocess.run(command(name), preexec_fn=_sigint_default).returncode
            if code:  # the comparison said why (bad input: 2; stopped: 130, 143); the later ones are not run
                print(f"stopped at {name} (exit {code})", file=sys.stderr)
                sys.exit(code)

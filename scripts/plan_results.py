"""The results page docs/results/plan.md: for the thesis' mean-estimation setting (gaussian data,
n = 100,000 users, d = 100), the plan's best mechanism and m as a function of the total budget and
the number of rounds T (pld accountant, delta 1e-5), predicted and measured by Monte Carlo.

    python scripts/plan_results.py --rounds-simulated 200 --out docs/results/plan

Measured: ROUNDS_SIMULATED rounds of the recommended row (the actual randomizer, m-of-d sampling,
per-round eps from the plan), grouped into studies of T rounds whose estimates are averaged.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from ldpfed.analysis import simulate_deviations
from ldpfed.analysis.predictor import load_moments
from ldpfed.data import load_tuples
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.planning import TotalBudget
from ldpfed.planning.plan import make_plan
from scripts.arguments import script_parser
from scripts.provenance import run_stamp

BUDGETS = (1.0, 4.0, 16.0)
ROUNDS = (1, 10, 100)
DELTA = 1e-5


def main() -> None:
    parser = script_parser(
        __doc__, users=100_000, dims=100, rounds_simulated=200, seed=2026, out=Path("docs/results/plan")
    )
    args = parser.parse_args()
    values = load_tuples("gaussian", users=args.users, dims=args.dims, rng=np.random.default_rng(args.seed))
    moments, _ = load_moments(values)
    root = np.random.SeedSequence(args.seed)
    records, start = [], time.perf_counter()
    for budget, stream in zip(BUDGETS, root.spawn(len(BUDGETS))):
        for rounds, cell in zip(ROUNDS, stream.spawn(len(ROUNDS))):
            plan = make_plan(moments, TotalBudget(budget, DELTA), rounds, accountant="pld", report_dims="auto")
            best = plan.best
            per_value = per_value_mechanism(
                best.budget.mechanism, best.budget.epsilon, best.report_dims, best.budget.delta
            )
            runs = simulate_deviations(values, per_value, best.report_dims, args.rounds_simulated, cell)
            per_round = runs.squared_error_per_repetition()
            studies = args.rounds_simulated // rounds
            averaged = runs.deviations[: studies * rounds].reshape(studies, rounds, -1).mean(axis=1)
            final = np.mean(averaged**2, axis=1)
            records.append(
                {
                    "total_epsilon": budget,
                    "rounds": rounds,
                    "mechanism": best.budget.mechanism,
                    "report_dims": best.report_dims,
                    "epsilon_per_round": best.budget.epsilon,
                    "pld_total": best.budget.spent["pld"].epsilon,
                    "predicted_mse_round": best.mse_round_mean,
                    "measured_mse_round": per_round.mean(),
                    "measured_mse_round_se": per_round.std(ddof=1) / np.sqrt(per_round.size),
                    "predicted_mse_final": best.mse_final,
                    "measured_mse_final": final.mean(),
                    "measured_mse_final_se": final.std(ddof=1) / np.sqrt(final.size) if final.size > 1 else np.nan,
                    "studies": studies,
                    "predicted_mse_one_collection": best.mse_one_collection,
                    "runner_up": f"{plan.rows[1].budget.mechanism} m={plan.rows[1].report_dims}",
                    "runner_up_mse_final": plan.rows[1].mse_final,
                }
            )
            print(
                f"eps {budget:g} T {rounds}: {records[-1]['mechanism']} m={best.report_dims} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
    frame = pd.DataFrame(records)
    args.out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out / "summary.csv", index=False)
    (args.out / "stamp.txt").write_text(f"{run_stamp()} {time.perf_counter() - start:.0f} s\n")
    print(frame.to_string())


if __name__ == "__main__":
    main()

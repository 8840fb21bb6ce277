"""The cosine estimate's own sampling law on one Gaussian mechanism (docs/results/canary_audit.md,
section "The cosine estimate on one Gaussian mechanism").

All k canaries are inserted into one release Delta = sum_j c_j + sigma Z, sigma the analytic
Gaussian mechanism's (Balle & Wang) for sensitivity 1 at (eps, 1e-5), eps in {1, 3, 10}. Two
estimators read the k cosines against the analytic null N(0, 1/d) (ldpfed.audit.canaries):
- `final_model_estimate`, Andrew et al.'s (the reference code's): a Gaussian fitted (mean and std)
  to the cosines; its law from the fit's (`fitted_estimate_law`);
- `equal_variance_estimate`: the mean alone, the null's std on both sides (exact for a Gaussian
  mechanism), the other canaries' k/d taken out of the noise variance; its sd `equal_variance_sd`.
Two kinds of canaries: random unit directions in d = 10^4 (`canary_directions`' law, the issue's
setting; their pairwise dots add a floor sqrt(2/d) to the mean's relative sd), and orthonormal ones
in d = 10^6 (exact and cheap, O(k) a draw: the large-d limit with the k/d term still there), which
show how many canaries the 10% target takes. Each cell: `--seeds` draws (default 16), the mean and sd
of eps_hat / eps - 1 measured beside the analytic ones.

`python scripts/canary_estimator.py [--seeds 16]` writes results/canary_audit/estimator.csv (the
results page's table, scripts/canary_audit.py) and prints it as markdown (a few minutes).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ldpfed.audit.canaries import equal_variance_estimate, equal_variance_sd, final_model_estimate, fitted_estimate_law
from ldpfed.mechanisms.gaussian import analytic_sigma
from scripts.arguments import script_parser

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "results" / "canary_audit" / "estimator.csv"

DELTA = 1e-5
EPSILONS = (1.0, 3.0, 10.0)
RANDOM = (10_000, (1000, 4000))  # (d, canary counts) of random directions
ORTHONORMAL = (1_000_000, (1000, 4000, 16000, 32000))
CHUNK = 2000  # canaries generated at once (float32 rows of d)


def random_cosines(k: int, d: int, sigmas: np.ndarray, seed: int) -> np.ndarray:
    """(len(sigmas), k) cosines of k random unit directions with sum_j c_j + sigma Z, one Z for all sigmas;
    the directions generated twice chunk by chunk (the sum, then the dots) instead of held."""

    def chunk(index: int) -> np.ndarray:
        rows = np.random.default_rng([seed, index]).standard_normal((min(CHUNK, k - index * CHUNK), d), np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    chunks = math.ceil(k / CHUNK)
    total = sum(chunk(index).sum(axis=0, dtype=np.float64) for index in range(chunks))
    noise = np.random.default_rng([seed, chunks]).standard_normal(d)
    deltas = total[None, :] + sigmas[:, None] * noise[None, :]
    deltas /= np.linalg.norm(deltas, axis=1, keepdims=True)
    return np.concatenate([deltas.astype(np.float32) @ chunk(index).T for index in range(chunks)], axis=1)


def orthonormal_cosines(k: int, d: int, sigmas: np.ndarray, seed: int) -> np.ndarray:
    """The same for k orthonormal directions in d: cos_i = (1 + sigma Z_i) / ||Delta||, exactly."""
    rng = np.random.default_rng(seed)
    along, rest = rng.standard_normal(k), rng.chisquare(d - k)
    dots = 1.0 + sigmas[:, None] * along[None, :]
    return dots / np.sqrt(np.sum(dots**2, axis=1, keepdims=True) + sigmas[:, None] ** 2 * rest)


def cells(kind: str, draw, d: int, counts, seeds: int) -> list[dict]:
    pairwise = kind == "random"
    sigmas = np.array([analytic_sigma(epsilon, DELTA, 1.0) for epsilon in EPSILONS])
    rows = []
    for k in counts:
        reference, equal = np.zeros((seeds, len(EPSILONS))), np.zeros((seeds, len(EPSILONS)))
        for seed in range(seeds):
            cosines = draw(k, d, sigmas, seed)
            for column, epsilon in enumerate(EPSILONS):
                reference[seed, column] = final_model_estimate(cosines[column], d, DELTA).epsilon / epsilon - 1
                equal[seed, column] = (
                    equal_variance_estimate(cosines[column], d, DELTA, inserted=k).epsilon / epsilon - 1
                )
        for column, (epsilon, sigma) in enumerate(zip(EPSILONS, sigmas)):
            law_mean, law_sd = fitted_estimate_law(1.0 / sigma, k, d, DELTA, pairwise, nodes=6)
            sd = equal_variance_sd(1.0 / sigma, k, d, DELTA, pairwise)
            rows.append(
                {
                    "canaries": kind,
                    "d": d,
                    "k": k,
                    "eps": epsilon,
                    "fitted std: measured": _shown(reference[:, column]),
                    "fitted std: analytic": f"{100 * (law_mean / epsilon - 1):+.0f}% ± {100 * law_sd / epsilon:.0f}%",
                    "equal stds: measured": _shown(equal[:, column]),
                    "equal stds: analytic sd": f"{100 * sd / epsilon:.1f}%",
                    "10% at 3 sd": "yes" if 3 * sd <= 0.1 * epsilon else "no",
                }
            )
    return rows


def _shown(errors: np.ndarray) -> str:
    return f"{100 * errors.mean():+.1f}% ± {100 * errors.std(ddof=1):.1f}%"


def table(seeds: int) -> pd.DataFrame:
    rows = cells("random", random_cosines, *RANDOM, seeds) + cells(
        "orthonormal", orthonormal_cosines, *ORTHONORMAL, seeds
    )
    return pd.DataFrame(rows).sort_values(["eps", "canaries", "k"], kind="stable")


def markdown(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(f"{value:g}" if isinstance(value, float) else str(value) for value in row) + " |"
              for row in frame.itertuples(index=False)]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    arguments = script_parser(__doc__, seeds=16).parse_args()
    frame = table(arguments.seeds)
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(TABLE, index=False)
    print(markdown(frame))

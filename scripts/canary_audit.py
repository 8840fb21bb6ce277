"""The in-run audit's results page (docs/results/canary_audit.md): accounted eps against the one-run
lower bound and the cosine estimate, per trust model at one total budget, by the CLI.

For digits and mnist-5k, logistic regression and the MLP, `ldpfed simulate --task train --canaries
300` runs under local trust (inid-gaussian, L2 clip 1, its per-round eps planned from a total of
(8, 1e-5) over 2 rounds by the rdp accountant: `--budget 8,1e-5`) and under central trust (the
trusted server's Gaussian calibrated to the same total, `--max-epsilon 8`), 10 real clients, every
client every round, engine local, run seed 0, noise seed 1. Each run writes its directory under
results/canary_audit/DATA/MODEL/TRUST; the page is made from their summary.json.

Then the trust models side by side at one total budget (`COMPARE`: `ldpfed compare --trust
local,central,secagg --canaries 300`, its trust.csv under results/canary_audit/compare), and the
cosine estimate's own sampling law on one Gaussian mechanism (scripts/canary_estimator.py, its
results/canary_audit/estimator.csv).

`python scripts/canary_audit.py [--data digits] [--page-only]`: runs what is missing (a run with a
summary.json, a comparison with its trust.csv, the estimator's table are kept), then writes the page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from scripts.arguments import script_parser
from scripts.provenance import run_stamp

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "results" / "canary_audit"
PAGE = ROOT / "docs" / "results" / "canary_audit.md"
DATA, MODELS = ("digits", "mnist-5k"), ("logreg", "mlp")
CANARIES, CLIENTS, ROUNDS, TOTAL, DELTA = 300, 10, 2, "8", "1e-5"
COMMON = ["--task", "train", "--engine", "local", "--clients", str(CLIENTS), "--canaries", str(CANARIES),
          "--rounds", str(ROUNDS), "--clip", "1", "--seed", "0", "--noise-seed", "1"]  # fmt: skip
TRUST = {
    "local": ["--mechanism", "inid-gaussian", "--aggregator", "fedavg", "--accountant", "rdp",
              "--budget", f"{TOTAL},{DELTA}"],
    "central": ["--trust", "central", "--max-epsilon", TOTAL, "--max-delta", DELTA],
}  # fmt: skip


COMPARED = RUNS / "compare"
COMPARE = ["ldpfed", "compare", "--task", "train", "--trust", "local,central,secagg", "--canaries", str(CANARIES),
           "--engine", "local", "--clients", str(CLIENTS), "--rounds", str(ROUNDS), "--epsilons", TOTAL,
           "--data", "digits", "--model", "logreg", "--out", str(COMPARED.relative_to(ROOT)),
           "--overwrite"]  # fmt: skip
ESTIMATOR = RUNS / "estimator.csv"  # scripts/canary_estimator.py


def command(data: str, model: str, trust: str) -> list[str]:
    out = RUNS / data / model / trust
    return ["ldpfed", "simulate", *COMMON, "--data", data, "--model", model, *TRUST[trust],
            "--out", str(out.relative_to(ROOT)), "--overwrite"]  # fmt: skip


def summary(data: str, model: str, trust: str) -> dict | None:
    path = RUNS / data / model / trust / "summary.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_missing(data_sets) -> None:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    for data in data_sets:
        for model in MODELS:
            for trust in TRUST:
                if summary(data, model, trust) is None:
                    line = command(data, model, trust)
                    print(" ".join(line), flush=True)
                    main = [sys.executable, "-c", "from ldpfed.cli.main import app; app()", *line[1:]]
                    subprocess.run(main, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, check=False)
    if not (COMPARED / "trust.csv").exists():
        print(" ".join(COMPARE), flush=True)
        main = [sys.executable, "-c", "from ldpfed.cli.main import app; app()", *COMPARE[1:]]
        subprocess.run(main, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, check=False)
    if not ESTIMATOR.exists():
        print("python scripts/canary_estimator.py", flush=True)
        script = [sys.executable, str(ROOT / "scripts" / "canary_estimator.py")]
        subprocess.run(script, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, check=False)


def row(data: str, model: str, trust: str) -> dict:
    found = summary(data, model, trust)
    if found is None:
        return {"data": data, "model": model, "trust": trust}
    audit = found["canary_audit"]
    bound, cosine = audit.get("one_run") or {}, audit.get("cosine") or {}
    verdict = "failed" if audit.get("failed") else "suspect" if audit.get("suspect") else "passed"
    return {
        "data": data,
        "model": model,
        "trust": trust,
        "d": cosine.get("dimension"),
        "accounted eps": audit.get("accounted_epsilon"),
        "one-run lower bound (97.5%)": bound.get("epsilon_lower"),
        "cosine estimate": cosine.get("epsilon"),
        "cosine lower limit (97.5%)": audit.get("cosine_lower_limit"),
        "verdict": verdict if audit.get("lines") else audit.get("error"),
        "final accuracy": found.get("final_accuracy"),
        "seconds": found.get("seconds"),
    }


def _cell(value) -> str:
    if isinstance(value, float):
        return "-" if pd.isna(value) else f"{value:.3g}"
    return "-" if value is None else str(value)


def markdown(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in values) + " |" for values in frame.itertuples(index=False)]
    return "\n".join(lines)


def compare_section() -> list[str]:
    """The trust models at one total budget, each run's audit beside its accounted eps."""
    if not (COMPARED / "trust.csv").exists():
        return []
    frame = pd.read_csv(COMPARED / "trust.csv")
    shown = frame.rename(
        columns={
            "trust": "trust",
            "epsilon_spent_run": "accounted eps",
            "one_run_lower_bound": "one-run lower bound (97.5%)",
            "cosine_estimate": "cosine estimate",
            "cosine_lower_limit": "cosine lower limit (97.5%)",
            "canary_audit": "canary audit",
            "cosine_note": "cosine note",
            "final_accuracy": "final accuracy",
        }
    )
    columns = ["trust", "accounted eps", "one-run lower bound (97.5%)", "cosine estimate", "cosine lower limit (97.5%)",
               "canary audit", "cosine note", "final accuracy"]  # fmt: skip
    return [
        "## Trust models side by side at one total budget",
        "",
        f"`{' '.join(COMPARE)}`: a total of ({TOTAL}, {DELTA}) per client over {ROUNDS} rounds for each trust model "
        f"(digits, logistic regression, {CLIENTS} real clients), each run with its canaries where its trust model "
        "hosts them; trust.csv and trust.json carry the audit columns (`canary_audit`, `one_run_lower_bound`, "
        "`cosine_estimate`, `cosine_lower_limit`, their confidences and `cosine_note`).",
        "",
        "Local trust under `compare --trust` runs the pure Laplace randomizer (the comparison takes a pure local "
        "mechanism) on Wang's m of the d coordinates: a canary's score sums a few Laplace values, whose privacy "
        "loss is bounded, and two Gaussians fitted to it overstate its eps at delta 1e-5 (the estimate lands "
        "above the accounted eps for a sound run). The audit therefore shows that estimate with a note and makes "
        "no flag from it; the one-run bound, valid for any noise, still can. Under secure aggregation the canary "
        "clients take part in the secure sum as any client (their discrete Gaussian shares are part of the "
        "accounted noise) and the audit speaks to the released model, as under central trust. The shuffle model "
        'has no training harness: `--trust shuffle --task train` is refused ("--trust shuffle applies to --task '
        'mean; got train (no shuffle run of --task train, so no canaries under it either)").',
        "",
        markdown(shown[columns]),
        "",
    ]


def estimator_section() -> list[str]:
    """The cosine estimate's sampling law on one Gaussian mechanism (scripts/canary_estimator.py)."""
    if not ESTIMATOR.exists():
        return []
    return [
        "## The cosine estimate on one Gaussian mechanism",
        "",
        "`python scripts/canary_estimator.py` (16 draws a cell): all k canaries inserted into one release "
        "sum_j c_j + sigma Z, sigma the analytic Gaussian mechanism's at (eps, 1e-5); the relative error "
        "eps_hat / eps - 1, measured (mean ± sd over the draws) beside the analytic law "
        '(ldpfed.audit.canaries: `fitted_estimate_law`, `equal_variance_sd`). "fitted std" is Andrew et al.\'s '
        'final-model estimate (mean and std fitted, null N(0, 1/d)); "equal stds" fits the mean alone, the '
        "null's std on both sides (exact for a Gaussian mechanism), and takes the other canaries' k/d out of the "
        "noise variance. Random directions: the issue's setting (d = 10^4); orthonormal ones: the large-d limit "
        "(exact, O(k) a draw), where only the canary count limits the precision.",
        "",
        "Reading: the fitted std is the estimator's trouble. The eps of two Gaussians at a small delta grows on "
        "both sides of equal stds (a std ratio r != 1 makes the privacy loss quadratic), so the std's sampling "
        "error (1/sqrt(2k) relative) enters as |r - 1|: a bias up and a wide spread, +30% ± 25% at eps 1 and "
        "+10% ± 10% at eps 3 with 1,000 canaries, the last round's measured +23% ± 25% and +9% ± 10%. At eps 10 "
        "the other 999 canaries add k/d = 0.1 to sigma^2 = 0.25: -13% ± 5% (measured -12% ± 5%). Inserting all "
        "the canaries and the analytic null is what that measurement already did: it does not remove either. "
        "Fitting the mean alone removes the kink, and the k/d correction the bias; what remains is the mean's "
        "own sampling sd, sigma / sqrt(k) on mu: 13%, 5.3% and 2.9% of eps at 1,000 canaries (d = 10^4). The "
        "10% target is then statistically out of reach at eps 1 and 3 with 1,000 canaries; within 3 sd it "
        "takes about 15,500 canaries at eps 1, 2,500 at eps 3 and 500 at eps 10 when d is large, and 20,500, "
        "3,500 and 1,000 at d = 10^4, where the canaries' pairwise dots add sqrt(2/d) to mu's relative sd, "
        "amplified by 1 + k / (2 d sigma^2) (which at d = 10^4 makes the sd grow again past a few thousand "
        "canaries at eps 3 and 10). tests/test_canary_estimator.py holds both estimators to 3 of their own sd.",
        "",
        markdown(pd.read_csv(ESTIMATOR, dtype=str).fillna("")),
        "",
    ]


def page() -> str:
    frame = pd.DataFrame([row(data, model, trust) for data in DATA for model in MODELS for trust in TRUST])
    parts = [
        "# The in-run privacy audit: accounted eps against what canaries show",
        "",
        run_stamp(),
        "",
        f"Generated by `python scripts/canary_audit.py`. {CLIENTS} real clients and {CANARIES} canary clients "
        f"(ldpfed.protocols.canaries), {ROUNDS} rounds, every client every round, a total of ({TOTAL}, {DELTA}) per "
        "client: under local trust inid-gaussian (L2 clip 1) at the per-round eps the rdp accountant plans for the "
        "total (`--budget`), under central trust the trusted server's Gaussian at `--max-epsilon` (clip 1).",
        "",
        "What each trust model's audit speaks to: local trust, the server, which sees every client's privatized "
        "reply: a canary's score is the cosine of its direction with the sum of its own replies, a left-out canary "
        "sends the opposite direction (the pair the clip's diameter bounds), and eps is that of two Gaussians of "
        "one std fitted to the two sides. Central trust, the released model: the cosine of each direction with the "
        "final model delta (Andrew et al.'s final-model estimate against the cosine null; a left-out canary sends "
        "a zero update, the same as not taking part).",
        "",
        "How to read the table: the one-run lower bound (Steinke et al., Appendix D) is a proof at its confidence: "
        "above the accounted eps it fails the run (exit 1). The cosine estimate approximates the eps the canaries "
        "see (a point estimate, not a bound); its lower confidence limit above the accounted eps marks the run "
        "suspect. Every run here passes: both the one-run bound and the lower limit stay below 8. With a few "
        "hundred canaries the one-run bound stays far below the estimate: it needs many more canaries to see a "
        "Gaussian mechanism's eps.",
        "",
        "The point estimates scatter around the accounted eps, above it in the central runs (8.1 to 9.8). That is "
        "the final-model estimator (as in the reference code) fitting the inserted canaries' std apart from the "
        "null's 1/sqrt(d): a ratio of 0.93 or 1.07 between the two, the sampling error of about 150 cosines, moves "
        "the eps of two Gaussians at delta 1e-5 by a point or two through their tails. The mean gap itself is "
        "within the accounting: the central runs' noise multiplier is z = 0.902, whose two rounds are the Gaussian "
        "mechanism at mu = sqrt(2) / z = 1.57 (analytic eps 7.44 at 1e-5, under the rdp accountant's 8); the "
        "canaries' measured mu (mean cosine over the null sd) is 1.30, 1.56 and 1.53 on digits logreg, digits MLP "
        "and mnist-5k MLP, whose eps at one std is 5.95 to 7.41. The local runs' estimate (two sides of one pooled "
        "std) has no such term; its standard error at this eps is about 0.7.",
        "",
        markdown(frame),
        "",
        "Commands:",
        "",
    ]
    parts += [f"- `{' '.join(command(data, model, trust))}`" for data in DATA for model in MODELS for trust in TRUST]
    parts += ["", *compare_section(), *estimator_section()]
    return "\n".join(parts).rstrip() + "\n"


if __name__ == "__main__":
    arguments = script_parser(__doc__, data="", page_only=False).parse_args()
    if not arguments.page_only:
        run_missing([arguments.data] if arguments.data else DATA)
    PAGE.write_text(page())
    print(f"wrote {PAGE.relative_to(ROOT)}")

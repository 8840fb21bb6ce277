"""Part C of the directional results page: federated LDP-SGD with LDPVec against the
numeric per-coordinate perturbation and noise-free training, on the local engine of
`ldpfed simulate --task train` (the same client and server halves as under Flower).

The thesis' Figure 6.2/6.3 setting (logistic regression and MLP, N users, E local steps, eps per
round in {1.5, 4.9, 15.3}) and its Table 6.4 setting (CNN, beta = 0.05, eps 15.3 / 48.5), scaled to
a 2-core machine: scikit-learn's digits (8x8, 10 classes; MNIST is not on this machine), N = 100
clients (500 in one block), 20 of them sampled per round, 15 rounds (CNN: 10), FedAvg. Every
run has its own row in `federated.csv` per round; a configuration the safe samplers refuse (a
per-angle budget below the mechanism's range) is recorded as refused, not replaced.

Clipping: LDPVec clips each update to L2 norm C = 1 (clean updates have norm 0.6-2.8 here); the
numeric path clips each coordinate to 3 C / sqrt(d) (the same scale per coordinate as an update
of norm 3C spread evenly) and reports Wang's m coordinates at eps/m each; the noise-free runs use
the numeric clipping without noise.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pandas as pd

from ldpfed.config import Config
from ldpfed.validation import LDPValueError
from simulations.progress import RowCollector

BASES = ("laplace", "piecewise", "gaussian")
DELTA = 1e-5
CLIP = 1.0
BETA = 0.05
SAMPLED = 20  # clients per round
DIMS = {"logreg": 650, "mlp": 15_010, "cnn": 9_840}  # parameters of the models on digits
SOUND_BEST = ("normalize", "centred", "hadamard")  # ldpfed's sound variant with every remedy on
THESIS_LIKE = ("split", "fixed", "none")  # the thesis' windows, with the magnitude made sound
ALL_VARIANTS = tuple(
    (m, w, r) for m in ("split", "normalize") for w in ("fixed", "centred") for r in ("none", "hadamard")
)


def block(
    model: str,
    clients: int,
    steps: int,
    rounds: int,
    epsilons: tuple[float, ...],
    variants: tuple = (SOUND_BEST,),
    all_variants_at: tuple[float, str] | None = None,
    note: str = "",
) -> dict:
    """One block of the grid, named by its model, N and E (and `note`); `all_variants_at` (eps, base)
    is the one cell that runs every LDPVec variant."""
    return dict(
        name=f"{model} N={clients} E={steps}" + (f" {note}" if note else ""),
        model=model,
        clients=clients,
        steps=steps,
        rounds=rounds,
        epsilons=epsilons,
        variants=variants,
        all_variants_at=all_variants_at,
    )


def blocks(quick: bool) -> list[dict]:
    """The grid: one block per (model, N, E, rounds), each with its eps values and variants."""
    if quick:
        return [block("logreg", 20, 5, rounds=3, epsilons=(15.3,), note="(quick)")]
    return [
        block("logreg", 100, 20, rounds=15, epsilons=(1.5, 4.9, 15.3), variants=(SOUND_BEST, THESIS_LIKE),
              all_variants_at=(15.3, "gaussian")),
        block("logreg", 500, 20, rounds=15, epsilons=(15.3,)),
        block("logreg", 100, 50, rounds=15, epsilons=(15.3,)),
        block("mlp", 100, 20, rounds=15, epsilons=(1.5, 4.9, 15.3)),
        block("cnn", 100, 20, rounds=10, epsilons=(15.3, 48.5), variants=(SOUND_BEST, THESIS_LIKE), note="beta=0.05"),
    ]  # fmt: skip


def runs_of(block: dict):
    """(label, options) of every run of a block."""
    yield (
        "noise-free",
        {"mechanism": "none", "perturbation": "numeric", "coordinate-clip": 3 * CLIP / math.sqrt(DIMS[block["model"]])},
    )
    for eps in block["epsilons"]:
        for base in BASES:
            variants = ALL_VARIANTS if (eps, base) == block["all_variants_at"] else block["variants"]
            common = {"mechanism": base, "epsilon": eps, "delta": DELTA if base == "gaussian" else 0.0}
            yield (
                f"numeric {base} eps={eps:g}",
                {**common, "perturbation": "numeric", "coordinate-clip": 3 * CLIP / math.sqrt(DIMS[block["model"]])},
            )
            for magnitude, window, rotation in variants:
                yield (
                    f"ldpvec {base} eps={eps:g} {magnitude}/{window}/{rotation}",
                    {
                        **common,
                        "perturbation": "ldpvec",
                        "clip": CLIP,
                        "beta": BETA,
                        "window": window,
                        "magnitude": magnitude,
                        "rotation": rotation,
                    },
                )


def run_block(block: dict, seed: int, log=print, cache: Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-round rows, one row per run with its status) of a block; with `cache`, each finished run
    is kept there as JSON and not run again (an interrupted grid resumes)."""
    from ldpfed.tasks import preflight, validated
    from simulations.federation import run

    rounds_rows, run_rows = [], []
    common = {
        "task": "train",
        "engine": "local",
        "data": "digits",
        "model": block["model"],
        "clients": block["clients"],
        "fraction": SAMPLED / block["clients"],
        "local-steps": block["steps"],
        "rounds": block["rounds"],
        "lr": 0.1,
        "batch-size": 32,
        "aggregator": "fedavg",
        "seed": seed,
    }
    for label, options in runs_of(block):
        record = {
            "block": block["name"],
            "run": label,
            "model": block["model"],
            "clients": block["clients"],
            "local_steps": block["steps"],
            "epsilon": options.get("epsilon"),
            "base": options["mechanism"],
            "perturbation": options["perturbation"],
            "magnitude": options.get("magnitude", "-"),
            "window": options.get("window", "-"),
            "rotation": options.get("rotation", "-"),
            "beta": options.get("beta"),
        }
        key = (
            None
            if cache is None
            else cache / f"{seed}-{block['name']}-{label}.json".replace(" ", "_").replace("/", "+")
        )
        if key is not None and key.exists():
            saved = json.loads(key.read_text())
            rounds_rows += saved["rounds"]
            run_rows.append(saved["run"])
            continue
        rows = []

        started = time.perf_counter()
        try:
            config, _ = preflight(validated(Config().with_options({**common, **options})))
            summary = run(config, RowCollector(rows), noise_seed=seed)  # reproducible from the seed: a utility grid
        except LDPValueError as error:  # e.g. a per-angle budget below the safe sampler's range
            run_rows.append({**record, "status": f"refused: {error}"})
            log(f"{block['name']} | {label}: refused ({error})")
            continue
        first = len(rounds_rows)
        for row in rows:
            rounds_rows.append(
                {
                    **record,
                    "round": row["round"],
                    "accuracy": row["accuracy"],
                    "loss": row["loss"],
                    "cosine_to_clean": row["cosine_to_clean"],
                    "leading_energy_share": row["leading_energy_share"],
                    "clean_leading_energy_share": row["clean_leading_energy_share"],
                }
            )
        run_rows.append(
            {
                **record,
                "status": "ok",
                "private": summary["private"],
                "final_accuracy": summary["final_accuracy"],
                "best_accuracy": summary["best_accuracy"],
                "final_loss": summary["final_loss"],
                "mean_cosine_to_clean": summary["mean_cosine_to_clean"],
                "mean_leading_energy_share": summary["mean_leading_energy_share"],
                "seconds": time.perf_counter() - started,
            }
        )
        if key is not None:
            key.write_text(json.dumps({"rounds": rounds_rows[first:], "run": run_rows[-1]}))
        log(
            f"{block['name']} | {label}: acc {summary['final_accuracy']:.3f} cos {summary['mean_cosine_to_clean']:.3f} "
            f"({time.perf_counter() - started:.0f} s)"
        )
    return pd.DataFrame(rounds_rows), pd.DataFrame(run_rows)


def run_grid(quick: bool, seed: int, log=print, cache: Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    parts = [run_block(block, seed, log, cache) for block in blocks(quick)]
    return pd.concat([p[0] for p in parts], ignore_index=True), pd.concat([p[1] for p in parts], ignore_index=True)

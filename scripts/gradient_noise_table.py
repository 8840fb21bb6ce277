"""Results page docs/results/gradient_noise.md: noise magnitude of the gradient noises at equal
claimed eps (spec: gradient-noise.md), saying which guarantees are real.

    PYTHONPATH=. python scripts/gradient_noise_table.py [--out docs/results]

Two settings, clip C = 1 (L2), delta = 1e-5:
1. one release (q = 1, one step) at eps = 1, d = 100 and 10^4;
2. DP-SGD, q = 0.01, T = 1000 steps, eps = 2, d = 1000 (per-step claims of R1SMG and product
   noise compose to nothing meaningful: their rows say so).
Magnitude: RMS noise per coordinate sqrt(E||n||^2 / d), from each noise's exact moments, and its
ratio to the i.i.d. analytic Gaussian at the same claim.
3. Accuracy: central DP-SGD (`ldpfed dpsgd`, simulations/dpsgd.py) of logistic regression on
   digits, 5 epochs, B = 64, C = 1, at claimed eps = 2 for the whole run (R1SMG and product
   noise: their per-step claim (2, 1e-5), which does not hold even per step), 3 seeds.
Samplers: each row says which one ran. The i.n.i.d. noises and PLRV-O default to their safe
samplers (per-coordinate grid, exact integer noise; samplers/safe_grid.py, plrvo_safe.py),
calibrated for what they sample; the continuous rows are NOT floating-point safe, for comparison.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from ldpfed.accounting import SelfComposedDpEvent, create_accountant, gaussian_round
from ldpfed.accounting.plrvo import search_parameters
from ldpfed.gradient_noise import (
    GUARANTEE_FAILS,
    PLRVO,
    InidGaussian,
    InidLaplace,
    available,
    calibrate,
    guarantee_fails,
    layer_profile,
)
from ldpfed.mechanisms.gaussian import analytic_sigma
from ldpfed.samplers.plrvo_safe import SafeLaw
from scripts.arguments import script_parser
from scripts.provenance import run_stamp

DELTA = 1e-5
FAILING = tuple(name for name in available() if guarantee_fails(name))  # published guarantee does not hold
CLAIM = ("epsilon", "delta", "target_delta", "sensitivity")  # not calibrated: the row's setting says them


def two_layers(dims: int) -> np.ndarray:
    """Per-layer clipping, 90% of the parameters in a layer clipped to 0.8, the rest to 0.6 (sum C_l^2 = 1)."""
    big = int(0.9 * dims)
    return layer_profile([0.8, 0.6], [big, dims - big])


def rms(noise) -> float:
    return float(math.sqrt(np.mean(noise.coordinate_variance())))


def plrvo_rows(target, dims, q, steps):
    """PLRV-O calibrated by each accountant with the safe sampler (default), and by the joint one with the
    continuous sampler."""
    rows = []
    for accountant, sampler in (("joint", "safe"), ("paper", "safe"), ("joint", "continuous")):
        law = SafeLaw.for_params(dims) if sampler == "safe" else None
        found = search_parameters(target, 1.0, dims, q, steps, DELTA, accountant=accountant, law=law)
        noise = PLRVO(dims, k=found.k, theta=found.theta, sample_rate=q, steps=steps, delta=DELTA, sampler=sampler)
        joint, _ = noise.epsilon("joint")
        if accountant == "joint":
            guarantee = "sound (joint accountant)"
        elif joint <= target * (1 + 1e-6):
            guarantee = "sound here (at q = 1 the paper accountant equals the joint one)"
        else:
            guarantee = f"claimed eps {target:g} understated: the joint accountant gives {joint:.4g}"
        rows.append(
            {
                "noise": f"plrvo (calibrated by the {accountant} accountant)",
                "rms": rms(noise),
                "sampler": sampler,
                "parameters": f"k={found.k:.4g}, theta={found.theta:.4g}, E|z|={noise.mean_abs():.4g}",
                "real_epsilon": joint,
                "guarantee": guarantee,
            }
        )
    return rows


def single_release(dims: int, epsilon: float = 1.0) -> list[dict]:
    sigma = analytic_sigma(epsilon, DELTA, 1.0)
    profile = two_layers(dims)
    rows = [
        {
            "noise": "gaussian (i.i.d., analytic)",
            "rms": sigma,
            "parameters": f"sigma={sigma:.4g}",
            "sampler": "continuous",
            "real_epsilon": epsilon,
            "guarantee": "sound",
        }
    ]
    for sampler in ("safe", "continuous"):
        inid = InidGaussian(profile, epsilon=epsilon, delta=DELTA, sampler=sampler)
        laplace = InidLaplace(profile, epsilon=epsilon, sampler=sampler)
        accountant = "RDP, discrete Gaussian" if sampler == "safe" else "analytic Gaussian"
        rows += [
            {
                "noise": "inid-gaussian (2 layers)",
                "rms": rms(inid),
                "parameters": f"eta={inid.eta:.6g}",
                "sampler": sampler,
                "real_epsilon": epsilon,
                "guarantee": f"sound ({accountant})",
            },
            {
                "noise": "inid-laplace (2 layers, pure eps)",
                "rms": rms(laplace),
                "sampler": sampler,
                "parameters": f"b in [{laplace.scales.min():.4g}, {laplace.scales.max():.4g}]",
                "real_epsilon": laplace.realized_epsilon(),
                "guarantee": "sound",
            },
        ]
    rows += [
        *plrvo_rows(epsilon, dims, 1.0, 1),
        *(failing_row(calibrate(name, epsilon=epsilon, delta=DELTA, dims=dims)) for name in FAILING),
    ]
    for row in rows:
        row.update(setting=f"one release, eps={epsilon:g}, d={dims}", ratio_to_gaussian=row["rms"] / sigma)
    return rows


def failing_row(noise) -> dict:
    """The row of a noise whose published guarantee does not hold: its calibrated parameters, no eps."""
    parameters = noise.parameters()
    return {
        "noise": noise.name,
        "rms": rms(noise),
        "parameters": ", ".join(
            f"{key}={value:.4g}" for key, value in parameters.items() if isinstance(value, float) and key not in CLAIM
        ),
        "sampler": noise.sampler,
        "real_epsilon": math.inf,
        "guarantee": GUARANTEE_FAILS,
    }


def gaussian_multiplier(target: float, q: float, steps: int, accountant: str = "pld") -> float:
    """The noise multiplier z whose Poisson-sampled Gaussian reaches eps = target (dp_accounting's
    PLD, or RDP: the accountant `ldpfed dpsgd` reports)."""

    def excess(log_z):
        event = SelfComposedDpEvent(gaussian_round(math.exp(log_z), sample_rate=q), steps)
        return create_accountant(accountant).compose(event).get_epsilon(DELTA) - target

    return math.exp(brentq(excess, math.log(0.3), math.log(30.0), xtol=1e-6))


def dpsgd(dims: int = 1000, epsilon: float = 2.0, q: float = 0.01, steps: int = 1000) -> list[dict]:
    z = gaussian_multiplier(epsilon, q, steps)
    inid = InidGaussian(two_layers(dims), noise_multiplier=z, sampler="continuous")
    rows = [
        {
            "noise": "gaussian (i.i.d., DP-SGD)",
            "rms": z,
            "parameters": f"z={z:.4g}",
            "real_epsilon": epsilon,
            "sampler": "continuous",
            "guarantee": "sound (PLD accountant)",
        },
        {
            "noise": "inid-gaussian (2 layers, same z)",
            "rms": rms(inid),
            "parameters": f"z={z:.4g}",
            "sampler": "continuous",
            "real_epsilon": epsilon,
            "guarantee": "sound (PLD accountant); the safe sampler has no Poisson-sampled bound in ldpfed",
        },
        *plrvo_rows(epsilon, dims, q, steps),
        {
            "noise": " / ".join(FAILING),
            "rms": math.nan,
            "parameters": "",
            "real_epsilon": math.inf,
            "sampler": "continuous",
            "guarantee": f"{GUARANTEE_FAILS} per step: no composed guarantee",
        },
    ]
    for row in rows:
        row.update(setting=f"DP-SGD q={q:g}, T={steps}, eps={epsilon:g}, d={dims}", ratio_to_gaussian=row["rms"] / z)
    return rows


SEEDS = (0, 1, 2)


def accuracy(epsilon: float = 2.0) -> list[dict]:
    """Test accuracy of central DP-SGD with each noise at claimed eps (mean over SEEDS)."""
    from simulations.dpsgd import DPSGDConfig, load, run, steps_per_epoch

    base = DPSGDConfig(epochs=5)
    _, _, y_all = load(base)
    n = int(y_all.numel())
    q, steps = base.batch_size / n, base.epochs * steps_per_epoch(base, n)
    dims = 650  # logistic regression on digits: 64 x 10 weights + 10 biases
    z = gaussian_multiplier(epsilon, q, steps, "rdp")
    settings = [
        ("gaussian (numeric)", {"perturbation": "numeric", "noise_multiplier": z}, "sound"),
        (
            "inid-gaussian (2 layers, same z)",
            {"perturbation": "inid-gaussian", "noise_multiplier": z, "noise_sampler": "continuous"},
            "sound",
        ),
    ]
    law = SafeLaw.for_params(dims)
    for accountant in ("joint", "paper"):
        found = search_parameters(epsilon, 1.0, dims, q, steps, DELTA, accountant=accountant, law=law)
        joint, _ = PLRVO(dims, k=found.k, theta=found.theta, sample_rate=q, steps=steps).epsilon("joint")
        settings.append(
            (
                f"plrvo (calibrated by the {accountant} accountant)",
                {"perturbation": "plrvo", "k": found.k, "theta": found.theta},
                "sound" if accountant == "joint" else f"understated: joint eps {joint:.4g}",
            )
        )
    for name in FAILING:
        settings.append(
            (
                f"{name} (per-step claim)",
                {"perturbation": name, "noise_epsilon": epsilon, "noise_delta": DELTA},
                GUARANTEE_FAILS,
            )
        )
    settings.append(("none (no noise)", {"perturbation": "none"}, "not private"))
    rows = []
    for label, options, guarantee in settings:
        results = [run(DPSGDConfig(epochs=5, seed=seed, noise_seed=seed, **options)) for seed in SEEDS]
        rows.append(
            {
                "setting": f"central DP-SGD, digits logreg, eps={epsilon:g}, {len(SEEDS)} seeds",
                "noise": label,
                "sampler": (
                    "-"
                    if options["perturbation"] == "none"
                    else "safe"
                    if results[0].get("noise_sampler", "").startswith("safe")
                    else "continuous"
                ),
                "parameters": ", ".join(f"{k}={v:.4g}" for k, v in options.items() if isinstance(v, float)),
                "rms": float(np.mean([r["noise_sd"]["per_coordinate"] if r["noise_sd"] else 0.0 for r in results])),
                "accuracy": float(np.mean([r["accuracy"] for r in results])),
                "accuracy_sd": float(np.std([r["accuracy"] for r in results], ddof=1)),
                "real_epsilon": results[0]["epsilon"] if results[0]["private"] else math.inf,
                "guarantee": guarantee,
            }
        )
    return rows


def markdown(frame: pd.DataFrame) -> str:
    lines = [
        "# Gradient noises at equal claimed eps (noise magnitude)",
        "",
        "Generated by `PYTHONPATH=. python scripts/gradient_noise_table.py` (the noise tables from exact moments,",
        "no sampling; the central DP-SGD section trains 3 seeds with each noise's sampler).",
        "Clip C = 1 (L2), delta = 1e-5. `rms` = sqrt(E||n||^2 / d) per coordinate; `ratio` = rms / the i.i.d.",
        "Gaussian's at the same claim. `real eps` is the guarantee ldpfed can certify (inf: none).",
        "`sampler`: safe = floating-point safe (fixed output grid, exact integer noise, accounted for what it",
        "samples: the default); continuous = the textbook float sampler, NOT floating-point safe (it fails the",
        "audit's never-produced event), shown for comparison.",
        "",
        run_stamp(),
        "",
    ]
    for setting, part in frame.groupby("setting", sort=False):
        if "accuracy" in part and part["accuracy"].notna().any():
            lines += [
                f"## {setting}",
                "",
                "`rms`: noise sd per coordinate of the released mean gradient.",
                "",
                "| noise | sampler | parameters | rms | test accuracy (sd) | real eps | guarantee |",
                "|---|---|---|---|---|---|---|",
            ]
            for row in part.itertuples():
                lines.append(
                    f"| {row.noise} | {row.sampler} | {row.parameters} | {row.rms:.4g} | "
                    f"{row.accuracy:.3f} ({row.accuracy_sd:.3f}) | {row.real_epsilon:.4g} | {row.guarantee} |"
                )
            lines.append("")
            continue
        lines += [
            f"## {setting}",
            "",
            "| noise | sampler | parameters | rms | ratio | real eps | guarantee |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in part.itertuples():
            lines.append(
                f"| {row.noise} | {row.sampler} | {row.parameters} | {row.rms:.4g} | {row.ratio_to_gaussian:.3f} | "
                f"{row.real_epsilon:.4g} | {row.guarantee} |"
            )
        lines.append("")
    lines += [
        "## Reading",
        "- R1SMG and product noise look cheap because their published calibrations are wrong: both fail",
        "  the audit at their published settings (tests/test_gradient_noise_audit.py; nearest-centre events).",
        "  ldpfed never counts them as private.",
        "- PLRV-O calibrated by the paper-faithful accountant adds less noise than the joint (sound) calibration,",
        "  and its real eps (joint accountant) is above the claim. At q = 1 both accountants coincide.",
        "- The i.n.i.d. Gaussian with per-layer clipping spends the same privacy as the i.i.d. Gaussian; it",
        "  redistributes the noise across layers (MSE ||D||_1^2 / eta^2).",
        "- Floating-point safety costs little noise: the safe i.n.i.d. Laplace and PLRV-O are within a",
        "  fraction of a percent of their continuous versions; the safe i.n.i.d. Gaussian pays ~8% in sd at",
        "  eps = 1 for its RDP calibration (no PLD bound for the discrete Gaussian) and the grid.",
        "- Accuracy: at equal claimed eps the noises whose guarantee fails (R1SMG, product noise) look better",
        "  than the sound Gaussian rows, and PLRV-O calibrated by the paper accountant better than PLRV-O",
        "  calibrated soundly (by less than the seeds' sd here); that advantage is the unaccounted privacy",
        "  loss, not a better mechanism.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    args = script_parser(__doc__, out=Path("docs/results")).parse_args()
    rows = single_release(100) + single_release(10_000) + dpsgd() + accuracy()
    frame = pd.DataFrame(rows)
    out = args.out
    (out / "gradient_noise").mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "gradient_noise" / "magnitude.csv", index=False)
    (out / "gradient_noise.md").write_text(markdown(frame))
    print(markdown(frame))


if __name__ == "__main__":
    main()

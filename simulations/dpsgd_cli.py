"""`ldpfed dpsgd`: central DP-SGD with numeric or GeoDP perturbation (simulations/dpsgd.py),
registered on ldpfed's CLI through the `ldpfed.commands` entry point (`dpsgd`), so ldpfed never
imports simulations/."""

from __future__ import annotations

import typer

from ldpfed.cli.common import OUTPUTS_EPILOG, console, error_console, handle_errors, print_json
from ldpfed.cli.options import json_option, sampler_option
from ldpfed.validation import LDPValueError

HELP = """Central DP-SGD on one data set: per-example clipping (torch.func), Poisson or shuffled
batches, --perturbation numeric (Gaussian noise) | geodp (magnitude and direction perturbed
separately) | none (noise-free baseline, not private). Prints the final test accuracy and the
epsilon at --target-delta from dp-accounting's RDP accountant (GeoDP: magnitude and direction
composed additively) under the neighbouring relation the sampling fits: add/remove one example
(Poisson) or replace one example (shuffle)."""


def register(app: typer.Typer) -> None:
    app.command("dpsgd", help=HELP, epilog=OUTPUTS_EPILOG)(dpsgd)


@handle_errors
def dpsgd(
    perturbation: str = typer.Option(
        "numeric",
        help="numeric | geodp | none | inid-gaussian | inid-laplace | plrvo | r1smg | product-noise (the last two: "
        "published guarantee does not hold, run NOT private).",
    ),
    noise_multiplier: float = typer.Option(1.0, help="sigma: noise sd / sensitivity."),
    batch_size: int = typer.Option(64, help="(Expected) batch size B."),
    epochs: int = typer.Option(5, help="Passes over the data."),
    beta: float = typer.Option(1.0, help="GeoDP bounding factor beta in (0, 1]."),
    window: str = typer.Option(
        "fixed", help="GeoDP angle windows: fixed (thesis) | centred (on the previous release)."
    ),
    data: str = typer.Option(
        "digits",
        # help texts are Rich markup: \\[ shows a bracket
        help="digits | mnist-5k | synthetic-fedprox | mnist | cifar10 (mnist-5k: the extra \\[mnist]).",
    ),
    data_dir: str | None = typer.Option(None, help="Directory with mnist/cifar10 files."),
    model: str = typer.Option("logreg", help="logreg | mlp | cnn."),
    lr: float = typer.Option(0.5, help="Learning rate."),
    clip: float = typer.Option(1.0, help="Per-example L2 clipping norm C."),
    sampling: str = typer.Option("poisson", help="poisson | shuffle."),
    target_delta: float = typer.Option(
        1e-5, help="The delta at which the composed total eps is reported (central DP over the examples)."
    ),
    seed: int = typer.Option(0, help="Seed of the split and the model's initialization (public: in the summary)."),
    noise_seed: int | None = typer.Option(
        None,
        help="Secret seed of the batches and the noise, to reproduce a run (never recorded; default: OS entropy). "
        "Whoever knows it can re-draw the noise and remove it from the model.",
    ),
    mia: bool = typer.Option(
        False, "--mia", help="Train on a random half and attack membership (loss threshold, offline LiRA)."
    ),
    shadows: int = typer.Option(8, help="Reference models of the LiRA attack (with --mia)."),
    k: float | None = typer.Option(
        None, "--k", help="The noise's parameter k: plrvo's Gamma shape; product-noise's k (else searched)."
    ),
    theta: float | None = typer.Option(None, "--theta", help="plrvo: Gamma scale theta."),
    noise_epsilon: float | None = typer.Option(
        None, help="r1smg, product-noise: per-step claimed epsilon; inid-laplace: per-step pure epsilon."
    ),
    noise_delta: float | None = typer.Option(None, help="r1smg, product-noise: per-step claimed delta."),
    noise_sampler: str | None = sampler_option(
        "safe, but continuous for numeric and geodp with Poisson sampling; safe draws integer noise on a grid, "
        "for which numeric, geodp and inid-gaussian need --sampling shuffle"
    ),
    json_output: bool = json_option("the summary as JSON on stdout"),
) -> None:
    from simulations.dpsgd import DPSGDConfig, run

    config = DPSGDConfig(
        perturbation=perturbation,
        noise_multiplier=noise_multiplier,
        batch_size=batch_size,
        epochs=epochs,
        lr=lr,
        clip=clip,
        beta=beta,
        window=window,
        sampling=sampling,
        data=data,
        data_dir=data_dir,
        model=model,
        target_delta=target_delta,
        seed=seed,
        k=k,
        theta=theta,
        noise_epsilon=noise_epsilon,
        noise_delta=noise_delta,
        noise_sampler=noise_sampler,
        noise_seed=noise_seed,
    )

    def show(row: dict) -> None:  # on stderr, with --json too: stdout holds the JSON alone
        model = f"{row['model']}, " if "model" in row else ""
        error_console.print(
            f"{model}epoch {row['epoch']}/{config.epochs}: test accuracy {row['test_accuracy']:.4f}, "
            f"loss {row['test_loss']:.4f}",
            highlight=False,
            soft_wrap=True,
        )

    if shadows < 2:
        raise LDPValueError(f"--shadows must be at least 2, got {shadows}")
    summary = run(config, progress=show, mia=mia, shadows=shadows)
    if json_output:
        print_json(summary)
        return
    privacy = (
        f"epsilon {summary['epsilon']:.4g} at delta {config.target_delta:g} under {summary['neighbouring_relation']} "
        f"adjacency ({summary['accountant']})"
        if summary["private"]
        else f"NOT PRIVATE ({summary['not_private_reason']})"
    )
    if summary.get("guarantee_assumes"):
        privacy += f"; the guarantee assumes {summary['guarantee_assumes']}"
    console.print(
        f"{config.perturbation} DP-SGD, {config.model} on {config.data}: accuracy {summary['accuracy']:.4f}; "
        f"{privacy}; "
        f"mean cosine to the clean gradient {summary['mean_cosine_to_clean']:.3f}"
    )
    for name, attack in summary.get("mia", {}).get("attacks", {}).items():
        console.print(
            f"membership inference, {name}: accuracy {attack['accuracy']:.3f} "
            f"[{attack['accuracy_low']:.3f}, {attack['accuracy_high']:.3f}], AUC {attack['auc']:.3f} "
            f"[{attack['auc_low']:.3f}, {attack['auc_high']:.3f}] (95%)"
        )

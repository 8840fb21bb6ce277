"""`ldpfed calibrate`: a gradient noise's calibrated parameters under its paper's names (spec:
gradient-noise.md), so that they can be checked against the papers without running anything."""

from __future__ import annotations

import typer
from rich.table import Table

import ldpfed.gradient_noise as gradient_noise
from ldpfed.cli.common import OUTPUTS_EPILOG, console, handle_errors, print_json
from ldpfed.cli.options import delta_option, epsilon_option, json_option, mechanism_option, sampler_option
from ldpfed.gradient_noise import GUARANTEE_FAILS, calibrate, parse_layers, read_profile
from ldpfed.gradient_noise.profile import PROFILE_ARRAYS
from ldpfed.validation import (
    LDPValueError,
    check_epsilon,
    check_fraction,
    check_memory,
    check_positive,
    check_positive_int,
)

PLRVO_ONLY = ("--sample-rate", "--steps")


@handle_errors
def calibrate_command(
    mechanism: str = mechanism_option(..., f"One of {', '.join(gradient_noise.available())}."),
    epsilon: float = epsilon_option(
        ..., " to calibrate for, of one release of the gradient (PLRV-O: in total after --steps steps)"
    ),
    delta: float = delta_option(
        " to calibrate for, of one release (PLRV-O: in total, default 1e-5; product noise: searches k)"
    ),
    dims: int = typer.Option(
        None, "--dims", "-d", help="Dimensions d of the gradient (M in the papers; PLRV-O: the parameters n)."
    ),
    clip: float = typer.Option(
        1.0, "--clip", help="Sensitivity: L2 clipping norm C (one layer for the i.n.i.d. noises)."
    ),
    k: float = typer.Option(
        None, "--k", help="Product noise: the noise's parameter k > 1 (searched from --delta when not given)."
    ),
    layers: str = typer.Option(
        None, "--layers", help="i.n.i.d.: per-layer clipping C1:d1,C2:d2,... (D_i = C_l/sqrt(d_l))."
    ),
    profile: str = typer.Option(None, "--profile", help="i.n.i.d.: file of per-coordinate sensitivities D_i."),
    sample_rate: float = typer.Option(
        None, "--sample-rate", "-q", help="PLRV-O: Poisson sampling rate per step (default 1)."
    ),
    steps: int = typer.Option(None, "--steps", help="PLRV-O: DP-SGD steps (default 1)."),
    sampler: str = sampler_option("safe for the i.n.i.d. noises"),
    as_json: bool = json_option("one JSON object instead of a table"),
) -> None:
    """Calibrate a gradient noise from the literature to a privacy target."""
    key = gradient_noise.get_class(mechanism).name
    epsilon = check_epsilon(epsilon, "--epsilon")
    delta = None if delta is None else check_fraction(delta, "--delta")
    clip = check_positive(clip, "--clip")
    dims = None if dims is None else check_positive_int(dims, "--dims")
    if dims is not None:
        check_memory(8.0 * PROFILE_ARRAYS * dims, f"--dims {dims:,} coordinates", "lower --dims")
    if sample_rate is not None and not (0.0 < sample_rate <= 1.0):
        raise LDPValueError(f"--sample-rate must be in (0, 1], got {sample_rate!r}")
    steps = None if steps is None else check_positive_int(steps, "--steps")
    if key != "plrvo" and (sample_rate is not None or steps is not None):
        raise LDPValueError(f"{' and '.join(PLRVO_ONLY)} apply to plrvo only")
    if layers is not None and profile is not None:
        raise LDPValueError("give --layers or --profile, not both")
    sensitivities = (
        parse_layers(layers) if layers is not None else read_profile(profile) if profile is not None else None
    )
    if sensitivities is not None and not gradient_noise.get_class(key).takes_profile:
        raise LDPValueError("--layers/--profile apply to the i.n.i.d. noises only")
    noise = calibrate(
        key,
        epsilon=epsilon,
        delta=delta,
        dims=dims,
        clip=clip,
        k=k,
        profile=sensitivities,
        sample_rate=1.0 if sample_rate is None else sample_rate,
        steps=1 if steps is None else steps,
        sampler=sampler,
    )
    record = {"mechanism": noise.name, **noise.describe()}
    record.pop("name")
    if as_json:
        print_json(record)
        return
    table = Table(title=f"{noise.name}: {noise.claim}")
    table.add_column("parameter")
    table.add_column("value")
    for name, value in noise.parameters().items():
        table.add_row(name, f"{value:.6g}" if isinstance(value, float) else str(value))
    console.print(table)
    status = "sound" if noise.guarantee_holds else f"{GUARANTEE_FAILS}: never counted as private"
    console.print(f"guarantee: {status}; sampler: {noise.sampler_description}")


def register(app: typer.Typer) -> None:
    app.command("calibrate", epilog=OUTPUTS_EPILOG)(calibrate_command)

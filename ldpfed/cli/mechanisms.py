"""`ldpfed mechanisms`: the randomizers with their guarantee and properties."""

from __future__ import annotations

import typer
from rich.table import Table

import ldpfed.mechanisms as registry
from ldpfed.cli.common import OUTPUTS_EPILOG, console, handle_errors, print_json
from ldpfed.cli.options import epsilon_option, json_option, sampler_option
from ldpfed.gradient_noise import listing
from ldpfed.mechanisms.base import SAMPLERS
from ldpfed.validation import LDPValueError, check_epsilon

EXAMPLE_DELTA = 1e-5


@handle_errors
def list_mechanisms(
    epsilon: float = epsilon_option(1.0, " per value, for the variance columns"),
    sampler: str = sampler_option("each mechanism's default"),
    as_json: bool = json_option("a JSON list instead of a table"),
    gradient_noises: bool = typer.Option(
        False, "--gradient-noises", help="List the gradient noises (ldpfed calibrate) and their samplers instead."
    ),
) -> None:
    """List the scalar randomizers: guarantee, sampler, bounded/unbounded, biased/unbiased, variance."""
    epsilon = check_epsilon(epsilon)
    if gradient_noises:
        list_gradient_noises(as_json)
        return
    if sampler is not None and sampler not in SAMPLERS:
        raise LDPValueError(f"--sampler must be one of {SAMPLERS}, got {sampler!r}")
    rows, skipped, errors = [], [], []
    for name, options in registry.variants():
        delta = EXAMPLE_DELTA if registry.get_class(name).approximate else None
        if sampler is not None:
            options = {**options, "sampler": sampler}
        try:
            mechanism = registry.get(name, epsilon, delta, **options)
        except LDPValueError as error:  # e.g. classic Gaussian calibration needs eps < 1
            skipped.append(f"{name} {options}: {error}")
            errors.append(error)
            continue
        row = mechanism.describe()
        row["variance_at_0"] = float(mechanism.variance(0.0))
        row["variance_at_1"] = float(mechanism.variance(1.0))
        rows.append(row)
    if not rows:  # e.g. an epsilon outside every mechanism's range: one line, exit 2
        raise errors[0]
    if as_json:
        print_json(rows)
        return
    table = Table(
        title=f"ldpfed randomizers (per-value budget eps = {epsilon:g}; Gaussian at delta = {EXAMPLE_DELTA:g})"
    )
    for column in ("name", "guarantee", "sampler", "output", "bias", "V(0)", "V(1)", "options"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            row["guarantee"],
            "safe (fixed output grid)" if row["floating_point_safe"] else "continuous: NOT floating-point safe",
            f"bounded, |t*| <= {row['output_bound']:.4g}" if row["bounded"] else "unbounded",
            "unbiased" if row["unbiased"] else "biased",
            f"{row['variance_at_0']:.4f}",
            f"{row['variance_at_1']:.4f}",
            ", ".join(f"{k}={v}" for k, v in row["options"].items()) or "-",
        )
    console.print(table)
    for note in skipped:
        console.print(f"not available at this eps: {note}", highlight=False)


def list_gradient_noises(as_json: bool) -> None:
    """The gradient noises of gradient-noise.md: guarantee status and samplers (default first)."""
    rows = listing()
    if as_json:
        print_json(rows)
        return
    table = Table(title="ldpfed gradient noises (ldpfed calibrate / simulate --task train / dpsgd)")
    for column in ("name", "guarantee", "default sampler", "samplers"):
        table.add_column(column)
    for row in rows:
        default = "safe (fixed output grid)" if row["floating_point_safe"] else "continuous: NOT floating-point safe"
        table.add_row(row["name"], row["status"], default, ", ".join(row["samplers"]))
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("mechanisms", epilog=OUTPUTS_EPILOG)(list_mechanisms)

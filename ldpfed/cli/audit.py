"""`ldpfed audit`: empirical privacy audit of one mechanism's claim (ldpfed.audit; spec: audit.md)."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

import ldpfed.frequency as frequency
import ldpfed.gradient_noise as gradient_noise
from ldpfed.audit import build_subject, run_audit
from ldpfed.audit.auditor import DEFAULT_CONFIDENCE, DEFAULT_SAMPLES
from ldpfed.audit.subject import DEFAULT_CATEGORIES, LDPVEC, VECTOR_SUBJECTS
from ldpfed.audit.subjects import available
from ldpfed.cli.common import OUTPUTS_EPILOG, console, handle_errors, print_json, progress_steps
from ldpfed.cli.options import delta_option, epsilon_option, json_option, mechanism_option, sampler_option
from ldpfed.validation import LDPValueError, canonical_name, check_memory, check_positive_int

EXIT_AUDIT_FAILED = 1  # like a failing test: the claim is refuted
ORACLES = tuple(frequency.available())
VECTOR_NOISES = (*VECTOR_SUBJECTS, LDPVEC, *gradient_noise.available())
DEFAULT_VECTOR_DIMS = 10
# float64 values per draw and coordinate alive at once: both neighbours' draws, their halves, the
# event statistics and sorting copies (measured: about 12 for Laplace)
AUDIT_ARRAYS = 16


def _options(
    mechanism: str, estimator, calibration, categories: int | None, dims: int | None = None, ldpvec: dict | None = None
) -> dict:
    """The variant options that apply to `mechanism`; one given for another mechanism is an error."""
    key = canonical_name(mechanism)
    options = {}
    given = {name: value for name, value in (ldpvec or {}).items() if value is not None}
    if given and key != "ldpvec":
        raise LDPValueError(f"--{', --'.join(given)} apply to --mechanism ldpvec only")
    if key == "ldpvec":
        options.update(given)
    for flag, value, applies in (
        ("--estimator", estimator, ("square-wave",)),
        ("--calibration", calibration, ("gaussian",)),
        ("--categories", categories, ORACLES),
    ):
        if value is not None and key not in applies:
            raise LDPValueError(f"{flag} applies to --mechanism {' or '.join(applies)} only")
    if estimator is not None:
        options["estimator"] = estimator
    if calibration is not None:
        options["calibration"] = calibration
    if key in ORACLES:
        options["k"] = DEFAULT_CATEGORIES if categories is None else categories
    if dims is not None:
        if key not in VECTOR_NOISES:
            raise LDPValueError(f"--dims applies to the vector noises ({', '.join(VECTOR_NOISES)})")
        options["dims"] = check_positive_int(dims, "--dims")
    return options


@handle_errors
def audit_command(
    mechanism: str = mechanism_option(..., f"One of: {', '.join(available())}."),
    epsilon: float = epsilon_option(..., " claimed, per value (per report for oracles)"),
    delta: float = delta_option(" claimed, per value (approximate mechanisms only)"),
    sampler: str = sampler_option("the mechanism's default"),
    samples: int = typer.Option(
        DEFAULT_SAMPLES, "--samples", help="Draws per neighbouring input (half select events, half bound them)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the draws."),
    confidence: float = typer.Option(DEFAULT_CONFIDENCE, "--confidence", help="Joint confidence of the lower bound."),
    estimator: str = typer.Option(None, "--estimator", help="square-wave: raw | debiased."),
    calibration: str = typer.Option(None, "--calibration", help="gaussian: analytic | classic."),
    categories: int = typer.Option(
        None, "--categories", help=f"Categories k of a frequency oracle (default {DEFAULT_CATEGORIES})."
    ),
    dims: int = typer.Option(
        None, "--dims", "-d", help="Vector noises: dimensions d of the vector (default 10; ldpvec 4)."
    ),
    base: str = typer.Option(None, "--base", help="ldpvec: its base scalar mechanism (default laplace)."),
    magnitude: str = typer.Option(None, "--magnitude", help="ldpvec: split | normalize | exact-unsafe."),
    release: str = typer.Option(
        None, "--release", help="ldpvec: cartesian | polar | offsets (gaussian angles, the floating-point event)."
    ),
    as_json: bool = json_option("one JSON object"),
) -> None:
    """Audit a mechanism's privacy claim: a lower bound on its epsilon from draws on worst-case
    neighbours. Exit code 1 when the claim is refuted (verdict "fail"), 2 on bad input."""
    samples = check_positive_int(samples, "--samples")
    key = canonical_name(mechanism)
    coordinates = dims if dims is not None else DEFAULT_VECTOR_DIMS if key in VECTOR_NOISES else 1
    coordinates = max(int(coordinates), 1)
    check_memory(
        8.0 * AUDIT_ARRAYS * samples * coordinates,
        f"--samples {samples:,} draws of {coordinates:,} coordinate(s)",
        "lower --samples or --dims",
    )
    options = _options(
        mechanism, estimator, calibration, categories, dims, {"base": base, "magnitude": magnitude, "release": release}
    )
    subject = build_subject(mechanism, epsilon, delta, sampler=sampler, **options)
    with progress_steps("audit", 2 + len(subject.families())) as advance:  # the two neighbours' draws, each family
        result = run_audit(subject, samples, seed, confidence, progress=advance)
    if as_json:
        print_json(result.to_dict())
    else:
        table = Table(
            title=f"audit of {escape(result.mechanism)} (sampler {result.sampler}), neighbours "
            f"{result.neighbours[0]} / {result.neighbours[1]}, {result.samples} draws each"
        )
        for column in ("family", "event chosen on the selection half", "hits (num / den)", "eps_lower"):
            table.add_column(column)
        for row in result.events:
            table.add_row(
                row["family"],
                escape(row["event"]),
                f"{row['hits_numerator']}/{row['draws_numerator']} vs "
                f"{row['hits_denominator']}/{row['draws_denominator']}",
                f"{row['epsilon_lower']:.4f}",
            )
        console.print(table)
        for row in result.unavailable_families:
            console.print(f"event family {row['family']} unavailable: {row['reason']}", highlight=False, markup=False)
        claim = f"eps = {result.claimed_epsilon:g}" + (
            f", delta = {result.claimed_delta:g}" if result.claimed_delta else ""
        )
        console.print(
            f"{result.verdict.upper()}: eps_lower = {result.epsilon_lower:.4f} at {result.confidence:g} "
            f"confidence against the claimed {claim}; event: {result.event}",
            highlight=False,
            markup=False,
        )
    if result.verdict == "fail":
        raise typer.Exit(code=EXIT_AUDIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command("audit", epilog=OUTPUTS_EPILOG)(audit_command)

"""`ldpfed predict`: the error of an LDP mean-estimation run, predicted before running it
(analysis.md: CLT predictor, Berry–Esseen bound, confidence supremum, break-even population)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import typer
from rich.table import Table

import ldpfed.mechanisms as registry
from ldpfed.analysis import predict as predictor
from ldpfed.analysis.breakeven import break_even
from ldpfed.analysis.confidence import check_alpha, error_supremum
from ldpfed.analysis.predictor import load_moments
from ldpfed.cli import frequency as frequency_cli
from ldpfed.cli.common import (
    HEADER_HELP,
    OUT_OF_DOMAIN_HELP,
    OUTPUTS_EPILOG,
    check_estimator,
    console,
    estimator_options,
    handle_errors,
    out_of_domain_policy,
    parse_domain,
    print_json,
    read_data,
    scale_note,
)
from ldpfed.cli.options import (
    OVERWRITE,
    delta_option,
    epsilon_option,
    json_option,
    mechanism_option,
    out_option,
    report_dims_option,
)
from ldpfed.data import DEFAULT_DIMS, DEFAULT_SET, DEFAULT_USERS, available_synthetic
from ldpfed.mechanisms.multidim import per_value_mechanism
from ldpfed.outputs import OutputDir
from ldpfed.validation import LDPValueError, check_memory, check_positive_int, check_report_dims

SHOWN_DIMENSIONS = 10
PER_DIMENSION_FILE = "per_dimension.csv"
PREDICTION_ARRAYS = 16  # float64 arrays of d values a prediction holds (bias, variance terms, r_j, moments...)
PREDICT_TASKS = ("mean", "frequency")
DEFAULT_DATA_HELP = (
    f"Default: the default data set ({DEFAULT_SET}, {DEFAULT_USERS:,} users x {DEFAULT_DIMS} dims, as `ldpfed "
    "simulate`'s default job); with only --users and --dims, a data-free prediction (Laplace, Gaussian)."
)


@handle_errors
def predict_command(
    mechanism: str = mechanism_option(..., "Randomizer name (see `ldpfed mechanisms`)."),
    epsilon: float = epsilon_option(..., " per user: one report of m of the d dimensions, eps/m per reported value"),
    delta: float = delta_option(", per user (delta/m per reported value); approximate mechanisms"),
    users: int = typer.Option(
        None, "--users", "-n", help=f"Users n (default: the data file's rows; synthetic {DEFAULT_USERS})."
    ),
    dims: int = typer.Option(
        None, "--dims", "-d", help=f"Dimensions d (default: the data file's columns; synthetic {DEFAULT_DIMS})."
    ),
    report_dims: int = report_dims_option(" (default d)"),
    data: str = typer.Option(
        None,
        "--data",
        help="Synthetic set (gaussian|uniform|poisson), a .csv/.npy/.parquet table, or a .json of moments. "
        + DEFAULT_DATA_HELP
        + " "
        + frequency_cli.DATA_HELP,
    ),
    domain: str = typer.Option(
        "-1,1",
        "--domain",
        help="LOW,HIGH: the declared domain of a data file's values (MSE stays on the [-1, 1] scale).",
    ),
    header: bool = typer.Option(None, "--header/--no-header", help=HEADER_HELP),
    out_of_domain: str = typer.Option("error", "--out-of-domain", help=OUT_OF_DOMAIN_HELP),
    seed: int = typer.Option(0, "--seed", help="Seed for synthetic data."),
    compare: str = typer.Option(None, "--compare", help="A second mechanism: break-even population and winner at n."),
    confidence: float = typer.Option(None, "--confidence", help="ALPHA in (0,1): the error supremum xi_j(alpha)."),
    estimator: str = typer.Option(None, "--estimator", help="Square-wave estimator: raw or debiased."),
    out: str | None = out_option("prediction.json, per_dimension.csv (frequency: per_category.csv)"),
    overwrite: bool = OVERWRITE,
    as_json: bool = json_option("one JSON object instead of tables"),
    task: str = typer.Option(
        "mean",
        "--task",
        help="mean (tuples in [-1, 1]) or frequency (categorical attributes; "
        "--mechanism may then list several: grr, oue, or mean mechanisms, histogram-encoded).",
    ),
    categories: str = typer.Option(None, "--categories", help=frequency_cli.CATEGORIES_HELP),
) -> None:
    """Predict MSE, bias/variance, Berry–Esseen bound (and optionally confidence, break-even)."""
    if task not in PREDICT_TASKS:
        raise LDPValueError(f"--task must be one of {PREDICT_TASKS}, got {task!r}")
    request = SimpleNamespace(**{name: value for name, value in locals().items() if name != "task"})
    PREDICTORS[task](request)


def _predict_frequency(request) -> None:
    """`predict --task frequency` (ldpfed.cli.frequency); the mean task's options are refused there."""
    unsupported = {
        "domain": None if request.domain == "-1,1" else request.domain,
        "compare": request.compare,
        "confidence": request.confidence,
        "out_of_domain": None if request.out_of_domain == "error" else request.out_of_domain,
    }
    names = ("mechanism", "epsilon", "delta", "users", "dims", "report_dims", "data", "header", "seed", "estimator")
    frequency_cli.predict_frequency_command(
        **{name: getattr(request, name) for name in (*names, "categories", "out", "overwrite", "as_json")},
        unsupported=unsupported,
    )


def _predict_mean(request) -> None:
    """`predict --task mean`: everything checked before any work or output; the prediction (and the
    second mechanism's break-even, the confidence supremum) written and shown."""
    if request.categories is not None:
        raise LDPValueError("--categories applies to --task frequency")
    mechanism, compare, estimator = request.mechanism, request.compare, request.estimator
    low_high = parse_domain(request.domain)
    out_of_domain_policy(request.out_of_domain)
    seed = check_positive_int(request.seed, "--seed", minimum=0)
    alpha = None if request.confidence is None else check_alpha(request.confidence)
    check_estimator(estimator)
    names = [mechanism] + ([compare] if compare else [])
    options = {name: estimator_options(name, estimator) for name in names}
    if estimator is not None and not any(options.values()):
        raise LDPValueError(f"--estimator applies to square-wave only, not to {' or '.join(names)}")
    users, dims, report_dims, data, delta = (
        request.users,
        request.dims,
        request.report_dims,
        request.data,
        request.delta,
    )
    _check_before_data(names, request.epsilon, delta, users, dims, report_dims, data, options)
    with OutputDir.prepare(request.out, overwrite=request.overwrite, command="predict") as destination:
        moments, source, scale = _load_data(data, users, dims, seed, low_high, request.header, request.out_of_domain)
        first = predictor(
            mechanism, request.epsilon, users, dims, report_dims, moments, delta=delta, **options[mechanism]
        )
        result = first.to_dict()
        result["data"] = source if moments is not None else first.data_source
        if scale is not None:
            result["scale"] = scale
        second, comparison = _second(first, compare, request.epsilon, moments, delta, options)
        if comparison is not None:
            result["compare"] = {**comparison.to_dict(), "prediction": second.to_dict(per_dimension=False)}
        supremum = None if alpha is None else error_supremum(first.deviation_model(), alpha)
        if supremum is not None:
            result["confidence"] = supremum.to_dict()
        written = destination.write(
            {frequency_cli.PREDICTION_FILE: result, PER_DIMENSION_FILE: per_dimension_frame(first, supremum)}
        )
    if request.as_json:
        print_json(result)
        return
    _print_summary(first, result["data"], second, comparison, supremum)
    if scale is not None:
        console.print(scale["note"] + ".", highlight=False)
    if written:
        console.print(f"wrote {request.out}/" + ", ".join(written), highlight=False)


def _second(first, compare: str | None, epsilon: float, moments, delta, options: dict):
    """--compare: the second mechanism's prediction on the same users and dims, and the break-even."""
    if not compare:
        return None, None
    second_delta = delta if registry.get_class(compare).approximate else None
    second = predictor(
        compare, epsilon, first.users, first.dims, first.report_dims, moments, delta=second_delta, **options[compare]
    )
    return second, break_even(first, second)


def per_dimension_frame(prediction, supremum) -> pd.DataFrame:
    """One row per dimension j: the JSON's `per_dimension` arrays (r_j, delta_j, sigma_j^2 and its
    parts, Berry–Esseen bound; analysis.md), the MSE delta_j^2 + sigma_j^2, and xi_j(alpha) with --confidence."""
    columns = {"dimension": np.arange(prediction.dims), **prediction.to_dict()["per_dimension"]}
    columns["mse"] = prediction.bias**2 + prediction.sigma2
    if supremum is not None:
        columns["error_supremum"] = supremum.per_dimension
    return pd.DataFrame(columns)


def _check_before_data(names, epsilon, delta, users, dims, report_dims, data, options) -> None:
    """What can be checked before data are read or generated: the sizes and, where m is known
    (synthetic or no data), each mechanism at its per-value budget eps/m."""
    users = None if users is None else check_positive_int(users, "--users")
    dims = None if dims is None else check_positive_int(dims, "--dims")
    if dims is not None:
        check_memory(8.0 * PREDICTION_ARRAYS * dims, f"--dims {dims:,} dimensions", "lower --dims")
    if data is not None and data not in available_synthetic():
        return  # a file: d and m are known once it is read
    if data is None and (users is None) != (dims is None):
        return  # _load_data names the missing option
    m = report_dims if report_dims is not None else dims if dims is not None else DEFAULT_DIMS
    m = check_report_dims(m, DEFAULT_DIMS if dims is None else dims)
    for name in names:
        approximate = registry.get_class(name).approximate
        per_value_mechanism(name, epsilon, m, delta if approximate or name == names[0] else None, **options[name])


def _load_data(data, users, dims, seed, domain, header, out_of_domain):
    """(column moments or None, data label, scale note or None) for the --data option.

    No --data and neither --users nor --dims: the default data set (DEFAULT_SET). No --data with
    both: a data-free prediction (the predictor says which mechanisms allow it). Synthetic sets
    default to DEFAULT_USERS x DEFAULT_DIMS.
    """
    if data is None:
        if users is None and dims is None:
            data = DEFAULT_SET
        elif users is None or dims is None:
            missing = "--users" if users is None else "--dims"
            raise LDPValueError(f"{missing} is missing: give --users and --dims (data-free), or --data")
        else:
            if header is not None or domain != (-1.0, 1.0):
                raise LDPValueError("--domain and --header/--no-header apply to a --data file")
            return None, "", None
    if Path(data).suffix.lower() == ".json":
        if header is not None or domain != (-1.0, 1.0):
            raise LDPValueError("--domain and --header/--no-header apply to a table file, not to a .json of moments")
        moments, source = load_moments(data)
        return moments, source, None
    if data in available_synthetic():
        users = DEFAULT_USERS if users is None else users
        dims = DEFAULT_DIMS if dims is None else dims
    tuples = read_data(
        data, users=users, dims=dims, seed=seed, domain=domain, header=header, out_of_domain=out_of_domain
    )
    moments, _ = load_moments(tuples.values)
    source = f"{tuples.source} (seed {seed})" if data in available_synthetic() else tuples.source
    if data == DEFAULT_SET and users == DEFAULT_USERS and dims == DEFAULT_DIMS:
        source += ", the default data set"
    scale = scale_note(domain) if domain != (-1.0, 1.0) and data not in available_synthetic() else None
    return moments, source, scale


def _print_summary(first, source, second, comparison, supremum) -> None:
    columns = [("", first)] + ([("", second)] if second is not None else [])
    table = Table(
        title=f"Predicted error (CLT): eps = {first.epsilon:g} per user ({first.epsilon / first.report_dims:g} per "
        f"value), {first.users:,} users, d = {first.dims}, m = {first.report_dims}; data: {source}"
    )
    table.add_column("quantity")
    for _, prediction in columns:
        description = prediction.mechanism
        options = ", ".join(f"{k}={v}" for k, v in description["options"].items())
        table.add_column(description["name"] + (f" ({options})" if options else ""), justify="right")
    rows = [
        ("guarantee (per value)", lambda p: p.mechanism["guarantee"].split(" (")[0]),
        ("reports per dimension r_j", lambda p: f"{np.mean(p.r):,.1f}"),
        ("MSE", lambda p: f"{p.mse:.6g}"),
        ("  bias^2", lambda p: f"{p.bias_sq:.6g}"),
        ("  variance", lambda p: f"{p.variance:.6g}"),
        ("    randomizer noise", lambda p: f"{np.mean(p.noise_variance):.6g}"),
        ("    sampling m of d", lambda p: f"{np.mean(p.sampling_variance):.6g}"),
        ("    no report (r_j = 0)", lambda p: f"{np.mean(p.no_report_variance):.6g}"),
        ("RMSE", lambda p: f"{np.sqrt(p.mse):.6g}"),
        ("Berry–Esseen bound (max over j)", lambda p: f"{p.berry_esseen.max:.4g}"),
        ("  third moment from", lambda p: p.berry_esseen.third_moment_source),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(p) for _, p in columns))
    console.print(table)

    shown = min(first.dims, SHOWN_DIMENSIONS)
    detail = Table(title=f"Per dimension ({first.mechanism['name']}; first {shown} of {first.dims})")
    for column in ("j", "r_j", "delta_j", "sigma_j", "Berry–Esseen") + (("xi_j(alpha)",) if supremum else ()):
        detail.add_column(column, justify="right")
    sigma = np.sqrt(first.sigma2)
    for j in range(shown):
        cells = [
            str(j),
            f"{first.r[j]:,.1f}",
            f"{first.bias[j]:.4g}",
            f"{sigma[j]:.4g}",
            f"{first.berry_esseen.bound[j]:.4g}",
        ]
        if supremum:
            cells.append(f"{supremum.per_dimension[j]:.4g}")
        detail.add_row(*cells)
    console.print(detail)
    for prediction in (first, second):
        if prediction is not None and prediction.normal_approximation_warning:
            console.print(f"Warning ({prediction.mechanism['name']}): {prediction.normal_approximation_warning}.")
    if supremum:
        console.print(
            f"With probability {supremum.alpha:g}: |error_j| <= {supremum.max:.4g} in each dimension "
            f"(worst j); all {first.dims} dimensions at once: <= {supremum.simultaneous:.4g}."
        )
    if comparison:
        verdict = (
            "equal errors at every population size"
            if comparison.total_winner == "tie"
            else f"{comparison.total_winner} wins at every population size"
            if comparison.total_dominates
            else f"break-even at n' = {comparison.total_n_prime:,.0f} users "
            "(lower-variance one wins below, lower-bias one above)"
        )
        console.print(
            f"Compare: {verdict}; at n = {comparison.users:,}: {comparison.total_winner} "
            f"(MSE {comparison.mse_a:.4g} vs {comparison.mse_b:.4g})."
        )


PREDICTORS = {"mean": _predict_mean, "frequency": _predict_frequency}


def register(app: typer.Typer) -> None:
    app.command("predict", epilog=OUTPUTS_EPILOG)(predict_command)

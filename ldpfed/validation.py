"""Validation at the public boundary: every bad parameter fails here, naming itself and its range.

Internals trust what passed through these functions (scikit-learn's convention).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

OutOfDomain = Literal["raise", "clip"]
OUT_OF_DOMAIN_POLICIES = ("raise", "clip")


class LDPValueError(ValueError):
    """A parameter or an input outside its allowed range."""


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """A privacy budget: a finite number > 0."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise LDPValueError(f"{name} must be a number > 0, got {epsilon!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise LDPValueError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return value


def check_delta(delta: float | None, *, approximate: bool, mechanism: str) -> float | None:
    """delta in (0, 1) for approximate mechanisms; absent (None or 0) for pure ones."""
    if not approximate:
        if delta not in (None, 0, 0.0):
            raise LDPValueError(
                f"{mechanism} is pure eps-LDP and takes no delta; got delta={delta!r} "
                "(omit it, or choose an approximate mechanism such as 'gaussian')"
            )
        return None
    if delta is None:
        raise LDPValueError(f"{mechanism} is (eps, delta)-LDP: give delta in (0, 1)")
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise LDPValueError(f"delta must be a number in (0, 1), got {delta!r}") from None
    if not (0.0 < value < 1.0):
        raise LDPValueError(f"delta must be in (0, 1), got {delta!r}")
    return value


def check_positive_int(value: int, name: str, minimum: int = 1) -> int:
    """An integer count >= minimum (users, dimensions, repetitions...)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise LDPValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise LDPValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_report_dims(report_dims: int, dims: int) -> int:
    """m, the dimensions each user reports: 1 <= m <= d."""
    m = check_positive_int(report_dims, "report_dims")
    if m > dims:
        raise LDPValueError(f"report_dims must be in [1, dims={dims}], got {m}")
    return m


def check_values(
    values,
    *,
    low: float = -1.0,
    high: float = 1.0,
    out_of_domain: OutOfDomain = "raise",
    name: str = "values",
) -> np.ndarray:
    """Float array of finite values in [low, high].

    Out-of-domain values raise unless `out_of_domain="clip"` asks for clipping explicitly;
    NaN and inf always raise (clipping them would invent data).
    """
    if out_of_domain not in OUT_OF_DOMAIN_POLICIES:
        raise LDPValueError(
            f"out_of_domain must be one of {OUT_OF_DOMAIN_POLICIES}, got {out_of_domain!r}"
        )
    array = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(array)):
        raise LDPValueError(f"{name} contain NaN or inf; clean the data first")
    if array.size and (array.min() < low or array.max() > high):
        if out_of_domain == "clip":
            return np.clip(array, low, high)
        raise LDPValueError(
            f"{name} must lie in [{low}, {high}]; found range [{array.min():.6g}, {array.max():.6g}]. "
            "Rescale the data, or pass out_of_domain='clip' to clip explicitly"
        )
    return array

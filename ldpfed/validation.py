"""Validation at the public boundary: every bad parameter fails here, naming itself and its range.

Internals trust what passed through these functions (scikit-learn's convention).
"""

from __future__ import annotations

import math
import os
from typing import Literal

import numpy as np

OutOfDomain = Literal["raise", "clip"]
OUT_OF_DOMAIN_POLICIES = ("raise", "clip")
# --out-of-domain (every command that reads tuple data, and `data.out-of-domain` of a federation's
# config): the user-facing names of the policies above.
OUT_OF_DOMAIN = {"error": "raise", "clip": "clip"}


class LDPValueError(ValueError):
    """A parameter or an input outside its allowed range."""


def out_of_domain_policy(value: str) -> str:
    """The --out-of-domain option (error | clip) as the library's policy name."""
    if value not in OUT_OF_DOMAIN:
        raise LDPValueError(f"--out-of-domain must be one of {', '.join(OUT_OF_DOMAIN)}, got {value!r}")
    return OUT_OF_DOMAIN[value]


def parse_domain(text: str) -> tuple[float, float]:
    """--domain LOW,HIGH with finite LOW < HIGH (the declared domain of a data file's values)."""
    try:
        bounds = [float(item) for item in str(text).split(",") if item.strip()]
    except ValueError:
        bounds = []
    if len(bounds) != 2 or not all(math.isfinite(b) for b in bounds) or not bounds[0] < bounds[1]:
        raise LDPValueError(f"--domain must be LOW,HIGH with finite LOW < HIGH, got {text!r}")
    if not math.isfinite(bounds[1] - bounds[0]):  # the rescaling to [-1, 1] divides by the width
        raise LDPValueError(f"--domain must have a finite width HIGH - LOW, got {text!r}")
    return bounds[0], bounds[1]


def check_positive(value: float, name: str) -> float:
    """A finite number > 0 (a budget, a clipping bound, a learning rate, a half-width...)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LDPValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise LDPValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def check_fraction(value: float, name: str) -> float:
    """A number strictly between 0 and 1 (a delta, a confidence level...)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LDPValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not (0.0 < number < 1.0):
        raise LDPValueError(f"{name} must be in (0, 1), got {value!r}")
    return number


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """A privacy budget: a finite number > 0."""
    return check_positive(epsilon, name)


def check_budget_range(epsilon: float, allowed: tuple[float, float], *, mechanism: str) -> float:
    """A per-value budget inside the range where `mechanism`'s formulas and sampler stay exact and
    finite (e.g. 1e-300 underflows e^eps - 1, 1e300 overflows the scales)."""
    low, high = allowed
    if not (low <= epsilon <= high):
        raise LDPValueError(
            f"{mechanism} needs a per-value epsilon in [{low:g}, {high:g}] (where its formulas and "
            f"sampler stay exact and finite), got {epsilon:g}"
        )
    return epsilon


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
    return check_fraction(delta, "delta")


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


def available_memory() -> int:
    """Bytes this process can still allocate without swapping or the OOM killer: psutil's
    `available` when installed, else Linux's MemAvailable, else free physical pages (os.sysconf)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def _size(nbytes: float) -> str:
    """Bytes in binary units, e.g. '72.8 TiB'."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30)):
        if nbytes >= size:
            return f"{nbytes / size:,.1f} {unit}"
    return f"{nbytes / 2**20:,.1f} MiB"


def check_memory(nbytes: float, what: str, remedy: str) -> None:
    """Refuse, before allocating, work whose arrays would not fit in the memory available now:
    one line naming the need, the limit and the option to lower (better than numpy's traceback
    or the OOM killer, which ends the process without a word)."""
    limit = available_memory()
    if nbytes > limit:
        raise LDPValueError(
            f"{what} need(s) about {_size(nbytes)} of memory, more than the {_size(limit)} available "
            f"on this machine; {remedy}"
        )


def check_report_dims(report_dims: int, dims: int) -> int:
    """m, the dimensions each user reports: 1 <= m <= d."""
    m = check_positive_int(report_dims, "report_dims")
    if m > dims:
        raise LDPValueError(f"report_dims must be in [1, dims={dims}], got {m}")
    return m


_RANGE_BLOCK = 1 << 18  # 2 MiB of float64: fits in a core's L2 cache


def _value_range(array: np.ndarray) -> tuple[float, float]:
    """(min, max) of a non-empty array; NaN if any value is NaN (min/max propagate it).

    This is all the checking `check_values` needs, and it runs on every perturb() call: over
    cache-sized blocks, max reads what min just loaded, so the data crosses memory once, not twice.
    """
    if array.size <= _RANGE_BLOCK or not array.flags.c_contiguous:
        return float(array.min()), float(array.max())
    flat = array.reshape(-1)
    lowest, highest = math.inf, -math.inf
    for start in range(0, flat.size, _RANGE_BLOCK):
        block = flat[start : start + _RANGE_BLOCK]
        low, high = block.min(), block.max()
        if math.isnan(low) or math.isnan(high):
            return math.nan, math.nan
        lowest, highest = min(lowest, low), max(highest, high)
    return float(lowest), float(highest)


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
        raise LDPValueError(f"out_of_domain must be one of {OUT_OF_DOMAIN_POLICIES}, got {out_of_domain!r}")
    array = np.asarray(values, dtype=float)
    if not array.size:
        return array
    lowest, highest = _value_range(array)
    if not (math.isfinite(lowest) and math.isfinite(highest)):
        raise LDPValueError(f"{name} contain NaN or inf; clean the data first")
    if lowest < low or highest > high:
        if out_of_domain == "clip":
            return np.clip(array, low, high)
        raise LDPValueError(
            f"{name} must lie in [{low}, {high}]; found range [{lowest:.6g}, {highest:.6g}]. "
            "Declare the data's domain (--domain LOW,HIGH), rescale the data, or clip it explicitly "
            "(--out-of-domain clip; in Python out_of_domain='clip')"
        )
    return array


def canonical_name(name) -> str:
    """A registry key as users may type it: case, surrounding spaces and "_" for "-" do not matter."""
    return str(name).strip().lower().replace("_", "-")


def check_choice(value, choices: tuple[str, ...], name: str) -> str:
    """`value` as its canonical name (`canonical_name`), which must be one of `choices`."""
    key = canonical_name(value)
    if key not in choices:
        raise LDPValueError(f"{name} must be one of {choices}, got {value!r}")
    return key


def check_generator(*rngs) -> None:
    """Randomness is passed explicitly as numpy Generators (never global or implicit state)."""
    if not all(isinstance(rng, np.random.Generator) for rng in rngs):
        raise TypeError("rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed))")

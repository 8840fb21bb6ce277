"""Categorical tuples for frequency estimation: users x attributes of category codes.

`read_categorical(spec, ...)` is the one entry point. SPEC is
- "zipf" or "zipf:S" (P(category c) proportional to 1/(c+1)^S, S = 1.1 by default) or "uniform":
  synthetic, `users` x `attributes` drawn from a numpy Generator, `categories` per attribute;
- "fair": Fair's affairs survey (Fair 1978, Journal of Political Economy 86(1), 45-61; shipped in
  the statsmodels wheel as `statsmodels.datasets.fair`), 6,366 rows; its eight categorical columns
  (rate_marriage, age, yrs_married, children, religious, educ, occupation, occupation_husb; the
  continuous `affairs` is left out). Needs the optional extra `categorical` (statsmodels);
- a .csv file: one column per attribute, labels or integers, header row detected as for tuples.

Categories are inferred per column (sorted; numerically when every label is a number) or given by
`categories` (the CLI's --categories): "K" (every attribute has the integer codes 0..K-1),
"K1,K2,..." (one count per attribute), or label lists per attribute "a,b,c;x,y". A value outside
the given categories, an empty field (NaN) or an empty file is an LDPValueError.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpfed.data.tabular import has_header_row
from ldpfed.validation import LDPValueError, check_memory, check_positive, check_positive_int

SYNTHETIC_LAWS = ("zipf", "uniform")
REAL_SETS = ("fair",)
DEFAULT_ZIPF_EXPONENT = 1.1
DEFAULT_CATEGORICAL = "zipf"
DEFAULT_CATEGORICAL_USERS, DEFAULT_ATTRIBUTES, DEFAULT_CATEGORIES = 10_000, 4, 10
FAIR_COLUMNS = ("rate_marriage", "age", "yrs_married", "children", "religious", "educ", "occupation", "occupation_husb")
FAIR_CITATION = (
    "Fair, R. (1978). A Theory of Extramarital Affairs. Journal of Political Economy 86(1), "
    "45-61; data as shipped by statsmodels (statsmodels.datasets.fair)"
)


@dataclass(frozen=True)
class CategoricalData:
    """codes[i, j]: user i's category (0..k_j - 1) in attribute j; labels[j]: attribute j's categories."""

    codes: np.ndarray
    labels: tuple[tuple[str, ...], ...]
    names: tuple[str, ...]
    source: str
    description: str

    @property
    def users(self) -> int:
        return self.codes.shape[0]

    @property
    def attributes(self) -> int:
        return self.codes.shape[1]

    @property
    def categories(self) -> np.ndarray:
        """k_j per attribute."""
        return np.array([len(labels) for labels in self.labels], dtype=np.int64)

    @property
    def offsets(self) -> np.ndarray:
        """Start of each attribute's block in the concatenated one-hot vector (length d + 1)."""
        return np.concatenate([[0], np.cumsum(self.categories)])

    def frequencies(self) -> np.ndarray:
        """True frequencies of every (attribute, category), concatenated (length sum k_j)."""
        flat = (self.codes + self.offsets[:-1]).ravel()
        return np.bincount(flat, minlength=int(self.offsets[-1])) / self.users

    def subset(self, rows) -> CategoricalData:
        return CategoricalData(self.codes[rows], self.labels, self.names, self.source, self.description)


def _check_codes(codes: np.ndarray, categories: np.ndarray) -> None:
    if codes.ndim != 2 or codes.shape[0] == 0 or codes.shape[1] == 0:
        raise LDPValueError(f"categorical data must be a non-empty (users, attributes) table, got shape {codes.shape}")
    if np.any(categories < 2):
        bad = [int(j) for j in np.flatnonzero(categories < 2)]
        raise LDPValueError(f"every attribute needs at least 2 categories; attribute(s) {bad} have fewer")


# ---- synthetic ---------------------------------------------------------------------------------
def category_law(law: str, k: int, exponent: float = DEFAULT_ZIPF_EXPONENT) -> np.ndarray:
    """P(category c), c = 0..k-1: Zipf 1/(c+1)^S normalized, or uniform 1/k."""
    if law == "uniform":
        return np.full(k, 1.0 / k)
    weights = 1.0 / np.arange(1, k + 1) ** exponent
    return weights / weights.sum()


def parse_synthetic(spec: str) -> tuple[str, float] | None:
    """("zipf", S) / ("uniform", 0) for a synthetic spec, None for anything else."""
    law, _, parameter = str(spec).strip().lower().partition(":")
    if law not in SYNTHETIC_LAWS:
        return None
    if law == "uniform":
        if parameter:
            raise LDPValueError(f"the uniform law takes no parameter, got {spec!r}")
        return law, 0.0
    try:
        exponent = float(parameter) if parameter else DEFAULT_ZIPF_EXPONENT
    except ValueError:
        raise LDPValueError(f"zipf:S needs a number S > 0, got {spec!r}") from None
    return law, check_positive(exponent, "zipf exponent")


def synthetic_categorical(
    law: str, users: int, attributes: int, categories, rng: np.random.Generator, exponent: float = DEFAULT_ZIPF_EXPONENT
) -> np.ndarray:
    """(users, attributes) codes, attribute j drawn i.i.d. from `category_law(law, k_j)`.

    Vectorized by inverse CDF over all attributes at once: attribute j's CDF is shifted by j, so one
    searchsorted on the concatenated CDFs finds every user's category.
    """
    users = check_positive_int(users, "users")
    attributes = check_positive_int(attributes, "attributes")
    counts = _counts(categories, attributes)
    # the uniforms, their codes and the shifted codes: three 8-byte arrays of users x attributes
    check_memory(
        24.0 * users * attributes,
        f"{users:,} users x {attributes:,} attributes of synthetic categorical data",
        "lower --users or --dims",
    )
    cdfs = [np.cumsum(category_law(law, int(k), exponent)) for k in counts]
    for cdf in cdfs:
        cdf[-1] = 1.0  # exact top, so that u < 1 never falls past the last category
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    shifted = np.concatenate([cdf + j for j, cdf in enumerate(cdfs)])
    u = rng.random((users, attributes)) + np.arange(attributes)
    return np.searchsorted(shifted, u, side="right") - starts


def _synthetic_counts(text: str) -> list[float]:
    """--categories of a synthetic set: K or K1,K2,... (category counts, not labels)."""
    items = [item.strip() for item in str(text).split(",")]
    if not all(_is_number(item) for item in items):
        raise LDPValueError(
            f"--categories of a synthetic set must be a count K or counts K1,K2,... (integers >= 2), got {text!r}"
        )
    return [float(item) for item in items]


def _counts(categories, attributes: int) -> np.ndarray:
    counts = np.atleast_1d(np.asarray(categories))
    if counts.size == 1:
        counts = np.full(attributes, counts.item())
    if counts.shape != (attributes,):
        raise LDPValueError(
            f"categories must be one count or {attributes} counts (one per attribute), got {categories!r}"
        )
    return np.array(
        [check_positive_int(int(k) if float(k).is_integer() else k, "categories", minimum=2) for k in counts.tolist()],
        dtype=np.int64,
    )


# ---- the real data set -------------------------------------------------------------------------
def fair_codes() -> tuple[np.ndarray, tuple[tuple[str, ...], ...]]:
    """Fair's survey as codes and labels (module docstring); an LDPValueError without statsmodels."""
    try:
        from statsmodels.datasets import fair
    except ImportError:
        raise LDPValueError("the fair data set needs statsmodels: pip install 'ldpfed[categorical]'") from None
    frame = fair.load_pandas().data
    return _encode([[_label(v) for v in frame[column].to_numpy()] for column in FAIR_COLUMNS], None)


# ---- CSV files ---------------------------------------------------------------------------------
def _label(value) -> str:
    """A field as a category label: integral numbers without '.0' (3.0 -> '3')."""
    if isinstance(value, str):
        return value.strip()
    number = float(value)
    if math.isnan(number):
        return ""
    return str(int(number)) if number.is_integer() else repr(number)


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def parse_categories(text: str | None, attributes: int) -> list[tuple[str, ...]] | None:
    """The --categories option (module docstring) as one label tuple per attribute."""
    if text is None:
        return None
    text = str(text).strip()
    if ";" in text or not all(_is_number(item) for item in text.split(",")):
        groups = [tuple(item.strip() for item in group.split(",") if item.strip()) for group in text.split(";")]
        if len(groups) == 1:
            groups = groups * attributes
    else:
        groups = [
            tuple(str(c) for c in range(int(k))) for k in _counts([float(i) for i in text.split(",")], attributes)
        ]
    if len(groups) != attributes:
        raise LDPValueError(f"--categories gives {len(groups)} attribute(s), the data have {attributes}")
    for j, group in enumerate(groups):
        if len(group) < 2 or len(set(group)) != len(group):
            raise LDPValueError(f"--categories: attribute {j} needs at least 2 distinct categories, got {group!r}")
    return groups


def _encode(columns: list[list[str]], categories: list[tuple[str, ...]] | None):
    """Codes and labels of label columns: inferred (sorted) or the given categories."""
    codes, labels = [], []
    for j, column in enumerate(columns):
        values = np.asarray(column, dtype=object)
        if np.any(values == ""):
            row = int(np.flatnonzero(values == "")[0])
            raise LDPValueError(
                f"attribute {j} has an empty or NaN value (row {row}); categorical data must be complete"
            )
        if categories is None:
            found = sorted(set(column), key=lambda s: (0, float(s), s) if _is_number(s) else (1, 0.0, s))
        else:
            found = list(categories[j])
        lookup = {label: code for code, label in enumerate(found)}
        unknown = sorted(set(column) - set(lookup))
        if unknown:
            raise LDPValueError(f"attribute {j} has value(s) {unknown[:5]} outside its categories {found}")
        codes.append(np.fromiter((lookup[v] for v in column), dtype=np.int64, count=len(column)))
        labels.append(tuple(found))
    return np.column_stack(codes), tuple(labels)


def _check_not_continuous(columns, path, names) -> None:
    """A column of non-integer numbers is continuous data, not categories: an error (with
    --categories the labels are explicit and such a column is taken as given)."""
    for j, column in enumerate(columns):
        labels = [label for label in column if label]
        if (
            labels
            and all(_is_number(label) for label in labels)
            and any("." in label or "e" in label for label in labels)
        ):
            name = names[j] if names else f"column {j}"
            raise LDPValueError(
                f"{path}: {name} holds non-integer numbers ({len(set(labels))} distinct), which would each "
                "become a category; for real values use --task mean, or give --categories to take them as labels"
            )


def read_categorical_csv(path: str | Path, categories: str | None = None, header: bool | None = None):
    """(codes, labels, names) of a CSV of category labels or integers, one column per attribute."""
    path = Path(path)
    if not path.is_file():
        raise LDPValueError(f"no such file: {path}")
    header = has_header_row(path) if header is None else header
    with open(path, newline="") as handle:
        rows = [[field.strip() for field in row] for row in csv.reader(handle) if row]
    names = tuple(rows[0]) if header and rows else None
    rows = rows[1:] if header else rows
    if not rows:
        raise LDPValueError(f"{path} holds no data rows")
    width = len(rows[0])
    if any(len(row) != width for row in rows):
        raise LDPValueError(f"{path}: every row must have {width} fields")
    columns = [
        [_label(float(v)) if _is_number(v) else ("" if v.lower() == "nan" else v) for v in column]
        for column in zip(*rows)
    ]
    if categories is None:
        _check_not_continuous(columns, path, names)
    codes, labels = _encode([list(c) for c in columns], parse_categories(categories, width))
    return codes, labels, names or tuple(f"attribute {j}" for j in range(width))


# ---- one entry point ---------------------------------------------------------------------------
def available_categorical() -> list[str]:
    return [*SYNTHETIC_LAWS, *REAL_SETS]


def synthetic_shape(spec: str | None, attributes: int | None, categories: str | None) -> tuple[int, np.ndarray] | None:
    """(attributes, category counts) of a synthetic set, known before it is generated (so a budget
    can be checked first); None for fair or a file, whose shape is known once read."""
    if parse_synthetic(DEFAULT_CATEGORICAL if spec is None else spec) is None:
        return None
    attributes = DEFAULT_ATTRIBUTES if attributes is None else check_positive_int(attributes, "attributes")
    return attributes, _counts(_synthetic_counts(categories) if categories else DEFAULT_CATEGORIES, attributes)


def read_categorical(
    spec: str | None = None,
    *,
    users: int | None = None,
    attributes: int | None = None,
    categories: str | None = None,
    rng: np.random.Generator | None = None,
    header: bool | None = None,
) -> CategoricalData:
    """Categorical data by SPEC (module docstring). Synthetic sets default to
    DEFAULT_CATEGORICAL_USERS x DEFAULT_ATTRIBUTES with DEFAULT_CATEGORIES categories."""
    spec = DEFAULT_CATEGORICAL if spec is None else str(spec)
    synthetic = parse_synthetic(spec)
    if synthetic is not None:
        law, exponent = synthetic
        if header is not None:
            raise LDPValueError("--header/--no-header apply to a CSV file")
        if rng is None:
            raise LDPValueError("synthetic categorical data need a numpy Generator (a seed)")
        users = DEFAULT_CATEGORICAL_USERS if users is None else users
        attributes, counts = synthetic_shape(spec, attributes, categories)
        codes = synthetic_categorical(law, users, attributes, counts, rng, exponent)
        labels = tuple(tuple(str(c) for c in range(k)) for k in counts)
        law_text = f"zipf (S = {exponent:g})" if law == "zipf" else "uniform"
        source = f"synthetic {law_text}"
        description = f"synthetic {law_text}: {users} users x {attributes} attributes, categories {counts.tolist()}"
        names = tuple(f"attribute {j}" for j in range(attributes))
        return _finish(codes, labels, names, source, description)

    if spec.lower() == "fair":
        if categories is not None or header is not None:
            raise LDPValueError("--categories and --header/--no-header apply to a CSV file, not to fair")
        codes, labels = fair_codes()
        source, names = "fair (Fair 1978, statsmodels)", FAIR_COLUMNS
        description = f"fair: {codes.shape[0]} rows x {codes.shape[1]} categorical columns ({FAIR_CITATION})"
    elif Path(spec).suffix.lower() == ".csv":
        codes, labels, names = read_categorical_csv(spec, categories, header)
        source = f"file {spec}"
        description = f"read {codes.shape[0]} rows x {codes.shape[1]} categorical columns from {spec}"
    else:
        raise LDPValueError(f"unknown categorical data {spec!r}: use zipf, zipf:S, uniform, fair or a .csv file")
    if users is not None and users != codes.shape[0]:
        raise LDPValueError(f"the data have {codes.shape[0]} rows (users) but users={users}")
    if attributes is not None and attributes != codes.shape[1]:
        raise LDPValueError(f"the data have {codes.shape[1]} attributes (columns) but attributes={attributes}")
    return _finish(codes, labels, names, source, description)


def _finish(codes, labels, names, source, description) -> CategoricalData:
    data = CategoricalData(
        np.ascontiguousarray(codes, dtype=np.int64), tuple(labels), tuple(names), source, description
    )
    _check_codes(data.codes, data.categories)
    return data

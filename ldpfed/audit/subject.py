"""`AuditSubject`: a mechanism as the auditor sees it (spec: audit.md).

Every subject builder (`subjects`, `ldpvec_subject`, `gradient_noise_subject`) returns one; the
auditor (`auditor`) reads only this interface.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ldpfed.audit.events import (
    EventFamily,
    ExactOutputsFamily,
    SetFamily,
    ThresholdFamily,
    class_log_ratio,
    fixed_statistic,
    never_produced,
    unseen_in_table,
)
from ldpfed.validation import (
    LDPValueError,
)

OUTPUT_KINDS = ("real", "vector", "discrete")
# Families whose events are sets of exact floats (the rest are events on real-valued statistics).
NEVER_PRODUCED = "never-produced"  # sampler inversion: outputs one input can never produce
FLOATING_POINT_FAMILIES = ("bit-pattern", "outputs-table", NEVER_PRODUCED, "exact-outputs")
LATTICE_DRAWS = 100_000  # held-out draws per input on which sampler inversion is run (~55 replays each)
TABLE_DRAWS = 1_000_000  # draws per input in an outputs table and in its evaluation
DEFAULT_CATEGORIES = 4
VECTOR_SUBJECTS = ("gaussian-vector",)
LDPVEC = "ldpvec"  # ldpfed.directional: options base (a scalar mechanism), magnitude, dims, beta, window, release
LDPVEC_OPTIONS = ("base", "magnitude", "dims", "beta", "window", "release")
DEFAULT_VECTOR_DIMS = 10  # coordinates of a gradient noise audited by name (option dims)


@dataclass(frozen=True)
class AuditSubject:
    """A mechanism as the auditor sees it (see the module docstring).

    `draw(which, n, rng)` returns n outputs for input `which` (0: x, 1: x'), shape (n,) or (n, d).
    `log_ratio(y)` = log p(y | x) - log p(y | x'); `producible(y, which)` says exactly whether
    input `which` can emit each float y; `classes(y)` maps outputs to int64 classes.
    `unavailable` lists (family, reason) for the event families that apply to such a mechanism but
    could not be built for this one here (e.g. a sampler inversion whose replay check failed).
    """

    name: str
    epsilon: float
    delta: float
    sampler: str
    inputs: tuple[str, str]
    draw: Callable[[int, int, np.random.Generator], np.ndarray]
    output: str = "real"
    log_ratio: Callable[[np.ndarray], np.ndarray] | None = None
    centres: tuple[np.ndarray, np.ndarray] | None = None
    classes: Callable[[np.ndarray], np.ndarray] | None = None
    producible: Callable[[np.ndarray, int], np.ndarray] | None = None
    options: dict = field(default_factory=dict)
    unavailable: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.output not in OUTPUT_KINDS:
            raise LDPValueError(f"output must be one of {OUTPUT_KINDS}, got {self.output!r}")
        if self.output == "vector" and self.centres is None:
            raise LDPValueError("a vector subject needs its centres f(x), f(x')")

    def families(self) -> list[EventFamily]:
        """The event families this subject supports, in a stable order."""
        families: list[EventFamily] = []
        if self.output == "real":
            families.append(ThresholdFamily("threshold", "y", fixed_statistic(lambda y: y)))
        if self.output == "vector":
            centre, other = (np.asarray(c, dtype=float) for c in self.centres)
            direction = centre - other
            families += [
                ThresholdFamily("projection", "<y, f(x) - f(x')>", fixed_statistic(lambda y: y @ direction)),
                ThresholdFamily(
                    "nearest-centre",
                    "|y - f(x')| - |y - f(x)|",
                    fixed_statistic(lambda y: np.linalg.norm(y - other, axis=-1) - np.linalg.norm(y - centre, axis=-1)),
                ),
                ThresholdFamily(
                    "norm-ball-x", "|y - f(x)|", fixed_statistic(lambda y: np.linalg.norm(y - centre, axis=-1))
                ),
                ThresholdFamily(
                    "norm-ball-x'", "|y - f(x')|", fixed_statistic(lambda y: np.linalg.norm(y - other, axis=-1))
                ),
                ThresholdFamily("output-norm", "|y|", fixed_statistic(lambda y: np.linalg.norm(y, axis=-1))),
            ]
        if self.log_ratio is not None:
            # Rounded to 9 decimals: the float noise of evaluating the ratio (which follows the
            # outputs' low bits) must not turn this density event into a bit-pattern one.
            log_ratio = self.log_ratio
            families.append(
                ThresholdFamily(
                    "likelihood-ratio", "log p(y|x)/p(y|x')", fixed_statistic(lambda y: np.round(log_ratio(y), 9))
                )
            )
        if self.classes is not None:
            name, label = (
                ("bit-pattern", "bit-pattern classes")
                if self.output == "real"
                else ("outcome-classes", "outcome classes")
            )
            families.append(ThresholdFamily(name, f"fitted log-ratio of {label}", class_log_ratio(self.classes)))
        if self.output == "real":
            families.append(SetFamily("outputs-table", unseen_in_table, max_draws=TABLE_DRAWS))
            families.append(ExactOutputsFamily("exact-outputs"))
        if self.producible is not None:
            families.append(SetFamily(NEVER_PRODUCED, never_produced(self.producible), max_draws=LATTICE_DRAWS))
        return families

    def describe(self) -> dict:
        return {
            "mechanism": self.name,
            "options": self.options,
            "sampler": self.sampler,
            "claimed_epsilon": self.epsilon,
            "claimed_delta": self.delta,
            "neighbours": list(self.inputs),
        }


def vector_subject(release, neighbours, centres, **fields) -> AuditSubject:
    """An AuditSubject whose outputs are vectors: input `which` is the row `neighbours[which]`, and
    its n draws are `release(rows, rng)` on n copies of that row (one vectorized call). `centres`:
    f(x), f(x') for the vector event families; `fields`: the subject's other fields."""
    rows = tuple(np.asarray(row, dtype=float) for row in neighbours)

    def draw(which, n, rng):
        return release(np.broadcast_to(rows[which], (n, rows[which].size)), rng)

    return AuditSubject(draw=draw, output="vector", centres=centres, **fields)

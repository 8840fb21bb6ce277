"""Event families of the auditor, and how each chooses its event on the selection half (audit.md).

An event S is a set of outputs together with the input whose probability goes in the numerator:
eps_lower = ln((P[M(num) in S] - delta) / P[M(den) in S]). Each family looks at the selection
half of the draws (never at the held-out half) and returns its one best event, scored with the
same bound the held-out evaluation will use; the auditor then evaluates that event on the held-out
half. Families:
- threshold families, S = {s(y) >= c} or {s(y) <= c} on a statistic s: the output itself, the
  log-likelihood ratio where the density is known, the projection on f(x) - f(x'), the
  nearest-centre statistic |y - f(x')| - |y - f(x)|, the distance to either centre (norm balls) and
  the output norm; the statistic may itself be fitted on the selection half (the empirical
  log-ratio of output classes: outcomes of discrete mechanisms, bit patterns of floats);
- set families, S from a short list of candidate sets: outputs one input can never produce
  (sampler inversion), outputs of one input absent from a table of the other's outputs, and a few
  exact output values (point masses: a grid-valued sampler that also releases some value with a
  small extra probability hides it from every statistic above, but not from this family).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

INPUT_NAMES = ("x", "x'")
_MAX_THRESHOLDS = 4096  # candidate thresholds per direction (all distinct values when fewer)

# objective(hits_numerator, n_numerator, hits_denominator, n_denominator) -> eps_lower (vectorized)
Objective = Callable[[np.ndarray, int, np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class Event:
    """A set of outputs (`contains`) and the input whose probability is the numerator (0: x)."""

    family: str
    description: str
    numerator: int
    contains: Callable[[np.ndarray], np.ndarray]
    max_draws: int | None = None  # membership is costly: evaluate on at most this many draws per input


class EventFamily(ABC):
    name: str

    @abstractmethod
    def choose(self, selection: tuple[np.ndarray, np.ndarray], objective: Objective) -> Event:
        """The family's best event on the selection draws (outputs of x, outputs of x')."""


def _candidate_thresholds(pooled: np.ndarray) -> np.ndarray:
    """From the sorted pooled scores: every distinct value, or quantiles dense in both tails
    (where tight events live)."""
    distinct = np.concatenate([[True], pooled[1:] != pooled[:-1]])
    if np.count_nonzero(distinct) <= _MAX_THRESHOLDS:
        return pooled[distinct]
    tails = np.geomspace(1e-6, 0.05, 400)
    levels = np.unique(np.concatenate([tails, np.linspace(0.0, 1.0, _MAX_THRESHOLDS - 800), 1.0 - tails]))
    return np.unique(pooled[np.round(levels * (pooled.size - 1)).astype(np.int64)])


@dataclass
class ThresholdFamily(EventFamily):
    """S = {s(y) >= c} or {s(y) <= c}, either input in the numerator, c searched on selection.

    `fit(selection)` returns the statistic s (a fixed function for most families; the class
    log-ratio family fits it on the selection draws).
    """

    name: str
    statistic_name: str
    fit: Callable[[tuple[np.ndarray, np.ndarray]], Callable[[np.ndarray], np.ndarray]]

    def choose(self, selection, objective):
        statistic = self.fit(selection)
        scores = [np.nan_to_num(statistic(draws), nan=0.0) for draws in selection]
        ordered = [np.sort(part) for part in scores]
        thresholds = _candidate_thresholds(np.sort(np.concatenate(scores)))
        best = None
        for upper in (True, False):  # S = {s >= c} or S = {s <= c}
            if upper:
                hits = [part.size - np.searchsorted(part, thresholds, side="left") for part in ordered]
            else:
                hits = [np.searchsorted(part, thresholds, side="right") for part in ordered]
            for numerator in (0, 1):
                values = objective(
                    hits[numerator], scores[numerator].size, hits[1 - numerator], scores[1 - numerator].size
                )
                index = int(np.argmax(values))
                if best is None or values[index] > best[0]:
                    best = (values[index], numerator, upper, float(thresholds[index]))
        _, numerator, upper, threshold = best

        def contains(outputs, statistic=statistic, upper=upper, threshold=threshold):
            values = np.nan_to_num(statistic(outputs), nan=0.0)
            return values >= threshold if upper else values <= threshold

        description = (
            f"{self.statistic_name} {'>=' if upper else '<='} {threshold:.6g}; "
            f"P[{INPUT_NAMES[numerator]}] over P[{INPUT_NAMES[1 - numerator]}]"
        )
        return Event(self.name, description, numerator, contains)


def fixed_statistic(function: Callable[[np.ndarray], np.ndarray]):
    """A statistic that needs no fitting, in the form ThresholdFamily takes."""
    return lambda selection: function


def class_log_ratio(classes: Callable[[np.ndarray], np.ndarray]):
    """Fit s(y) = log((n_x(c) + 1/2) / (n_x'(c) + 1/2)) for the class c of y on the selection
    draws (0 for classes not seen): a likelihood-ratio classifier on discrete outcome classes or
    on float bit patterns (DP-Sniper-style, Bichsel et al. S&P 2021)."""

    def fit(selection):
        keys = [classes(draws) for draws in selection]
        known, inverse = np.unique(np.concatenate(keys), return_inverse=True)
        counts = [np.bincount(part, minlength=known.size) for part in np.split(inverse, [keys[0].size])]
        log_ratio = np.log((counts[0] + 0.5) / keys[0].size) - np.log((counts[1] + 0.5) / keys[1].size)

        def statistic(outputs):
            key = classes(outputs)
            position = np.clip(np.searchsorted(known, key), 0, known.size - 1)
            return np.where(known[position] == key, log_ratio[position], 0.0)

        return statistic

    return fit


@dataclass
class SetFamily(EventFamily):
    """The best of a few candidate sets, each with its numerator input, scored on selection.

    `candidates(fit_draws)` builds (description, numerator, contains) from draws that are then not
    used to score them (the first half of each selection half), so scores stay honest.
    """

    name: str
    candidates: Callable[[tuple[np.ndarray, np.ndarray]], list[tuple[str, int, Callable]]]
    max_draws: int | None = None

    def choose(self, selection, objective):
        halves = [np.array_split(draws[: self.max_draws] if self.max_draws else draws, 2) for draws in selection]
        fit_draws = (halves[0][0], halves[1][0])
        score_draws = (halves[0][1], halves[1][1])
        best = None
        for index, (_, numerator, contains) in enumerate(self.candidates(fit_draws)):
            top, bottom = score_draws[numerator], score_draws[1 - numerator]
            value = objective(
                np.array([contains(top).sum()]), len(top), np.array([contains(bottom).sum()]), len(bottom)
            )[0]
            if best is None or value > best[0]:
                best = (value, index)
        # The final event may use all selection draws (e.g. a bigger table), never held-out ones.
        capped = tuple(draws[: self.max_draws] if self.max_draws else draws for draws in selection)
        description, numerator, contains = self.candidates(capped)[best[1]]
        return Event(self.name, description, numerator, contains, self.max_draws)


def never_produced(producible: Callable[[np.ndarray, int], np.ndarray]):
    """Candidate sets 'outputs input j can never produce' (numerator: the other input)."""

    def candidates(_fit_draws):
        return [
            (
                f"outputs {INPUT_NAMES[other]} can never produce (sampler inversion); "
                f"P[{INPUT_NAMES[1 - other]}] over P[{INPUT_NAMES[other]}]",
                1 - other,
                lambda outputs, other=other: ~producible(outputs, other),
            )
            for other in (1, 0)
        ]

    return candidates


def unseen_in_table(fit_draws):
    """Candidate sets 'outputs absent from a table of the other input's draws' (the table comes
    from draws independent of those the set is evaluated on)."""
    sets = []
    for other in (1, 0):
        table = np.unique(fit_draws[other])

        def contains(outputs, table=table):
            order = np.argsort(outputs)  # sorted look-ups stay in cache: ~20x faster at 10^6 draws
            ordered = outputs[order]
            position = np.clip(np.searchsorted(table, ordered), 0, table.size - 1)
            absent = np.empty(outputs.shape, dtype=bool)
            absent[order] = table[position] != ordered
            return absent

        sets.append(
            (
                f"outputs absent from a table of {table.size} distinct outputs of {INPUT_NAMES[other]}; "
                f"P[{INPUT_NAMES[1 - other]}] over P[{INPUT_NAMES[other]}]",
                1 - other,
                contains,
            )
        )
    return sets


def exact_keys(outputs: np.ndarray) -> np.ndarray:
    """Each scalar output's exact float, as its 64 bits (so -0.0 and +0.0 are different outputs)."""
    return np.ascontiguousarray(outputs, dtype=np.float64).view(np.uint64)


def _ranked_outputs(draws: tuple[np.ndarray, np.ndarray], numerator: int, objective: Objective) -> np.ndarray:
    """Distinct output values (keys), best first for the numerator input: each value scored alone
    as the event {y = v} by the audit's own bound on these draws (ties: the smaller key first).
    Only values seen more often under the numerator input are ranked."""
    keys = [exact_keys(part) for part in draws]
    known, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    parts = np.split(inverse, [keys[0].size])
    top = np.bincount(parts[numerator], minlength=known.size)
    bottom = np.bincount(parts[1 - numerator], minlength=known.size)
    keep = np.flatnonzero(top > bottom)
    if not keep.size:
        return known[:0]
    # The bound depends on the counts only: evaluate it once per distinct pair of counts.
    pairs, pair_of = np.unique(np.stack([top[keep], bottom[keep]]), axis=1, return_inverse=True)
    scores = objective(pairs[0], draws[numerator].size, pairs[1], draws[1 - numerator].size)[pair_of.reshape(-1)]
    return known[keep[np.lexsort((known[keep], -scores))]]


@dataclass
class ExactOutputsFamily(EventFamily):
    """S = the k best single output values of one input, k in `sizes` (audit.md: point masses).

    The values are ranked on the first half of the selection draws, each size and direction is
    scored on the second half (the ranking's overfitting does not enter the score), and the winner
    is re-ranked on all selection draws; the held-out half is never seen, so the bound stays valid.
    """

    name: str
    sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)

    def choose(self, selection, objective):
        halves = [np.array_split(draws, 2) for draws in selection]
        fit_draws, score_draws = (halves[0][0], halves[1][0]), (halves[0][1], halves[1][1])
        best = None
        for numerator in (0, 1):
            ranked = _ranked_outputs(fit_draws, numerator, objective)
            if not ranked.size:
                continue
            order = np.argsort(ranked)
            sizes = np.array([size for size in self.sizes if size <= ranked.size] or [ranked.size])
            hits = []
            for part in score_draws:  # rank of each scored draw's value in the list (size if absent)
                keys = exact_keys(part)
                position = np.clip(np.searchsorted(ranked[order], keys), 0, ranked.size - 1)
                rank = np.where(ranked[order][position] == keys, order[position], ranked.size)
                hits.append(np.searchsorted(np.sort(rank), sizes, side="left"))
            values = objective(
                hits[numerator], score_draws[numerator].size, hits[1 - numerator], score_draws[1 - numerator].size
            )
            index = int(np.argmax(values))
            if best is None or values[index] > best[0]:
                best = (values[index], numerator, int(sizes[index]))
        if best is None:  # no value is more frequent under either input
            return Event(self.name, "no exact output favours either input", 0, lambda y: np.zeros(len(y), dtype=bool))
        _, numerator, size = best
        chosen = np.sort(_ranked_outputs(selection, numerator, objective)[:size])
        shown = ", ".join(f"{value:.17g}" for value in chosen[:4].view(np.float64)) + (", ..." if size > 4 else "")

        def contains(outputs, chosen=chosen):
            keys = exact_keys(outputs)
            position = np.clip(np.searchsorted(chosen, keys), 0, chosen.size - 1)
            return chosen[position] == keys

        description = (
            f"y in {{{shown}}} ({chosen.size} exact outputs); "
            f"P[{INPUT_NAMES[numerator]}] over P[{INPUT_NAMES[1 - numerator]}]"
        )
        return Event(self.name, description, numerator, contains)

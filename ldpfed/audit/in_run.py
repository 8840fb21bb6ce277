"""The audit of one training run from what the run recorded about its canaries (audit.md).

A run with canaries records, in its local output only (never in the server's view):
- `CanaryRecord`: the canaries' ids, their secret inclusion coins, the seed of their directions
  (entropy and spawn key of the SeedSequence that `canary_directions` takes) and the model dimension;
- the model deltas, oriented so that an inserted canary pushes them along +direction: the final
  delta (final minus initial weights; black box) and/or each round's aggregate delta (white box).

`canary_audit` turns them into an `AuditVerdict`:
- black box (`final_delta`): scores = cosines with the final delta; the one-run bound over all
  canaries and coins, the final-model cosine estimate and its lower limit from the inserted ones;
- white box (`round_deltas`, shape (rounds, d), or `max_cosines`, the running maximum a run keeps
  with `np.maximum(kept, canary_cosines(directions, step))` each round so that it need not store
  the deltas): scores = each canary's largest cosine over the rounds; the one-run bound, and the
  all-iterates estimate (inserted vs never-inserted maxima; no lower limit: its null is itself a fit).
The level 1 - confidence is split evenly between the one-run bound and the lower limit (all of it
to the one-run bound in white box), so a sound run is flagged with probability at most 1 - confidence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ldpfed.audit.canaries import (
    all_iterates_estimate,
    canary_cosines,
    canary_directions,
    final_model_estimate,
    final_model_lower_limit,
    max_over_rounds,
)
from ldpfed.audit.one_run import one_run_audit
from ldpfed.audit.verdict import AuditVerdict, audit_verdict
from ldpfed.validation import LDPValueError, check_fraction, check_positive_int


@dataclass(frozen=True)
class CanaryRecord:
    """What a run keeps about its canaries (its local secret: the coins never leave the run)."""

    ids: tuple[int, ...]
    coins: tuple[bool, ...]
    entropy: int
    spawn_key: tuple[int, ...]
    dimension: int

    @classmethod
    def create(cls, root: np.random.SeedSequence, ids, coins, dimension: int) -> CanaryRecord:
        ids, coins = tuple(int(i) for i in ids), tuple(bool(c) for c in coins)
        if len(ids) != len(coins) or len(set(ids)) != len(ids):
            raise LDPValueError("canary ids must be distinct, one coin per id")
        dimension = check_positive_int(dimension, "dimension", minimum=2)
        return cls(ids, coins, int(root.entropy), tuple(root.spawn_key), dimension)

    def directions(self) -> np.ndarray:
        root = np.random.SeedSequence(self.entropy, spawn_key=self.spawn_key)
        return canary_directions(root, self.ids, self.dimension)

    def to_dict(self) -> dict:
        return asdict(self)


def canary_audit(
    accounted_epsilon: float,
    record: CanaryRecord,
    *,
    delta: float,
    final_delta: np.ndarray | None = None,
    round_deltas: np.ndarray | None = None,
    max_cosines: np.ndarray | None = None,
    confidence: float = 0.95,
) -> AuditVerdict:
    """The verdict of one run: black box from `final_delta`, white box from `round_deltas` or
    `max_cosines` (give exactly one; call twice for both threat models)."""
    if sum(given is not None for given in (final_delta, round_deltas, max_cosines)) != 1:
        raise LDPValueError("give exactly one of final_delta (black box), round_deltas or max_cosines (white box)")
    alpha = 1.0 - check_fraction(confidence, "confidence")
    coins = np.asarray(record.coins, dtype=bool)
    if coins.sum() < 2 or (~coins).sum() < 2:
        raise LDPValueError("the audit needs at least 2 inserted and 2 left-out canaries")
    directions = record.directions()
    if final_delta is not None:
        scores = canary_cosines(directions, np.asarray(final_delta, dtype=float).reshape(-1))
        seen, level = scores[coins], alpha / 2.0
        estimate = final_model_estimate(seen, record.dimension, delta, unseen=int((~coins).sum()))
        lower = final_model_lower_limit(seen, record.dimension, delta, 1.0 - level)
        limit_confidence = 1.0 - level
    else:
        if max_cosines is not None:
            scores = np.asarray(max_cosines, dtype=float).reshape(-1)
            if scores.size != coins.size:
                raise LDPValueError(f"max_cosines holds {scores.size} canaries, the record {coins.size}")
        else:
            deltas = np.atleast_2d(np.asarray(round_deltas, dtype=float))
            scores = max_over_rounds(canary_cosines(directions, deltas))
        estimate = all_iterates_estimate(scores[coins], scores[~coins], record.dimension, delta)
        lower = limit_confidence = None
        level = alpha
    bound = one_run_audit(scores, coins, delta=delta, confidence=1.0 - level)
    return audit_verdict(accounted_epsilon, bound, estimate, lower, limit_confidence)

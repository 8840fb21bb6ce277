"""The empirical privacy auditor: draw, choose events on one half, bound eps on the other (audit.md).

    result = audit("laplace", epsilon=1.0, sampler="continuous", samples=10**6, seed=0)

Procedure, for a subject with neighbours x, x' and claim (eps, delta):
1. Draw `samples` outputs from each input (two independent streams of SeedSequence(seed)); the
   first half of each is the selection half, the second the held-out half.
2. Each of the subject's E event families chooses its one best event on the selection half.
3. Each chosen event S is evaluated once on the held-out half: with alpha = 1 - confidence, every
   Clopper–Pearson bound is taken at one-sided level alpha / (2E) (a union/Bonferroni split over
   the 2E bounds), so with probability >= confidence all of them hold at once and every
   eps_lower(S) = ln((p_low - delta) / q_high) is a valid lower bound; the reported epsilon_lower
   is their maximum (0 when no event certifies a positive value).
4. Verdict "fail" when epsilon_lower > the claimed eps (the claim is then false at that
   confidence), else "pass" (which proves nothing: audits can only refute).
Events whose membership test is costly (sampler inversion) use the first LATTICE_DRAWS held-out
draws of each input; the bound uses the counts it was evaluated on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ldpfed.audit.bounds import clopper_pearson_lower, clopper_pearson_upper, epsilon_lower_bound
from ldpfed.audit.events import INPUT_NAMES, Event
from ldpfed.audit.subjects import AuditSubject, build_subject
from ldpfed.validation import LDPValueError, check_fraction, check_positive_int

DEFAULT_SAMPLES = 1_000_000
DEFAULT_CONFIDENCE = 0.99
MIN_SAMPLES = 1_000


@dataclass(frozen=True)
class AuditResult:
    """What an audit found; `events` holds every evaluated event with its counts and bounds,
    `unavailable_families` each event family that applies to such a mechanism but could not be
    built here, with the reason ({"family", "reason"}), so a missing event is never silent."""

    mechanism: str
    options: dict
    sampler: str
    claimed_epsilon: float
    claimed_delta: float
    epsilon_lower: float
    confidence: float
    event: str
    samples: int
    verdict: str
    neighbours: list
    seed: int
    events: list = field(default_factory=list)
    unavailable_families: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _evaluate(event: Event, held_out: tuple[np.ndarray, np.ndarray], delta: float, alpha: float) -> dict:
    draws = [part[: event.max_draws] if event.max_draws else part for part in held_out]
    hits = [int(np.count_nonzero(event.contains(part))) for part in draws]
    top, bottom = event.numerator, 1 - event.numerator
    epsilon = float(epsilon_lower_bound(hits[top], len(draws[top]), hits[bottom], len(draws[bottom]), delta, alpha))
    return {
        "family": event.family,
        "event": event.description,
        "numerator": INPUT_NAMES[top],
        "epsilon_lower": max(epsilon, 0.0),
        "hits_numerator": hits[top],
        "draws_numerator": len(draws[top]),
        "hits_denominator": hits[bottom],
        "draws_denominator": len(draws[bottom]),
        "p_numerator_lower": float(clopper_pearson_lower(hits[top], len(draws[top]), alpha)),
        "p_denominator_upper": float(clopper_pearson_upper(hits[bottom], len(draws[bottom]), alpha)),
    }


def run_audit(
    subject: AuditSubject,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    families: tuple[str, ...] | None = None,
    progress: Callable[[str], None] | None = None,
) -> AuditResult:
    """Audit `subject` (see the module docstring for the procedure and its confidence split).

    `families` restricts the event families by name (e.g. only the real-valued ones, to test the
    mechanism's law apart from its floats); the confidence is split over those evaluated.
    `progress(text)` is called after each step: the draws at each neighbour, then each family.
    """
    samples = check_positive_int(samples, "samples", minimum=MIN_SAMPLES)
    seed = check_positive_int(seed, "seed", minimum=0)
    confidence = check_fraction(confidence, "confidence")
    streams = [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(2)]
    advance = progress or (lambda text: None)
    draws = []
    for which, rng in enumerate(streams):
        draws.append(subject.draw(which, samples, rng))
        advance(f"{samples:,} draws at neighbour {which + 1}/2")
    half = samples // 2
    selection = (draws[0][:half], draws[1][:half])
    held_out = (draws[0][half:], draws[1][half:])

    supported = subject.families()
    families_asked = families
    if families is not None:
        unknown = set(families) - {family.name for family in supported}
        if unknown:
            why = "".join(f"; {name}: {reason}" for name, reason in subject.unavailable if name in unknown)
            raise LDPValueError(
                f"event families {sorted(unknown)} do not apply to {subject.name}; "
                f"available: {', '.join(family.name for family in supported)}{why}"
            )
        supported = [family for family in supported if family.name in families]
        if not supported:
            raise LDPValueError("no event family selected")
    families = supported
    alpha = (1.0 - confidence) / (2 * len(families))  # Bonferroni over 2 bounds per family

    def objective(hits_top, n_top, hits_bottom, n_bottom):
        return epsilon_lower_bound(hits_top, n_top, hits_bottom, n_bottom, subject.delta, alpha)

    evaluated = []
    for family in families:
        evaluated.append(_evaluate(family.choose(selection, objective), held_out, subject.delta, alpha))
        advance(f"event family {family.name}")
    best = max(evaluated, key=lambda row: row["epsilon_lower"])
    epsilon_lower = best["epsilon_lower"]
    return AuditResult(
        mechanism=subject.name,
        options=subject.options,
        sampler=subject.sampler,
        claimed_epsilon=subject.epsilon,
        claimed_delta=subject.delta,
        epsilon_lower=epsilon_lower,
        confidence=confidence,
        event=f"{best['family']}: {best['event']}" if epsilon_lower > 0 else "none certifies eps > 0",
        samples=samples,
        verdict="fail" if epsilon_lower > subject.epsilon else "pass",
        neighbours=list(subject.inputs),
        seed=seed,
        events=evaluated,
        unavailable_families=[
            {"family": name, "reason": reason}
            for name, reason in subject.unavailable
            if families_asked is None or name in families_asked
        ],
    )


def audit(
    mechanism,
    epsilon: float | None = None,
    delta: float | None = None,
    *,
    sampler: str | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    families: tuple[str, ...] | None = None,
    **options,
) -> AuditResult:
    """Audit a mechanism given by name (ldpfed.audit.available()), or a Mechanism,
    FrequencyOracle or AuditSubject instance (whose own claim is audited)."""
    if isinstance(mechanism, str) and epsilon is None:
        raise LDPValueError("epsilon is required")
    subject = build_subject(mechanism, epsilon, delta, sampler=sampler, **options)
    return run_audit(subject, samples, seed, confidence, families)

"""The verdict of an in-run audit: the accounted eps beside what the canaries show (audit.md).

    verdict = audit_verdict(4.0, lower_bound=one_run_audit(scores, coins), estimate=final_model_estimate(...))
    verdict.lines  # ["accounted 4.0; empirical lower bound 1.3 (95%); cosine estimate 3.9"]
    verdict.failed  # True when the lower bound exceeds the accounted eps

`failed`: the one-run lower bound exceeds the accounted eps; at its confidence this refutes the
accounting (a proof, like a failed `ldpfed audit`). `suspect`: the cosine estimate's lower
confidence limit exceeds the accounted eps; it rests on a Gaussian fit to the canaries' cosines, so
it is a warning, not a proof. A passed audit proves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ldpfed.audit.canaries import CosineEstimate
from ldpfed.audit.one_run import OneRunBound
from ldpfed.validation import LDPValueError, check_positive


def _number(value: float) -> str:
    """One decimal from 1 on ("4.0", "12.3"), two significant digits below ("0.46")."""
    return f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def _percent(confidence: float) -> str:
    return f"{100 * confidence:g}%"


@dataclass(frozen=True)
class AuditVerdict:
    """The accounted eps, the one-run lower bound, the cosine estimate and its lower limit."""

    accounted_epsilon: float
    lower_bound: OneRunBound | None = None
    estimate: CosineEstimate | None = None
    estimate_lower: float | None = None  # the cosine estimate's lower confidence limit
    estimate_confidence: float | None = None
    estimate_note: str | None = None  # why the estimate has no lower limit (its fit does not model the noise)

    def __post_init__(self) -> None:
        if (self.estimate_lower is None) != (self.estimate_confidence is None):
            raise LDPValueError("estimate_lower and estimate_confidence go together")
        object.__setattr__(self, "accounted_epsilon", check_positive(self.accounted_epsilon, "accounted_epsilon"))

    @property
    def failed(self) -> bool:
        return self.lower_bound is not None and self.lower_bound.epsilon_lower > self.accounted_epsilon

    @property
    def suspect(self) -> bool:
        return self.estimate_lower is not None and self.estimate_lower > self.accounted_epsilon

    @property
    def flagged(self) -> bool:
        return self.failed or self.suspect

    @property
    def lines(self) -> list[str]:
        """The console lines: the figures, then one line per flag."""
        parts = [f"accounted {_number(self.accounted_epsilon)}"]
        if self.lower_bound is not None:
            bound = self.lower_bound
            parts.append(f"empirical lower bound {_number(bound.epsilon_lower)} ({_percent(bound.confidence)})")
        if self.estimate is not None:
            text = f"cosine estimate {_number(self.estimate.epsilon)}"
            if self.estimate_lower is not None:
                text += f" ({_percent(self.estimate_confidence)} lower limit {_number(self.estimate_lower)})"
            if self.estimate_note:
                text += f" ({self.estimate_note})"
            parts.append(text)
        lines = ["; ".join(parts)]
        if self.failed:
            lines.append(
                f"FAILED: the empirical lower bound {_number(self.lower_bound.epsilon_lower)} "
                f"({_percent(self.lower_bound.confidence)}) exceeds the accounted eps "
                f"{_number(self.accounted_epsilon)}: the run leaks more than it accounts"
            )
        if self.suspect:
            lines.append(
                f"SUSPECT: the cosine estimate's {_percent(self.estimate_confidence)} lower limit "
                f"{_number(self.estimate_lower)} exceeds the accounted eps {_number(self.accounted_epsilon)} "
                "(a Gaussian fit to the canaries' cosines, not a proof)"
            )
        return lines

    def to_dict(self) -> dict:
        return {
            "accounted_epsilon": self.accounted_epsilon,
            "one_run": None if self.lower_bound is None else self.lower_bound.to_dict(),
            "cosine": None if self.estimate is None else self.estimate.to_dict(),
            "cosine_lower_limit": self.estimate_lower,
            "cosine_confidence": self.estimate_confidence,
            "cosine_note": self.estimate_note,
            "failed": self.failed,
            "suspect": self.suspect,
            "lines": self.lines,
        }


audit_verdict = AuditVerdict  # the verdict from whichever of the one-run bound and the cosine estimate the run computed

"""Whether a run is private, as a function of its config (spec: federated.md, "Who knows the noise").

A run is private when everything a client sends carries accounted noise: its privatized report
and, by design, public values (its sample count, the FedAvg weight; whether it replied). Anything
else that leaves a client in the clear makes the run non-private, and every privacy output says
`private: false` with the reasons and no finite epsilon. Clean values for the simulation's
diagnostics never reach the server (ldpfed.protocols.diagnostics), so they do not count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ldpfed.gradient_noise as gradient_noise
from ldpfed.accounting import CalibratedDpEvent, legacy_event, not_private
from ldpfed.config import Config
from ldpfed.gradient_noise import GUARANTEE_FAILS


@dataclass(frozen=True)
class PrivacyStatus:
    private: bool
    reasons: tuple[str, ...]

    def epsilon(self, value: float) -> float | None:
        """`value` if the run is private (and finite), else None (JSON null)."""
        return float(value) if self.private and math.isfinite(value) else None

    def record(self) -> dict:
        return {"private": self.private, "privacy_reasons": list(self.reasons)}


def privacy_status(config: Config, sends: str) -> PrivacyStatus:
    """Private, or not with the reasons; `sends`: what a client sends (the task's `Task.sends`)."""
    reasons = []
    if not config.noisy:
        reasons.append(f"mechanism none: clients send their {sends} without noise")
    if gradient_noise.guarantee_fails(config.privacy.mechanism):
        reasons.append(f"mechanism {config.privacy.mechanism}: {GUARANTEE_FAILS} (gradient-noise.md)")
    if config.directional and config.training.magnitude == "exact-unsafe":
        reasons.append(
            "ldpvec magnitude exact-unsafe: clients send the norm of their update without noise (directional.md)"
        )
    return PrivacyStatus(not reasons, tuple(reasons))


def round_event(
    config: Config,
    epsilon: float,
    delta: float | None,
    noise_multiplier: float | None = None,
    mechanism_event=None,
    sends: str = "tuples",
):
    """The ledger event of one client's round: the mechanism's (eps, delta[, noise multiplier]) cost
    (or its own `mechanism_event`, calibrated to (eps, delta), e.g. the discrete Gaussian of the
    safe sampler), or a not-private event with the reasons (ldpfed.accounting), by `privacy_status`
    (`sends`: what a client sends, the task's `Task.sends`)."""
    status = privacy_status(config, sends)
    if not status.private:
        return not_private("; ".join(status.reasons))
    if mechanism_event is not None:
        return CalibratedDpEvent(mechanism_event, epsilon, delta)
    return legacy_event(epsilon, delta, config.privacy.mechanism, noise_multiplier)

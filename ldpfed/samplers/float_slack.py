"""The float slack of a sampler, composed into an accountant's result (spec: gradient-noise.md,
Accounting across rounds; mechanisms.md, Floating-point safety).

An event's RDP or PLD curve describes an IDEAL law, e.g. the exact discrete Gaussian. The safe
samplers draw it up to a float error bounded per draw (ldpfed.samplers.safe_grid,
`gaussian_sampler_slack`): over one release, every set S of outputs has

    P_real(S) <= e^over P_ideal(S) + mass,     P_ideal(S) <= e^under P_real(S),

whatever the input (`FloatSlack(over, under, mass)`; per draw over = ln r2, under = ln r1 and mass
the float and tail terms e, summed over the draws of the release).

Composition rule (the hybrid argument, the "basic composition" of the slack: the argument of
Dwork & Roth 2014, Theorem 3.16, applied to the real-vs-ideal closeness). Take T releases,
adaptively composed, and two neighbouring inputs x, x'. Swap the real sampler for the ideal one
draw by draw (each swap is one draw's closeness, applied to the conditional probability of S given
the other draws, a function in [0, 1]); after all swaps

    P_real,T(S | x) <= e^A P_ideal,T(S | x) + e^A B,    P_ideal,T(S | x') <= e^C P_real,T(S | x'),

A, B, C the sums of over, mass, under over the releases. If the ideal composition is
(eps_i, delta_i)-DP (what the accountant computes from the ideal curves, never hand-written), then
P_real,T(S|x) <= e^(eps_i + A + C) P_real,T(S|x') + e^A (delta_i + B). So the real composition is

    (eps_i(delta_i) + A + C, target)-DP  with  delta_i = target e^-A - B,

i.e. the accountant's ideal eps is taken at the slightly smaller delta_i and the slack's eps A + C
is added: sound for any accountant whose result is an (eps, delta)-DP statement about the ideal
composition (rdp and pld; basic/advanced compose calibrated guarantees, which include the slack
already). Releases that do not involve the differing record have the same real law under x and
x' and need no swap: the slack is counted for the accounted releases only, as the events are.
For one release it is `safe_grid.gaussian_float_slack`'s bound (the same hybrid over d draws).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ldpfed.validation import LDPValueError


@dataclass(frozen=True)
class FloatSlack:
    """How far a sampler's realized law may be from the ideal one (module docstring): log factors
    `over` (realized above ideal) and `under` (ideal above realized), and an additive `mass`."""

    over: float = 0.0
    under: float = 0.0
    mass: float = 0.0

    def __add__(self, other: FloatSlack) -> FloatSlack:
        return FloatSlack(self.over + other.over, self.under + other.under, self.mass + other.mass)

    def times(self, count: int) -> FloatSlack:
        """The slack of `count` such releases (the sums of the hybrid argument)."""
        return FloatSlack(count * self.over, count * self.under, count * self.mass)

    @property
    def epsilon(self) -> float:
        """The eps the slack adds to the ideal composition's: over + under."""
        return self.over + self.under

    def ideal_delta(self, target_delta: float) -> float:
        """delta_i = target e^-over - mass: the ideal composition's delta that leaves `target_delta`
        for the real one (LDPValueError when the slack alone exceeds the target)."""
        ideal = target_delta * math.exp(-self.over) - self.mass
        if not ideal > 0.0:
            raise LDPValueError(
                f"the samplers' float slack ({self.mass:.3g} in delta over the releases) leaves no "
                f"room in the target delta {target_delta:g}"
            )
        return ideal


NONE = FloatSlack()
SLACK_RULE = (
    "eps_ideal(target e^-over - mass) + over + under: basic composition of the samplers' per-draw float "
    "slack over the accounted releases (hybrid argument; ldpfed.samplers.float_slack)"
)


def event_slack(event) -> FloatSlack:
    """One leaf event's per-release slack (its `float_slack()`; none for exact or continuous laws)."""
    method = getattr(event, "float_slack", None)
    return method() if callable(method) else NONE


def composed_slack(pairs) -> FloatSlack:
    """The slack of (event, count) pairs composed: the sums of the module docstring."""
    total = NONE
    for event, count in pairs:
        total = total + event_slack(event).times(count)
    return total

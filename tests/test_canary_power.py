"""The audit's power and false-flag rate in seconds: one round of a run's canaries through the run's
own scoring and decision (ldpfed.protocols.canaries: `CanaryDesign`'s updates, the run's privatizer or
the trusted server's `CentralNoise`, `LocalAudit.observe` / `verdict` and `central_verdict`), over 20
design secrets: a sound mechanism is not flagged in at least 19 of 20, one whose noise is secretly
halved (a test-only privatizer; the accounting unchanged) in at least 19 of 20 is.

Settings (where a sound run's cosine estimate reaches at least half its accounted eps):
- local trust: 300 canaries, inid-gaussian at (4, 1e-5) per round, L2 clip 1, d = 650 (digits'
  logistic regression), one round: each canary's score is its own reply's cosine with its direction,
  +c against -c (the clip's diameter), so the estimate is the noise's own eps (the calibration's slack
  puts it a little below 4); halved noise doubles mu: eps ~ 9;
- central trust: 300 canaries, the trusted server's Gaussian on the sum of clipped updates (clip 1)
  at noise multiplier z = 1.2, d = 2,000, one round without sampling: accounted eps is the Gaussian
  mechanism's at mu = 1/z (3.96 at 1e-5, exact for one round); halved: mu doubles, eps ~ 9.
The verdict flags a sound run with probability at most 5% (its level, split between the one-run bound
and the cosine limit); with the RDP slack and the half-inserted canaries' spread (mu's standard
error ~0.12 at mu ~ 0.8), the limit of a sound run sits far below 4, that of a halved one far above.
"""

from __future__ import annotations

import numpy as np

from ldpfed.audit.canaries import epsilon_two_gaussians
from ldpfed.protocols import canaries, seeds
from ldpfed.protocols.central import CentralNoise, clip_updates
from ldpfed.protocols.train import TrainOutcome
from ldpfed.training.noise_privatizer import NoisePrivatizer

COUNT, SEEDS, DELTA = 300, 20, 1e-5


class HalvedNoise(NoisePrivatizer):
    """Test only: the privatizer's noise draws times 1/2, its accounting unchanged."""

    def privatize_rows(self, updates, rngs, broadcast=None):
        clean = self.clip_only(updates)
        return clean + 0.5 * (super().privatize_rows(updates, rngs, broadcast) - clean)


class _Server:
    """What `LocalAudit.observe` reads of the server half after a round."""

    def __init__(self, privatizer, outcome: TrainOutcome) -> None:
        self.privatizer, self.outcome = privatizer, outcome


def _local_flagged(privatizer: NoisePrivatizer, secret: int) -> bool:
    dims, clip = 650, privatizer.clip
    design = canaries.CanaryDesign(secret, first=0, count=COUNT)
    updates = design.updates(design.ids, dims, clip, left_out=-1.0)  # what TrainNode sends for a canary
    rngs = [seeds.rng(secret * 1000 + pid, seeds.NOISE, 1) for pid in design.ids]  # each canary its own stream
    noisy = privatizer.privatize_rows(updates, rngs, {})
    sizes = np.ones(COUNT)
    mean = noisy.mean(axis=0)
    audit = canaries.LocalAudit(design, dims)
    audit.observe(_Server(privatizer, TrainOutcome(design.ids, sizes, noisy, mean, mean)))
    return audit.verdict(4.0, DELTA).flagged  # accounted: one round of the mechanism at (4, 1e-5)


def _central_flagged(factor: float, secret: int) -> bool:
    dims, clip, multiplier = 2000, 1.0, 1.2
    noise = CentralNoise(multiplier, dims)
    design = canaries.CanaryDesign(secret, first=0, count=COUNT)
    clipped, _ = clip_updates(design.updates(design.ids, dims, clip, left_out=0.0), clip)  # left out: zero
    total = clipped.sum(axis=0)
    released = total + factor * (noise.release_sum(total, clip, np.random.default_rng(secret)) - total)
    accounted = epsilon_two_gaussians(0.0, multiplier, 1.0, multiplier, DELTA)
    return canaries.central_verdict(design, released / COUNT, accounted, DELTA).flagged


def test_local_sound_mechanism_is_not_flagged_and_halved_noise_is():
    sound_noise, halved_noise = (
        kind("inid-gaussian", epsilon=4.0, delta=DELTA, clip=1.0) for kind in (NoisePrivatizer, HalvedNoise)
    )
    sound = sum(_local_flagged(sound_noise, secret) for secret in range(SEEDS))
    halved = sum(_local_flagged(halved_noise, secret) for secret in range(SEEDS))
    assert sound <= 1 and halved >= SEEDS - 1, (sound, halved)


def test_central_sound_mechanism_is_not_flagged_and_halved_noise_is():
    sound = sum(_central_flagged(1.0, secret) for secret in range(SEEDS))
    halved = sum(_central_flagged(0.5, secret) for secret in range(SEEDS))
    assert sound <= 1 and halved >= SEEDS - 1, (sound, halved)

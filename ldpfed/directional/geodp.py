"""GeoDP for central DP-SGD and its accounting (spec: directional.md, GeoDP; thesis Algorithm 5;
Duan et al. 2025, "Analyzing and Optimizing Perturbation of DP-SGD Geometrically").

One step on a batch of per-example gradients g_1..g_b (b random under Poisson sampling; B the
expected batch size, public, used for normalization as in Opacus):
- each g_i is clipped to L2 norm C;
- magnitude: r = ||sum_i g_i|| / B, released as r + (C/B) N(0, sigma^2);
- direction: each g_i's angles are clipped into their windows (fixed or centred on a public
  reference, `windows.py`) and written as offsets from the window centres; the angle vector
  centre + (sum of offsets)/B is released with (sqrt(d+2) beta pi / B) N(0, sigma^2) per angle;
- the noisy (magnitude, angles) are converted back.

DECISION (sensitivity of the direction). The paper and the thesis convert the clipped batch MEAN
to angles and divide the angle noise by B. The angles of a mean are not 1/B-sensitive: one
example can turn a small mean around entirely, so that noise is not calibrated. Averaging the
per-example window-clipped angle offsets is what the 1/B sensitivity holds for: adding or removing
one example moves the sum of offsets by at most each window's half-width, so its L2 sensitivity
is (beta pi / 2) sqrt(d+2) <= sqrt(d+2) beta pi, the spec's figure (which also covers replacing
one example). The magnitude ||sum g_i|| moves by at most C (triangle inequality).

Accounting: the magnitude and the direction are two Gaussian releases of the same batch, each with
noise multiplier sigma for its sensitivity; they compose ADDITIVELY in RDP (the GaussianDpEvent
composed twice inside the sampling event; ldpfed's RDP accountant over dp-accounting's). The thesis'
Theorem 7 averages the two costs ((eps1 + (d-1) eps2)/d), i.e. charges one Gaussian of multiplier
sigma; that is not a composition (`thesis_averaged_event` exists only to show the difference).
Numeric DP-SGD (Gaussian noise sigma C on the sum) is one GaussianDpEvent per step.
Samplers (option `sampler`; mechanisms.md, Floating-point safety): "safe" (the default) releases
each part with ldpfed.gradient_noise's safe i.n.i.d. Gaussian at noise multiplier sigma: the sum
||sum g_i|| (sensitivity C, one coordinate) and the sum of the angle offsets (uniform profile, L2
sensitivity sqrt(d+2) beta pi) are rounded to fixed grids and get exact discrete Gaussian
integers, s = sigma (J + sqrt(d)) grid steps (the rounding's inflation); each is a
DiscreteGaussianVectorDpEvent(sigma), whose RDP curve is the continuous one's, but which has no
Poisson-subsampled bound: sound with shuffled batches only (`training_event` refuses the other).
Each event carries its sampler's float slack, which the rdp accountant composes into the reported
eps (ldpfed.samplers.float_slack).
"continuous": rng.standard_normal at the spec's sds, NOT floating-point safe (Mironov 2012).
Sampling and the neighbouring relation every figure assumes:
- "poisson": each example joins a step's batch with probability q = B/N, amplified by
  PoissonSampledDpEvent; adjacency: add or remove one example (dp_accounting's ADD_OR_REMOVE_ONE,
  Abadi et al. 2016; N, hence q and the step count, is public).
- "shuffle": a fresh permutation per epoch cut into fixed-size batches of B, each example in exactly
  one batch per epoch. Add/remove does not fit (one more example moves every later batch and may
  add a step), so the adjacency is REPLACE ONE example: the permutation is over positions, so the
  neighbours differ in one batch per epoch, where the clipped sum moves by up to 2C (||g - g'|| <=
  2C) and ||sum g_i|| by up to 2C; the other steps' conditional laws are equal (parallel
  composition, adaptively). One epoch is one release at multiplier sigma/2 for the sum (numeric)
  and for the magnitude (GeoDP); GeoDP's direction keeps sigma, its L2 sensitivity sqrt(d+2) beta pi
  already covering a replaced example (window widths, see the DECISION above). Epochs compose in
  RDP. No amplification by shuffling is claimed. dp_accounting's RdpAccountant takes a
  GaussianDpEvent's multiplier as given whatever its relation (it does not double the shift for
  REPLACE_ONE, its PLD accountant does), so the halved multiplier is written into the event here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import attr
import numpy as np

import ldpfed.directional.windows as win
from ldpfed.accounting import create_accountant
from ldpfed.directional.spherical import from_spherical, to_spherical
from ldpfed.gradient_noise.inid_gaussian import InidGaussian
from ldpfed.validation import (
    LDPValueError,
    check_choice,
    check_fraction,
    check_generator,
    check_positive,
    check_positive_int,
)

SAMPLINGS = ("poisson", "shuffle")
PERTURBATIONS = ("numeric", "geodp")
SAMPLERS = ("safe", "continuous")
SAFE_POISSON = (
    "the safe sampler (discrete Gaussian) has no Poisson-subsampled RDP bound in ldpfed: use sampling "
    "'shuffle', or the continuous sampler (NOT floating-point safe)"
)


def clip_rows(gradients, clip: float) -> np.ndarray:
    """Each row scaled to L2 norm <= clip."""
    g = np.asarray(gradients, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", g, g))
    return g * np.minimum(1.0, clip / np.where(norms > 0, norms, 1.0))[:, None]


@dataclass(frozen=True)
class GeoDP:
    """GeoDP noise for the mean of a batch of per-example gradients (see the module docstring)."""

    noise_multiplier: float
    clip: float
    batch_size: int
    beta: float = 1.0
    window: str = "fixed"
    sampler: str = "safe"

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_positive(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "clip", check_positive(self.clip, "clip"))
        object.__setattr__(self, "batch_size", check_positive_int(self.batch_size, "batch_size"))
        object.__setattr__(self, "beta", win.check_beta(self.beta))
        object.__setattr__(self, "window", win.check_window(self.window))
        object.__setattr__(self, "sampler", check_choice(self.sampler, SAMPLERS, "sampler"))
        object.__setattr__(self, "_safe", {})  # dims -> (magnitude noise, angle noise) (derived)

    def safe_noises(self, dims: int):
        """(magnitude noise, angle noise) of the safe sampler: InidGaussian at noise multiplier sigma
        for ||sum g_i|| (profile [C]) and for the sum of angle offsets (uniform profile, L2 sqrt(d+2) beta pi)."""
        if dims not in self._safe:
            _, l2 = win.sensitivities(self.beta, dims)
            self._safe[dims] = (
                InidGaussian(np.array([self.clip]), noise_multiplier=self.noise_multiplier, sampler="safe"),
                InidGaussian(
                    np.full(dims - 1, l2 / math.sqrt(dims - 1)), noise_multiplier=self.noise_multiplier, sampler="safe"
                ),
            )
        return self._safe[dims]

    def noise_sd(self, dims: int) -> tuple[float, float]:
        """(sd of the magnitude noise, sd of the noise on each angle): the spec's C sigma / B and
        sqrt(d+2) beta pi sigma / B, or the safe sampler's integer noise (inflated by the rounding,
        <= 1 + 2^-10), its rounding (variance <= g^2/4) aside."""
        if self.sampler == "safe":
            magnitude, angles = self.safe_noises(dims)
            return float(magnitude.scales[0]) / self.batch_size, float(angles.scales[0]) / self.batch_size
        _, l2 = win.sensitivities(self.beta, dims)
        return self.clip * self.noise_multiplier / self.batch_size, l2 * self.noise_multiplier / self.batch_size

    def _sums(self, gradients, reference):
        """(||sum g_i||, window centres, sum of the angle offsets in radians) of the clipped batch."""
        g = np.atleast_2d(np.asarray(gradients, dtype=np.float64))
        if g.ndim != 2 or g.shape[-1] < 2:
            raise LDPValueError(f"gradients must be a batch (examples, d) with d >= 2, got shape {np.shape(gradients)}")
        dims = g.shape[-1]
        clipped = clip_rows(g, self.clip)
        norm_of_sum = float(np.linalg.norm(clipped.sum(axis=0)))
        centre = win.centres(self.window, self.beta, dims, reference if self.window == "centred" else None)
        _, angles = to_spherical(clipped)
        offset_sum = (win.to_offsets(angles, centre, self.beta) * win.half_widths(self.beta, dims)).sum(axis=0)
        return norm_of_sum, centre, offset_sum

    def _summaries(self, gradients, reference):
        """(r, mean angles): the clean magnitude and angle vector the noise is centred on."""
        norm_of_sum, centre, offset_sum = self._sums(gradients, reference)
        return norm_of_sum / self.batch_size, centre + offset_sum / self.batch_size

    def clean(self, gradients, *, reference=None) -> np.ndarray:
        """The noise-free release the noise is centred on (a diagnostic: never private)."""
        radius, angles = self._summaries(gradients, reference)
        return from_spherical(np.asarray(radius), angles)

    def privatize(self, gradients, rng: np.random.Generator, *, reference=None) -> np.ndarray:
        """The noisy mean gradient (d,) of a batch (examples, d); `reference` centres the windows."""
        check_generator(rng)
        if self.sampler == "safe":  # both sums released on their grids, then divided by B
            norm_of_sum, centre, offset_sum = self._sums(gradients, reference)
            magnitude, angles = self.safe_noises(offset_sum.size + 1)
            noisy_radius = magnitude.perturb(np.array([norm_of_sum]), rng)[0] / self.batch_size
            noisy_angles = centre + angles.perturb(offset_sum, rng) / self.batch_size
            return from_spherical(np.asarray(noisy_radius), noisy_angles)
        radius, angles = self._summaries(gradients, reference)
        magnitude_sd, angle_sd = self.noise_sd(angles.size + 1)
        noisy_radius = radius + magnitude_sd * rng.standard_normal()
        noisy_angles = angles + angle_sd * rng.standard_normal(angles.shape)
        return from_spherical(np.asarray(noisy_radius), noisy_angles)


def numeric_noise(
    gradients, clip: float, noise_multiplier: float, batch_size: int, rng: np.random.Generator
) -> np.ndarray:
    """DP-SGD's Gaussian mechanism: (sum of clipped gradients + N(0, (sigma C)^2 I)) / B."""
    clipped = clip_rows(np.atleast_2d(gradients), clip)
    total = clipped.sum(axis=0)
    return (total + noise_multiplier * clip * rng.standard_normal(total.shape)) / batch_size


# --- accounting (dp-accounting events; no hand-written RDP) -----------------------------------------
ADD_OR_REMOVE = "add-or-remove-one"
REPLACE_ONE = "replace-one"
RELATIONS = {  # sampling -> the neighbouring relation its accounting assumes (module docstring)
    "poisson": ADD_OR_REMOVE,
    "shuffle": REPLACE_ONE,
}
RELATION_DESCRIPTIONS = {
    ADD_OR_REMOVE: "add or remove one training example (dp_accounting ADD_OR_REMOVE_ONE; Poisson sampling)",
    REPLACE_ONE: (
        "replace one training example by another (dp_accounting REPLACE_ONE; shuffled fixed-size batches: "
        "one batch per epoch differs, its clipped sum by up to 2C)"
    ),
}


def neighbouring_relation(sampling: str) -> str:
    """The relation a run with this batch sampling is accounted under (module docstring)."""
    if sampling not in RELATIONS:
        raise LDPValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    return RELATIONS[sampling]


def _replaced(event):
    """A release whose shift doubles under replace-one: the same event at half the multiplier."""
    return attr.evolve(event, noise_multiplier=event.noise_multiplier / 2.0)


def step_event(perturbation: str, noise_multiplier: float, relation: str = ADD_OR_REMOVE):
    """The DpEvent of one release on one batch: numeric = one Gaussian; geodp = magnitude and
    direction composed (additively in RDP). Under replace-one the sum (magnitude) moves by 2C: its
    multiplier is sigma/2; the direction's sensitivity already covers a replacement."""
    import dp_accounting

    if perturbation not in PERTURBATIONS:
        raise LDPValueError(f"perturbation must be one of {PERTURBATIONS}, got {perturbation!r}")
    gaussian = dp_accounting.GaussianDpEvent(check_positive(noise_multiplier, "noise_multiplier"))
    if relation == REPLACE_ONE:
        magnitude = _replaced(gaussian)
        return magnitude if perturbation == "numeric" else dp_accounting.ComposedDpEvent([magnitude, gaussian])
    if relation != ADD_OR_REMOVE:
        raise LDPValueError(f"relation must be one of {tuple(RELATION_DESCRIPTIONS)}, got {relation!r}")
    if perturbation == "numeric":
        return gaussian
    # Magnitude and direction: two Gaussian releases of multiplier sigma on the same batch (a
    # SelfComposedDpEvent, hashable, unlike ComposedDpEvent's list, for ldpfed's ledger).
    return dp_accounting.SelfComposedDpEvent(gaussian, 2)


def thesis_averaged_event(noise_multiplier: float):
    """The thesis' Theorem 7 cost of a GeoDP step: the average (eps1 + (d-1) eps2)/d of two equal
    Gaussian costs, i.e. one Gaussian. NOT a valid composition; for comparison only."""
    import dp_accounting

    return dp_accounting.GaussianDpEvent(noise_multiplier)


def safe_step_event(perturbation: str, noise_multiplier: float, dims: int, relation: str = REPLACE_ONE):
    """One step's event with the safe sampler on d = `dims` parameters: the releases' own
    DiscreteGaussianVectorDpEvent(sigma), with their samplers' float slack (numeric: one release of
    d coordinates; geodp: the magnitude (1) and the angle offsets (d - 1), composed). Under
    replace-one (shuffled batches, the safe sampler's only use) the sum's and the magnitude's
    multiplier is sigma/2: the rounding's grid sensitivity J + sqrt(d) becomes at most 2J + sqrt(d)
    <= 2 (J + sqrt(d)) steps; the float slack bounds the sampler, whatever the input."""
    import dp_accounting

    if perturbation not in PERTURBATIONS:
        raise LDPValueError(f"perturbation must be one of {PERTURBATIONS}, got {perturbation!r}")
    if relation not in RELATION_DESCRIPTIONS:
        raise LDPValueError(f"relation must be one of {tuple(RELATION_DESCRIPTIONS)}, got {relation!r}")
    dims = check_positive_int(dims, "dims", minimum=2)
    adjust = _replaced if relation == REPLACE_ONE else (lambda event: event)
    if perturbation == "numeric":  # the slack depends on (sigma, d) only, not on the profile's scale
        return adjust(InidGaussian(np.ones(dims), noise_multiplier=noise_multiplier, sampler="safe").event())
    magnitude, angles = GeoDP(noise_multiplier, 1.0, 1).safe_noises(dims)
    return dp_accounting.ComposedDpEvent([adjust(magnitude.event()), angles.event()])


def training_event(
    perturbation: str,
    noise_multiplier: float,
    *,
    sampling: str,
    sample_rate: float,
    steps: int,
    epochs: int,
    sampler: str = "continuous",
    dims: int | None = None,
):
    """The whole run's DpEvent under the sampling's neighbouring relation (`neighbouring_relation`):
    `steps` Poisson-sampled steps at rate q (add/remove one), or `epochs` shuffled epochs, each one
    release on the batch holding the replaced example (replace one). sampler "safe": each epoch one
    `safe_step_event` on `dims` parameters (shuffled epochs only)."""
    import dp_accounting

    relation = neighbouring_relation(sampling)
    if sampler == "safe":
        if sampling != "shuffle":
            raise LDPValueError(f"{perturbation}: {SAFE_POISSON}")
        if dims is None:
            raise LDPValueError("the safe sampler's event needs the number of parameters (dims)")
        return dp_accounting.SelfComposedDpEvent(
            safe_step_event(perturbation, noise_multiplier, dims, relation), check_positive_int(epochs, "epochs")
        )
    event = step_event(perturbation, noise_multiplier, relation)
    if sampling == "poisson":
        sampled = dp_accounting.PoissonSampledDpEvent(check_fraction(sample_rate, "sample_rate"), event)
        return dp_accounting.SelfComposedDpEvent(sampled, check_positive_int(steps, "steps"))
    return dp_accounting.SelfComposedDpEvent(event, check_positive_int(epochs, "epochs"))


def rdp_epsilon(event, target_delta: float) -> float:
    """eps at `target_delta` of `event` by ldpfed's RDP accountant (dp-accounting's RdpAccountant)."""

    epsilon = create_accountant("rdp").compose(event).get_epsilon(check_fraction(target_delta, "target_delta"))
    return float(epsilon) if epsilon is not None and math.isfinite(epsilon) else math.inf

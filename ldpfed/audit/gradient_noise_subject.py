"""Gradient noises as subjects of ldpfed's privacy auditor (`ldpfed.audit`, spec: audit.md).

Neighbours: f(x) = 0 and f(x') = Delta at the worst case of the sensitivity: the profile vector
D for the i.n.i.d. noises (the corner of the box |Delta_i| <= D_i, Mahalanobis norm eta for the
Gaussian), D e_1 for R1SMG and product noise (norm D), C e_1 for one PLRV-O release (one
example of norm C, no subsampling: the claim audited is the joint accountant's eps for q = 1,
one step). Where the density is known the exact log-likelihood ratio is supplied (continuous
samplers; a safe sampler's release is a mixture over its rounding, audited from samples only).
Draws go through `perturb`, so a safe sampler is audited as it releases (rounding included). The claim
audited is the published one, also for R1SMG and product noise, which fail it (gradient-noise.md).

Floating-point event (audit.md, Floating-point events): `producible` decides exactly whether an
output can come from a centre c. A continuous release is y = fl(c + n) in one float addition;
when |y_i| < |c_i|/2 the exact sum needed |n_i| > |c_i|/2, so y_i is a multiple of ulp(c_i)/2 (both
terms are, and that sum is representable), while from c_i = 0 any float n_i can come out: outputs
with such a y_i off that lattice are never produced by the shifted input. A safe release is
fl(m_i g_i) for integers m_i whatever the input: the test is the same for both inputs and the
event cannot fire.

"""

from __future__ import annotations

import numpy as np

from ldpfed.accounting.plrvo import PlrvoStep
from ldpfed.audit.subject import vector_subject
from ldpfed.gradient_noise.base import GradientNoise
from ldpfed.gradient_noise.inid_gaussian import InidGaussian
from ldpfed.gradient_noise.inid_laplace import InidLaplace
from ldpfed.gradient_noise.plrvo import PLRVO
from ldpfed.gradient_noise.product_noise import ProductNoise
from ldpfed.gradient_noise.r1smg import R1SMG


def _claim_and_shift(noise: GradientNoise):
    """((eps, delta) claimed for one release, Delta, log ratio log p(y|x)/p(y|x') or None)."""
    first = np.eye(1, noise.dims).ravel()
    if isinstance(noise, InidGaussian) and noise.floating_point_safe:
        return (noise.epsilon, noise.delta), noise.profile, None
    if isinstance(noise, InidLaplace) and noise.floating_point_safe:
        return (noise.pure_epsilon, 0.0), noise.profile, None
    if isinstance(noise, InidGaussian):
        shift, variance = noise.profile, noise.scales**2
        return (
            (noise.epsilon, noise.delta),
            shift,
            lambda y: np.sum(((y - shift) ** 2 - y**2) / (2 * variance), axis=-1),
        )
    if isinstance(noise, InidLaplace):
        shift, scales = noise.profile, noise.scales
        return (noise.pure_epsilon, 0.0), shift, lambda y: np.sum((np.abs(y - shift) - np.abs(y)) / scales, axis=-1)
    if isinstance(noise, (R1SMG, ProductNoise)):
        return (noise.epsilon, noise.delta), noise.sensitivity * first, None
    if isinstance(noise, PLRVO):
        shift = noise.clip * first
        epsilon, _ = PlrvoStep(noise.k, noise.theta, noise.clip, noise.dims, 1.0, noise.law).epsilon(1, noise.delta)
        if noise.floating_point_safe:  # a mixture over atoms and roundings: no closed-form density
            return (epsilon, noise.delta), shift, None

        def log_ratio(y):
            return (noise.k + 1.0) * np.sum(
                np.log1p(noise.theta * np.abs(y - shift)) - np.log1p(noise.theta * np.abs(y)), axis=-1
            )

        return (epsilon, noise.delta), shift, log_ratio
    raise TypeError(f"no audit subject for {type(noise).__name__}")


def continuous_producible(centre: np.ndarray):
    """producible(y) for y = fl(centre + n): coordinates with |y_i| < |c_i|/2 lie on ulp(c_i)/2."""
    centre = np.asarray(centre, dtype=float)
    shifted = centre != 0
    lattice = np.spacing(np.abs(centre[shifted])) / 2.0
    half = np.abs(centre[shifted]) / 2.0

    def producible(reports):
        y = np.atleast_2d(reports)[:, shifted]
        return np.all((np.abs(y) >= half) | (np.fmod(y, lattice) == 0.0), axis=-1)

    return producible


def grid_producible(noise: GradientNoise):
    """producible(y) for a safe release: every y_i is fl(m g_i) for an integer m."""
    steps = noise.steps

    def producible(reports):
        y = np.atleast_2d(reports)
        return np.all(np.rint(y / steps) * steps == y, axis=-1)

    return producible


def noise_subject(noise: GradientNoise):
    """The AuditSubject of one release of `noise` (see the module docstring)."""

    (epsilon, delta), shift, log_ratio = _claim_and_shift(noise)
    centres = (np.zeros(noise.dims), np.asarray(shift, dtype=float))

    if isinstance(noise, PLRVO) and noise.floating_point_safe:
        # Outputs fl(m g_j) over the 4096 atom grids: the same set for both inputs (whether y is in it
        # does not depend on the input), so "x' can never produce y" holds for no y that x produces.
        every = lambda reports: np.ones(np.atleast_2d(reports).shape[0], dtype=bool)  # noqa: E731
        tests = (every, every)
    elif noise.floating_point_safe:
        on_grid = grid_producible(noise)
        tests = (on_grid, on_grid)
    else:
        tests = tuple(continuous_producible(centre) for centre in centres)

    def producible(reports, which):
        return tests[which](np.asarray(reports, dtype=float))

    return vector_subject(
        noise.perturb,
        centres,
        centres,
        name=noise.name,
        epsilon=float(epsilon),
        delta=float(delta or 0.0),
        sampler=noise.sampler,
        inputs=("f(x) = 0", "f(x') = Delta (worst case of the sensitivity)"),
        log_ratio=log_ratio,
        producible=producible,
        options={
            "dims": noise.dims,
            "guarantee_holds": noise.guarantee_holds,
            "sampler": noise.sampler,
            **{key: value for key, value in noise.parameters().items() if isinstance(value, (int, float, bool))},
        },
    )

"""LDPVec: directional perturbation of clipped updates for federated LDP-SGD (spec: directional.md,
LDPVec; thesis Algorithm 6, made sound).

A client's update g is clipped to L2 norm C, optionally rotated by a public random rotation
(`rotation.py`), written as a magnitude r and d-1 angles (`spherical.py`), the angles clipped
into windows of width beta*pi (`windows.py`) and perturbed with the chosen base randomizer, and
converted back. The magnitude is handled by one of three modes:
- "split": r in [0, C] is perturbed with eps/d (sensitivity C), the angles share eps (d-1)/d;
- "normalize": every clipped update is rescaled to norm exactly C (the magnitude carries
  nothing; a zero update becomes C e_1), all of eps goes to the angles;
- "exact-unsafe": the thesis' Algorithm 6 as printed: r is released without noise. ||g|| leaks,
  so this is NOT private: `private` is False and the spent epsilon is inf.
Angle budgets (basic composition, recorded in `BudgetSplit`):
- laplace: Lap(L1/eps_dir) on every angle, L1 = beta d pi (the vector Laplace mechanism), i.e.
  per angle a budget in proportion to its window width: eps_dir/d for theta_1..theta_(d-2),
  2 eps_dir/d for the last angle;
- gaussian: N(0, s^2) on every angle for L2 = beta pi sqrt(d+2) at (eps_dir, delta_dir). Sampler
  (the base mechanism's option `sampler`): "safe" (default) is ldpfed.gradient_noise's safe
  i.n.i.d. Gaussian with a uniform profile on the d-1 angles in radians: every angle rounded
  (unbiased, randomized) to one fixed grid g = L2 / J plus exact discrete Gaussian integers, the
  rounding's sqrt(d-1) steps added to the sensitivity, z calibrated to (eps_dir, delta_dir) by
  dp_accounting's RdpAccountant (inid_gaussian.py, safe_grid.py): the released angles are
  centre + g m for integers m, a set that does not depend on the input. "continuous": s by the
  analytic Gaussian mechanism, rng.standard_normal, NOT floating-point safe (Mironov 2012);
- bounded mechanisms (piecewise, square-wave, duchi, hybrid): each angle's window is mapped to
  [-1, 1] and perturbed with eps_dir/(d-1).
Every non-Gaussian angle randomizer, and every magnitude randomizer, is ldpfed's registered scalar
mechanism on [-1, 1] (`ldpfed.mechanisms.get`), so its sampler (floating-point safe where the
registry's is) and its exact bias/variance are reused; the Gaussian angle noise is the vector
noise above (its moments: `angle_noise_moments`, `expected_output`, exact for either sampler).

With rotation, d above means D, the padded dimension of the rotation (a power of two).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

import ldpfed.directional.rotation as rot
import ldpfed.directional.windows as win
import ldpfed.mechanisms as mechanisms
from ldpfed.accounting import CalibratedDpEvent, EpsilonDeltaDpEvent, not_private
from ldpfed.accounting.events import gaussian_mechanism_event
from ldpfed.directional.spherical import exact_sin_cos, from_spherical, to_spherical
from ldpfed.gradient_noise.inid_gaussian import InidGaussian
from ldpfed.mechanisms.gaussian import analytic_sigma
from ldpfed.samplers.safe_grid import rounding_variance
from ldpfed.validation import (
    LDPValueError,
    canonical_name,
    check_choice,
    check_delta,
    check_epsilon,
    check_generator,
    check_positive,
)

MAGNITUDES = ("split", "normalize", "exact-unsafe")
GAUSSIAN = "gaussian"
LAPLACE = "laplace"
ADDITIVE = (LAPLACE, GAUSSIAN)  # angle noise independent of the angle: closed-form output moments


@dataclass(frozen=True)
class BudgetSplit:
    """How a client's (eps, delta) per update is spent (basic composition adds the parts up)."""

    dims: int  # coordinates converted (d, or D with rotation)
    epsilon: float
    delta: float | None
    magnitude: str
    magnitude_epsilon: float  # inf when released exactly (exact-unsafe), 0 when constant (normalize)
    magnitude_delta: float
    direction_epsilon: float
    direction_delta: float
    inner_angle_epsilon: float | None  # per angle theta_1..theta_(d-2); None for gaussian
    last_angle_epsilon: float | None
    angle_sigma: float | None  # gaussian: sd of the noise on every angle (radians)
    private: bool
    spent_epsilon: float  # what the ledger is charged: epsilon, or inf when not private
    angle_sampler: str | None = None  # gaussian: safe | continuous
    angle_grid_step: float | None = None  # gaussian, safe sampler: the angles' grid step (radians)
    angle_noise_multiplier: float | None = None  # gaussian, safe sampler: z of the RDP calibration

    def angles_total(self) -> float:
        """Sum of the per-angle budgets (gaussian: the vector calibration's eps_dir)."""
        if self.inner_angle_epsilon is None:
            return self.direction_epsilon
        return (self.dims - 2) * self.inner_angle_epsilon + self.last_angle_epsilon

    def to_dict(self) -> dict:
        return asdict(self)


class _AngleGaussian:
    """N(0, sd^2) added to offsets t (the vector Gaussian calibration, in one window's units);
    continuous sampler, NOT floating-point safe."""

    sampler = "continuous"

    def __init__(self, sd: float) -> None:
        self.sd = sd

    def characteristic(self, t):
        """E[exp(i N)] of the noise in radians, given sd in radians: exp(-sd^2/2)."""
        return np.full(np.shape(t), math.exp(-0.5 * self.sd**2), dtype=complex)

    def perturb(self, t, rng, out_of_domain="clip"):
        return t + self.sd * rng.standard_normal(np.shape(t))

    def perturb_rows(self, values, rngs):
        """Row i with its own generator rngs[i] (as `Mechanism.perturb_rows`)."""
        return np.stack([self.perturb(row, rng) for row, rng in zip(values, rngs)]).reshape(np.shape(values))

    def bias(self, t):
        return np.zeros(np.shape(t))

    def variance(self, t):
        return np.full(np.shape(t), self.sd**2)

    def log_density(self, y, t):
        z = (np.asarray(y, dtype=float) - t) / self.sd
        return -0.5 * z * z - np.log(self.sd * np.sqrt(2.0 * np.pi))


class _SafeAngleGaussian:
    """The floating-point-safe Gaussian on all d-1 angles at once (one vector release; module
    docstring): InidGaussian's safe sampler with the uniform profile L2 / sqrt(d-1), on the offsets
    t scaled to radians by the half-widths. Offsets in and out (shape (clients, d-1))."""

    sampler = "safe"

    def __init__(self, epsilon: float, delta: float, l2: float, half: np.ndarray) -> None:

        try:
            self.noise = InidGaussian(
                np.full(half.size, l2 / math.sqrt(half.size)), epsilon=epsilon, delta=delta, sampler="safe"
            )
        except LDPValueError as error:
            raise LDPValueError(
                f"ldpvec gaussian angles ({error}); use the base option sampler='continuous' "
                "(NOT floating-point safe) for such budgets"
            ) from None
        self.half = half
        self.step = float(self.noise.steps[0])  # one grid step g = L2 / J for every angle (radians)
        self.sd = float(self.noise.scales[0])  # sd of the integer noise times g (radians)

    def perturb(self, t, rng, out_of_domain="clip"):
        released = self.noise._release(np.asarray(t) * self.half, rng)  # g (K + N): on the grid
        released /= self.half
        return released

    def perturb_rows(self, values, rngs):
        """Row i with its own generator rngs[i] (as `Mechanism.perturb_rows`): one vector release each."""
        released = self.noise.perturb_rows(np.asarray(values) * self.half, rngs)
        released /= self.half
        return released

    def bias(self, t):
        return np.zeros(np.shape(t))  # unbiased rounding, symmetric integer noise

    def variance(self, t):
        """(s^2 + g^2 f (1 - f)) / half^2: noise plus the rounding's two-point variance."""

        radians = np.asarray(t) * self.half
        return (self.sd**2 + rounding_variance(radians, self.step)) / self.half**2

    def characteristic(self, t):
        """E[exp(i (released - angle))] in radians: the rounding's (1-f) e^(-i f g) + f e^(i (1-f) g)
        times the discrete Gaussian's, exp(-sd^2/2) (Poisson summation: the aliased terms are below
        exp(-2 pi^2 s^2) for s grid steps, zero in double precision at s >= 10 steps)."""
        scaled = np.asarray(t) * self.half / self.step
        f = scaled - np.floor(scaled)
        rounding = (1.0 - f) * np.exp(-1j * f * self.step) + f * np.exp(1j * (1.0 - f) * self.step)
        return rounding * math.exp(-0.5 * self.sd**2)


@dataclass(frozen=True)
class LDPVec:
    """Directional LDP perturbation of updates (rows of a (clients, d) batch) clipped to norm `clip`."""

    base: str
    epsilon: float
    clip: float
    delta: float | None = None
    beta: float = 1.0
    window: str = "fixed"
    magnitude: str = "split"
    rotation: str = "none"
    options: dict = field(default_factory=dict)  # options of the base mechanism (e.g. estimator)

    def __post_init__(self) -> None:
        cls = mechanisms.get_class(self.base)
        set_ = lambda key, value: object.__setattr__(self, key, value)  # noqa: E731
        set_("base", cls.name)
        set_("epsilon", check_epsilon(self.epsilon))
        set_("delta", check_delta(self.delta, approximate=cls.approximate, mechanism=cls.name))
        set_("clip", check_positive(self.clip, "clip"))
        set_("beta", win.check_beta(self.beta))
        set_("window", win.check_window(self.window))
        set_("rotation", rot.check_rotation(self.rotation))
        set_("magnitude", check_choice(self.magnitude, MAGNITUDES, "magnitude"))
        set_("options", dict(self.options))
        set_("_cache", {})  # dims -> randomizers (derived, not a field)
        # Validate the base mechanism's options now (the per-angle budgets depend on d: checked,
        # against the mechanism's epsilon range, when d is known).
        mechanisms.get(self.base, 0.5, 1e-5 if cls.approximate else None, **self.options)

    @property
    def private(self) -> bool:
        return self.magnitude != "exact-unsafe"

    @property
    def angle_sampler(self) -> str | None:
        """gaussian: the angle noise's sampler, the base mechanism's `sampler` option (default safe)."""
        if self.base != GAUSSIAN:
            return None
        return canonical_name(self.options.get("sampler", "safe"))

    @property
    def name(self) -> str:
        return f"ldpvec[{self.base},{self.magnitude},{self.window},beta={self.beta:g},rotation={self.rotation}]"

    def converted_dims(self, dims: int) -> int:
        """Coordinates the hyperspherical transform sees: d, or D with the Hadamard rotation."""
        return rot.padded_dims(dims) if self.rotation == "hadamard" else int(dims)

    # --- budget ------------------------------------------------------------------------------------
    def budget(self, dims: int) -> BudgetSplit:
        return self._randomizers(self.converted_dims(dims))[0]

    def _randomizers(self, dims: int):
        """(BudgetSplit, magnitude randomizer or None, inner-angle randomizer, last-angle randomizer)."""
        if dims not in self._cache:
            self._cache[dims] = self._build_randomizers(dims)
        return self._cache[dims]

    def _build_randomizers(self, dims: int):
        if dims < 2:
            raise LDPValueError(f"directional perturbation needs d >= 2 coordinates, got {dims}")
        eps, delta = self.epsilon, self.delta or 0.0
        if self.magnitude == "split":
            eps_mag, delta_mag = eps / dims, delta / dims
            eps_dir, delta_dir = eps - eps_mag, delta - delta_mag
        else:
            eps_mag = 0.0 if self.magnitude == "normalize" else math.inf
            delta_mag, eps_dir, delta_dir = 0.0, eps, delta
        magnitude = None
        if self.magnitude == "split":
            magnitude = mechanisms.get(self.base, eps_mag, delta_mag or None, **self.options)
        sigma = eps_inner = eps_last = sampler = step = multiplier = None
        if self.base == GAUSSIAN:
            _, l2 = win.sensitivities(self.beta, dims)
            sampler = self.angle_sampler
            if sampler == "safe":
                inner = last = _SafeAngleGaussian(eps_dir, delta_dir, l2, win.half_widths(self.beta, dims))
                sigma, step, multiplier = inner.sd, inner.step, inner.noise.noise_multiplier
            else:
                sigma = analytic_sigma(eps_dir, delta_dir, sensitivity=l2)
                half = win.half_widths(self.beta, 3)  # (inner, last)
                inner, last = _AngleGaussian(sigma / half[0]), _AngleGaussian(sigma / half[1])
        else:
            if self.base == LAPLACE:  # budget in proportion to the window widths (vector Laplace, L1)
                eps_inner, eps_last = eps_dir / dims, 2.0 * eps_dir / dims
            else:
                eps_inner = eps_last = eps_dir / (dims - 1)
            inner = mechanisms.get(self.base, eps_inner, None, **self.options)
            last = inner if eps_last == eps_inner else mechanisms.get(self.base, eps_last, None, **self.options)
        split = BudgetSplit(
            dims=dims,
            epsilon=eps,
            delta=self.delta,
            magnitude=self.magnitude,
            magnitude_epsilon=eps_mag,
            magnitude_delta=delta_mag,
            direction_epsilon=eps_dir,
            direction_delta=delta_dir,
            inner_angle_epsilon=eps_inner,
            last_angle_epsilon=eps_last,
            angle_sigma=sigma,
            private=self.private,
            spent_epsilon=eps if self.private else math.inf,
            angle_sampler=sampler,
            angle_grid_step=step,
            angle_noise_multiplier=multiplier,
        )
        return split, magnitude, inner, last

    # --- pre-processing ----------------------------------------------------------------------------
    def clip_updates(self, updates) -> np.ndarray:
        """Each row scaled to L2 norm <= C (a (clients, d) array)."""
        g = np.atleast_2d(np.asarray(updates, dtype=np.float64))
        if g.ndim != 2 or g.shape[-1] < 2:
            raise LDPValueError(
                f"updates must be a vector (d,) or a batch (clients, d) with d >= 2, got {np.shape(updates)}"
            )
        if not np.all(np.isfinite(g)):
            raise LDPValueError("updates contain NaN or inf (diverged local training?)")
        norms = np.sqrt(np.einsum("ij,ij->i", g, g))
        factor = np.minimum(1.0, self.clip / np.where(norms > 0, norms, 1.0))
        return g * factor[:, None]

    def _signs(self, dims: int, rng: np.random.Generator | None, rotation_seed) -> np.ndarray | None:
        """The rotation's signs (None without rotation): from the public seed, else from rng."""
        if self.rotation == "none":
            return None
        if rotation_seed is None and rng is None:
            raise LDPValueError("with rotation='hadamard' give the rotation_seed that perturb used")
        source = rng if rotation_seed is None else np.random.default_rng(rotation_seed)
        return rot.random_signs(dims, source)

    def _polar(self, updates, reference, signs):
        """(clipped rows, r, offsets t in [-1, 1], window centres) in the converted coordinates."""
        clipped = self.clip_updates(updates)
        y = clipped if signs is None else rot.rotate(clipped, signs)
        if reference is not None and signs is not None:
            reference = rot.rotate(reference, signs)
        radius, angles = to_spherical(y)
        if self.magnitude == "normalize":
            radius = np.full_like(radius, self.clip)
        centre = win.centres(self.window, self.beta, y.shape[-1], reference if self.window == "centred" else None)
        return clipped, radius, win.to_offsets(angles, centre, self.beta), centre

    def preprocess(self, updates, *, reference=None, rotation_seed=None) -> np.ndarray:
        """The noise-free vector the perturbation is centred on: clipped (L2, then normalized for
        `normalize`) and its angles clipped into their windows (rotation undone)."""
        rows = np.atleast_2d(updates)
        signs = self._signs(self.converted_dims(rows.shape[-1]), None, rotation_seed)
        _, radius, offsets, centre = self._polar(rows, reference, signs)
        y = from_spherical(radius, win.from_offsets(offsets, centre, self.beta))
        return y if signs is None else rot.unrotate(y, signs, rows.shape[-1])

    # --- perturbation ------------------------------------------------------------------------------
    def perturb(self, updates, rng: np.random.Generator, *, reference=None, rotation_seed=None) -> np.ndarray:
        """Privatize a batch of updates (clients, d) (or one (d,)); returns (clients, d).

        `reference`: the public direction the centred windows are centred on (ignored by fixed
        windows). `rotation_seed`: public seed of the Hadamard rotation (default: drawn from rng).
        """
        rows = np.atleast_2d(updates)
        radius, angles, signs = self._perturb_polar(rows, rng, reference, rotation_seed)
        y = from_spherical(radius, angles)
        return y if signs is None else rot.unrotate(y, signs, rows.shape[-1])

    def perturb_rows(self, updates, rngs, *, reference=None, rotation_seed=None) -> np.ndarray:
        """Row k of `updates` (clients, d) privatized with its own generator `rngs[k]`: bit for bit
        `perturb(updates[k], rngs[k], ...)`, so each client's noise comes from its own stream
        whichever clients share the block (spec: scale.md). Clipping, rotation and the polar
        transforms run over the block; each randomizer's `perturb_rows` draws row k from rngs[k]
        (magnitude, then the angles: each generator's order of draws is that of `perturb`). With
        the Hadamard rotation the public `rotation_seed` is required (one rotation for the block)."""
        rows = np.asarray(updates, dtype=np.float64)
        if rows.ndim != 2 or len(rngs) != rows.shape[0]:
            raise LDPValueError(
                f"perturb_rows needs a (clients, d) block and one generator per row, got shape "
                f"{rows.shape} and {len(rngs)} generators"
            )
        if self.rotation == "hadamard" and rotation_seed is None:
            raise LDPValueError("perturb_rows with rotation='hadamard' needs the public rotation_seed")
        check_generator(*rngs)
        budget, magnitude, inner, last = self._randomizers(self.converted_dims(rows.shape[-1]))
        signs = self._signs(budget.dims, None, rotation_seed)
        _, radius, offsets, centre = self._polar(rows, reference, signs)
        if magnitude is not None:
            t = np.clip(2.0 * radius / self.clip - 1.0, -1.0, 1.0)
            radius = 0.5 * self.clip * (magnitude.perturb_rows(t[:, None], rngs)[:, 0] + 1.0)
        if inner is last:
            noisy = inner.perturb_rows(offsets, rngs)
        else:
            noisy = np.empty_like(offsets)
            noisy[:, :-1] = inner.perturb_rows(offsets[:, :-1], rngs)
            noisy[:, -1] = last.perturb_rows(offsets[:, -1:], rngs)[:, 0]
        y = from_spherical(radius, win.from_offsets(noisy, centre, self.beta, overwrite=True))
        return y if signs is None else rot.unrotate(y, signs, rows.shape[-1])

    def perturb_polar(self, updates, rng: np.random.Generator, *, reference=None, rotation_seed=None):
        """The released (magnitude, angles) of each row, shapes (clients,) and (clients, D-1), in the
        rotated coordinates when rotating: what `perturb` converts back."""
        radius, angles, _ = self._perturb_polar(np.atleast_2d(updates), rng, reference, rotation_seed)
        return radius, angles

    def clipped_polar(self, updates, *, reference=None, rotation_seed=None):
        """The noise-free (magnitude, window-clipped angles) the perturbation is centred on."""
        rows = np.atleast_2d(updates)
        signs = self._signs(self.converted_dims(rows.shape[-1]), None, rotation_seed)
        _, radius, offsets, centre = self._polar(rows, reference, signs)
        return radius, win.from_offsets(offsets, centre, self.beta)

    def _perturb_polar(self, rows, rng, reference, rotation_seed):
        check_generator(rng)
        budget, magnitude, inner, last = self._randomizers(self.converted_dims(rows.shape[-1]))
        signs = self._signs(budget.dims, rng, rotation_seed)
        _, radius, offsets, centre = self._polar(rows, reference, signs)
        if magnitude is not None:
            t = np.clip(2.0 * radius / self.clip - 1.0, -1.0, 1.0)
            radius = 0.5 * self.clip * (magnitude.perturb(t, rng, out_of_domain="clip") + 1.0)
        noisy = self._perturb_offsets(offsets, inner, last, rng)
        return radius, win.from_offsets(noisy, centre, self.beta, overwrite=True), signs

    @staticmethod
    def _perturb_offsets(offsets, inner, last, rng):
        if inner is last:  # one randomizer for every angle (bounded bases, safe Gaussian): one call
            return inner.perturb(offsets, rng, out_of_domain="clip")
        noisy = np.empty_like(offsets)
        noisy[:, :-1] = inner.perturb(offsets[:, :-1], rng, out_of_domain="clip")
        noisy[:, -1] = last.perturb(offsets[:, -1], rng, out_of_domain="clip")
        return noisy

    def angle_offsets(self, updates, *, reference=None, rotation_seed=None) -> np.ndarray:
        """The clean window offsets t in [-1, 1] of every angle, shape (clients, D-1)."""
        rows = np.atleast_2d(updates)
        signs = self._signs(self.converted_dims(rows.shape[-1]), None, rotation_seed)
        return self._polar(rows, reference, signs)[2]

    def perturb_angle_offsets(self, updates, rng: np.random.Generator, *, reference=None, rotation_seed=None):
        """What the angle randomizer releases, the noisy offsets (clients, D-1), before the float
        conversion to angles: for audits of the sampler itself (audit_subject.py, release "offsets")."""
        check_generator(rng)
        rows = np.atleast_2d(updates)
        _, _, inner, last = self._randomizers(self.converted_dims(rows.shape[-1]))
        offsets = self.angle_offsets(rows, reference=reference, rotation_seed=rotation_seed)
        return self._perturb_offsets(offsets, inner, last, rng)

    # --- exact statistics --------------------------------------------------------------------------
    def angle_noise_moments(self, updates, *, reference=None, rotation_seed=None) -> tuple[np.ndarray, np.ndarray]:
        """Exact (bias, variance) of each perturbed angle given the update, in radians, shape
        (clients, D-1): half_width * b(t) and half_width^2 * V(t) of the angle's randomizer."""
        rows = np.atleast_2d(updates)
        budget, _, inner, last = self._randomizers(self.converted_dims(rows.shape[-1]))
        signs = self._signs(budget.dims, None, rotation_seed)
        _, _, offsets, _ = self._polar(rows, reference, signs)
        half = win.half_widths(self.beta, budget.dims)
        if inner is last:  # one randomizer for every angle (bounded bases, safe Gaussian)
            return inner.bias(offsets) * half, inner.variance(offsets) * half**2
        bias, variance = np.empty_like(offsets), np.empty_like(offsets)
        bias[:, :-1], variance[:, :-1] = inner.bias(offsets[:, :-1]), inner.variance(offsets[:, :-1])
        bias[:, -1], variance[:, -1] = last.bias(offsets[:, -1]), last.variance(offsets[:, -1])
        return bias * half, variance * half**2

    def expected_output(self, updates, *, reference=None, rotation_seed=None) -> np.ndarray:
        """Exact E[perturb(g)] for additive angle noise (laplace, gaussian with either sampler).

        For independent additive noise N on an angle, E[cos(theta + N)] = phi cos(theta) and
        E[sin(theta + N)] = phi sin(theta) with phi = E[cos N] (1/(1+b^2) for Laplace of scale b,
        exp(-s^2/2) for N(0, s^2)). With the product form of the inverse transform,
            E[g*_z] = E[r*] (prod_{i<z} phi_i sin theta_i) phi_z cos theta_z,
        i.e. coordinate z of the clean (angle-clipped) vector shrunk by prod_{i<=z} phi_i: the
        exact bias, which grows along the coordinates (spec: directional.md, last section).
        The safe Gaussian's noise (rounding plus integers) depends on the angle through its
        fractional grid position: E[exp(i theta*)] = exp(i theta) c(theta) with the complex factor
        c of `_SafeAngleGaussian.characteristic`, in the same product form.
        """
        if self.base not in ADDITIVE:
            raise LDPValueError(f"expected_output needs additive angle noise (laplace, gaussian), not {self.base}")
        rows = np.atleast_2d(updates)
        dims = rows.shape[-1]
        budget, magnitude, inner, last = self._randomizers(self.converted_dims(dims))
        signs = self._signs(budget.dims, None, rotation_seed)
        _, radius, offsets, centre = self._polar(rows, reference, signs)
        mean_radius = radius
        if magnitude is not None:
            t = np.clip(2.0 * radius / self.clip - 1.0, -1.0, 1.0)
            mean_radius = radius + 0.5 * self.clip * magnitude.bias(t)
        half = win.half_widths(self.beta, budget.dims)
        if self.base == GAUSSIAN and budget.angle_sampler == "safe":
            angles = win.from_offsets(offsets, centre, self.beta)
            sines, cosines = exact_sin_cos(angles)
            factor = inner.characteristic(offsets)
            mean_cos = cosines * factor.real - sines * factor.imag  # Re, Im of exp(i theta) c
            mean_sin = sines * factor.real + cosines * factor.imag
            y = np.empty((offsets.shape[0], budget.dims))
            prefix = np.ones_like(mean_cos)
            np.cumprod(mean_sin[:, :-1], axis=-1, out=prefix[:, 1:])
            prefix *= np.reshape(mean_radius, (-1, 1))
            y[:, :-1] = prefix * mean_cos
            y[:, -1] = prefix[:, -1] * mean_sin[:, -1]
            return y if signs is None else rot.unrotate(y, signs, dims)
        if self.base == GAUSSIAN:
            phi = np.exp(-0.5 * budget.angle_sigma**2) * np.ones(budget.dims - 1)
        else:
            scales = (
                half
                * np.r_[np.full(budget.dims - 2, 2.0 / budget.inner_angle_epsilon), 2.0 / budget.last_angle_epsilon]
            )
            phi = 1.0 / (1.0 + scales**2)
        shrink = np.empty(budget.dims)
        shrink[:-1] = np.cumprod(phi)
        shrink[-1] = shrink[-2]
        y = from_spherical(mean_radius, win.from_offsets(offsets, centre, self.beta)) * shrink
        return y if signs is None else rot.unrotate(y, signs, dims)

    def round_event(self, dims: int | None = None):
        """One update's privacy event for `ldpfed.accounting` (the ledger): (eps, delta) by basic
        composition of the magnitude and angle parts, or a not-private event for exact-unsafe.
        With the safe Gaussian sampler and `dims` given, the parts are named: the angles'
        DiscreteGaussianVectorDpEvent(z) calibrated to (eps_dir, delta_dir), composed (split) with
        the magnitude's scalar discrete Gaussian event calibrated to (eps_mag, delta_mag), each with
        its sampler's float slack (for rdp): basic, advanced and rdp account it; pld refuses it (no
        PLD bound for the vector discrete Gaussian)."""

        if not self.private:
            return not_private("ldpvec magnitude exact-unsafe: ||g|| is released without noise")
        if dims is None or self.angle_sampler != "safe":
            return EpsilonDeltaDpEvent(self.epsilon, self.delta or 0.0)
        split, magnitude, angle_noise, _ = self._randomizers(self.converted_dims(dims))
        angles = angle_noise.noise.event()  # carries the sampler's float slack (ldpfed.samplers.float_slack)
        if self.magnitude != "split":
            return angles
        from dp_accounting import ComposedDpEvent

        magnitude_event = CalibratedDpEvent(
            gaussian_mechanism_event(magnitude), split.magnitude_epsilon, split.magnitude_delta
        )
        return ComposedDpEvent((magnitude_event, angles))  # a tuple: hashable (the ledger counts events)

    def describe(self, dims: int | None = None) -> dict:
        record = {
            "perturbation": "ldpvec",
            "name": self.name,
            "base": self.base,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "clip": self.clip,
            "clipping": "L2 to clip",
            "beta": self.beta,
            "window": self.window,
            "magnitude": self.magnitude,
            "rotation": self.rotation,
            "options": self.options,
            "private": self.private,
        }
        if not self.private:
            record["not_private_reason"] = "magnitude exact-unsafe: ||g|| is released without noise"
        if self.angle_sampler == "safe":
            record["angle_noise_sampler"] = (
                "safe (one grid for every angle, exact discrete Gaussian integers, "
                "RDP-calibrated with the rounding inflation; floating-point safe)"
            )
        elif self.angle_sampler == "continuous":
            record["angle_noise_sampler"] = "continuous (numpy standard_normal; NOT floating-point safe)"
        if dims is not None:
            record["budget"] = self.budget(dims).to_dict()
        return record

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
- gaussian: N(0, s^2) on every angle, s calibrated by the analytic Gaussian mechanism for
  L2 = beta pi sqrt(d+2) at (eps_dir, delta_dir);
- bounded mechanisms (piecewise, square-wave, duchi, hybrid): each angle's window is mapped to
  [-1, 1] and perturbed with eps_dir/(d-1).
Every non-Gaussian angle randomizer, and every magnitude randomizer, is ldpfed's registered scalar
mechanism on [-1, 1] (`ldpfed.mechanisms.get`), so its sampler (floating-point safe where the
registry's is) and its exact bias/variance are reused. The Gaussian angle noise, whose sd is set
by the vector calibration, is drawn here with rng.standard_normal (a continuous sampler).

With rotation, d above means D, the padded dimension of the rotation (a power of two).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

import ldpfed.mechanisms as mechanisms
from ldpfed.directional import rotation as rot
from ldpfed.directional import windows as win
from ldpfed.directional.spherical import from_spherical, to_spherical
from ldpfed.mechanisms.gaussian import analytic_sigma
from ldpfed.validation import LDPValueError, check_delta, check_epsilon, check_positive

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

    def angles_total(self) -> float:
        """Sum of the per-angle budgets (gaussian: the vector calibration's eps_dir)."""
        if self.inner_angle_epsilon is None:
            return self.direction_epsilon
        return (self.dims - 2) * self.inner_angle_epsilon + self.last_angle_epsilon

    def to_dict(self) -> dict:
        return asdict(self)


class _AngleGaussian:
    """N(0, sd^2) added to offsets t (the vector Gaussian calibration, in one window's units)."""

    def __init__(self, sd: float) -> None:
        self.sd = sd

    def perturb(self, t, rng, out_of_domain="clip"):
        return t + self.sd * rng.standard_normal(np.shape(t))

    def bias(self, t):
        return np.zeros(np.shape(t))

    def variance(self, t):
        return np.full(np.shape(t), self.sd**2)

    def log_density(self, y, t):
        z = (np.asarray(y, dtype=float) - t) / self.sd
        return -0.5 * z * z - np.log(self.sd * np.sqrt(2.0 * np.pi))


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
        magnitude = str(self.magnitude).strip().lower()
        if magnitude not in MAGNITUDES:
            raise LDPValueError(f"magnitude must be one of {MAGNITUDES}, got {self.magnitude!r}")
        set_("magnitude", magnitude)
        set_("options", dict(self.options))
        set_("_cache", {})  # dims -> randomizers (derived, not a field)
        # Validate the base mechanism's options now (the per-angle budgets depend on d: checked,
        # against the mechanism's epsilon range, when d is known).
        mechanisms.get(self.base, 0.5, 1e-5 if cls.approximate else None, **self.options)

    @property
    def private(self) -> bool:
        return self.magnitude != "exact-unsafe"

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
        sigma = eps_inner = eps_last = None
        if self.base == GAUSSIAN:
            _, l2 = win.sensitivities(self.beta, dims)
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
            dims=dims, epsilon=eps, delta=self.delta, magnitude=self.magnitude,
            magnitude_epsilon=eps_mag, magnitude_delta=delta_mag,
            direction_epsilon=eps_dir, direction_delta=delta_dir,
            inner_angle_epsilon=eps_inner, last_angle_epsilon=eps_last, angle_sigma=sigma,
            private=self.private, spent_epsilon=eps if self.private else math.inf,
        )
        return split, magnitude, inner, last

    # --- pre-processing ----------------------------------------------------------------------------
    def clip_updates(self, updates) -> np.ndarray:
        """Each row scaled to L2 norm <= C (a (clients, d) array)."""
        g = np.atleast_2d(np.asarray(updates, dtype=np.float64))
        if g.ndim != 2 or g.shape[-1] < 2:
            raise LDPValueError(f"updates must be a vector (d,) or a batch (clients, d) with d >= 2, got {np.shape(updates)}")
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
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed))")
        budget, magnitude, inner, last = self._randomizers(self.converted_dims(rows.shape[-1]))
        signs = self._signs(budget.dims, rng, rotation_seed)
        _, radius, offsets, centre = self._polar(rows, reference, signs)
        if magnitude is not None:
            t = np.clip(2.0 * radius / self.clip - 1.0, -1.0, 1.0)
            radius = 0.5 * self.clip * (magnitude.perturb(t, rng, out_of_domain="clip") + 1.0)
        if inner is last:  # one budget for every angle (bounded bases): one call
            noisy = inner.perturb(offsets, rng, out_of_domain="clip")
        else:
            noisy = np.empty_like(offsets)
            noisy[:, :-1] = inner.perturb(offsets[:, :-1], rng, out_of_domain="clip")
            noisy[:, -1] = last.perturb(offsets[:, -1], rng, out_of_domain="clip")
        return radius, win.from_offsets(noisy, centre, self.beta, overwrite=True), signs

    # --- exact statistics --------------------------------------------------------------------------
    def angle_noise_moments(self, updates, *, reference=None, rotation_seed=None) -> tuple[np.ndarray, np.ndarray]:
        """Exact (bias, variance) of each perturbed angle given the update, in radians, shape
        (clients, D-1): half_width * b(t) and half_width^2 * V(t) of the angle's randomizer."""
        rows = np.atleast_2d(updates)
        budget, _, inner, last = self._randomizers(self.converted_dims(rows.shape[-1]))
        signs = self._signs(budget.dims, None, rotation_seed)
        _, _, offsets, _ = self._polar(rows, reference, signs)
        half = win.half_widths(self.beta, budget.dims)
        bias, variance = np.empty_like(offsets), np.empty_like(offsets)
        bias[:, :-1], variance[:, :-1] = inner.bias(offsets[:, :-1]), inner.variance(offsets[:, :-1])
        bias[:, -1], variance[:, -1] = last.bias(offsets[:, -1]), last.variance(offsets[:, -1])
        return bias * half, variance * half**2

    def expected_output(self, updates, *, reference=None, rotation_seed=None) -> np.ndarray:
        """Exact E[perturb(g)] for additive angle noise (laplace, gaussian; continuous samplers).

        For independent additive noise N on an angle, E[cos(theta + N)] = phi cos(theta) and
        E[sin(theta + N)] = phi sin(theta) with phi = E[cos N] (1/(1+b^2) for Laplace of scale b,
        exp(-s^2/2) for N(0, s^2)). With the product form of the inverse transform,
            E[g*_z] = E[r*] (prod_{i<z} phi_i sin theta_i) phi_z cos theta_z,
        i.e. coordinate z of the clean (angle-clipped) vector shrunk by prod_{i<=z} phi_i: the
        exact bias, which grows along the coordinates (spec: directional.md, last section).
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
        if self.base == GAUSSIAN:
            phi = np.exp(-0.5 * budget.angle_sigma**2) * np.ones(budget.dims - 1)
        else:
            scales = half * np.r_[np.full(budget.dims - 2, 2.0 / budget.inner_angle_epsilon), 2.0 / budget.last_angle_epsilon]
            phi = 1.0 / (1.0 + scales**2)
        shrink = np.empty(budget.dims)
        shrink[:-1] = np.cumprod(phi)
        shrink[-1] = shrink[-2]
        y = from_spherical(mean_radius, win.from_offsets(offsets, centre, self.beta)) * shrink
        return y if signs is None else rot.unrotate(y, signs, dims)

    def round_event(self):
        """One update's privacy event for `ldpfed.accounting` (the ledger): (eps, delta) by basic
        composition of the magnitude and angle parts, or a not-private event for exact-unsafe."""
        from ldpfed.accounting import EpsilonDeltaDpEvent, not_private

        if not self.private:
            return not_private("ldpvec magnitude exact-unsafe: ||g|| is released without noise")
        return EpsilonDeltaDpEvent(self.epsilon, self.delta or 0.0)

    def describe(self, dims: int | None = None) -> dict:
        record = {
            "perturbation": "ldpvec", "name": self.name, "base": self.base, "epsilon": self.epsilon,
            "delta": self.delta, "clip": self.clip, "clipping": "L2 to clip", "beta": self.beta,
            "window": self.window, "magnitude": self.magnitude, "rotation": self.rotation,
            "options": self.options, "private": self.private,
        }
        if not self.private:
            record["not_private_reason"] = "magnitude exact-unsafe: ||g|| is released without noise"
        if self.base == GAUSSIAN:
            record["angle_noise_sampler"] = "continuous (numpy standard_normal; not floating-point safe)"
        if dims is not None:
            record["budget"] = self.budget(dims).to_dict()
        return record

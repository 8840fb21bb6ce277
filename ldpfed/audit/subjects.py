"""What the auditor needs to know about a mechanism: `AuditSubject`, the plug-in interface.

A mechanism plugs into the auditor by providing its sampler on two neighbouring inputs at the
worst case (`draw`), its claim (epsilon, delta), and whatever else it can offer that yields
sharper events: the log-likelihood ratio where the density is known, the centres f(x), f(x') of a
vector output, classes of discrete outcomes, an exact "can this input produce this output" test
(floating_point.LatticeInverter). The event families follow from what is provided (`families`).

Built-in subjects (`build_subject` by name):
- every scalar randomizer of ldpfed.mechanisms, inputs t = -1 and t' = +1 (sensitivity 2, the
  whole domain; audit.md);
- the frequency oracles, categories 0 and 1 of k: GRR, OUE, histogram encoding and SHE (its
  Laplace case), and the discrete oracles that class their reports (OLH, BLH, Hadamard response,
  subset selection, THE, SUE, HCMS, CMS: `audit_classes`; their usual aliases, e.g. hr, ss);
- "gaussian-vector": f(x) - f(x') of norm D in R^d with N(0, s^2 I) noise, s from the analytic
  Gaussian calibration (Balle & Wang 2018), the reference for the vector events that gradient
  noises and LDPVec will use.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from functools import partial

import numpy as np

import ldpfed.frequency as frequency
import ldpfed.frequency.oracles as frequency_oracles
import ldpfed.gradient_noise as gradient_noise
import ldpfed.mechanisms as mechanisms
from ldpfed.audit.floating_point import LATTICE_SIZE, LatticeInverter, bit_pattern_classes, replay_mismatch
from ldpfed.audit.gradient_noise_subject import noise_subject
from ldpfed.audit.ldpvec_subject import ldpvec_subject
from ldpfed.audit.subject import (
    DEFAULT_CATEGORIES,
    DEFAULT_VECTOR_DIMS,
    LDPVEC,
    LDPVEC_OPTIONS,
    NEVER_PRODUCED,
    VECTOR_SUBJECTS,
    AuditSubject,
    vector_subject,
)
from ldpfed.frequency import FrequencyOracle, GeneralizedRR, HistogramEncoding, OptimizedUnaryEncoding
from ldpfed.mechanisms.base import Mechanism
from ldpfed.mechanisms.gaussian import analytic_sigma
from ldpfed.outputs import options_text
from ldpfed.registry import Registry
from ldpfed.validation import (
    LDPValueError,
    canonical_name,
    check_delta,
    check_epsilon,
    check_positive,
    check_positive_int,
)

# --- scalar randomizers --------------------------------------------------------------------------
SCALAR_INPUTS = (-1.0, 1.0)  # worst case: the two ends of [-1, 1]


def _lattice_pieces(mechanism: Mechanism) -> tuple[tuple[int, int], ...]:
    """Pieces of the 53-bit lattice on which the sampler's output is monotone in u. Hybrid uses
    u < alpha for PM (monotone) and u >= alpha for Duchi (+B then -B)."""
    alpha = getattr(mechanism, "alpha", None) if mechanism.name == "hybrid" else None
    if alpha is not None and 0.0 < alpha < 1.0:
        split = math.ceil(alpha * LATTICE_SIZE)  # u = k/2^53 < alpha  <=>  k < alpha 2^53
        return ((0, split), (split, LATTICE_SIZE))
    return ((0, LATTICE_SIZE),)


DISCRETE_OUTPUT = ("duchi",)  # mechanisms whose sampler emits a fixed finite set of floats


def sampler_name(mechanism: Mechanism) -> str:
    """The sampler a mechanism uses: its `sampler` option where it has one, "discrete" for fixed
    finite outputs, else "continuous" (the samplers of mechanisms without the option)."""
    if hasattr(mechanism, "sampler"):
        return str(mechanism.sampler)
    return "discrete" if mechanism.name in DISCRETE_OUTPUT else "continuous"


def _mechanism_label(mechanism: Mechanism) -> tuple[str, dict]:
    options = {k: v for k, v in mechanism.options().items() if k != "sampler"}
    return (f"{mechanism.name}[{options_text(options)}]" if options else mechanism.name), options


def scalar_inverter(mechanism: Mechanism) -> tuple[LatticeInverter | None, str]:
    """(an exact producibility test for the mechanism's sampler, "") if its sampler replays
    exactly, else (None, why not)."""
    sample = mechanism._sample  # the vectorized sampler on validated inputs (Mechanism interface)

    def draw(t, n, rng):
        return mechanism.perturb(np.full(n, t), rng)

    reason = replay_mismatch(sample, draw, SCALAR_INPUTS)
    if reason is not None:
        return None, reason
    return LatticeInverter(sample, _lattice_pieces(mechanism)), ""


def mechanism_subject(mechanism: Mechanism) -> AuditSubject:
    """A scalar randomizer on the neighbours t = -1, t' = +1."""
    x, x_prime = SCALAR_INPUTS
    inverter, reason = scalar_inverter(mechanism)
    name, options = _mechanism_label(mechanism)
    return AuditSubject(
        name=name,
        epsilon=mechanism.epsilon,
        delta=mechanism.delta or 0.0,
        sampler=sampler_name(mechanism),
        inputs=(f"t = {x:g}", f"t = {x_prime:g}"),
        draw=lambda which, n, rng: mechanism.perturb(np.full(n, SCALAR_INPUTS[which]), rng),
        output="real",
        log_ratio=lambda y: mechanism.log_density(y, x) - mechanism.log_density(y, x_prime),
        classes=bit_pattern_classes,
        producible=None if inverter is None else (lambda y, which: inverter.producible(y, SCALAR_INPUTS[which])),
        options=options,
        unavailable=() if inverter is not None else ((NEVER_PRODUCED, reason),),
    )


# --- frequency oracles ---------------------------------------------------------------------------
def _packed_bits(bits: np.ndarray) -> np.ndarray:
    """Class of an OUE report: its first (up to 16) bits as an integer (x and x' differ in the
    first two; the others are identically distributed under both)."""
    head = np.asarray(bits, dtype=np.int64)[:, :16]
    return head @ (np.int64(1) << np.arange(head.shape[1], dtype=np.int64))


def _histogram_subject(oracle: HistogramEncoding, common: dict) -> AuditSubject:
    """A histogram encoding's subject: vector reports around each category's centre, with the
    scalar mechanism's never-produced family where it has an inverter."""
    entry = oracle.entry
    b0, b1 = entry.bias_coefficients
    encoded = [np.where(np.arange(oracle.k) == category, 1.0, -1.0) for category in (0, 1)]
    centres = tuple(b0 + (1.0 + b1) * one_hot for one_hot in encoded)
    inverter, reason = scalar_inverter(entry)
    producible = None
    if inverter is not None:
        # Only entries 0 and 1 differ between the categories; entry j of category c is the
        # scalar mechanism on input encoded[c][j].
        def producible(reports, which):
            reports = np.asarray(reports, dtype=float)
            return inverter.producible(reports[:, 0], encoded[which][0]) & inverter.producible(
                reports[:, 1], encoded[which][1]
            )

    name, options = _mechanism_label(entry)
    return AuditSubject(
        name=f"histogram[{name}]",
        delta=oracle.delta or 0.0,
        sampler=sampler_name(entry),
        output="vector",
        centres=centres,
        producible=producible,
        unavailable=() if inverter is not None else ((NEVER_PRODUCED, reason),),
        **{**common, "options": {"k": oracle.k, "mechanism": entry.name, **options}},
    )


def oracle_subject(oracle: FrequencyOracle) -> AuditSubject:
    """A frequency oracle on the neighbouring categories 0 and 1."""

    def draw(which, n, rng):
        return oracle.perturb(np.full(n, which), rng)

    def log_ratio(reports):
        return oracle.log_probability(reports, 0) - oracle.log_probability(reports, 1)

    common = dict(
        epsilon=oracle.epsilon,
        inputs=("category 0", "category 1"),
        draw=draw,
        log_ratio=log_ratio,
        options={"k": oracle.k},
    )
    if isinstance(oracle, GeneralizedRR):
        return AuditSubject(
            name="grr",
            delta=0.0,
            sampler="discrete",
            output="discrete",
            classes=lambda reports: np.asarray(reports, dtype=np.int64),
            **common,
        )
    if isinstance(oracle, OptimizedUnaryEncoding):
        return AuditSubject(
            name="oue", delta=0.0, sampler="discrete", output="discrete", classes=_packed_bits, **common
        )
    if isinstance(oracle, HistogramEncoding) and oracle.name == "she":
        subject = oracle_subject(HistogramEncoding(oracle.epsilon, oracle.k, oracle.entry))
        return replace(subject, name="she")
    if isinstance(oracle, HistogramEncoding):
        return _histogram_subject(oracle, common)
    if hasattr(oracle, "audit_projection"):
        # CMS: a report of 1 + m numbers, of which 3 bear on categories 0 and 1; drawn in chunks
        # and projected, so that a million draws of a 1,024-column sketch fit in memory.
        return AuditSubject(
            name=oracle.name,
            delta=0.0,
            sampler="discrete",
            output="discrete",
            classes=oracle.projected_classes,
            **{
                **common,
                "draw": partial(_projected_draws, oracle),
                "log_ratio": oracle.projected_log_ratio,
                "options": {**common["options"], **_oracle_options(oracle)},
            },
        )
    if hasattr(oracle, "audit_classes"):
        # OLH, BLH, Hadamard response, subset selection, THE, HCMS: discrete reports whose
        # log-likelihood ratio between categories 0 and 1 depends only on the class (does the
        # report support category 0, category 1), computed exactly by log_probability.
        return AuditSubject(
            name=oracle.name,
            delta=0.0,
            sampler="discrete",
            output="discrete",
            classes=oracle.audit_classes,
            **{**common, "options": {**common["options"], **_oracle_options(oracle)}},
        )
    raise LDPValueError(f"no audit subject for frequency oracle {oracle.name!r}")


PROJECTED_CHUNK = 1 << 22  # report numbers drawn at once before a projection keeps 3 per report


def _projected_draws(oracle, which: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n reports of category `which`, drawn chunk by chunk and kept as their `audit_projection`."""
    chunk = max(1, PROJECTED_CHUNK // oracle.report_width)
    parts = [
        oracle.audit_projection(oracle.perturb(np.full(min(chunk, n - start), which), rng))
        for start in range(0, n, chunk)
    ]
    return np.concatenate(parts)


def _oracle_options(oracle: FrequencyOracle) -> dict:
    """The parameters an oracle derives from (eps, k) or takes, for the audit's record."""
    described = oracle.describe()
    keys = ("g", "K", "omega", "theta", "hashes", "columns", "seed")  # hcms and cms: hashes, columns, seed
    return {key: described[key] for key in keys if key in described}


# --- vector noise --------------------------------------------------------------------------------
def gaussian_vector_subject(
    epsilon: float, delta: float, dims: int = 10, sensitivity: float = 1.0, sigma: float | None = None
) -> AuditSubject:
    """x = 0 and x' = D e_1 in R^d with N(0, s^2 I) noise. s defaults to the analytic calibration
    for (epsilon, delta) at sensitivity D; passing `sigma` audits another noise level against the
    same claim (e.g. half the required one)."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, approximate=True, mechanism="gaussian-vector")
    dims = check_positive_int(dims, "dims")
    sensitivity = check_positive(sensitivity, "sensitivity")
    calibrated = analytic_sigma(epsilon, delta, sensitivity)
    sigma = calibrated if sigma is None else check_positive(sigma, "sigma")
    centres = (np.zeros(dims), np.eye(1, dims).ravel() * sensitivity)

    def perturb(rows, rng):
        return rows + sigma * rng.standard_normal(rows.shape)

    def log_ratio(y):
        return (np.sum((y - centres[1]) ** 2, axis=-1) - np.sum((y - centres[0]) ** 2, axis=-1)) / (2.0 * sigma * sigma)

    options = {"dims": dims, "sensitivity": sensitivity, "sigma": sigma}
    if sigma != calibrated:
        options["calibrated_sigma"] = calibrated
    return vector_subject(
        perturb,
        centres,
        centres,
        name="gaussian-vector",
        epsilon=epsilon,
        delta=delta,
        sampler="continuous",
        inputs=("f(x) = 0", f"f(x') = {sensitivity:g} e_1"),
        log_ratio=log_ratio,
        options=options,
    )


# --- by name -------------------------------------------------------------------------------------
def has_sampler_option(name: str) -> bool:
    """Does the scalar mechanism `name` take a `sampler` option ("safe" | "continuous")?"""
    return "sampler" in {f.name for f in fields(mechanisms.get_class(name))}


def _with_sampler(cls: type, name: str, sampler: str | None) -> dict:
    """The sampler option for a mechanism class that has one. Without the option, a discrete
    mechanism has its single sampler and a continuous one its "continuous" sampler; asking for
    anything else is an error naming what exists."""
    if sampler is None:
        return {}
    if has_sampler_option(cls.name):
        return {"sampler": sampler}
    if cls.name in DISCRETE_OUTPUT:
        raise LDPValueError(f"{name} has a single (discrete) sampler; omit the sampler option")
    if sampler == "continuous":
        return {}
    raise LDPValueError(f"{name} has no {sampler!r} sampler in this version; available: continuous")


def _scalar_subject(key, epsilon, delta, sampler, options) -> AuditSubject:
    cls = mechanisms.get_class(key)
    return mechanism_subject(mechanisms.get(key, epsilon, delta, **options, **_with_sampler(cls, key, sampler)))


def _oracle_subject(key, epsilon, delta, sampler, options) -> AuditSubject:
    k = options.pop("k", DEFAULT_CATEGORIES)
    if key == "histogram":
        entry = options.get("mechanism", "laplace")
        options.update(_with_sampler(mechanisms.get_class(entry), f"histogram[{entry}]", sampler))
        if delta is not None:
            options["delta"] = delta
    else:
        if sampler is not None:
            raise LDPValueError(f"{key} has a single (discrete) sampler; omit the sampler option")
        if delta not in (None, 0, 0.0):
            raise LDPValueError(f"{key} is pure eps-LDP and takes no delta; got delta={delta!r}")
    return oracle_subject(frequency.get(key, epsilon, k, **options))


def _gaussian_vector_subject(key, epsilon, delta, sampler, options) -> AuditSubject:
    if sampler not in (None, "continuous"):
        raise LDPValueError("gaussian-vector has only the continuous sampler")
    unknown = set(options) - {"dims", "sensitivity"}
    if unknown:
        raise LDPValueError(f"gaussian-vector does not take option(s) {sorted(unknown)}; allowed: dims, sensitivity")
    return gaussian_vector_subject(epsilon, delta, **options)


def _ldpvec_subject(key, epsilon, delta, sampler, options) -> AuditSubject:
    """The base mechanism's sampler option is the angle and magnitude sampler."""
    unknown = set(options) - set(LDPVEC_OPTIONS)
    if unknown:
        raise LDPValueError(f"ldpvec does not take option(s) {sorted(unknown)}; allowed: {', '.join(LDPVEC_OPTIONS)}")
    base = canonical_name(options.pop("base", "laplace"))
    extra = _with_sampler(mechanisms.get_class(base), f"ldpvec[{base}]", sampler)
    return ldpvec_subject(base, epsilon, delta, **options, **extra)


def _gradient_noise_subject(key, epsilon, delta, sampler, options) -> AuditSubject:
    """Calibrated as published, audited on D e_1 (or D)."""
    unknown = set(options) - {"dims", "clip", "k"}
    if unknown:
        raise LDPValueError(f"{key} does not take option(s) {sorted(unknown)}; allowed: dims, clip, k")
    options.setdefault("dims", DEFAULT_VECTOR_DIMS)
    return noise_subject(gradient_noise.calibrate(key, epsilon=epsilon, delta=delta, sampler=sampler, **options))


# Every name the auditor accepts, with the builder of its subject: the scalar randomizers, the
# frequency oracles, the Gaussian vector reference, LDPVec and the gradient noises.
_REGISTRY = Registry(
    "mechanism",
    {
        **dict.fromkeys(mechanisms.available(), _scalar_subject),
        **dict.fromkeys(frequency.available(), _oracle_subject),
        **dict.fromkeys(frequency_oracles.ALIASES, _oracle_subject),  # hr, ss, de, ...: the same oracles
        **dict.fromkeys(VECTOR_SUBJECTS, _gaussian_vector_subject),
        LDPVEC: _ldpvec_subject,
        **dict.fromkeys(gradient_noise.available(), _gradient_noise_subject),
    },
)
available = _REGISTRY.available
get_class = _REGISTRY.get_class  # the builder of a name's subject


def build_subject(
    name, epsilon: float | None = None, delta: float | None = None, *, sampler: str | None = None, **options
) -> AuditSubject:
    """The audit subject for a name from `available()` (or a Mechanism, FrequencyOracle or
    AuditSubject passed through). Options go to the mechanism (e.g. estimator="debiased"), the
    oracle (k, default 4; mechanism for histogram) or the vector noise (dims)."""
    if isinstance(name, AuditSubject):
        return name
    if isinstance(name, Mechanism):
        return mechanism_subject(name)
    if isinstance(name, FrequencyOracle):
        return oracle_subject(name)
    key = canonical_name(name)
    return get_class(key)(key, epsilon, delta, sampler, options)


get = build_subject

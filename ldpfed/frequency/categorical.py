"""Several categorical attributes: m-of-d sampling and one frequency oracle per attribute
(mechanisms.md, Frequency estimation by histogram encoding and Several dimensions).

A user holds d categorical attributes (k_j categories each). She samples m of the d attributes
uniformly without replacement and reports each through a frequency oracle with budget eps/m
(`ldpfed.frequency`: GRR, OUE, or histogram encoding on a scalar mean mechanism, which then spends
eps/(2m) per one-hot entry). The guarantee is eps per user by basic composition.

The collector sees, per (attribute, category) entry e, the users' unbiased contributions c_ie (the
oracle's `contributions`: an unbiased estimate of the one-hot bit), and keeps only their
per-entry counts, sums and sums of squares (`ldpfed.mechanisms.multidim.ReportSums` over the D = sum k_j
entries). So the frequency task is a D-dimensional mean estimation of one-hot entries in [0, 1]:
f_hat_e = mean of the r_j contributions of the users who reported attribute j (0 when r_j = 0),
and the CLT predictor and the re-calibrating aggregators apply per entry.

Perturbation is vectorized over users and entries: histogram encoding perturbs the whole +-1
one-hot matrix with its per-entry mechanism, OUE draws every bit with its probability p or q,
GRR draws every attribute's keep-or-move decision and uniform other category at once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

import ldpfed.frequency.oracles as frequency_oracles
import ldpfed.mechanisms as mechanisms
from ldpfed.frequency.longitudinal import LongitudinalOracle
from ldpfed.frequency.oracles import (
    CountingOracle,
    FrequencyOracle,
    GeneralizedRR,
    HistogramEncoding,
    OptimizedUnaryEncoding,
)
from ldpfed.mechanisms.multidim import ReportSums, sample_report_mask
from ldpfed.validation import LDPValueError, check_epsilon, check_report_dims

# The longitudinal oracles (a permanent report memoized over rounds, ldpfed.frequency.longitudinal):
# a federation runs them from each user's memo (`AttributeOracles.memoized_report_sums`); plans and
# comparisons of one-round collections list the others.
LONGITUDINAL_ORACLES = tuple(
    name for name in frequency_oracles.available() if hasattr(frequency_oracles.get_class(name), "epsilon_inf")
)
# The oracles that report a category (or its encoding) in one round; the registry's entry
# "histogram" encodes one with a scalar mechanism, named by that mechanism.
COUNTING_ORACLES = tuple(
    name for name in frequency_oracles.available() if name != "histogram" and name not in LONGITUDINAL_ORACLES
)


def oracle_kind(name: str) -> str:
    """ "grr", "oue", another oracle of the registry (a longitudinal one included: it collects over
    rounds from a memo, `AttributeOracles.memoized`), or "histogram" (any scalar mechanism name,
    histogram-encoded)."""
    key = frequency_oracles.resolve(name)
    if key in COUNTING_ORACLES or key in LONGITUDINAL_ORACLES:
        return key
    if key == "histogram":
        raise LDPValueError("name the histogram encoding by its mechanism (e.g. laplace, piecewise), not 'histogram'")
    mechanisms.get_class(key)  # an unknown name fails here, naming the choices
    return "histogram"


def is_longitudinal(name: str) -> bool:
    """Does `name` collect over rounds from a permanent (memoized) report?"""
    return frequency_oracles.resolve(name) in LONGITUDINAL_ORACLES


def has_channel(name: str) -> bool:
    """Does the frequency mechanism `name` report through a two-level channel (p, q) (a support-
    counting oracle), which IBU needs?"""
    kind = oracle_kind(name)
    return kind != "histogram" and issubclass(frequency_oracles.get_class(kind), CountingOracle)


def takes_hash_seed(name: str) -> bool:
    """Does the frequency mechanism `name` draw public hash functions from a `seed` (hcms, cms)?"""
    kind = oracle_kind(name)
    return kind != "histogram" and "seed" in {f.name for f in fields(frequency_oracles.get_class(kind)) if f.init}


def channel_oracles() -> list[str]:
    """The one-round oracles with a two-level channel (`has_channel`)."""
    return [name for name in COUNTING_ORACLES if has_channel(name)]


def is_approximate(name: str) -> bool:
    """Does the frequency mechanism `name` take a delta (a histogram-encoded approximate mechanism)?"""
    return oracle_kind(name) == "histogram" and mechanisms.get_class(name).approximate


def available_frequency_mechanisms() -> list[str]:
    return [*COUNTING_ORACLES, *mechanisms.available()]


@dataclass(frozen=True, eq=False)
class AttributeOracles:
    """The oracles of d attributes (budget eps/m each) and the one-hot entry layout."""

    name: str  # grr, oue, or the scalar mechanism of histogram encoding
    epsilon: float  # a user's total budget
    report_dims: int  # m attributes reported per user
    oracles: tuple[FrequencyOracle, ...]

    @classmethod
    def build(
        cls,
        name: str,
        epsilon: float,
        categories,
        report_dims: int | None = None,
        delta: float | None = None,
        hash_seed: int | None = None,
        **options,
    ) -> AttributeOracles:
        """`hash_seed`: the collection's public hash index, for the oracles that draw public hash
        functions (`takes_hash_seed`; ignored by the others)."""
        epsilon = check_epsilon(epsilon)
        counts = [int(k) for k in np.asarray(categories).ravel()]
        m = check_report_dims(len(counts) if report_dims is None else report_dims, len(counts))
        kind = oracle_kind(name)
        if kind == "histogram":
            options = {"mechanism": mechanisms.get_class(name).name, **options}
            if delta is not None:
                options["delta"] = delta / m
        elif delta is not None:
            raise LDPValueError(f"--delta applies to approximate mechanisms, not to {kind}")
        if hash_seed is not None and takes_hash_seed(name):
            options = {**options, "seed": hash_seed}
        oracles = tuple(frequency_oracles.get(kind, epsilon / m, k, **dict(options)) for k in counts)
        label = kind if kind != "histogram" else options["mechanism"]
        return cls(label, epsilon, m, oracles)

    @property
    def kind(self) -> str:
        return self.oracles[0].name

    @property
    def attributes(self) -> int:
        return len(self.oracles)

    @property
    def categories(self) -> np.ndarray:
        return np.array([oracle.k for oracle in self.oracles], dtype=np.int64)

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.categories)])

    @property
    def entries(self) -> int:
        return int(self.offsets[-1])

    @property
    def width(self) -> int:
        """Numbers a user's reports and contributions hold at most: the one-hot entries, or the
        oracles' reports where they are wider (a count mean sketch's row of bits); bounds a chunk."""
        return max(self.entries, sum(oracle.report_width for oracle in self.oracles))

    @property
    def attribute_of_entry(self) -> np.ndarray:
        """Attribute index j of every one-hot entry (length D)."""
        return np.repeat(np.arange(self.attributes), self.categories)

    @property
    def channels(self) -> tuple[tuple[float, float], ...] | None:
        """Each attribute's two-level channel (p, q): the probability that a report supports its
        user's category and another one (`CountingOracle`); what IBU inverts. None when the oracles
        report otherwise (histogram encoding, hcms, dbitflippm): no such channel."""
        if not all(isinstance(oracle, CountingOracle) for oracle in self.oracles):
            return None
        return tuple((float(oracle.p), float(oracle.q)) for oracle in self.oracles)

    def entry_variances(self) -> tuple[np.ndarray, np.ndarray]:
        """(V_in, V_out) per entry: the variance of one user's contribution when the entry is her
        category (bit 1) or not (bit 0); `FrequencyOracle.variance` at f = 1 and f = 0 with n = 1."""
        v_in = np.concatenate([o.variance(np.eye(o.k)[0], 1)[:1].repeat(o.k) for o in self.oracles])
        v_out = np.concatenate([o.variance(np.eye(o.k)[0], 1)[1:2].repeat(o.k) for o in self.oracles])
        return v_in, v_out

    def one_hot(self, codes: np.ndarray) -> np.ndarray:
        """(n, D) 0/1 matrix of the users' categories."""
        bits = np.zeros((codes.shape[0], self.entries), dtype=bool)
        np.put_along_axis(bits, codes + self.offsets[:-1], True, axis=1)
        return bits

    def contributions(self, codes: np.ndarray, reported: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(n, D) unbiased per-user estimates of the one-hot bits of the reported attributes (0 in
        the entries of attributes not reported). `reported`: (n, d) mask of the m sampled attributes."""
        n = codes.shape[0]
        entry_mask = np.repeat(reported, self.categories, axis=1)
        bits = self.one_hot(codes)
        out = np.zeros((n, self.entries))
        first = self.oracles[0]
        if isinstance(first, HistogramEncoding):
            signs = np.where(bits[entry_mask], 1.0, -1.0)
            reports = first.entry.perturb(signs, rng)
            b0, b1 = first.entry.bias_coefficients
            out[entry_mask] = ((reports - b0) / (1.0 + b1) + 1.0) / 2.0  # HistogramEncoding.contributions
        elif isinstance(first, OptimizedUnaryEncoding):
            p, q = first.p, first.q  # the same for every k
            sent = rng.random(int(entry_mask.sum())) < np.where(bits[entry_mask], p, q)
            out[entry_mask] = (sent - q) / (p - q)
        elif isinstance(first, GeneralizedRR):
            move = np.array([o._move for o in self.oracles])
            p = np.array([o.p for o in self.oracles])
            q = np.array([o.q for o in self.oracles])
            k = self.categories
            keep = rng.random(codes.shape) >= move  # P(keep) = p exactly (ldpfed.frequency)
            other = (codes + rng.integers(1, k, size=codes.shape)) % k  # uniform among the k - 1 others
            report = np.where(keep, codes, other)
            supports = self.one_hot(report)
            out[entry_mask] = ((supports - q[self.attribute_of_entry]) / (p - q)[self.attribute_of_entry])[entry_mask]
        elif self.memoized:  # a longitudinal oracle reports from its memo, round after round
            raise LDPValueError(
                f"{first.name} collects over rounds from a permanent report (its memo): memoized_report_sums, "
                "not a one-round collection (which would redraw the memo and spend eps_inf each time)"
            )
        else:  # any other oracle of the registry: its own sampler and per-user contributions
            for j, oracle in enumerate(self.oracles):  # a loop over attributes, each vectorized over users
                rows = np.flatnonzero(reported[:, j])
                if rows.size:
                    columns = slice(self.offsets[j], self.offsets[j + 1])
                    out[rows, columns] = oracle.contributions(oracle.perturb(codes[rows, j], rng))
        return out

    def report_sums(self, codes: np.ndarray, rng: np.random.Generator) -> ReportSums:
        """Sample m of d attributes per user, perturb them, and sum the contributions per entry."""
        codes = np.asarray(codes)
        reported = sample_report_mask(codes.shape[0], self.attributes, self.report_dims, rng)
        values = self.contributions(codes, reported, rng)
        count = np.repeat(reported.sum(axis=0), self.categories).astype(float)
        return ReportSums(count, values.sum(axis=0), np.einsum("ij,ij->j", values, values), codes.shape[0])

    @property
    def memoized(self) -> bool:
        """Do the oracles report over rounds from a permanent (memoized) report?"""
        return isinstance(self.oracles[0], LongitudinalOracle)

    def memoized_report_sums(
        self, codes: np.ndarray, permanent: np.random.Generator, rng: np.random.Generator
    ) -> ReportSums:
        """One round of a memoized collection: each user's m attributes and their permanent reports
        are drawn from `permanent`, a stream that is the same every round (the client's own secret:
        the same memo each round, and nothing the server knows redraws it); this round's
        instantaneous reports from `rng`. The reported attributes are memoized too: a fresh m of d
        each round would release every attribute's permanent report over the rounds (d eps_inf / m)."""
        codes = np.asarray(codes)
        n = codes.shape[0]
        reported = sample_report_mask(n, self.attributes, self.report_dims, permanent)
        out = np.zeros((n, self.entries))
        for j, oracle in enumerate(self.oracles):  # a loop over attributes, each vectorized over users
            rows = np.flatnonzero(reported[:, j])
            if rows.size:
                memo = oracle.memoize(codes[rows, j], permanent)
                out[rows, self.offsets[j] : self.offsets[j + 1]] = oracle.contributions(oracle.report(memo, rng))
        count = np.repeat(reported.sum(axis=0), self.categories).astype(float)
        return ReportSums(count, out.sum(axis=0), np.einsum("ij,ij->j", out, out), n)

    @property
    def epsilon_1(self) -> float | None:
        """A memoized collection's budget against an observer of one round (m attributes at
        eps_1 / m each); None for a one-round collection, whose every round spends `epsilon`."""
        return self.report_dims * self.oracles[0].epsilon_1 if self.memoized else None

    @property
    def guarantee(self) -> str:
        if self.memoized:
            return (
                f"{self.epsilon:g}-LDP per user against the server over all rounds (each user's permanent "
                f"report of {self.report_dims} of {self.attributes} attributes, memoized: charged once), "
                f"{self.epsilon_1:g}-LDP against an observer of one round"
            )
        return (
            f"{self.epsilon:g}-LDP per user: {self.report_dims} of {self.attributes} attributes, "
            f"each {self.oracles[0].guarantee}"
        )

    def describe(self) -> dict:
        first = self.oracles[0]
        return {
            "name": self.name,
            "oracle": self.kind,
            "epsilon": self.epsilon,
            "report_dims": self.report_dims,
            "attributes": self.attributes,
            "categories": self.categories.tolist(),
            "per_attribute": first.describe() | {"k": None},
            "guarantee": self.guarantee,
            **({"epsilon_inf": self.epsilon, "epsilon_1": self.epsilon_1} if self.memoized else {}),
        }

"""The prediction's per-dimension arithmetic: the compiled one-pass loop gives the numpy
operations' results bit for bit (terms.py), so a large prediction is the same number whichever
path computes it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import ldpfed.mechanisms as registry
from ldpfed.analysis import ColumnMoments, predict
from ldpfed.analysis.predictor import inverse_report_moment
from ldpfed.analysis.terms import COMPILED_DIMS, DimensionTerms, _compiled_terms, _numpy_terms

DIMS = COMPILED_DIMS + 5  # not a whole number of the loop's blocks


@dataclass(frozen=True)
class SkewedMechanism:
    """Coefficients no registered mechanism has: V(t) < 0 near t = -1 (clipped to 0, so the
    Berry–Esseen bound is 0 there), a biased estimate, and a third moment whose polynomial
    bound reaches its cap."""

    bias_coefficients: tuple = (0.125, -0.3)
    variance_coefficients: tuple = (0.2, 0.5, -1.0)

    def third_abs_central_moment(self, t):
        return 1.0 + np.cos(3.0 * np.asarray(t, dtype=float))


def columns(rng: np.random.Generator, users: int = 6) -> np.ndarray:
    """Columns of every kind: spread, constant (0, +-1: zero spread, a -0.0 in some products)."""
    values = rng.uniform(-1.0, 1.0, (users, DIMS)) * rng.uniform(0.0, 1.0, DIMS)
    values[:, :3] = 0.0
    values[:, 3], values[:, 4] = -1.0, 1.0
    return values


def assert_identical(compiled: tuple[DimensionTerms, str], reference: tuple[DimensionTerms, str]) -> None:
    assert compiled[1] == reference[1]
    for name, got, want in zip(DimensionTerms._fields, compiled[0], reference[0]):
        assert got.shape == want.shape == (DIMS,), name
        assert got.tobytes() == want.tobytes(), name  # every bit, the sign of zero included


def registered():
    for name in registry.available():
        for options in ({"estimator": "raw"}, {"estimator": "debiased"}) if name == "square-wave" else ({},):
            delta = 1e-5 if registry.get_class(name).approximate else None
            yield registry.get(name, 0.05, delta, **options)


@pytest.mark.parametrize("mechanism", [*registered(), SkewedMechanism()], ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("source", ["array", "summary"])
def test_compiled_loop_gives_the_numpy_terms_bit_for_bit(mechanism, source):
    moments = ColumnMoments.from_array(columns(np.random.default_rng(3)))
    moments = moments if source == "array" else moments.summary()
    users = moments.users
    for fraction in (0.3, 1.0):  # some dimensions without reports; every user reporting everything
        no_report, inverse = inverse_report_moment(users, fraction)
        law = (users * fraction, no_report, inverse, users)
        assert_identical(_compiled_terms(mechanism, moments, *law), _numpy_terms(mechanism, moments, *law))


def test_skewed_mechanism_exercises_the_clipped_and_capped_branches():
    """The edge cases above really occur (else the bitwise check would not cover them)."""
    moments = ColumnMoments.from_array(columns(np.random.default_rng(3))).summary()
    no_report, inverse = inverse_report_moment(moments.users, 0.3)
    terms, _ = _compiled_terms(SkewedMechanism(), moments, 1.8, no_report, inverse, moments.users)
    assert np.any(terms.report_variance == 0.0) and np.any(terms.report_variance > 0.0)
    assert np.all(terms.bound[terms.report_variance == 0.0] == 0.0)
    assert np.any(terms.third_moment == 2.0)  # the cap max_t g(t) = 2 (g(0) = 2)
    assert np.any(terms.bound == 1.0)  # a Kolmogorov distance clipped at 1


def test_a_large_prediction_is_the_numpy_one():
    """predict takes the compiled path from COMPILED_DIMS dimensions on; with given counts, numpy."""
    rng = np.random.default_rng(5)
    moments = ColumnMoments.from_array(columns(rng, users=40))
    prediction = predict("hybrid", 4.0, 40, DIMS, 300, moments)
    no_report, inverse = inverse_report_moment(40, 300 / DIMS)
    mechanism = registry.get("hybrid", 4.0 / 300)
    reference, _ = _numpy_terms(mechanism, moments, 40 * 300 / DIMS, no_report, inverse, 40)
    assert prediction.bias.tobytes() == reference.bias.tobytes()
    assert (
        prediction.sigma2.tobytes()
        == (reference.noise_variance + reference.sampling_variance + reference.no_report_variance).tobytes()
    )
    assert prediction.berry_esseen.bound.tobytes() == reference.bound.tobytes()
    counts = rng.integers(0, 3, DIMS)  # per-dimension report laws: the numpy path
    given = predict("hybrid", 4.0, 40, DIMS, 300, moments, counts=counts)
    assert np.all(given.no_report_probability[counts == 0] == 1.0)
    assert np.all(given.bias[counts == 0] == -moments.mean[counts == 0])

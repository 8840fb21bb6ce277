"""LDPVec under the empirical privacy auditor (spec: audit.md: "LDPVec with the magnitude released
unperturbed: fail")."""

from __future__ import annotations

import pytest

from ldpfed.audit import run_audit
from ldpfed.directional.audit_subject import ldpvec_subject
from ldpfed.validation import LDPValueError

SAMPLES = 200_000


def test_exact_unsafe_fails_the_audit():
    result = run_audit(ldpvec_subject("laplace", 1.0, magnitude="exact-unsafe", dims=4), samples=SAMPLES, seed=0)
    assert result.verdict == "fail" and result.epsilon_lower > 3.0


@pytest.mark.parametrize("magnitude", ["split", "normalize"])
@pytest.mark.parametrize("base,delta", [("laplace", None), ("piecewise", None), ("gaussian", 1e-5)])
def test_sound_modes_pass(base, delta, magnitude):
    result = run_audit(ldpvec_subject(base, 1.0, delta, magnitude=magnitude, dims=4), samples=SAMPLES, seed=1)
    assert result.verdict == "pass"


def test_the_polar_release_audit_has_power():
    """With the exact density ratio the auditor certifies most of the claimed eps (it is tight)."""
    result = run_audit(ldpvec_subject("laplace", 1.0, magnitude="split", dims=4, release="polar"), samples=SAMPLES, seed=2)
    assert result.verdict == "pass" and result.epsilon_lower > 0.6


def test_polar_release_of_exact_unsafe_is_refused():
    with pytest.raises(LDPValueError):
        ldpvec_subject("laplace", 1.0, magnitude="exact-unsafe", release="polar")

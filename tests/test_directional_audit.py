"""LDPVec under the empirical privacy auditor (spec: audit.md: "LDPVec with the magnitude released
unperturbed: fail")."""

from __future__ import annotations

import pytest

from ldpfed.audit import run_audit
from ldpfed.audit.ldpvec_subject import ldpvec_subject
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
    result = run_audit(
        ldpvec_subject("laplace", 1.0, magnitude="split", dims=4, release="polar"), samples=SAMPLES, seed=2
    )
    assert result.verdict == "pass" and result.epsilon_lower > 0.6


def test_polar_release_of_exact_unsafe_is_refused():
    with pytest.raises(LDPValueError):
        ldpvec_subject("laplace", 1.0, magnitude="exact-unsafe", release="polar")
    with pytest.raises(LDPValueError, match="safe gaussian"):
        ldpvec_subject("gaussian", 1.0, 1e-5, release="polar")
    assert ldpvec_subject("gaussian", 1.0, 1e-5, release="polar", sampler="continuous").log_ratio is not None


@pytest.mark.parametrize("sampler, exit_code", [("safe", 0), ("continuous", 1)])
def test_the_audit_cli_audits_ldpvec_gaussian_and_its_floating_point_event(sampler, exit_code):
    """`ldpfed audit --mechanism ldpvec --base gaussian --release offsets`: the safe sampler (the
    default) passes, the continuous one is refuted by the never-produced event (exit 1)."""
    import json

    from typer.testing import CliRunner

    from ldpfed.cli.main import app

    result = CliRunner().invoke(
        app,
        [
            "audit",
            "--mechanism",
            "ldpvec",
            "--base",
            "gaussian",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--release",
            "offsets",
            "--sampler",
            sampler,
            "--samples",
            "100000",
            "--json",
        ],
    )
    assert result.exit_code == exit_code, result.output
    record = json.loads(result.stdout)
    assert record["sampler"] == sampler
    if sampler == "continuous":
        assert record["event"].startswith("never-produced")


@pytest.mark.parametrize(
    "args",
    [
        ["--mechanism", "laplace", "--base", "gaussian"],
        ["--mechanism", "ldpvec", "--base", "nope"],
        ["--mechanism", "ldpvec", "--base", "laplace", "--release", "offsets"],
        ["--mechanism", "ldpvec", "--magnitude", "exact"],
    ],
)
def test_the_audit_cli_refuses_bad_ldpvec_options(args):
    from typer.testing import CliRunner

    from ldpfed.cli.main import app

    result = CliRunner().invoke(app, ["audit", *args, "--epsilon", "1", "--samples", "1000"])
    assert result.exit_code == 2, result.output

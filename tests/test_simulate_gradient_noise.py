"""`ldpfed simulate --task train --mechanism <gradient noise>`: L2-clipped
updates plus a noise of ldpfed.gradient_noise; R1SMG and product noise make the run not private."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ldpfed, ldpfed_json

from ldpfed.gradient_noise import GUARANTEE_FAILS

BASE = "simulate --task train --engine local --clients 3 --rounds 2 --aggregator fedavg --clip 1 --epsilon 4"


def simulate(arguments: str) -> dict:
    return ldpfed_json(BASE, arguments)


def test_inid_gaussian_run_is_private_and_its_noise_matches_the_prediction():
    # a fixed noise root: the ratio below is a statistical check and must be reproducible
    summary = simulate("--mechanism inid-gaussian --delta 1e-5 --noise-seed 1")
    assert summary["private"] and summary["epsilon_spent_max_per_client"] == pytest.approx(2 * 4.0)
    # Measured ||noisy mean - clean mean||^2 over its exact expectation: 2 rounds of a sum of
    # d = 650 Gaussian coordinates, relative sd ~ sqrt(2 / (2 * 650)) = 0.04.
    assert summary["noise_measured_over_predicted"] == pytest.approx(1.0, abs=5 * 0.04)
    assert summary["noise_sampler"].startswith("safe")


def test_plrvo_run_is_accounted_by_rdp():
    summary = simulate("--mechanism plrvo --accountant rdp")
    assert summary["private"] and np.isfinite(summary["epsilon_spent_max_per_client"])
    assert summary["noise_sampler"].startswith("safe")


@pytest.mark.parametrize("mechanism", ["r1smg", "product-noise"])
def test_failing_published_noises_are_not_private(mechanism):
    summary = simulate(f"--mechanism {mechanism} --delta 1e-5")
    assert summary["private"] is False and summary["epsilon_spent_max_per_client"] is None
    assert any(GUARANTEE_FAILS in reason for reason in summary["privacy_reasons"])


@pytest.mark.parametrize(
    "fault",
    [
        "--mechanism inid-gaussian --delta 1e-5 --aggregator mean",
        "--mechanism plrvo",  # basic accountant: no per-round (eps, delta)
        "--mechanism r1smg --delta 1e-5 --task mean",
        "--mechanism inid-gaussian --delta 1e-5 --report-dims 3",
    ],
)
def test_bad_combinations_fail_in_one_line(fault):
    result = ldpfed(BASE, fault, "--json")
    assert result.exit_code == 2 and result.stderr.strip().splitlines()[-1].startswith("error:"), result.output

"""The distributed mean estimation experiment (scripts/ddgauss_dme.py) on a reduced grid: n = 100,
d = 250, 16 bits, three budgets (the page runs the full grid)."""

from __future__ import annotations

import pytest

from scripts.ddgauss_dme import ddg_setting, rdp_gaussian_sigma, run, summarize

EPSILONS = (0.75, 3.0, 6.0)
REPETITIONS = 20


@pytest.fixture(scope="module")
def summary():
    return summarize(run(clients=(100,), bits=(16,), epsilons=EPSILONS, repetitions=REPETITIONS, seed=7))


def test_16_bits_costs_what_the_central_gaussian_accounted_alike_costs(summary):
    """At 16 bits the DDG's MSE is within 10% of the central Gaussian's calibrated by the same RDP
    conversion, at every eps. The measured mean of 20 repetitions x 250 coordinates of near-normal
    errors has relative standard error sqrt(2 / 5,000) = 2% (a rare modular wrap adds to it: the
    page counts them); the expected gap is below 3% (next test), so 10% is 3.5 standard errors away."""
    assert len(summary) == len(EPSILONS)
    assert (summary.vs_gaussian_rdp - 1).abs().max() < 0.10


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_the_sum_noise_matches_the_rdp_calibrated_gaussian(epsilon):
    """n sigma^2 + n gamma^2 / 4 (shares and rounding) against the RDP Gaussian's sigma^2: the DDG
    at 16 bits loses under 3% (its rounding-inflated sensitivity), while against the analytic
    Gaussian the RDP conversion itself costs 10-20% (the page's first table)."""
    setting = ddg_setting(100, 16, epsilon)
    noise = 100 * (setting.local_stddev**2 + setting.gamma**2 / 4)
    assert 1.0 <= noise / rdp_gaussian_sigma(epsilon) ** 2 < 1.03


def test_the_page_sets_both_central_baselines_beside_the_ddg(summary, tmp_path):
    """The page's 16-bit table carries the analytic and the RDP-calibrated Gaussian with the DDG's
    ratio to each and the two baselines' own ratio: the accounting's gap alone (the same Gaussian,
    calibrated twice at one (eps, delta)) exceeds 10% at these budgets, which is why only the RDP
    baseline can be within 10%."""
    from scripts.ddgauss_dme import page, ratios

    table = ratios(summary)
    assert (table.rdp_vs_analytic > 1.10).all() and (table.rdp_vs_analytic < 1.25).all()
    text = page(summary, "python scripts/ddgauss_dme.py", REPETITIONS, tmp_path / "secagg_dme", stamp="test")
    header = next(line for line in text.splitlines() if line.startswith("| clients | epsilon | mse"))
    for column in ("gaussian", "vs_gaussian", "gaussian_rdp", "vs_gaussian_rdp", "rdp_vs_analytic"):
        assert f" {column} |" in header
    assert "Within 10% of the analytic Gaussian at every eps: NOT met" in text
    assert "within 10% of the RDP-calibrated Gaussian: met" in text

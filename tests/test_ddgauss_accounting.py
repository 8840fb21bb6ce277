"""The distributed discrete Gaussian's accountant against the authors' reference code
(tests/reference_ddgauss.py, a port of google-research/federated distributed_dp/accounting_utils.py)."""

from __future__ import annotations

import math

import pytest
import reference_ddgauss as reference

from ldpfed.accounting import create_accountant
from ldpfed.accounting.ddgauss import (
    DistributedDiscreteGaussianDpEvent,
    ddgauss_epsilon,
    ddgauss_params,
    poisson_subsampled_rdp,
    rounded_l2_norm_bound,
    sum_inflation,
)
from ldpfed.validation import LDPValueError

BETA = math.exp(-0.5)
CLIP = 10.0
# (gamma, sigma, n, D, beta, q, T, delta): coarse and fine grids, 2 to 1,000 shares (tau matters at
# small sigma / gamma), no rounding bias and the reference's, Poisson sampling and T rounds.
GRID = [
    (1.0, 0.2, 2, 16, 0.0, 1.0, 1, 1e-5),
    (1.0, 0.5, 3, 16, BETA, 1.0, 1, 1e-5),
    (1.0, 1.0, 2, 256, BETA, 1.0, 10, 1e-6),
    (0.5, 0.6, 10, 64, BETA, 1.0, 1, 1e-5),
    (0.05, 1.0, 10, 256, BETA, 1.0, 100, 1e-5),
    (0.005, 5.0, 100, 256, BETA, 1.0, 1, 1e-8),
    (0.005, 0.2, 1000, 256, 0.0, 1.0, 1, 1e-5),
    (2.5, 2.0, 1000, 256, BETA, 1.0, 1, 1e-5),
    (0.05, 1.0, 1000, 1024, BETA, 1.0, 50, 1e-5),
    (1.0, 0.5, 3, 16, BETA, 0.1, 10, 1e-5),
    (0.05, 1.0, 10, 256, BETA, 0.05, 100, 1e-5),
    (1.0, 5.0, 1000, 256, BETA, 0.05, 100, 1e-5),
    (0.005, 0.5, 100, 64, 0.0, 0.3, 20, 1e-6),
]


def _reference_epsilon(gamma, sigma, n, dims, beta, q, rounds, delta) -> float:
    return float(reference.ddgauss_epsilon(gamma, sigma, n, CLIP, beta, dims, q, rounds, delta)[0])


@pytest.mark.parametrize("gamma, sigma, n, dims, beta, q, rounds, delta", GRID)
def test_epsilon_matches_the_reference_on_a_grid(gamma, sigma, n, dims, beta, q, rounds, delta):
    """At the reference's orders the two implementations agree within 1% (they agree to ~1e-14);
    at the ledger's orders (dp-accounting's, up to 1024) ldpfed's figure is never more than 1% above
    the reference's (it is lower where the best order exceeds the reference's largest, 256)."""
    event = DistributedDiscreteGaussianDpEvent(gamma, sigma, n, CLIP, dims, beta, q)
    expected = _reference_epsilon(gamma, sigma, n, dims, beta, q, rounds, delta)
    assert ddgauss_epsilon(event, rounds, delta, orders=reference.RDP_ORDERS) == pytest.approx(expected, rel=0.01)
    assert ddgauss_epsilon(event, rounds, delta) <= 1.01 * expected


def test_the_grid_exercises_tau_sampling_and_the_rounding_bound():
    """The comparison can fail where it matters: tau is large somewhere on the grid, and sampling
    and the rounding bound change the reference's epsilon."""
    taus = [sum_inflation(sigma / gamma, n) for gamma, sigma, n, *_ in GRID]
    assert max(taus) > 1e-3 and min(taus) == 0.0
    gamma, sigma, n, dims, beta, q, rounds, delta = GRID[10]
    unsampled = _reference_epsilon(gamma, sigma, n, dims, beta, 1.0, rounds, delta)
    assert _reference_epsilon(gamma, sigma, n, dims, beta, q, rounds, delta) < 0.5 * unsampled
    assert rounded_l2_norm_bound(CLIP / 1.0, BETA, 256) > 1.3 * CLIP  # coarse grid: the bound inflates


def test_the_ledger_gives_the_same_epsilon():
    """ldpfed's rdp accountant composes the event to the same figure (no float slack is carried)."""
    event = DistributedDiscreteGaussianDpEvent(0.05, 1.0, 10, CLIP, 256, BETA, 0.05)
    spent = create_accountant("rdp").compose(event, 100).spent(1e-5)
    assert spent.epsilon == pytest.approx(ddgauss_epsilon(event, 100, 1e-5), rel=1e-12)


def test_subsampled_bound_at_q_one_is_the_curve():
    """Zhu & Wang's bound at q -> 1 tends to the unsampled curve (only the l = alpha term is left,
    times 3 for alpha >= 3)."""
    event = DistributedDiscreteGaussianDpEvent(0.5, 0.6, 10, CLIP, 64, BETA, 1.0)
    orders = [2, 5, 20]
    near_one = poisson_subsampled_rdp(event.curve, 1.0 - 1e-12, orders)
    expected = event.curve(orders) + [0.0, math.log(3) / 4, math.log(3) / 19]
    assert near_one == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    "epsilon, n, dims, bits, k",
    [(1.0, 100, 256, 16, 2), (6.0, 1000, 256, 10, 2), (0.75, 3, 16, 8, 4), (2.0, 10, 64, 6, 2), (3.0, 2, 256, 12, 4)],
)
def test_params_match_the_reference(epsilon, n, dims, bits, k):
    """gamma and sigma as the reference's `ddgauss_params` finds them, small n and few bits included."""
    gamma, sigma = reference.ddgauss_params(1, epsilon, CLIP, bits, n, dims, 1e-5, BETA, 1, k=k)
    params = ddgauss_params(epsilon, 1e-5, n, dims, bits, CLIP, k_stddevs=k, orders=reference.RDP_ORDERS)
    assert params.gamma == pytest.approx(gamma, rel=0.01)
    assert params.local_stddev == pytest.approx(sigma, rel=0.01)


def test_params_meet_the_budget_with_sampling_and_rounds():
    params = ddgauss_params(2.0, 1e-5, 100, 256, 16, CLIP, sampling_prob=0.1, rounds=50, k_stddevs=2)
    assert 0.99 * 2.0 < params.spent <= 2.0
    spread = 2 * 2 * math.sqrt(CLIP**2 * 100**2 / 256 + (params.gamma**2 / 4 + params.local_stddev**2) * 100)
    assert spread / params.gamma <= 2**16 < 1.001 * spread / params.gamma


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ddgauss_params(1.0, 1e-5, 1000, 256, 5, CLIP), "bits = 5 is too few for the sum of 1000 clients"),
        (lambda: ddgauss_params(1.0, 1e-5, 100, 256, 16, 0.0), "clip norm c must be a finite number > 0"),
        (lambda: ddgauss_params(1.0, 1e-5, 100, 256, 16, -1.0), "clip norm c must be a finite number > 0"),
        (lambda: ddgauss_params(0.1, 1e-5, 100, 256, 8, CLIP, rounds=10_000), "cannot hold the noise"),
        (lambda: DistributedDiscreteGaussianDpEvent(1.0, 1.0, 10, CLIP, 16, 1.0), "beta must be in [0, 1)"),
        (lambda: ddgauss_params(1.0, 1e-5, 10, 16, 8, CLIP, sampling_prob=0.0), "sampling rate q must be in (0, 1]"),
    ],
)
def test_bad_input_gets_one_line(call, message):
    with pytest.raises(LDPValueError) as error:
        call()
    assert message in str(error.value) and "\n" not in str(error.value)

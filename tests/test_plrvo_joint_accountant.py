"""PLRV-O's joint (sound) accountant against references that sum every term (gradient-noise.md, PLRV-O).

The joint term w_eta prod_i G(x_i, eta) multiplies n coordinates, so a high eta can dominate however
small its weight: nothing may be dropped by a one-coordinate bound. References: an mpmath sum over
every coordinate and every eta (30 digits), for the continuous law and the safe sampler's G_safe
(plrvo_safe.py), and a plain float64 sum at the size where the error was seen (n = 10^4).
"""

from __future__ import annotations

import json
import math
from functools import cache, lru_cache

import mpmath
import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import binom
from typer.testing import CliRunner

from ldpfed.accounting import PlrvoDpEvent
from ldpfed.accounting import plrvo as plrvo_module
from ldpfed.cli.main import app
from ldpfed.samplers.plrvo_safe import ATOMS, SafeLaw, first_atom

K, THETA, CLIP = 20000.0, 1e-4, 0.2
PARAMS = 600  # 256 coordinates one by one, then blocks: both paths of the accountant
ORDERS = (4, 16, 64)
# The blocks' bound exceeds log prod_i G by a second-order term: for a block [a, a(1 + r)] on which
# log G ~ t^-p (p in [1/2, 1]) the chord's excess is about r^2 p (p + 1) / 12 <= r^2 / 6 of the block,
# r = BLOCK_GROWTH = 2^-8, i.e. 2.5e-6; the test allows 1e-5.
BLOCK_SLACK = 1e-5


@cache
def _mp_shifts() -> tuple:
    """x_i = C (sqrt(i) - sqrt(i-1)), i = 1..n, in mpmath."""
    with mpmath.workdps(30):
        return tuple(mpmath.mpf(CLIP) * (mpmath.sqrt(i) - mpmath.sqrt(i - 1)) for i in range(1, PARAMS + 1))


@cache
def _mp_powers(eta: int) -> tuple:
    """((1 - theta(eta-1)x_i)^-k, (1 + theta eta x_i)^-k), i = 1..n: the terms both laws' G share."""
    k, theta = mpmath.mpf(K), mpmath.mpf(THETA)
    with mpmath.workdps(30):
        ups = tuple((1 - theta * (eta - 1) * x) ** (-k) for x in _mp_shifts())
        downs = tuple((1 + theta * eta * x) ** (-k) for x in _mp_shifts())
    return ups, downs


def _mp_g_row(eta: int, law) -> tuple:
    """G(x_i, eta) (spec) or G_safe(x_i, eta) (plrvo_safe.py's docstring), i = 1..n, in mpmath; the
    factors that do not depend on x are computed once per eta."""
    a, b = mpmath.mpf(eta) / (2 * eta - 1), mpmath.mpf(eta - 1) / (2 * eta - 1)
    ups, downs = _mp_powers(eta)
    if law is None:
        return tuple(a * up + b * down for up, down in zip(ups, downs))
    step, gamma, tau = (mpmath.mpf(v) for v in (law.step_ratio, law.shift_ratio, law.table_error))
    u1 = mpmath.mpf(first_atom(K, THETA))
    c_a = a + (2 * eta - 1) * step**2 / 24
    c_b = 1 - c_a
    up_weight, down_weight = c_a * mpmath.exp((eta - 1) * gamma), c_b * mpmath.exp(-eta * gamma)
    table_factor = mpmath.exp((2 * eta - 1) * tau)
    return tuple(
        table_factor
        * (
            up_weight * up
            + down_weight * down
            + (up_weight * mpmath.expm1(u1 * (eta - 1) * x) + down_weight * mpmath.expm1(-u1 * eta * x)) / ATOMS
        )
        for x, up, down in zip(_mp_shifts(), ups, downs)
    )


@lru_cache(maxsize=2)
def _mp_g_table(safe: bool) -> tuple:
    """G(x_i, eta) for eta = 0..max(ORDERS)+1 (rows) and i = 1..n (columns), in mpmath."""
    law = SafeLaw.for_params(PARAMS) if safe else None
    with mpmath.workdps(30):
        return tuple((mpmath.mpf(1),) * PARAMS if eta < 2 else _mp_g_row(eta, law) for eta in range(max(ORDERS) + 2))


@lru_cache(maxsize=2)
def _mp_log_products(safe: bool) -> tuple:
    """log prod_{i=1..n} G(x_i, eta), coordinate by coordinate (computed once per law)."""
    with mpmath.workdps(30):
        return tuple(mpmath.fsum(mpmath.log(g) for g in row) for row in _mp_g_table(safe))


def _mp_weights(lam: int, q: float) -> list:
    with mpmath.workdps(30):
        q = mpmath.mpf(q)
        return [mpmath.binomial(lam + 1, eta) * (1 - q) ** (lam + 1 - eta) * q**eta for eta in range(lam + 2)]


def _mp_alpha(lam: int, q: float, log_products) -> float:
    """log sum_eta binom(lam+1, eta) (1-q)^(lam+1-eta) q^eta prod_i G(x_i, eta), every eta."""
    with mpmath.workdps(30):
        weights = _mp_weights(lam, q)
        return float(mpmath.log(mpmath.fsum(w * mpmath.exp(log_products[eta]) for eta, w in enumerate(weights))))


def _mp_paper_alpha(lam: int, q: float, table) -> float:
    """The paper's sum_i log sum_eta w_eta G(x_i, eta), every eta and coordinate."""
    with mpmath.workdps(30):
        weights = _mp_weights(lam, q)
        return float(
            mpmath.fsum(
                mpmath.log(mpmath.fsum(w * table[eta][i] for eta, w in enumerate(weights))) for i in range(PARAMS)
            )
        )


def _eps(lams, alphas, delta) -> float:
    """The spec's conversion, min over the orders: alpha/lam + log(lam/(lam+1)) - (log delta + log(lam+1))/lam."""
    return min(
        a / lam + math.log(lam / (lam + 1)) - (math.log(delta) + math.log(lam + 1)) / lam
        for lam, a in zip(lams, alphas)
    )


@pytest.mark.parametrize("safe", [False, True], ids=["continuous", "safe"])
def test_joint_log_products_bound_the_term_by_term_product_tightly(safe):
    law = SafeLaw.for_params(PARAMS) if safe else None
    reference = np.array([float(v) for v in _mp_log_products(safe)])
    etas = np.arange(reference.size)
    computed = plrvo_module.joint_log_products(K, THETA, CLIP, PARAMS, etas, law)
    assert np.all(computed >= reference - 1e-12 * np.abs(reference))
    assert np.all(computed <= reference * (1 + BLOCK_SLACK) + 1e-15)


@pytest.mark.parametrize("safe", [False, True], ids=["continuous", "safe"])
@pytest.mark.parametrize("q", [1e-3, 1e-2])
def test_joint_accountant_is_never_below_the_full_sum(q, safe):
    """Small q, small T, small delta: where dropping high etas by a one-coordinate bound understated eps."""
    law = SafeLaw.for_params(PARAMS) if safe else None
    log_products = _mp_log_products(safe)
    lams, alphas = plrvo_module.PlrvoStep(K, THETA, CLIP, PARAMS, q, law).alphas("joint", ORDERS)
    assert lams.tolist() == list(ORDERS)
    reference = np.array([_mp_alpha(lam, q, log_products) for lam in ORDERS])
    # An overstatement r of every log product moves alpha(lam) by at most r log prod G(x, lam + 1).
    slack = BLOCK_SLACK * np.array([float(log_products[lam + 1]) for lam in ORDERS])
    assert np.all(alphas >= reference - 1e-12 * np.abs(reference))
    assert np.all(alphas <= reference + slack)
    for steps in (1, 10):
        for delta in (1e-5, 1e-9):
            computed = plrvo_module.PlrvoStep(K, THETA, CLIP, PARAMS, q, law).epsilon(steps, delta, "joint", ORDERS)[0]
            expected = _eps(ORDERS, steps * reference, delta)
            assert expected - 1e-12 <= computed <= expected + steps * max(slack / np.array(ORDERS)) + 1e-12


@pytest.mark.parametrize("safe", [False, True], ids=["continuous", "safe"])
def test_paper_accountant_is_the_published_sum_from_above(safe):
    """Terms it does not evaluate are replaced by their bound: at most n (lam + 2) e^-40 above the full sum."""
    law = SafeLaw.for_params(PARAMS) if safe else None
    lams, alphas = plrvo_module.PlrvoStep(K, THETA, CLIP, PARAMS, 1e-2, law).alphas("paper", ORDERS)
    reference = np.array([_mp_paper_alpha(lam, 1e-2, _mp_g_table(safe)) for lam in ORDERS])
    assert np.all(alphas >= reference * (1 - 1e-12))
    assert np.all(alphas <= reference * (1 + 1e-12) + PARAMS * (np.array(ORDERS) + 2) * math.exp(-40))


def _plain_joint_alphas(k, theta, clip, params, q, orders):
    """alpha_step(lam) of the continuous law summing every eta and every coordinate, plainly in float64
    (fine here: (1 - theta (eta - 1) x)^-k < e^500)."""
    i = np.arange(1, params + 1, dtype=float)
    x = clip * (np.sqrt(i) - np.sqrt(i - 1))
    log_products = np.zeros(max(orders) + 2)
    for eta in range(2, log_products.size):
        g = (
            eta / (2 * eta - 1) * (1 - theta * (eta - 1) * x) ** -k
            + (eta - 1) / (2 * eta - 1) * (1 + theta * eta * x) ** -k
        )
        log_products[eta] = np.log(g).sum()
    return np.array(
        [logsumexp(binom.logpmf(np.arange(lam + 2), lam + 1, q) + log_products[: lam + 2]) for lam in orders]
    )


def test_account_cli_at_the_reported_setting_matches_the_full_sum():
    """n = 10^4, q = 0.001, T = 1: eps was 0.0123 where the full sum gives 0.1420."""
    arguments = (
        "--mechanism plrvo --k 20000 --theta 1e-4 --clip 0.2 --dims 10000 --sample-rate 0.001 --rounds 1 "
        "--target-delta 1e-5 --accountant joint --sampler continuous --json"
    ).split()
    result = CliRunner().invoke(app, ["account", *arguments])
    assert result.exit_code == 0, result.output
    epsilon = json.loads(result.stdout)["epsilon"]
    orders = plrvo_module.usable_orders(CLIP, THETA)
    expected = _eps(orders, _plain_joint_alphas(K, THETA, CLIP, 10_000, 0.001, orders), 1e-5)
    assert expected == pytest.approx(0.1420, abs=1e-4)
    assert expected - 1e-9 <= epsilon <= expected * (1 + 1e-4)


def test_rdp_event_is_never_below_the_full_sum():
    """PlrvoDpEvent.rdp (the `rdp` ledger, `dpsgd --perturbation plrvo`) at n = 10^4, q = 0.01."""
    orders = (8, 27, 64, 384)
    reference = _plain_joint_alphas(K, THETA, CLIP, 10_000, 0.01, orders) / np.array(orders)
    rdp = np.array(PlrvoDpEvent(K, THETA, CLIP, 10_000, 0.01).rdp([lam + 1 for lam in orders]))
    assert np.all(rdp >= reference * (1 - 1e-12))
    assert np.all(rdp <= reference * (1 + 1e-4))


def test_calibrated_theta_meets_the_target_by_the_full_sum():
    """The parameter search at n = 2000, q = 0.01, T = 10 (the reported theta's full-sum eps was 0.58 > 0.5)."""
    found = plrvo_module.search_parameters(0.5, CLIP, 2000, 0.01, 10, 1e-5, ks=[1e5])
    orders = plrvo_module.usable_orders(CLIP, found.theta)
    alphas = _plain_joint_alphas(found.k, found.theta, CLIP, 2000, 0.01, orders)
    assert _eps(orders, 10 * alphas, 1e-5) <= 0.5

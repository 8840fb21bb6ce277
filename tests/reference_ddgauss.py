# Copyright 2021, Google LLC. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""The authors' accountant for the distributed discrete Gaussian, ported as an independent reference.

Source: google-research/federated, distributed_dp/accounting_utils.py at commit
5e27a86323a35c2018fb97fbbe755c7ade9370ab (Kairouz, Liu & Steinke, ICML 2021): `rounded_l2_norm_bound`,
`rounded_l1_norm_bound`, `_compute_rdp_subsampled`, `compute_rdp_dgaussian`, `ddgauss_epsilon`,
`ddgauss_local_stddev` and `ddgauss_params`, kept in their structure (per-order loops, scipy's
`minimize_scalar` searches). The one dependency left out, tensorflow-privacy's
`get_privacy_spent(orders, rdp, target_delta=delta)`, is replaced by its conversion
(`rdp_accountant._compute_eps` of tensorflow/privacy, Apache-2.0, the version using Canonne, Kamath
& Steinke 2020, Proposition 12), written out below as `get_privacy_spent`. Changes to the original:
Python 3 / PEP 8 formatting, that substitution, and no TensorFlow import. Nothing of ldpfed is
imported here, so the tests compare two independent implementations.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

RDP_ORDERS = tuple(range(2, 129)) + (256,)
DIV_EPSILON = 1e-22


def get_privacy_spent(orders, rdp, target_delta):
    """(eps, delta, optimal order): tensorflow-privacy's `_compute_eps` (CKS 2020, Prop. 12)."""
    orders_vec, rdp_vec = np.atleast_1d(orders), np.atleast_1d(rdp)
    eps_vec = []
    for a, r in zip(orders_vec, rdp_vec):
        if target_delta**2 + math.expm1(-r) >= 0:
            eps = 0
        elif a > 1.01:
            eps = r + math.log1p(-1 / a) - math.log(target_delta * a) / (a - 1)
        else:
            eps = np.inf
        eps_vec.append(eps)
    idx_opt = int(np.argmin(eps_vec))
    return max(0, eps_vec[idx_opt]), target_delta, orders_vec[idx_opt]


def log_comb(n, k):
    gammaln = special.gammaln
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def _compute_rdp_subsampled(alpha, gamma, eps, upper_bound=True):
    """RDP with Poisson subsampling (Zhu & Wang 2019, Theorem 5 if upper_bound else Theorem 6)."""
    if isinstance(alpha, float):
        assert alpha.is_integer()
        alpha = int(alpha)
    assert alpha > 1
    assert 0 < gamma <= 1
    if upper_bound:
        a = [0, eps(2)]
        b = [
            ((1 - gamma) ** (alpha - 1)) * (alpha * gamma - gamma + 1),
            special.comb(alpha, 2) * (gamma**2) * (1 - gamma) ** (alpha - 2),
        ]
        for l in range(3, alpha + 1):  # noqa: E741 (the original's name)
            a.append((l - 1) * eps(l) + log_comb(alpha, l) + (alpha - l) * np.log(1 - gamma) + l * np.log(gamma))
            b.append(3)
    else:
        a = [0]
        b = [((1 - gamma) ** (alpha - 1)) * (alpha * gamma - gamma + 1)]
        for l in range(2, alpha + 1):  # noqa: E741
            a.append((l - 1) * eps(l) + log_comb(alpha, l) + (alpha - l) * np.log(1 - gamma) + l * np.log(gamma))
            b.append(1)
    return special.logsumexp(a=a, b=b) / (alpha - 1)


def rounded_l2_norm_bound(l2_norm_bound, beta, dim):
    """The L2 norm bound after conditional stochastic rounding (KLS Theorem 1)."""
    assert int(dim) == dim and dim > 0, f"Invalid dimension: {dim}"
    assert 0 <= beta < 1, "beta must be in the range [0, 1)"
    assert l2_norm_bound > 0, "Input l2_norm_bound should be positive."
    bound_1 = l2_norm_bound + np.sqrt(dim)
    if beta == 0:
        return bound_1
    squared_bound_2 = np.square(l2_norm_bound) + 0.25 * dim
    squared_bound_2 += np.sqrt(2.0 * np.log(1.0 / beta)) * (l2_norm_bound + 0.5 * np.sqrt(dim))
    bound_2 = np.sqrt(squared_bound_2)
    return min(bound_1, bound_2)


def rounded_l1_norm_bound(l2_norm_bound, dim):
    return l2_norm_bound * min(np.sqrt(dim), l2_norm_bound)


def compute_rdp_dgaussian(q, l1_scale, l2_scale, tau, dim, steps, orders):
    """RDP of the sampled (distributed) discrete Gaussian (KLS Proposition 14 / Eq. 17)."""
    orders = [int(order) for order in orders]

    def eps(order):
        assert order > 1, "alpha must be greater than 1."
        term_1 = (order / 2.0) * l2_scale**2 + tau * dim
        term_2 = (order / 2.0) * (l2_scale**2 + 2 * l1_scale * tau + tau**2 * dim)
        term_3 = (order / 2.0) * (l2_scale + np.sqrt(dim) * tau) ** 2
        return min(term_1, term_2, term_3)

    if q == 1:
        rdp = np.array([eps(order) for order in orders])
    else:
        rdp = np.array([min(_compute_rdp_subsampled(order, q, eps), eps(order)) for order in orders])
    return rdp * steps


def ddgauss_epsilon(
    gamma,
    local_stddev,
    num_clients,
    l2_sens,
    beta,
    dim,
    q,
    steps,
    delta,
    l1_sens=None,
    rounding=True,
    orders=RDP_ORDERS,
):
    """epsilon of the (distributed) discrete Gaussian via RDP."""
    scale = 1.0 / (gamma + DIV_EPSILON)
    l1_sens = l1_sens or (l2_sens * np.sqrt(dim))
    if rounding:
        l2_sens = rounded_l2_norm_bound(l2_sens * scale, beta, dim) / scale
        l1_sens = rounded_l1_norm_bound(l2_sens * scale, dim) / scale
    tau = 0
    for k in range(1, num_clients):
        tau += math.exp(-2 * (math.pi * local_stddev * scale) ** 2 * (k / (k + 1)))
    tau *= 10
    l1_scale = l1_sens / (np.sqrt(num_clients) * local_stddev)
    l2_scale = l2_sens / (np.sqrt(num_clients) * local_stddev)
    rdp = compute_rdp_dgaussian(q, l1_scale, l2_scale, tau, dim, steps, orders)
    eps, _, order = get_privacy_spent(orders, rdp, target_delta=delta)
    return eps, order


def ddgauss_local_stddev(q, epsilon, l2_clip_norm, gamma, beta, steps, num_clients, dim, delta, orders=RDP_ORDERS):
    """The local stddev of the distributed discrete Gaussian for a target epsilon."""

    def stddev_opt_fn(stddev):
        stddev += DIV_EPSILON
        cur_epsilon, _ = ddgauss_epsilon(
            gamma, stddev, num_clients, l2_clip_norm, beta, dim, q, steps, delta, orders=orders
        )
        return (epsilon - cur_epsilon) ** 2

    stddev_result = optimize.minimize_scalar(stddev_opt_fn)
    if stddev_result.success:
        return stddev_result.x
    return -1


def ddgauss_params(
    q,
    epsilon,
    l2_clip_norm,
    bits,
    num_clients,
    dim,
    delta,
    beta,
    steps,
    k=4,
    rho=1,
    sqrtn_norm_growth=False,
    orders=RDP_ORDERS,
):
    """gamma and the local noise stddev for the given parameters."""
    n_factor = num_clients ** (1 if sqrtn_norm_growth else 2)

    def stddev(x):
        return ddgauss_local_stddev(q, epsilon, l2_clip_norm, x, beta, steps, num_clients, dim, delta, orders)

    def mod_min(x):
        return k * math.sqrt(rho / dim * l2_clip_norm**2 * n_factor + (x**2 / 4.0 + stddev(x) ** 2) * num_clients)

    def gamma_opt_fn(x):
        return (math.pow(2, bits) - 2 * mod_min(x) / (x + DIV_EPSILON)) ** 2

    gamma_result = optimize.minimize_scalar(gamma_opt_fn)
    if not gamma_result.success:
        raise ValueError("Cannot compute gamma.")
    gamma = gamma_result.x
    local_stddev = ddgauss_local_stddev(q, epsilon, l2_clip_norm, gamma, beta, steps, num_clients, dim, delta, orders)
    return gamma, local_stddev

"""Write multi_freq_ldpy_reference.npz: multi-freq-ldpy 0.2.5's IBU on fixed reports and its
longitudinal parameters and variances, so the tests compare ldpfed with it where it is not installed.

    pip install multi-freq-ldpy==0.2.5 && python tests/data/make_multi_freq_ldpy_reference.py

Reports are drawn here with numpy's own samplers (not ldpfed's) from a fixed seed and stored beside
the library's outputs, so the tests feed both sides the identical reports.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from multi_freq_ldpy.long_freq_est.Variance_LONG_PURE import VAR_Long_Pure
from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_IBU
from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_IBU

OUT = Path(__file__).with_name("multi_freq_ldpy_reference.npz")
# (k, eps, users); every case is run with each (iterations, tolerance, stop) below
IBU_CASES = ((2, 1.0, 500), (10, 1.0, 2000), (50, 2.0, 3000))
IBU_SETTINGS = ((10_000, 1e-12, "max_abs"), (50, 1e-3, "mse"), (7, 1e-12, "mae"), (10_000, 1e-9, "max_squared"))
LONGITUDINAL_GRID = [(eps, k) for eps in (1.0, 2.0, 4.0) for k in (2, 16, 128)]


def grr_reports(values, k, eps, rng):
    p = np.exp(eps) / (np.exp(eps) + k - 1)
    keep = rng.random(values.size) < p
    return np.where(keep, values, (values + rng.integers(1, k, values.size)) % k)


def oue_reports(values, k, eps, rng):
    bits = rng.random((values.size, k)) < 1 / (np.exp(eps) + 1)
    bits[np.arange(values.size), values] = rng.random(values.size) < 0.5
    return bits


def longitudinal_parameters(eps_perm, eps_1, k):
    """(p1, q1, p2, q2) of L-SUE (basic RAPPOR), L-OSUE and L-GRR, as multi-freq-ldpy computes them."""
    e, ep = np.exp(eps_1), np.exp(eps_perm)
    # L-SUE: the library's closed form for p2 (long_freq_est/L_SUE.py)
    p1 = np.exp(eps_perm / 2) / (np.exp(eps_perm / 2) + 1)
    E = np.exp
    root = np.sqrt(
        (
            4 * E(7 * eps_perm / 2)
            - 4 * E(5 * eps_perm / 2)
            - 4 * E(3 * eps_perm / 2)
            + 4 * E(eps_perm / 2)
            + E(4 * eps_perm)
            + 4 * E(3 * eps_perm)
            - 10 * E(2 * eps_perm)
            + 4 * ep
            + 1
        )
        * e
    )
    middle = e - E(2 * eps_perm) + 2 * ep - 2 * E(eps_1 + eps_perm) + E(eps_1 + 2 * eps_perm) - 1
    tail = (
        E(3 * eps_perm / 2)
        - E(eps_perm / 2)
        + ep
        - E(eps_1 + eps_perm / 2)
        - E(eps_1 + eps_perm)
        + E(eps_1 + 3 * eps_perm / 2)
        + E(eps_1 + 2 * eps_perm)
        - 1
    )
    p2 = -(root * (e - 1) * (ep - 1) ** 2 - middle * tail) / ((e - 1) * (ep - 1) ** 2 * middle)
    sue = (p1, 1 - p1, p2, 1 - p2)
    # L-OSUE (long_freq_est/L_OSUE.py)
    p2 = (1 - np.exp(eps_1 + eps_perm)) / (e - ep - np.exp(eps_1 + eps_perm) + 1)
    osue = (0.5, 1 / (ep + 1), p2, 1 - p2)
    # L-GRR (long_freq_est/L_GRR.py)
    p1 = ep / (ep + k - 1)
    q1 = (1 - p1) / (k - 1)
    p2 = (q1 - e * p1) / ((-p1 * e) + k * q1 * e - q1 * e - p1 * (k - 1) + q1)
    grr = (p1, q1, p2, (1 - p2) / (k - 1))
    return {"rappor": sue, "l-osue": osue, "l-grr": grr}


def main() -> None:
    rng = np.random.default_rng(20240601)
    arrays = {}
    for case, (k, eps, users) in enumerate(IBU_CASES):
        values = rng.zipf(1.5, users) % k
        grr = grr_reports(values, k, eps, rng)
        oue = oue_reports(values, k, eps, rng)
        arrays[f"case{case}_grr_reports"] = grr
        arrays[f"case{case}_oue_reports"] = np.packbits(oue, axis=1)
        for setting, (iterations, tolerance, stop) in enumerate(IBU_SETTINGS):
            arrays[f"case{case}_grr_ibu{setting}"] = GRR_Aggregator_IBU(list(grr), k, eps, iterations, tolerance, stop)
            arrays[f"case{case}_oue_ibu{setting}"] = UE_Aggregator_IBU(
                oue.astype(float), k, eps, True, iterations, tolerance, stop
            )
    arrays["ibu_cases"] = np.array(IBU_CASES, dtype=float)
    arrays["ibu_settings_iterations"] = np.array([s[0] for s in IBU_SETTINGS])
    arrays["ibu_settings_tolerance"] = np.array([s[1] for s in IBU_SETTINGS])
    arrays["ibu_settings_stop"] = np.array([s[2] for s in IBU_SETTINGS])
    for name in ("rappor", "l-osue", "l-grr"):
        rows = []
        for eps, k in LONGITUDINAL_GRID:
            parameters = longitudinal_parameters(eps, eps / 2, k)[name]
            rows.append([eps, eps / 2, k, *parameters, VAR_Long_Pure(*parameters, n=1, f=0)])
        arrays[f"longitudinal_{name}"] = np.array(rows)  # eps_inf, eps_1, k, p1, q1, p2, q2, variance at n=1, f=0
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({len(arrays)} arrays)")


if __name__ == "__main__":
    main()

"""Per-client privacy ledger (gradient-noise.md, Accounting across rounds): basic and advanced
composition, Gaussian RDP through dp_accounting, no amplification, records, bad input."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import accountant as pld_accountant
from dp_accounting.pld import common as pld_common
from dp_accounting.rdp import RdpAccountant

from ldpfed.accounting import PrivacyLedger, advanced_composition
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError


def test_basic_composition_sums_over_the_rounds_a_client_took_part_in():
    ledger = PrivacyLedger()
    for round_, eps in enumerate([0.5, 0.25, 1.0]):
        ledger.record("a", round_, eps, 1e-6, "gaussian")
    ledger.record("b", 1, 0.5, None, "laplace")  # sampled in one round of three
    totals = ledger.totals()
    assert totals["a"]["rounds"] == 3 and totals["a"]["basic_epsilon"] == pytest.approx(1.75)
    assert totals["a"]["basic_delta"] == pytest.approx(3e-6)
    assert totals["b"]["rounds"] == 1 and totals["b"]["basic_epsilon"] == 0.5 and totals["b"]["basic_delta"] == 0.0


def test_advanced_composition_on_hand_derived_values():
    """k = 100 rounds of eps = 0.1, delta' = 1e-5:
    sqrt(2 * 100 * ln 1e5) * 0.1 = sqrt(2302.585) * 0.1 = 4.79853; 100 * 0.1 * (e^0.1 - 1) = 1.05171."""
    assert advanced_composition([0.1] * 100, 1e-5) == pytest.approx(4.79853 + 1.05171, abs=1e-4)
    # heterogeneous rounds: sqrt(2 ln(1/d') (0.1^2 + 0.2^2)) + 0.1 (e^0.1 - 1) + 0.2 (e^0.2 - 1)
    expected = math.sqrt(2 * math.log(1e3) * 0.05) + 0.1 * 0.1051709 + 0.2 * 0.2214028
    assert advanced_composition([0.1, 0.2], 1e-3) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(("eps", "k"), [(0.05, 200), (0.1, 100), (0.3, 50)])
def test_advanced_composition_is_valid_against_the_optimal_theorem(eps, k):
    """dp_accounting implements Kairouz-Oh-Viswanath's optimal composition; DRV is a valid but
    looser bound, so it must not be smaller."""
    optimal = pld_accountant.advanced_composition(pld_common.DifferentialPrivacyParameters(eps, 0.0), k, 1e-5)
    drv = advanced_composition([eps] * k, 1e-5)
    assert optimal <= drv
    assert optimal <= k * eps


def test_advanced_composition_is_monotone():
    base = advanced_composition([0.1] * 50, 1e-5)
    assert advanced_composition([0.1] * 51, 1e-5) > base
    assert advanced_composition([0.11] * 50, 1e-5) > base
    assert advanced_composition([0.1] * 50, 1e-4) < base


def test_advanced_figure_only_when_smaller_than_basic():
    ledger = PrivacyLedger()
    for r in range(2):
        ledger.record("few", r, 1.0, 0.0, "laplace")
    for r in range(400):
        ledger.record("many", r, 0.05, 0.0, "laplace")
    totals = ledger.totals(delta_target=1e-5)
    assert totals["few"]["advanced_epsilon"] is None and totals["few"]["advanced_delta"] is None
    assert totals["many"]["advanced_epsilon"] == pytest.approx(advanced_composition([0.05] * 400, 1e-5))
    assert totals["many"]["advanced_epsilon"] < totals["many"]["basic_epsilon"]
    assert totals["many"]["advanced_delta"] == pytest.approx(1e-5)


@pytest.mark.parametrize("noise_multiplier", [0.8, 2.0, 5.0])
def test_rdp_for_one_gaussian_round_matches_dp_accounting(noise_multiplier):
    ledger = PrivacyLedger()
    ledger.record(0, 0, 1.0, 1e-5, "gaussian", noise_multiplier=noise_multiplier)
    accountant = RdpAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier))
    rdp = ledger.totals(delta_target=1e-5)["0"]["rdp_epsilon"]
    assert rdp == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-12)
    # RDP conversion is an upper bound on the exact (analytic) Gaussian eps at the same delta
    assert rdp >= dp_accounting.get_epsilon_gaussian(noise_multiplier, 1e-5)


def test_rdp_over_rounds_matches_dp_accounting_and_beats_basic_for_many_rounds():
    ledger = PrivacyLedger()
    privatizer = UpdatePrivatizer("gaussian", 1.0, 0.1, delta=1e-6)
    for r in range(100):
        ledger.record(7, r, **privatizer.ledger_entry(50))
    accountant = RdpAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(privatizer.noise_multiplier(50)), 100)
    totals = ledger.totals(delta_target=1e-5)["7"]
    assert totals["rdp_epsilon"] == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-12)
    assert totals["rdp_epsilon"] < totals["basic_epsilon"] == pytest.approx(100.0)


def test_m_gaussian_reports_compose_to_one_gaussian_with_multiplier_over_sqrt_m():
    """The identity behind UpdatePrivatizer.noise_multiplier, checked in dp_accounting."""
    z, m = 3.0, 4
    many, one = RdpAccountant(), RdpAccountant()
    many.compose(dp_accounting.GaussianDpEvent(z), m)
    one.compose(dp_accounting.GaussianDpEvent(z / math.sqrt(m)))
    assert many.get_epsilon(1e-5) == pytest.approx(one.get_epsilon(1e-5), rel=1e-9)


def test_pure_or_mixed_clients_get_no_rdp_figure():
    ledger = PrivacyLedger()
    ledger.record("pure", 0, 1.0, 0.0, "laplace")
    ledger.record("mixed", 0, 1.0, 1e-5, "gaussian", noise_multiplier=2.0)
    ledger.record("mixed", 1, 1.0, 0.0, "laplace")
    ledger.record("open", 0, math.inf, 0.0, "none")
    totals = ledger.totals()
    assert totals["pure"]["rdp_epsilon"] is None and totals["mixed"]["rdp_epsilon"] is None
    assert totals["open"]["basic_epsilon"] == math.inf and totals["open"]["advanced_epsilon"] is None
    assert totals["mixed"]["mechanisms"] == ["gaussian", "laplace"]


def test_state_dict_round_trip_and_frames():
    ledger = PrivacyLedger()
    for r in range(3):
        ledger.record(r % 2, r, 0.5, 1e-6, "gaussian", noise_multiplier=1.5)
    state = ledger.state_dict(delta_target=1e-5)
    assert state["amplification_by_client_sampling"] is False and len(state["entries"]) == 3
    restored = PrivacyLedger.from_state_dict(state)
    assert restored.totals(1e-5) == ledger.totals(1e-5) == state["totals"]
    frame = ledger.to_frame(1e-5)
    assert list(frame["client_id"]) == ["0", "1"] and list(frame["rounds"]) == [2, 1]
    assert np.allclose(frame["basic_epsilon"], [1.0, 0.5])
    assert len(ledger.entries_frame()) == 3


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((0, 0, 0.0, 0.0, "laplace"), {}, "epsilon"),
        ((0, 0, float("nan"), 0.0, "laplace"), {}, "epsilon"),
        ((0, 0, 1.0, 1.0, "gaussian"), {}, "delta"),
        ((0, 0, 1.0, -0.1, "gaussian"), {}, "delta"),
        ((0, -1, 1.0, 0.0, "laplace"), {}, "round"),
        ((0, 0, 1.0, 1e-5, "gaussian"), {"noise_multiplier": 0.0}, "noise_multiplier"),
    ],
)
def test_bad_records(args, kwargs, match):
    with pytest.raises(LDPValueError, match=match):
        PrivacyLedger().record(*args, **kwargs)


def test_duplicate_round_and_bad_delta_target():
    ledger = PrivacyLedger()
    ledger.record(1, 4, 1.0, 0.0, "laplace")
    with pytest.raises(LDPValueError, match="already has an entry"):
        ledger.record(1, 4, 1.0, 0.0, "laplace")
    for bad in (0.0, 1.0, "x"):
        with pytest.raises(LDPValueError, match="delta_target"):
            ledger.totals(delta_target=bad)

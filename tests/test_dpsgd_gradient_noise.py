"""`ldpfed dpsgd` with the gradient noises of gradient-noise.md."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting import SelfComposedDpEvent

from ldpfed.accounting import PlrvoDpEvent, create_accountant
from ldpfed.gradient_noise import GUARANTEE_FAILS
from ldpfed.validation import LDPValueError
from simulations.dpsgd import DPSGDConfig, gradient_noise, privacy_record, run


def test_inid_gaussian_costs_the_gaussian_of_its_noise_multiplier():
    inid = privacy_record(
        DPSGDConfig(perturbation="inid-gaussian", noise_multiplier=1.3, noise_sampler="continuous"), 1000, 200, 50
    )
    numeric = privacy_record(DPSGDConfig(perturbation="numeric", noise_multiplier=1.3), 1000, 200, 50)
    assert inid["private"] and inid["epsilon"] == pytest.approx(numeric["epsilon"], rel=1e-12)
    assert "not floating-point safe" in inid["noise_sampler"]


def test_inid_gaussian_safe_sampler_is_the_default_and_is_accounted_by_rdp_only():
    """Shuffled epochs: the discrete Gaussian's RDP curve is the continuous one's (CKS), so the RDP
    epsilon equals the numeric Gaussian's; Poisson sampling has no bound for it and is refused."""
    with pytest.raises(LDPValueError, match="shuffle"):
        DPSGDConfig(perturbation="inid-gaussian", noise_multiplier=1.3)
    safe = privacy_record(
        DPSGDConfig(perturbation="inid-gaussian", noise_multiplier=1.3, sampling="shuffle"), 1000, 80, 50
    )
    numeric = privacy_record(
        DPSGDConfig(perturbation="numeric", noise_multiplier=1.3, sampling="shuffle"), 1000, 80, 50
    )
    assert safe["private"] and safe["epsilon"] == pytest.approx(numeric["epsilon"], rel=1e-12)
    assert safe["noise_sampler"].startswith("safe")
    summary = run(DPSGDConfig(perturbation="inid-gaussian", noise_multiplier=1.3, sampling="shuffle", epochs=1))
    assert summary["noise_sampler"].startswith("safe") and summary["noise_sd"]["noise"]["sampler"] == "safe"


def test_inid_gaussian_noise_is_calibrated_to_per_layer_clipping():
    config = DPSGDConfig(perturbation="inid-gaussian", noise_multiplier=2.0, clip=1.0, noise_sampler="continuous")
    noise, clips = gradient_noise(config, [30, 10], 0.1, 10)
    assert clips == pytest.approx([1 / np.sqrt(2)] * 2)
    assert noise.condition() == pytest.approx(1 / 2.0**2)  # Mahalanobis sensitivity 1/z


@pytest.mark.parametrize("sampler", ["safe", "continuous"])
def test_plrvo_run_is_accounted_by_the_joint_accountant(sampler):
    config = DPSGDConfig(perturbation="plrvo", k=200.0, theta=0.05, epochs=1, noise_sampler=sampler)
    summary = run(config)
    rate = config.batch_size / summary["train_examples"]
    event = SelfComposedDpEvent(PlrvoDpEvent(200.0, 0.05, 1.0, summary["parameters"], rate, sampler), summary["steps"])
    expected = create_accountant("rdp").compose(event).get_epsilon(1e-5)
    assert summary["private"] and summary["epsilon"] == pytest.approx(expected, rel=1e-12)
    assert summary["noise_sampler"].startswith(sampler)
    continuous_sd = np.sqrt(2 / (199 * 198 * 0.05**2)) / config.batch_size
    # safe: the atoms' discretized Gamma (dominated: a hair more noise) and the grid, within 1e-3
    assert summary["noise_sd"]["per_coordinate"] == pytest.approx(
        continuous_sd, rel=1e-12 if sampler == "continuous" else 1e-3
    )
    if sampler == "safe":
        bare = (
            create_accountant("rdp")
            .compose(SelfComposedDpEvent(PlrvoDpEvent(200.0, 0.05, 1.0, summary["parameters"], rate), summary["steps"]))
            .get_epsilon(1e-5)
        )
        assert bare <= summary["epsilon"] <= bare * 1.01


@pytest.mark.parametrize("perturbation", ["r1smg", "product-noise"])
def test_failing_published_noises_make_the_run_not_private(perturbation):
    record = privacy_record(DPSGDConfig(perturbation=perturbation, noise_epsilon=1.0, noise_delta=1e-5), 1000, 10, 50)
    assert record["private"] is False and record["epsilon"] is None
    assert GUARANTEE_FAILS in record["not_private_reason"]


@pytest.mark.parametrize(
    "options",
    [
        {"perturbation": "plrvo", "k": 2.0},
        {"perturbation": "r1smg", "noise_epsilon": 1.0},
        {"perturbation": "product-noise", "noise_epsilon": 1.0},
        {"perturbation": "plrvo", "k": 2.0, "theta": 1.0, "sampling": "shuffle"},
        {"k": float("nan")},
    ],
)
def test_missing_or_bad_noise_parameters_fail_early(options):
    with pytest.raises(LDPValueError):
        DPSGDConfig(**options)


@pytest.mark.parametrize("sampler", ["safe", "continuous"])
def test_inid_laplace_is_selectable_and_accounted_as_amplified_pure_steps(sampler):
    """Per-step pure eps amplified by Poisson sampling, log(1 + q (e^eps - 1)), composed by the PLD
    of the generic eps-DP mechanism; the run's release uses the chosen sampler."""
    import math

    from ldpfed.accounting import pure_round

    config = DPSGDConfig(perturbation="inid-laplace", noise_epsilon=0.5, noise_sampler=sampler, epochs=1)
    record = privacy_record(config, 1000, 200)
    amplified = math.log1p(config.batch_size / 1000 * math.expm1(0.5))
    expected = create_accountant("pld").compose(SelfComposedDpEvent(pure_round(amplified), 200)).get_epsilon(1e-5)
    assert record["private"] and record["epsilon"] == pytest.approx(expected, rel=1e-12)
    assert expected < 200 * amplified  # the PLD composition beats the basic sum
    summary = run(config)
    assert summary["noise_sampler"].startswith(sampler) and summary["noise_sd"]["noise"]["sampler"] == sampler
    with pytest.raises(LDPValueError):
        DPSGDConfig(perturbation="inid-laplace")

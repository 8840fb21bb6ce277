"""`ldpfed dpsgd`: central DP-SGD with numeric or GeoDP noise (simulations/dpsgd.py).

The command is registered through the `ldpfed.commands` entry point; these tests register it on a
fresh typer app, so they do not depend on the installed entry points.
"""

from __future__ import annotations

import json
import math
from functools import cache

import dp_accounting
import numpy as np
import pytest
import torch
import typer
from helpers import words
from typer.testing import CliRunner

from simulations.dpsgd import DPSGDConfig, per_example_gradients, run
from simulations.dpsgd_cli import register

TRAIN_EXAMPLES = 1797 - round(0.2 * 1797)  # digits minus its test split


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test root (keeps dpsgd a sub-command)."""

    register(app)
    return app


def _invoke(*parts: str):
    """`ldpfed dpsgd PARTS...`, each part split at white space."""
    return CliRunner().invoke(_app(), ["dpsgd", *words(*parts)])


def _summary(*parts: str) -> dict:
    """The JSON summary of `ldpfed dpsgd PARTS... --json`; a non-zero exit fails the test."""
    result = _invoke(*parts, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _poisson_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    from dp_accounting.rdp import RdpAccountant

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
    )
    return float(RdpAccountant().compose(event).get_epsilon(delta))  # the library itself, not ldpfed


def test_per_example_gradients_match_one_backward_per_example():
    from ldpfed.training.models import build_model

    model = build_model("mlp", (8,), 3, seed=1)
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([0, 1, 2, 1, 0])
    batched = per_example_gradients(model, params, x, y)
    for i in range(5):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
        single = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        torch.testing.assert_close(batched[i], single, rtol=1e-5, atol=1e-6)


def test_numeric_dpsgd_learns_and_reports_the_rdp_epsilon():
    # a fixed noise seed (noise and batches): the accuracy and cosine checks are statistical, so reproducible
    summary = _summary(
        "--perturbation numeric --noise-multiplier 1.0 --batch-size 128 --epochs 2 --target-delta 1e-5 --noise-seed 1"
    )
    assert summary["train_examples"] == TRAIN_EXAMPLES and summary["private"] is True
    steps = 2 * round(TRAIN_EXAMPLES / 128)
    assert summary["steps"] == steps
    assert summary["epsilon"] == pytest.approx(_poisson_epsilon(1.0, 128 / TRAIN_EXAMPLES, steps, 1e-5), rel=1e-9)
    assert summary["accuracy"] > 0.5  # 10 classes: chance is 0.1
    assert 0.0 < summary["mean_cosine_to_clean"] < 1.0
    assert summary["noise_sd"]["per_coordinate"] == pytest.approx(1.0 / 128)


def test_geodp_is_charged_both_releases():
    config = DPSGDConfig(perturbation="geodp", noise_multiplier=1.5, batch_size=128, epochs=1, beta=0.5, seed=3)
    summary = run(config)
    steps = round(TRAIN_EXAMPLES / 128)
    q = 128 / TRAIN_EXAMPLES
    assert summary["epsilon"] == pytest.approx(_poisson_epsilon(1.5 / math.sqrt(2.0), q, steps, 1e-5), rel=1e-9)
    assert summary["epsilon"] > _poisson_epsilon(1.5, q, steps, 1e-5)
    assert np.isfinite(summary["loss"]) and -1.0 <= summary["mean_cosine_to_clean"] <= 1.0
    assert summary["noise_sd"]["per_angle"] == pytest.approx(
        math.sqrt(summary["parameters"] + 2) * 0.5 * math.pi * 1.5 / 128
    )


def test_noise_free_baseline_is_not_private_and_runs_are_reproducible():
    config = DPSGDConfig(perturbation="none", batch_size=128, epochs=1, sampling="shuffle", seed=5, noise_seed=11)
    first, second = run(config), run(config)
    assert first["private"] is False and first["epsilon"] is None and "not_private_reason" in first
    assert first["mean_cosine_to_clean"] == pytest.approx(1.0)
    assert first["history"] == second["history"]


def test_the_noise_and_batches_come_from_a_secret_the_summary_never_records():
    """`seed` (recorded in the summary) fixes the split and the initialization only: two runs with
    the same seed draw different noise and batches (OS entropy), so nobody re-draws the noise from the
    summary; a given noise_seed reproduces the run and is not in the summary."""
    from simulations.dpsgd import load, train

    config = DPSGDConfig(perturbation="numeric", noise_multiplier=1.0, batch_size=64, epochs=1, seed=2)
    data, x_all, y_all = load(config)
    x, y = x_all[:256], y_all[:256]

    def weights(noise_seed):
        model = train(config, data, x, y, seed=config.seed, noise_seed=noise_seed)["model"]
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    fresh = [weights(None), weights(None)]
    assert not torch.equal(fresh[0], fresh[1])
    assert torch.equal(weights(123), weights(123)) and not torch.equal(weights(123), weights(124))
    public = dict(config.__dict__, noise_seed=None)
    assert "noise_seed" in public  # the field exists; run() leaves it out of the summary
    result = _invoke("--epochs 1 --batch-size 256 --noise-seed 987654321 --json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert "noise_seed" not in summary and "987654321" not in result.stdout
    assert summary["batch_and_noise_randomness"].startswith("secret")


def test_the_console_states_the_relation_and_what_a_float_samplers_guarantee_assumes():
    result = _invoke("--epochs 1 --batch-size 256")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "under add-or-remove-one adjacency" in text
    assert "the guarantee assumes exact real-valued noise" in text and "NOT floating-point safe" in text


@pytest.mark.parametrize(
    "args",
    [
        ["--perturbation", "vector"],
        ["--data", "nope"],
        ["--noise-multiplier", "0"],
        ["--beta", "2"],
        ["--model", "resnet"],
        ["--sampling", "random"],
        ["--target-delta", "1.5"],
        ["--batch-size", "100000"],
        ["--noise-seed", "-1"],
    ],
)
def test_bad_input_exits_2_with_one_line(args):
    result = _invoke(*args, "--epochs", "1", "--json")
    assert result.exit_code == 2
    assert result.stdout.strip() == "" or "error" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_attack_evaluation_against_known_scores():
    """A perfectly separating score gives accuracy 1 and AUC 1; an independent one stays near 1/2
    within its intervals; the intervals are exact (Clopper-Pearson) and Hanley-McNeil."""
    from simulations.mia import accuracy_with_interval, auc_with_interval, evaluate_attack

    rng = np.random.default_rng(0)
    member = np.zeros(2000, dtype=bool)
    member[:1000] = True
    perfect = evaluate_attack(member.astype(float) + 0.01 * rng.random(2000), member, rng)
    assert perfect["accuracy"] == 1.0 and perfect["auc"] == 1.0
    blind = evaluate_attack(rng.random(2000), member, rng)
    assert blind["accuracy_low"] < 0.5 < blind["accuracy_high"] and blind["auc_low"] < 0.5 < blind["auc_high"]
    interval = accuracy_with_interval(60, 100)
    assert interval["accuracy_low"] == pytest.approx(0.4972, abs=1e-3) and interval["accuracy_high"] == pytest.approx(
        0.6967, abs=1e-3
    )
    assert auc_with_interval(np.array([2.0, 3.0]), np.array([1.0, 2.5]))["auc"] == pytest.approx(0.75)


def test_mia_report_from_the_cli():
    summary = _summary("--perturbation numeric --epochs 1 --batch-size 128 --mia --shadows 2")
    report = summary["mia"]
    assert report["members"] == TRAIN_EXAMPLES // 2 and summary["train_examples"] == TRAIN_EXAMPLES // 2
    for attack in report["attacks"].values():
        assert attack["accuracy_low"] <= attack["accuracy"] <= attack["accuracy_high"]
        assert attack["auc_low"] <= attack["auc"] <= attack["auc_high"]
    assert _invoke("--shadows 1 --json").exit_code == 2


def test_a_json_run_shows_its_progress_on_stderr_and_keeps_stdout_for_the_json():
    result = _invoke("--perturbation numeric --epochs 2 --batch-size 256 --mia --shadows 2 --json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["epochs"] == 2
    for line in ("epoch 1/2: test accuracy", "epoch 2/2: test accuracy", "shadow model 2/2, epoch 2/2"):
        assert line in result.stderr, result.stderr


def _replace_one_events(perturbation: str, sigma: float) -> list:
    """One shuffled epoch under replace-one, in dp-accounting's own terms: the sum (numeric) or the
    magnitude (GeoDP) moves by 2C, i.e. a Gaussian of multiplier sigma/2; GeoDP's direction, whose
    sensitivity covers a replacement, keeps sigma."""
    magnitude = dp_accounting.GaussianDpEvent(sigma / 2)
    return [magnitude] if perturbation == "numeric" else [magnitude, dp_accounting.GaussianDpEvent(sigma)]


@cache  # ~0.5 s each; the numeric cases of a test share theirs
def _replace_one_pld_epsilon(perturbation: str, sigma: float, epochs: int, delta: float) -> float:
    """The independent reference: dp-accounting's PLD accountant under REPLACE_ONE, which doubles the
    Gaussian's shift itself (noise sigma C, records of norm <= C). GeoDP's direction has noise sigma L
    with L bounding a replacement's whole shift: records of norm L/2 in REPLACE_ONE's terms, 2 sigma."""
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_accounting.GaussianDpEvent(sigma), epochs)
    if perturbation == "geodp":
        accountant.compose(dp_accounting.GaussianDpEvent(2 * sigma), epochs)
    return float(accountant.get_epsilon(delta))


@pytest.mark.parametrize("perturbation", ["numeric", "geodp"])
def test_shuffled_dpsgd_is_floating_point_safe_by_default(perturbation):
    """--sampling shuffle: the safe sampler by default, labelled, accounted under replace-one: per
    epoch one discrete Gaussian release of multiplier sigma/2 for the sum or magnitude (and sigma for
    GeoDP's direction), on the library's Gaussian RDP curve, plus the samplers' float slack."""
    from dp_accounting.rdp import RdpAccountant

    summary = _summary(
        f"--perturbation {perturbation} --sampling shuffle --noise-multiplier 1.5 --batch-size 128 --epochs 1"
    )
    assert summary["noise_sampler"].startswith("safe") and "floating-point safe" in summary["noise_sampler"]
    assert summary["neighbouring_relation"] == "replace-one" and summary["guarantee_assumes"] is None
    events = _replace_one_events(perturbation, 1.5)
    library = RdpAccountant().compose(dp_accounting.ComposedDpEvent(events)).get_epsilon(1e-5)
    # the ideal curve's eps at the delta the samplers' float slack leaves, plus the slack's eps (its own field)
    slack = summary["float_slack"]
    assert 0 < slack["epsilon"] < 1e-6 and 0 < slack["delta"] < 1e-10
    at_slack_delta = RdpAccountant().compose(dp_accounting.ComposedDpEvent(events)).get_epsilon(1e-5 - slack["delta"])
    assert summary["epsilon"] == pytest.approx(at_slack_delta + slack["epsilon"], rel=1e-12)
    assert summary["epsilon"] > library + slack["epsilon"]
    assert summary["epsilon"] >= _replace_one_pld_epsilon(perturbation, 1.5, 1, 1e-5)
    assert "DiscreteGaussianVectorDpEvent" in summary["dp_event"]
    if perturbation == "numeric":  # sigma C / B, inflated by the rounding's sqrt(d)/J <= 2^-10
        assert 1.5 / 128 < summary["noise_sd"]["per_coordinate"] < 1.5 / 128 * (1 + 2.0**-9)
    else:
        assert summary["noise_sd"]["sampler"] == "safe"


@pytest.mark.parametrize(
    "perturbation, sampler, old_epsilon",
    [("numeric", "safe", 12.30), ("numeric", "continuous", 12.30), ("geodp", "safe", 19.05)],
)
def test_shuffled_epochs_are_charged_under_replace_one(perturbation, sampler, old_epsilon):
    """sigma = 1, 5 shuffled epochs, delta 1e-5 (the README's command with --sampling shuffle): one
    release at sigma/2 per epoch (numeric 30.13; GeoDP 35.08 with its direction at sigma), never
    below dp-accounting's own REPLACE_ONE PLD (28.37; GeoDP 33.10); add/remove at sigma read 12.30
    (GeoDP 19.05), below what a replaced example can cost."""
    from dp_accounting.rdp import RdpAccountant

    from simulations.dpsgd import privacy_record

    config = DPSGDConfig(
        perturbation=perturbation, noise_multiplier=1.0, epochs=5, sampling="shuffle", noise_sampler=sampler
    )
    record = privacy_record(config, TRAIN_EXAMPLES, 5 * math.ceil(TRAIN_EXAMPLES / 64), 650)
    library = RdpAccountant().compose(dp_accounting.ComposedDpEvent(_replace_one_events(perturbation, 1.0)), 5)
    expected = library.get_epsilon(1e-5)
    assert record["epsilon"] == pytest.approx(expected, rel=1e-6)  # + the safe sampler's slack (< 1e-6)
    assert record["epsilon"] >= expected
    reference = _replace_one_pld_epsilon(perturbation, 1.0, 5, 1e-5)
    assert record["epsilon"] >= reference > old_epsilon  # the add/remove figure understated a replacement
    assert (
        record["neighbouring_relation"] == "replace-one"
        and "REPLACE_ONE" in record["neighbouring_relation_description"]
    )


def test_poisson_records_name_add_or_remove_and_the_float_samplers_assumption():
    """Poisson sampling stays add/remove one example; the continuous sampler's private: true comes with
    what it assumes (exact real-valued noise; the audit refutes the float sampler)."""
    from simulations.dpsgd import privacy_record

    record = privacy_record(DPSGDConfig(perturbation="numeric"), TRAIN_EXAMPLES, 22, 650)
    assert record["private"] is True and record["neighbouring_relation"] == "add-or-remove-one"
    assert "NOT floating-point safe" in record["guarantee_assumes"] and "audit" in record["guarantee_assumes"]
    assert record["epsilon"] == pytest.approx(_poisson_epsilon(1.0, 64 / TRAIN_EXAMPLES, 22, 1e-5), rel=1e-9)
    laplace = DPSGDConfig(perturbation="inid-laplace", noise_epsilon=0.5, sampling="shuffle", epochs=3)
    assert privacy_record(laplace, TRAIN_EXAMPLES, 3 * 23, 650)["guarantee_assumes"] is None
    none = privacy_record(DPSGDConfig(perturbation="none"), TRAIN_EXAMPLES, 22, 650)
    assert none["private"] is False and none["epsilon"] is None and none["neighbouring_relation"] is None


def test_shuffled_inid_laplace_costs_twice_its_step_epsilon_per_epoch():
    """Replace-one moves the batch sum by twice the add/remove bound: pure 2E per epoch, composed by
    dp-accounting's PLD of the generic eps-DP mechanism (3 epochs of 1.0 at delta 1e-5)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    from simulations.dpsgd import privacy_record

    config = DPSGDConfig(perturbation="inid-laplace", noise_epsilon=0.5, sampling="shuffle", epochs=3)
    record = privacy_record(config, TRAIN_EXAMPLES, 3 * 23, 650)
    reference = (
        pld_lib.from_privacy_parameters(DifferentialPrivacyParameters(1.0, 0.0))
        .self_compose(3)
        .get_epsilon_for_delta(1e-5)
    )
    assert record["epsilon"] == pytest.approx(reference, rel=1e-6) and record["epsilon"] > 2.0


def test_poisson_dpsgd_defaults_to_the_continuous_sampler_and_refuses_safe():
    config = DPSGDConfig(perturbation="numeric")
    assert config.sampling == "poisson" and config.noise_sampler == "continuous" and not config.safe_noise
    assert (
        DPSGDConfig(perturbation="geodp", noise_sampler="continuous", sampling="shuffle").noise_sampler == "continuous"
    )
    assert DPSGDConfig(perturbation="inid-gaussian", sampling="shuffle").noise_sampler == "safe"
    for perturbation in ("numeric", "geodp"):
        result = _invoke(f"--perturbation {perturbation} --sampler safe --json")
        assert result.exit_code == 2 and "Poisson" in result.output

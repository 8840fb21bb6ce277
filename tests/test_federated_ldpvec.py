"""Federated LDPVec (spec: directional.md, federated.md): `ldpfed simulate --task train
--perturbation ldpvec`, its public inputs, its diagnostics, what the server sees, and bad combos."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import run_collecting_rows
from typer.testing import CliRunner

from ldpfed.accounting import NotPrivateDpEvent
from ldpfed.cli.main import app
from ldpfed.config import Config, from_flat
from ldpfed.directional.privatizer import REFERENCE, ROTATION_SEED, DirectionalPrivatizer
from ldpfed.protocols import seeds
from ldpfed.protocols.base import ClientReply
from ldpfed.protocols.nodes import local_round
from ldpfed.protocols.privacy import privacy_status
from ldpfed.protocols.session import World
from ldpfed.protocols.train import client_round_event, privatize
from ldpfed.tasks import client_half, resolve, server_half, validated, without_seed
from ldpfed.validation import LDPValueError

runner = CliRunner()
LDPVEC = {
    "task": "train",
    "engine": "local",
    "clients": 3,
    "rounds": 2,
    "local-steps": 2,
    "seed": 5,
    "perturbation": "ldpvec",
    "mechanism": "laplace",
    "epsilon": 8.0,
    "clip": 1.0,
    "beta": 0.4,
    "window": "centred",
    "magnitude": "normalize",
    "rotation": "hadamard",
}


def config_of(**options) -> Config:
    """The LDPVec run with `options`; the numeric perturbation clips each coordinate to the same C."""
    base = dict(LDPVEC)
    if options.get("perturbation") == "numeric":
        base["coordinate-clip"] = base.pop("clip")
    return validated(Config().with_options({**base, **options}))


def run_rows(config: Config, out=None) -> tuple[dict, pd.DataFrame]:
    if out is not None:
        config = config.with_options({"out": str(out)})
    return run_collecting_rows(config, noise_seed=5)  # one noise root: runs compared have the same noise


# ---- the options reach the client --------------------------------------------------------------
@pytest.mark.parametrize("source", ["flags", "flower-run-config"])
def test_the_ldpvec_options_reach_the_client(source):
    if source == "flags":
        config = config_of()
    else:  # what a Flower node reads under `flwr run`: the flattened run config
        flat = {
            f"training.{key}": value
            for key, value in LDPVEC.items()
            if key in ("perturbation", "beta", "window", "magnitude", "rotation", "clip")
        }
        flat.update({"run.task": "train", "privacy.mechanism": "laplace", "privacy.epsilon": 8.0})
        config = validated(from_flat(flat, source="run config"))
    world = World.from_config(config)
    client = client_half(config, 0, world.data, world.secret(0))
    assert isinstance(client.privatizer, DirectionalPrivatizer)
    vec = client.privatizer.ldpvec
    assert (vec.base, vec.epsilon, vec.clip, vec.beta, vec.window, vec.magnitude, vec.rotation) == (
        "laplace",
        8.0,
        1.0,
        0.4,
        "centred",
        "normalize",
        "hadamard",
    )
    numeric = client_half(config.with_options({"perturbation": "numeric"}), 0, world.data, 1)
    assert not isinstance(numeric.privatizer, DirectionalPrivatizer)


def test_the_server_broadcasts_the_public_reference_and_rotation_seed_and_applies_the_mean():
    config = config_of()
    world = World.from_config(config)
    server = server_half(config, world.data, world.server)
    first = server.configure_round(1).broadcast
    assert set(first) == {"global", REFERENCE, ROTATION_SEED}
    assert not np.any(first[REFERENCE])  # no step yet: windows in the middle of the ranges
    assert np.array_equal(first[ROTATION_SEED], seeds.stream(world.server, seeds.ROTATION, 1).generate_state(4))
    clients = {pid: client_half(config, pid, world.data, world.secret(pid)) for pid in range(3)}
    local_round(server, clients.__getitem__, 1)
    outcome = server.outcome
    np.testing.assert_allclose(outcome.step, (outcome.sizes / outcome.sizes.sum()) @ outcome.updates, rtol=1e-12)
    second = server.configure_round(2).broadcast
    np.testing.assert_array_equal(second[REFERENCE], outcome.step)  # the previous global step
    assert not np.array_equal(second[ROTATION_SEED], first[ROTATION_SEED])
    fixed = config_of(window="fixed", rotation="none")
    assert set(server_half(fixed, world.data, world.server).configure_round(1).broadcast) == {"global"}


def test_the_public_inputs_change_the_release_as_documented():
    """The same secret stream and update give the same release only with the same public inputs."""
    private = DirectionalPrivatizer(
        "laplace", 8.0, 1.0, beta=0.4, window="centred", magnitude="normalize", rotation="hadamard"
    )
    rng = np.random.default_rng(1)
    update, reference = rng.standard_normal(650), rng.standard_normal(650)

    def release(**public):
        return private.privatize(update, np.random.default_rng(7), **public)

    base = release(reference=reference, rotation_seed=[1, 2])
    np.testing.assert_array_equal(base, release(reference=reference, rotation_seed=np.array([1, 2], dtype=np.uint32)))
    assert not np.array_equal(base, release(reference=-reference, rotation_seed=[1, 2]))
    assert not np.array_equal(base, release(reference=reference, rotation_seed=[1, 3]))
    with pytest.raises(LDPValueError, match="rotation seed"):
        release(reference=reference)


# ---- diagnostics -------------------------------------------------------------------------------
def test_the_cosine_and_energy_columns_exist_and_are_sane(tmp_path):
    summary, rows = run_rows(config_of(rotation="none"), tmp_path / "vec")
    metrics = pd.read_csv(tmp_path / "vec" / "metrics.csv")
    for column in ("cosine_to_clean", "leading_energy_share", "clean_leading_energy_share"):
        assert column in metrics and metrics[column].notna().all(), column
    assert metrics["cosine_to_clean"].between(-1, 1).all()
    assert metrics["leading_energy_share"].between(0, 1).all()
    # Without rotation the angle noise piles the energy into the first coordinates (directional.md,
    # last section): far above the clean updates' share, and the direction is mostly lost.
    assert (metrics["leading_energy_share"] > 0.5).all() and (metrics["cosine_to_clean"] < 0.5).all()
    assert (metrics["clean_leading_energy_share"] < 0.5).all()
    assert summary["mean_cosine_to_clean"] == pytest.approx(metrics["cosine_to_clean"].mean())
    assert summary["perturbation"] == "ldpvec" and summary["ldpvec"]["budget"]["direction_epsilon"] == 8.0
    assert summary["deviation"] == "not used"  # the plain mean: no aggregator uses a deviation model
    assert np.isnan(metrics["predicted_squared_distance"]).all()  # no per-coordinate noise model
    assert (metrics["measured_squared_distance"] > 0).all()
    # Noise-free: the privatized update IS the clean clipped one (cosine 1, same energy share).
    clean_summary, clean = run_rows(config_of(perturbation="numeric", mechanism="none", rotation="none"))
    assert clean_summary["deviation"] == "not used"
    np.testing.assert_allclose(clean["cosine_to_clean"], 1.0, rtol=1e-12)
    np.testing.assert_allclose(clean["leading_energy_share"], clean["clean_leading_energy_share"], rtol=1e-12)


@pytest.mark.parametrize(
    "options, shown",
    [
        ({}, "not used"),  # ldpvec: the plain mean
        ({"aggregator": "fedavg"}, "not used"),
        ({"perturbation": "numeric", "aggregator": "mean"}, "not used"),
        ({"perturbation": "numeric", "aggregator": "hdr4me"}, "plug-in"),
        ({"perturbation": "numeric", "aggregator": "l2", "deviation": "model"}, "model"),
    ],
)
def test_the_summary_names_a_deviation_model_only_where_an_aggregator_uses_one(options, shown):
    from ldpfed.tasks.train import deviation_used

    assert deviation_used(config_of(**options)) == shown


# ---- what the server sees ----------------------------------------------------------------------
def test_the_server_cannot_redraw_an_ldpvec_clients_noise():
    """The server holds its config, its seed, the data seed, every broadcast (with the public
    reference and rotation seed) and every reply. Even told each client's CLEAN update, no stream
    it can derive from an integer it holds reproduces a reply; the client's real secret does
    (positive control), so a test that derived the noise from a server-known seed would fail."""
    from test_server_view import candidate_streams, integers_seen

    config = config_of(rounds=2)
    world = World.from_config(config)
    server = server_half(config, world.data, world.server)
    clients = {pid: client_half(config, pid, world.data, world.secret(pid)) for pid in range(3)}
    seen, clean = {}, {}
    for server_round in (1, 2):  # driven by hand so that the broadcasts are kept
        plan = server.configure_round(server_round)
        for pid in plan.partitions:
            reply, diagnostics = clients[pid].reply(server_round, plan.broadcast)
            seen[server_round, pid] = (plan.broadcast, reply.arrays["update"])
            clean[server_round, pid] = diagnostics["clean"]
        server.aggregate(
            server_round,
            {pid: ClientReply({"update": seen[server_round, pid][1]}, {"num-examples": 1}) for pid in plan.partitions},
            {},
        )
    public = without_seed(config)
    candidates = integers_seen(public, {"server_seed": world.server, "data_seed": world.data})
    candidates |= {int(w) for (broadcast, _) in seen.values() for w in broadcast[ROTATION_SEED]}
    privatizer = clients[0].privatizer
    for (server_round, pid), (broadcast, update) in seen.items():
        truth = clean[server_round, pid]
        rotation_words = [int(w) for w in broadcast[ROTATION_SEED]]  # the whole public seed, too
        streams = [np.random.SeedSequence(rotation_words)] + [
            stream for candidate in sorted(candidates) for stream in candidate_streams(candidate, pid, server_round)
        ]
        for stream in streams:
            guess = privatize(privatizer, truth, np.random.default_rng(stream), broadcast)
            assert not np.allclose(guess, update), (stream, server_round, pid)
        secret_stream = seeds.rng(world.secret(pid), seeds.NOISE, server_round)
        np.testing.assert_array_equal(privatize(privatizer, truth, secret_stream, broadcast), update)


# ---- privacy status ----------------------------------------------------------------------------
def test_exact_unsafe_is_not_private_and_has_no_finite_epsilon(tmp_path):
    config = config_of(magnitude="exact-unsafe", rotation="none")
    status = privacy_status(config, "clipped model updates")
    assert not status.private and "exact-unsafe" in status.reasons[0]
    world = World.from_config(config)
    server = server_half(config, world.data, world.server)
    assert isinstance(client_round_event(config, server.privatizer, 650), NotPrivateDpEvent)
    summary, rows = run_rows(config, tmp_path / "unsafe")
    assert summary["private"] is False and summary["epsilon"] is None
    assert summary["epsilon_spent_max_per_client"] is None and rows["epsilon_spent"].isna().all()
    assert "epsilon" not in summary["ldpvec"]
    privacy = json.loads((tmp_path / "unsafe" / "privacy.json").read_text())
    assert privacy["private"] is False and "exact-unsafe" in privacy["reasons"][0]
    table = pd.read_csv(tmp_path / "unsafe" / "privacy.csv")
    assert not table["private"].any() and table.filter(like="_epsilon").isna().all().all()
    # the sound modes are private, with the configured epsilon per round
    split = run_rows(config_of(magnitude="split", rotation="none", rounds=1))[0]
    assert split["private"] is True and split["epsilon_spent_max_per_client"] == 8.0


# ---- the Gaussian base: floating-point-safe angle noise -------------------------------------------
@pytest.mark.parametrize("magnitude", ["split", "normalize"])
def test_gaussian_ldpvec_trains_with_the_safe_sampler_and_the_ledger_says_so(tmp_path, magnitude):
    """`simulate --task train --perturbation ldpvec --mechanism gaussian`: the safe sampler by
    default, in the summary and in every ledger event (the rdp accountant composes them)."""
    config = config_of(mechanism="gaussian", delta=1e-5, rotation="none", magnitude=magnitude, accountant="rdp")
    summary, rows = run_rows(config, tmp_path / "safe")
    assert summary["private"] is True and summary["ldpvec"]["budget"]["angle_sampler"] == "safe"
    assert "floating-point safe" in summary["ldpvec"]["angle_noise_sampler"]
    assert 0 < summary["epsilon_spent_max_per_client"] < 2 * 8.0  # rdp: below basic composition of 2 rounds
    entries = (tmp_path / "safe" / "privacy_entries.csv").read_text()  # the ledger's events, per round
    assert "DiscreteGaussianVectorDpEvent" in entries
    assert np.isfinite(rows["measured_squared_distance"]).all()


# ---- bad combinations --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, message",
    [
        ({"aggregator": "hdr4me"}, "aggregator mean or fedavg"),
        ({"mechanism": "none"}, "scalar base mechanism"),
        ({"mechanism": "inid-gaussian", "delta": 1e-5}, "scalar base mechanism"),
        ({"report-dims": 10}, "report-dims does not apply"),
        ({"task": "mean"}, "--task train only"),
        ({"beta": 0.0}, "beta must be in"),
        ({"beta": 1.5}, "beta must be in"),
        ({"window": "diagonal"}, "window must be one of"),
        ({"magnitude": "exact"}, "magnitude must be one of"),
        ({"rotation": "random"}, "rotation must be one of"),
        ({"perturbation": "angles"}, "perturbation must be one of"),
        ({"mechanism": "gaussian"}, "delta"),
    ],
)
def test_bad_ldpvec_combinations_are_one_clear_error(options, message):
    flags = {**LDPVEC, **options}
    with pytest.raises(LDPValueError, match=message):
        config = resolve(None, flags)
        from ldpfed.tasks import preflight

        preflight(config)


def test_a_per_angle_budget_below_the_samplers_range_fails_before_the_run(tmp_path):
    """MLP on digits (d = 15,010, D = 16,384 with rotation) at eps 1.5: eps/D is below the safe
    Laplace's range, refused by the CLI with exit 2 and nothing written."""
    out = tmp_path / "run"
    args = [
        "simulate",
        "--task",
        "train",
        "--engine",
        "local",
        "--model",
        "mlp",
        "--perturbation",
        "ldpvec",
        "--epsilon",
        "1.5",
        "--rotation",
        "hadamard",
        "--rounds",
        "1",
        "--clients",
        "2",
        "--out",
        str(out),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "per-value epsilon" in result.output and not out.exists()


@pytest.mark.slow
def test_ldpvec_under_flower_gives_the_local_engines_numbers(tmp_path):
    """The public inputs travel through Flower's records: same seed, same rows on both engines."""
    config = config_of(rounds=2, clients=2).with_options({"engine": "flower", "cpus": 2})
    _, flower = run_rows(config, tmp_path / "flower")
    _, local = run_rows(config.with_options({"engine": "local"}))
    for column in ("accuracy", "loss", "cosine_to_clean", "leading_energy_share", "measured_squared_distance"):
        np.testing.assert_allclose(flower[column], local[column], rtol=1e-10, err_msg=column)
    assert math.isfinite(flower["cosine_to_clean"].iloc[-1])

"""`simulate --canaries M`: canary clients audit a federated training run from inside it
(ldpfed.protocols.canaries): the verdict beside the accounted eps, a run whose noise is secretly
halved is flagged, a sound one is not, and nothing in the server's view marks a canary.

Settings where a sound run's cosine estimate reaches at least half its accounted eps (digits,
logistic regression, d = 650, one noise seed each):
- local trust: 5 real clients, 300 canaries, 1 round, inid-gaussian at eps 4, delta 1e-5, L2 clip 1,
  rdp accountant. A canary's score is the cosine of its direction with its own privatized reply;
  the pair is +c against -c, the clip's diameter the noise is calibrated for, so the estimate is
  the analytic eps of the noise (the RDP calibration's slack puts it a little below 4). Halving the
  noise doubles the Gaussian's mu: eps ~ 9, far above 4.
- central trust: 10 real clients, 300 canaries, 2 rounds, max-epsilon 4 (fraction 1: no sampling),
  L2 clip 1; the cosine with the final model delta (black box). Halving the noise: eps ~ 10.
With 300 canaries (~150 a side) the fitted mean gap of the cosines has a relative standard error
of about 0.1 at eps 4, so the 97.5% lower limit of a sound run lies well below the accounted eps,
and that of a halved run (the gap doubled) well above it.
"""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest
from helpers import ldpfed, ldpfed_json

from ldpfed.protocols import central, train
from ldpfed.training.noise_privatizer import NoisePrivatizer

NOISE_SEED = "--noise-seed 20261128"
LOCAL = (
    "simulate --task train --engine local --clients 5 --rounds 1 --aggregator fedavg --mechanism inid-gaussian "
    f"--epsilon 4 --delta 1e-5 --clip 1 --accountant rdp --canaries 300 {NOISE_SEED}"
)
CENTRAL = (
    "simulate --task train --trust central --engine local --clients 10 --rounds 2 --max-epsilon 4 --clip 1 "
    f"--canaries 300 {NOISE_SEED}"
)


SECAGG = (
    "simulate --task train --trust secagg --engine local --clients 6 --rounds 2 --max-epsilon 8 --clip 1 "
    f"--canaries 100 {NOISE_SEED}"
)


def halve_local_noise(monkeypatch, factor: float = 0.5) -> None:
    """A test-only privatizer: the gradient noise's draws scaled by `factor` (the accounting unchanged)."""
    honest = NoisePrivatizer.privatize_rows

    def scaled(self, updates, rngs, broadcast=None):
        clean = self.clip_only(updates)
        return clean + factor * (honest(self, updates, rngs, broadcast) - clean)

    monkeypatch.setattr(NoisePrivatizer, "privatize_rows", scaled)


def halve_central_noise(monkeypatch, factor: float = 0.5) -> None:
    honest = central.CentralNoise.release_sum

    def scaled(self, total, clip, rng):
        return total + factor * (honest(self, total, clip, rng) - total)

    monkeypatch.setattr(central.CentralNoise, "release_sum", scaled)


def test_local_sound_run_reaches_half_its_eps_and_is_not_flagged(tmp_path):
    summary = ldpfed_json(LOCAL, "--out", tmp_path / "run")
    audit = summary["canary_audit"]
    assert (summary["clients"], summary["real_clients"], summary["canary_clients"]) == (305, 5, 300)
    assert audit["accounted_epsilon"] == pytest.approx(4.0)
    assert audit["cosine"]["epsilon"] >= 2.0 and not audit["failed"] and not audit["suspect"]
    assert audit["lines"][0].startswith("accounted 4.0; empirical lower bound")
    privacy = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert privacy["canary_audit"]["lines"] == audit["lines"]
    record = tmp_path / "run" / "canaries.json"
    assert stat.S_IMODE(os.stat(record).st_mode) == 0o600  # the coins: the run's owner only
    coins = json.loads(record.read_text())["record"]["coins"]
    assert len(coins) == 300 and 100 < sum(coins) < 200
    assert "coins" not in json.dumps(summary)  # the summary and privacy.json hold no coin
    # the training loss is the real clients' (a canary trains nothing: its loss is no number)
    metrics = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    loss = float(metrics[1].split(",")[metrics[0].split(",").index("train_loss")])
    assert np.isfinite(loss) and loss > 0


def test_local_run_with_halved_noise_is_flagged(monkeypatch):
    halve_local_noise(monkeypatch)
    audit = ldpfed_json(LOCAL)["canary_audit"]
    assert audit["suspect"] and audit["cosine_lower_limit"] > 4.0
    assert any(line.startswith("SUSPECT") for line in audit["lines"])


def test_central_sound_run_reaches_half_its_eps_and_is_not_flagged():
    summary = ldpfed_json(CENTRAL)
    audit = summary["canary_audit"]
    assert summary["real_clients"] == 10 and summary["canary_clients"] == 300
    assert audit["audit_speaks_to"].startswith("the released model")
    assert audit["accounted_epsilon"] == pytest.approx(4.0, rel=1e-3)
    assert audit["cosine"]["epsilon"] >= 2.0 and not audit["failed"] and not audit["suspect"]


def test_central_run_with_halved_noise_is_flagged(monkeypatch):
    halve_central_noise(monkeypatch)
    audit = ldpfed_json(CENTRAL)["canary_audit"]
    assert audit["suspect"] and audit["cosine_lower_limit"] > 4.0


def test_secagg_sound_run_hosts_its_canaries_in_the_secure_sum_and_is_not_flagged():
    """Under secure aggregation the canaries take part in the secure sum as any client (their shares
    in the accounted noise); the audit speaks to the released model, as under central trust."""
    summary = ldpfed_json(SECAGG)
    audit = summary["canary_audit"]
    assert summary["real_clients"] == 6 and summary["canary_clients"] == 100 and summary["clients"] == 106
    assert audit["audit_speaks_to"].startswith("the released model")
    assert audit["accounted_epsilon"] == pytest.approx(8.0, rel=1e-3)
    assert audit["cosine"]["epsilon"] >= 4.0 and not audit["failed"] and not audit["suspect"]


def test_secagg_run_with_secretly_halved_shares_is_flagged(monkeypatch):
    """A test-only encoder whose discrete Gaussian shares are halved (the accounting unchanged)."""
    from ldpfed.protocols.ddgauss import DistributedDiscreteGaussian

    honest = DistributedDiscreteGaussian.shares
    monkeypatch.setattr(DistributedDiscreteGaussian, "shares", lambda self, rows, rng: honest(self, rows, rng) // 2)
    audit = ldpfed_json(SECAGG)["canary_audit"]
    assert audit["suspect"] and audit["cosine_lower_limit"] > 8.0


def test_a_failed_audit_exits_1_naming_it(monkeypatch):
    # noise cut 100-fold under an accounted eps of 1: every guess right, the one-run bound (~4.5 from
    # 150 + 150 guesses) above the accounting
    halve_local_noise(monkeypatch, factor=0.01)
    result = ldpfed(LOCAL.replace("--epsilon 4", "--epsilon 1"), "--json")
    assert result.exit_code == 1, result.output
    assert "FAILED: the empirical lower bound" in result.stderr


def _server_view(monkeypatch, arguments: str) -> list[tuple]:
    """What reaches the server half: per round, the broadcast's keys and, per reply, its array names,
    shapes and dtypes and its metric names and types."""
    seen = []
    configure, aggregate = train.TrainServer.configure_round, train.TrainServer.aggregate

    def configure_round(self, server_round):
        plan = configure(self, server_round)
        seen.append(("broadcast", tuple(sorted(plan.broadcast))))
        return plan

    def aggregate_round(self, server_round, replies, failures, sums=None):
        for pid in replies:
            reply = replies[pid]
            arrays = tuple((k, v.shape, v.dtype.str) for k, v in sorted(reply.arrays.items()))
            metrics = tuple((k, type(v).__name__) for k, v in sorted(reply.metrics.items()))
            seen.append((arrays, metrics, replies[pid].metrics["num-examples"]))
        return aggregate(self, server_round, replies, failures, **({"sums": sums} if sums else {}))

    monkeypatch.setattr(train.TrainServer, "configure_round", configure_round)
    monkeypatch.setattr(train.TrainServer, "aggregate", aggregate_round)
    ldpfed_json(arguments)
    return seen


def test_nothing_in_the_servers_view_marks_a_canary(monkeypatch):
    base = "simulate --task train --engine local --clients 4 --rounds 2 --aggregator fedavg --mechanism inid-gaussian"
    base += f" --epsilon 4 --delta 1e-5 --clip 1 {NOISE_SEED}"
    without = _server_view(monkeypatch, base)
    with_canaries = _server_view(monkeypatch, base + " --canaries 6")
    shapes = {entry[:2] for entry in without if entry[0] != "broadcast"}
    assert {entry[:2] for entry in with_canaries if entry[0] != "broadcast"} == shapes and len(shapes) == 1
    broadcasts = {entry for entry in with_canaries if entry[0] == "broadcast"}
    assert broadcasts == {entry for entry in without if entry[0] == "broadcast"}
    # a canary's count is one of the real clients' counts (drawn from its own stream)
    real_counts = {entry[2] for entry in without if entry[0] != "broadcast"}
    assert {entry[2] for entry in with_canaries if entry[0] != "broadcast"} <= real_counts
    assert sum(entry[0] != "broadcast" for entry in with_canaries) == 2 * 10  # every client of 4 + 6 replied


def test_replayed_noise_seed_gives_the_same_coins_and_verdict(tmp_path):
    arguments = LOCAL.replace("--canaries 300", "--canaries 20")
    first = ldpfed_json(arguments, "--out", tmp_path / "a")
    again = ldpfed_json(arguments, "--out", tmp_path / "b")
    records = [json.loads((tmp_path / run / "canaries.json").read_text())["record"] for run in ("a", "b")]
    assert records[0] == records[1]
    assert first["canary_audit"]["cosine"] == again["canary_audit"]["cosine"]
    assert np.isfinite(first["canary_audit"]["cosine"]["epsilon"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("simulate --task mean --canaries 5", "--canaries"),
        ("simulate --task train --canaries 5 --fresh-noise", "noise root"),
        ("simulate --task train --canaries -1", "canaries"),
        ("simulate --task train --trust shuffle --canaries 5", "shuffle"),
        ("simulate --task train --trust central --max-epsilon 4 --clipping adaptive --canaries 5", "zero update"),
    ],
)
def test_bad_canary_options_exit_2(arguments, message):
    result = ldpfed(arguments, "--engine local --json")
    assert result.exit_code == 2 and message in result.stderr, result.output


def test_flower_run_hosts_and_audits_its_canaries():
    summary = ldpfed_json(LOCAL.replace("--engine local", "--engine flower --nodes 2").replace("300", "40"))
    assert summary["engine"] == "flower" and summary["clients_replied_total"] == 45
    assert summary["canary_audit"]["cosine"]["seen"] + summary["canary_audit"]["cosine"]["unseen"] == 40

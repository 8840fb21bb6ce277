"""What a run with canaries reports beside its audit: the training loss of the clients with data
(a canary trains nothing), privacy.json's copy of the verdict, and the refusal of canaries in a
deployment (`flwr run`), whose halves no harness playing the world builds."""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.config import Config
from ldpfed.protocols import canaries
from ldpfed.protocols.recorder import qualified
from ldpfed.protocols.train import TrainOutcome
from ldpfed.tasks import flower_run_config, node_half, server_half, validated
from ldpfed.tasks.train import TrainTask
from ldpfed.validation import LDPValueError


def _federation(clients: int = 3, count: int = 4) -> Config:
    config = validated(Config().with_options({"task": "train", "clients": clients, "canaries": count}))
    return canaries.expanded(config)


class _Server:
    """What `TrainTask.joined` reads of the server half: its round outcome and privatizer (one
    without a per-coordinate noise model, so that only the clean-update diagnostics are joined)."""

    privatizer = object()

    def __init__(self, outcome: TrainOutcome) -> None:
        self.outcome = outcome


def test_the_train_loss_of_a_round_with_canaries_is_the_real_clients_weighted_loss():
    # clients 0..2 hold data, 3..6 are canaries (loss NaN: they train nothing); 1 and 5 did not reply
    config = _federation()
    pids = [0, 2, 3, 4, 6]
    sizes = np.array([10.0, 30.0, 10.0, 30.0, 20.0])
    losses = {0: 2.0, 2: 1.0, 3: np.nan, 4: np.nan, 6: np.nan}
    dims = 5
    updates = np.zeros((len(pids), dims))
    outcome = TrainOutcome(pids, sizes, updates, np.zeros(dims), np.zeros(dims))
    diagnostics = {pid: {"clean": np.zeros(dims), "loss": losses[pid]} for pid in pids}
    metrics = TrainTask().joined(config, _Server(outcome), None, diagnostics)
    assert metrics["train_loss"] == pytest.approx((10 * 2.0 + 30 * 1.0) / 40)  # clients 0 and 2 by their counts
    # a round where only canaries replied has no training loss
    only = TrainOutcome([3, 4], sizes[2:4], updates[2:4], np.zeros(dims), np.zeros(dims))
    assert np.isnan(TrainTask().joined(config, _Server(only), None, diagnostics)["train_loss"])


def test_privacy_json_carries_the_summarys_verdict():
    state = {"accountant": "rdp", "private": True, "epsilon": 4.0}
    verdict = {"audit_speaks_to": "the server", "accounted_epsilon": 4.0, "failed": False, "lines": ["accounted 4.0"]}
    summary = {"privacy_qualification": "q", "noise_seed": "nodes", "canary_audit": verdict}
    record = qualified(state, summary)
    assert record["canary_audit"] == verdict
    assert list(record)[:5] == ["accountant", "private", "privacy_qualification", "noise_seed", "epsilon"]
    assert "canary_audit" not in qualified(state, {"privacy_qualification": "q"})  # a run without canaries


def test_a_deployments_halves_refuse_canaries():
    # `flwr run` reads its options with flower_run_config, in the ServerApp and in every ClientApp;
    # no party plays the world there, so the server half and a node half refuse the config
    config = flower_run_config({"run.task": "train", "federation.clients": 4, "training.canaries": 6})
    with pytest.raises(LDPValueError, match=r"ldpfed simulate.*flwr run"):
        server_half(config, 1, 2)
    with pytest.raises(LDPValueError, match="training.canaries = 0"):
        node_half(config, [0, 1], 1, {0: 5, 1: 6})
    # the harness of `ldpfed simulate` gives the halves the federation's config: accepted
    canaries.check_world(canaries.expanded(config))

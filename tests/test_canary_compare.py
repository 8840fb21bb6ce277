"""`compare --trust ... --canaries M` (simulations.trust_compare): each trust model that hosts canaries
runs them and its row carries the audit beside the accounted eps; one that cannot says so; and the
local audit's Gaussian fit makes no flag where the replies' noise is not Gaussian."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers import ldpfed

import ldpfed.tasks as tasks
import simulations.trust_compare as trust_compare
from ldpfed.outputs import OutputDir
from ldpfed.protocols import canaries
from ldpfed.protocols.train import _privatizer


def _audit(failed: bool, suspect: bool) -> dict:
    return {
        "audit_speaks_to": "the server",
        "accounted_epsilon": 8.0,
        "one_run": {"epsilon_lower": 1.5, "confidence": 0.975},
        "cosine": {"epsilon": 7.0},
        "cosine_lower_limit": 5.0,
        "cosine_confidence": 0.975,
        "failed": failed,
        "suspect": suspect,
        "lines": ["accounted 8.0; ..."],
    }


def test_each_trust_model_runs_its_canaries_or_says_it_cannot(monkeypatch, capsys):
    configs = {}

    def fake_run(config, output, noise_seed):  # local trust's harness
        configs["local"] = config
        return {"canary_audit": _audit(False, False)}

    def fake_trust(config, output, noise_seed):  # central and secagg's harness
        configs[config.privacy.trust] = config
        return {"canary_audit": _audit(False, config.privacy.trust == "central")}

    def fake_figures(config, summary, trust):
        return {"final_accuracy": 0.5, "noise_sd": 1.0, "noise_sd_on_mean": 0.1, "bits_per_value": 32}

    monkeypatch.setattr(trust_compare, "run", fake_run)
    monkeypatch.setattr(trust_compare, "run_trust", fake_trust)
    monkeypatch.setattr(trust_compare, "figures", lambda c, s, t: {**fake_figures(c, s, t), "epsilon_spent_run": 8.0})
    options = {"task": "train", "trust": "local,central,secagg", "epsilons": "8", "canaries": 40, "rounds": 1}
    out = OutputDir.prepare(None, command="compare")
    trust_compare.compare_trust({**options, "engine": "local", "out": out, "as_json": True})
    assert {trust: config.training.canaries for trust, config in configs.items()} == {
        "local": 40,
        "central": 40,
        "secagg": 40,  # the secure sum hosts them as any client
    }
    shown = capsys.readouterr()
    assert "local: canary audit: passed" in shown.err and "central: canary audit: SUSPECT" in shown.err
    assert "secagg: canary audit: passed" in shown.err
    rows = json.loads(shown.out)
    assert [row["canary_audit"] for row in rows] == ["passed", "SUSPECT", "passed"]
    assert rows[0]["one_run_lower_bound"] == 1.5 and rows[2]["cosine_estimate"] == 7.0
    table = trust_compare._table(pd.DataFrame(rows), tasks.get("train"), audited=True)
    headers = [column.header for column in table.columns]
    assert headers[-3:] == ["one-run lower bound", "cosine estimate", "canary audit"]
    assert list(table.columns[-1].cells) == [row["canary_audit"] for row in rows]


def test_the_audit_columns_of_a_row():
    row = trust_compare.audit_figures({"canary_audit": _audit(True, False)}, "local")
    assert set(row) == set(trust_compare.AUDIT_COLUMNS)
    assert (row["canary_audit"], row["one_run_lower_bound"], row["cosine_estimate"]) == ("FAILED", 1.5, 7.0)
    assert row["audit_accounted_epsilon"] == 8.0 and row["cosine_lower_limit"] == 5.0
    missing = trust_compare.audit_figures({"canary_audit": {"audit_speaks_to": "x", "error": "not private"}}, "local")
    assert missing["canary_audit"] == "not made: not private" and missing["cosine_estimate"] is None
    assert trust_compare.audit_figures({}, "shuffle")["canary_audit"].startswith("not hosted")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("compare --task train --canaries 5", "give --trust"),
        ("compare --task mean --trust local --canaries 5", "--task train"),
        ("compare --task train --trust local,shuffle --canaries 5", "no canaries under it either"),
    ],
)
def test_canaries_outside_a_trust_comparison_of_training_exit_2(arguments, message):
    result = ldpfed(arguments)
    assert result.exit_code == 2 and message in result.stderr, result.output


def test_a_fit_of_gaussians_flags_nothing_where_the_noise_is_not_gaussian():
    # scores far apart (mu = 20): the Gaussian fit's eps and its lower limit are far above 4, a flag
    # under Gaussian noise; under Laplace noise the fit does not model the tails, so no limit, no flag
    coins = np.arange(200) < 100
    scores = np.random.default_rng(0).normal(0.0, 0.01, 200) + np.where(coins, 0.1, -0.1)
    flagged = canaries.replacement_verdict(4.0, scores, coins, 650, 1e-5)
    assert flagged.suspect and flagged.estimate_note is None
    noted = canaries.replacement_verdict(4.0, scores, coins, 650, 1e-5, not_gaussian="laplace")
    assert noted.estimate_lower is None and not noted.suspect and noted.estimate.epsilon == flagged.estimate.epsilon
    assert "laplace noise: no limit, no flag" in noted.lines[0] and noted.to_dict()["cosine_note"]
    assert noted.lower_bound == flagged.lower_bound  # the one-run bound holds for any noise
    assert canaries.non_gaussian_noise(_privatizer("laplace", 8.0, 1.0, None, None)) == "laplace"
    assert canaries.non_gaussian_noise(_privatizer("inid-gaussian", 8.0, 1.0, 1e-5, None)) is None
    assert canaries.non_gaussian_noise(_privatizer("gaussian", 8.0, 1.0, 1e-5, None)) is None

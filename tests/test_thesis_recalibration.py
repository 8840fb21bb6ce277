"""The thesis-grid script: verdict logic, and a tiny end-to-end run that writes its files."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from scripts import thesis_recalibration as script
from scripts.verdicts import paired_verdicts


def _runs(hdr4me, others):
    """One cell's rows: HDR4ME*'s MSE and each comparator's, per repetition."""
    cell = {"data": "g", "mechanism": "laplace", "options": "", "epsilon": 1.0}
    mse = {"hdr4me": hdr4me, **others}
    return pd.DataFrame(
        [
            {**cell, "repeat": repeat, "aggregator": name, "mse": values[repeat]}
            for repeat in range(len(hdr4me))
            for name, values in mse.items()
        ]
    )


def test_paired_verdicts_beat_tie_and_lose():
    hdr4me = np.array([1.0, 2.0, 3.0, 4.0])
    others = {
        "mean": hdr4me + np.array([1.0, 1.1, 0.9, 1.0]),  # always larger: hdr4me beats
        "l1": hdr4me + np.array([0.5, -0.5, 0.4, -0.4]),  # differences straddle 0: tie
        "l2": hdr4me - np.array([1.0, 1.2, 0.8, 1.0]),  # always smaller: hdr4me loses
        "james-stein": hdr4me,  # identical: tie (zero spread)
    }
    verdicts = paired_verdicts(_runs(hdr4me, others), script.VERDICT_KEYS, script.COMPARATORS).set_index("versus")
    assert verdicts.loc["mean", "verdict"] == "beats"
    assert verdicts.loc["l1", "verdict"] == "ties"
    assert verdicts.loc["l2", "verdict"] == "loses"
    assert verdicts.loc["james-stein", "verdict"] == "ties"
    assert verdicts.loc["mean", "ratio"] == hdr4me.mean() / others["mean"].mean()


def test_tiny_grid_writes_results_and_report(tmp_path, monkeypatch):
    out, doc = tmp_path / "res", tmp_path / "doc.md"
    monkeypatch.setattr(script, "DATA_SETS", (("gaussian", 200, 5), ("uniform", 300, 7)))
    monkeypatch.setattr(sys, "argv", ["x", "--scale", "1", "--repeats", "2", "--out", str(out), "--doc", str(doc)])
    script.main()
    summary = pd.read_csv(out / "summary.csv")
    verdicts = pd.read_csv(out / "verdicts.csv")
    assert set(summary["data"]) == {"gaussian", "uniform"}
    assert len(verdicts) == len(summary) // 5 * len(script.COMPARATORS)
    assert (out / "mse_gaussian.png").exists() and "HDR4ME* vs" in doc.read_text()
    assert (tmp_path / "doc" / "summary.csv").exists() and (tmp_path / "doc" / "mse_uniform.png").exists()
    assert "](doc/mse_uniform.png)" in doc.read_text() and "What changed" not in doc.read_text()


def test_changed_cells_lists_only_cells_that_moved():
    summary = pd.DataFrame(
        {
            "data": ["g", "g"],
            "mechanism": ["laplace", "square-wave"],
            "options": ["", "estimator=raw"],
            "epsilon": [1.0, 1.0],
            "aggregator": ["l1", "l1"],
            "mse": [0.5, 0.0808],
        }
    )
    previous = summary.assign(mse=[0.5, 0.0613], options=[np.nan, "estimator=raw"])  # as read back from CSV
    changes = script.changed_cells(summary, previous)
    assert list(changes["relative_change"]) == [0.0, 0.0808 / 0.0613 - 1]
    page = "\n".join(script.change_section(changes))
    assert "| g | square-wave[estimator=raw] | 1 | l1 | 0.0613 | 0.0808 | +31.8% |" in page
    assert "(1 of 2 compared; the largest relative change among the others is 0)" in page
    assert script.changed_cells(summary, None).empty

"""The in-process mean-estimation runner: chunking, reproducibility, agreement with the predictor."""

from __future__ import annotations

import numpy as np
import pytest

import ldpfed.aggregation as agg
import ldpfed.mechanisms as mechanisms
from ldpfed.data import generate
from ldpfed.experiments.mean import run_mean_experiment
from ldpfed.mechanisms.multidim import perturb_tuples, summarize
from ldpfed.protocols.mean import collect_sums, estimate_once
from ldpfed.validation import LDPValueError

DATA = generate("gaussian", 3000, 12, np.random.default_rng(5))


@pytest.mark.parametrize("report_dims", [12, 4])
def test_chunked_collection_equals_one_pass_over_the_same_streams(report_dims):
    mechanism = mechanisms.get("laplace", 1.0)
    stream = np.random.SeedSequence(9).spawn(1)[0]
    chunked = collect_sums(DATA, mechanism, report_dims, stream, chunk_users=700)
    # Unchunked reference: the same per-chunk streams, every user's reports in one array.
    children = np.random.SeedSequence(9).spawn(1)[0].spawn(5)
    parts = [
        perturb_tuples(DATA[k * 700 : (k + 1) * 700], mechanism, report_dims, np.random.default_rng(c))
        for k, c in enumerate(children)
    ]
    mask = np.concatenate([p[0] for p in parts])
    reports = np.concatenate([p[1] for p in parts])
    reference = summarize(mask, reports)
    np.testing.assert_array_equal(chunked.count, reference.count)
    np.testing.assert_allclose(chunked.total, reference.total, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(chunked.total_sq, reference.total_sq, rtol=1e-12)
    assert chunked.users == 3000 and np.all(chunked.count.sum() == 3000 * report_dims)
    # Collecting does not consume the caller's stream: a second call gives the same sums.
    again = collect_sums(DATA, mechanism, report_dims, stream, chunk_users=700)
    np.testing.assert_array_equal(again.total, chunked.total)


def test_chunked_and_unchunked_runs_agree_in_distribution():
    # Different chunk sizes draw different (equally valid) randomness; the MSE must agree within noise.
    runs = [
        run_mean_experiment(DATA, "laplace", 2.0, aggregators=["mean"], repeats=40, seed=1, chunk_users=c).runs["mse"]
        for c in (None, 250)
    ]
    se = np.sqrt(runs[0].var(ddof=1) / 40 + runs[1].var(ddof=1) / 40)
    assert abs(runs[0].mean() - runs[1].mean()) <= 5 * se
    assert not np.allclose(runs[0], runs[1])


def test_same_seed_same_result_and_another_seed_differs():
    kwargs = dict(aggregators=agg.available("mean"), repeats=3, report_dims=5)
    first = run_mean_experiment(DATA, ["laplace"], [0.5, 2.0], seed=4, **kwargs)
    second = run_mean_experiment(DATA, ["laplace"], [0.5, 2.0], seed=4, **kwargs)
    other = run_mean_experiment(DATA, ["laplace"], [0.5, 2.0], seed=5, **kwargs)
    assert first.runs.equals(second.runs)
    assert not np.allclose(first.runs["mse"], other.runs["mse"])
    # A grid row equals the run of that configuration alone (common random numbers).
    alone = run_mean_experiment(DATA, "laplace", 2.0, seed=4, **kwargs)
    grid_rows = first.runs[first.runs["epsilon"] == 2.0].reset_index(drop=True)
    assert np.array_equal(grid_rows["mse"].to_numpy(), alone.runs["mse"].to_numpy())


def test_runs_and_summary_are_tidy_and_record_their_options():
    result = run_mean_experiment(DATA, "laplace", [1.0], repeats=2, seed=0, alpha=0.9, l2_reference="estimate")
    assert set(result.runs.columns) >= {
        "mechanism",
        "options",
        "epsilon",
        "aggregator",
        "repeat",
        "mse",
        "deviation_source",
        "alpha",
        "l2_reference",
    }
    assert len(result.runs) == 2 * len(agg.available("mean"))
    assert set(result.runs["deviation_source"]) == {"plug-in"}
    assert set(result.runs.loc[result.runs["aggregator"] == "l2", "l2_reference"]) == {"estimate"}
    summary = result.summary
    assert list(summary["aggregator"]) == agg.available("mean")
    assert summary.loc[summary["aggregator"] != "mean", "predicted_mse"].isna().all()
    assert result.config["alpha"] == 0.9 and result.config["chunk_users"] > 0


def test_estimate_once_applies_every_aggregator_to_one_collection():
    mechanism = mechanisms.get("laplace", 0.5)
    sums = collect_sums(DATA, mechanism, 12, np.random.SeedSequence(2))
    aggregators = agg.get_many(agg.available("mean"))
    theta_hat, model, results = estimate_once(sums, mechanism, aggregators)
    np.testing.assert_array_equal(results["mean"].estimate, theta_hat)
    assert model.source == "plug-in" and set(results) == set(agg.available("mean"))
    fixed = type(model)(delta=np.zeros(12), sigma=np.full(12, 0.3), source="model")
    _, used, results = estimate_once(sums, mechanism, aggregators, deviation=fixed)
    assert used is fixed and results["hdr4me"].record["deviation_source"] == "model"


def test_mean_mse_agrees_with_the_predictor():
    for name in mechanisms.available():
        cls = mechanisms.get_class(name)
        delta = 1e-5 if cls.approximate else None
        for report_dims in (12, 3):
            result = run_mean_experiment(
                DATA, name, 2.0, aggregators=["mean"], report_dims=report_dims, delta=delta, repeats=120, seed=8
            )
            mse = result.runs["mse"]
            predicted = result.summary["predicted_mse"].iloc[0]
            # E[MSE] = mean_j (sigma_j^2 + delta_j^2) holds exactly (no CLT needed), up to E[1/r_j] vs
            # 1/E[r_j] for m < d (relative (1 - m/d)/E[r_j] < 0.1% here): 5 standard errors suffice.
            assert abs(mse.mean() - predicted) <= 5 * mse.std(ddof=1) / np.sqrt(len(mse)), (name, report_dims)


def test_model_deviation_comes_from_the_predictor():
    result = run_mean_experiment(
        DATA, "laplace", 1.0, aggregators=["mean", "hdr4me"], deviation="model", repeats=2, seed=0
    )
    assert set(result.runs["deviation_source"]) == {"model"}


def test_bad_input_fails_before_work():
    with pytest.raises(LDPValueError, match="epsilon"):
        run_mean_experiment(DATA, "laplace", [1.0, -1.0])
    with pytest.raises(LDPValueError, match="report_dims"):
        run_mean_experiment(DATA, "laplace", 1.0, report_dims=13)
    with pytest.raises(LDPValueError, match="unknown aggregator"):
        run_mean_experiment(DATA, "laplace", 1.0, aggregators=["mean", "median"])
    with pytest.raises(LDPValueError, match="unknown mechanism"):
        run_mean_experiment(DATA, "nope", 1.0)
    with pytest.raises(LDPValueError, match="values"):
        run_mean_experiment(DATA * 2, "laplace", 1.0)
    with pytest.raises(LDPValueError, match="deviation"):
        run_mean_experiment(DATA, "laplace", 1.0, deviation="oracle")

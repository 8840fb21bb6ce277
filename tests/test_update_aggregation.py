"""Re-calibrated aggregation of privatized model updates (ldpfed.aggregation.updates):
the FedAvg mean, the plug-in and model deviation models, noise-free runs, records, bad input.

Monte Carlo tolerances are 5 standard errors of the repetition average, computed in the test from
the repetitions themselves; seeds are fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr, ndtri
from update_federation import CLIP, DIMS, clean_updates, privatizer, repeated_privatizations, sample_counts

import ldpfed.aggregation as aggregation
from ldpfed.aggregation.updates import aggregate_updates, plugin_update_deviation
from ldpfed.training.privatize import UpdatePrivatizer
from ldpfed.validation import LDPValueError

Z = 5.0
AGGREGATORS = aggregation.available("mean")


def _noise_free(clients: int = 50, identical: bool = False):
    none = privatizer("none")
    updates = none.privatize(clean_updates(3, clients=clients, identical=identical), np.random.default_rng(0))
    return none, updates, sample_counts(3, clients)


# --- the plain mean and the record -----------------------------------------------------------------
def test_plain_mean_is_the_normalized_weighted_mean_and_recorded():
    lap = privatizer("laplace")
    updates = lap.privatize(clean_updates(), np.random.default_rng(1))
    counts = sample_counts()
    result = aggregate_updates(updates, counts, "hdr4me", privatizer=lap, alpha=0.9)
    np.testing.assert_allclose(result.plain_mean, np.einsum("k,kd->d", counts, updates) / counts.sum(), rtol=1e-12)
    np.testing.assert_allclose(result.weights.sum(), 1.0)
    # the weights' scale does not matter
    again = aggregate_updates(updates, 7.0 * counts, "hdr4me", privatizer=lap, alpha=0.9)
    np.testing.assert_allclose(again.estimate, result.estimate, rtol=1e-12)
    record = result.record
    assert record["aggregator"] == "hdr4me" and record["alpha"] == 0.9 and record["l2_reference"] == "bound"
    assert record["halfwidth"] == CLIP == record["clip"]
    assert record["deviation_source"] == "plug-in" == record["deviation_requested"]
    assert record["deviation_fallback"] is None
    assert (record["clients"], record["dims"], record["mechanism"]) == (50, DIMS, "laplace")
    assert record["report_dims"] == lap.dims_reported(DIMS)
    assert 1 < record["effective_clients"] < 50
    summary = result.summary()
    assert summary["deviation_variance_trace"] == pytest.approx(np.sum(result.deviation.sigma**2))
    assert summary["recalibration_shift_squared"] == pytest.approx(np.sum((result.estimate - result.plain_mean) ** 2))


def test_default_aggregator_is_the_plain_mean_and_instances_pass_through():
    lap = privatizer("laplace")
    updates = lap.privatize(clean_updates(), np.random.default_rng(2))
    plain = aggregate_updates(updates, sample_counts(), privatizer=lap)
    np.testing.assert_array_equal(plain.estimate, plain.plain_mean)
    instance = aggregation.get("l2", alpha=0.8, l2_reference="estimate")
    by_instance = aggregate_updates(updates, sample_counts(), instance, privatizer=lap)
    by_name = aggregate_updates(updates, sample_counts(), "l2", privatizer=lap, alpha=0.8, l2_reference="estimate")
    np.testing.assert_array_equal(by_instance.estimate, by_name.estimate)


# --- deviation models ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", AGGREGATORS)
def test_mechanism_none_with_the_model_deviation_returns_the_plain_mean_exactly(name):
    none, updates, counts = _noise_free()
    result = aggregate_updates(updates, counts, name, privatizer=none, deviation="model")
    assert not result.deviation.sigma.any() and not result.deviation.delta.any()
    np.testing.assert_array_equal(result.estimate, result.plain_mean)


@pytest.mark.parametrize("name", AGGREGATORS)
def test_identical_noise_free_updates_give_plug_in_sigma_zero_and_the_plain_mean(name):
    none, updates, counts = _noise_free(identical=True)
    result = aggregate_updates(updates, counts, name, privatizer=none)
    assert result.deviation.source == "plug-in"
    assert np.max(result.deviation.sigma) <= 1e-14
    np.testing.assert_allclose(result.estimate, result.plain_mean, rtol=0, atol=1e-13)


@pytest.mark.parametrize("clients", [4, 50])
def test_recalibration_of_a_noise_free_run_moves_no_further_than_its_thresholds(clients):
    """Mechanism none, plug-in deviation: delta = 0 and sigma_z > 0 only from the clean updates'
    spread, so xi_z = sigma_z z_(1+alpha)/2 and, with |m_z| <= C for the plain mean m,
      l1           |change| = min(|m|, xi)            <= xi
      l2 (bound)   |change| = |m| xi / (C + xi)       <= xi |m| / C
      hdr4me       |change| <= p2 xi + p3 xi |m| / C <= (1 - p1) xi,  1 - p1 = 2 Phi(-C / sigma)
      james-stein  |change| = min(|m|, sigma^2 / |m|) <= sigma.
    The bounds are computed here from sigma alone, not from the aggregators' diagnostics."""
    alpha = 0.95
    none, updates, counts = _noise_free(clients)
    p = counts / counts.sum()
    # the plug-in sigma, written out: sum p^2 * weighted sample variance / (1 - sum p^2)
    mean = p @ updates
    sigma = np.sqrt(np.sum(p**2) * (p @ (updates - mean) ** 2) / (1 - np.sum(p**2)))
    xi = sigma * ndtri((1 + alpha) / 2)
    with np.errstate(divide="ignore"):
        beyond = 2 * ndtr(-CLIP / sigma)  # 1 - p1; 0 where sigma = 0
    bounds = {
        "mean": np.zeros(DIMS),
        "l1": xi,
        "l2": xi * np.abs(mean) / CLIP,
        "hdr4me": beyond * xi,
        "james-stein": sigma,
    }
    assert np.all(np.abs(mean) <= CLIP)
    for name in AGGREGATORS:
        options = {} if name in ("mean", "james-stein") else {"alpha": alpha}
        result = aggregate_updates(updates, counts, name, privatizer=none, **options)
        np.testing.assert_allclose(result.deviation.sigma, sigma, rtol=1e-12)
        change = np.abs(result.estimate - result.plain_mean)
        assert np.all(change <= bounds[name] * (1 + 1e-9) + 1e-15), name
        assert np.all(change <= np.abs(mean) + 1e-15), name  # never past zero
    if clients == 50:  # many clients: sigma << C, so hdr4me is the plain mean to float precision
        result = aggregate_updates(updates, counts, "hdr4me", privatizer=none)
        np.testing.assert_allclose(result.estimate, result.plain_mean, rtol=0, atol=1e-12)


def test_plug_in_sigma_with_equal_weights_is_the_sample_variance_over_k():
    lap = privatizer("laplace")
    updates = lap.privatize(clean_updates(), np.random.default_rng(4))
    model = plugin_update_deviation(updates, np.full(50, 1 / 50), lap)
    np.testing.assert_allclose(model.sigma**2, updates.var(axis=0, ddof=1) / 50, rtol=1e-10)
    assert not model.delta.any()  # unbiased mechanism


def test_plug_in_delta_is_the_mechanism_bias_at_the_inverted_estimate():
    """delta_z = C b(t_z), t_z = clip((ubar_z / C - b0) / (1 + b1)) (recalibration.md, plug-in erratum),
    and over repetitions it is unbiased for the true noise mean sum_k p_k C b(c_kz / C) wherever t_z
    stays inside [-1, 1]; b(ubar_z / C), the old plug-in, is off there by C b1 b(tbar_z)."""
    sw = UpdatePrivatizer("square-wave", 2.0 * DIMS, CLIP, report_dims=DIMS)  # eps 2 per value, every coordinate
    mechanism = sw.per_value_mechanism(DIMS)
    b0, b1 = mechanism.bias_coefficients
    clean = sw.clip_only(clean_updates())
    counts = sample_counts()
    p = counts / counts.sum()
    true_mean = p @ sw.noise_moments(clean)[0]
    deltas = []
    for noisy in repeated_privatizations(sw, clean, 200, seed=5):
        result = aggregate_updates(noisy, counts, privatizer=sw)
        t = np.clip((result.plain_mean / CLIP - b0) / (1 + b1), -1, 1)
        np.testing.assert_allclose(result.deviation.delta, CLIP * mechanism.bias(t), rtol=1e-12, atol=1e-15)
        deltas.append(result.deviation.delta)
    deltas = np.array(deltas)
    inside = np.abs(p @ clean) < 0.5 * CLIP  # t_z rarely clipped there (sd of t_z about 0.15)
    standard_error = deltas[:, inside].std(axis=0, ddof=1) / np.sqrt(deltas.shape[0])
    error = deltas[:, inside].mean(axis=0) - true_mean[inside]
    assert inside.sum() > 50
    np.testing.assert_array_less(np.abs(error), Z * standard_error)


def test_model_deviation_is_the_worst_case_laplace_noise_by_hand():
    """Laplace, eps = 2 per round, d = 200 -> m = 1, per value eps = 2, V = 8 / 4 = 2, p = d/m = 200.
    Worst case at |t| = 1: v = C^2 [p V + (p - 1) * 1^2]; sigma^2 = sum p_k^2 v."""
    lap = UpdatePrivatizer("laplace", 2.0, CLIP, sampler="continuous")  # the real-number V = 8 / eps^2
    counts = sample_counts()
    weights = counts / counts.sum()
    v = CLIP**2 * (200 * 2.0 + 199 * 1.0)
    updates = lap.privatize(clean_updates(), np.random.default_rng(6))
    result = aggregate_updates(updates, counts, privatizer=lap, deviation="model")
    assert result.deviation.source == "model"
    np.testing.assert_allclose(result.deviation.sigma**2, np.sum(weights**2) * v, rtol=1e-12)
    assert not result.deviation.delta.any()


@pytest.mark.parametrize("counts", [np.array([30.0]), np.array([30.0, 0.0, 0.0])])
def test_plug_in_falls_back_to_the_model_with_fewer_than_two_weighted_clients(counts):
    lap = privatizer("laplace")
    updates = lap.privatize(clean_updates(clients=counts.size), np.random.default_rng(7))
    result = aggregate_updates(updates, counts, "l1", privatizer=lap)
    model = aggregate_updates(updates, counts, "l1", privatizer=lap, deviation="model")
    assert result.deviation.source == "model" and result.record["deviation_requested"] == "plug-in"
    assert "used the model" in result.record["deviation_fallback"]
    np.testing.assert_array_equal(result.estimate, model.estimate)


def _plug_in_traces(name: str, identical: bool, reps: int = 300, seed: int = 8):
    """(per-repetition plug-in traces sum_z sigma_z^2, the true trace sum_k p_k^2 v_kz, the exact
    expectation of the plug-in trace) for Laplace on the synthetic federation."""
    priv = privatizer(name, epsilon=4.0)
    clean = priv.clip_only(clean_updates(9, identical=identical))
    p = sample_counts(9) / sample_counts(9).sum()
    traces = np.array(
        [
            np.sum(plugin_update_deviation(noisy, p, priv).sigma ** 2)
            for noisy in repeated_privatizations(priv, clean, reps, seed)
        ]
    )
    mu, v = priv.noise_moments(clean)
    true = np.sum(p**2 @ v)
    # E sum_k p_k (u_k - ubar)^2 = sum_k p_k (a_k - abar)^2 + sum_k p_k v_k - sum_k p_k^2 v_k, a = c + mu
    a = clean + mu
    spread = p @ (a - p @ a) ** 2
    expected = np.sum(np.sum(p**2) * (spread + p @ v - p**2 @ v) / (1 - np.sum(p**2)))
    return traces, true, expected


@pytest.mark.parametrize("name", ["laplace", "square-wave"])
def test_plug_in_sigma_matches_its_expectation_and_covers_the_true_noise(name):
    traces, true, expected = _plug_in_traces(name, identical=False)
    se = traces.std(ddof=1) / np.sqrt(traces.size)
    assert abs(traces.mean() - expected) <= Z * se
    assert traces.mean() >= true - Z * se


def test_plug_in_sigma_is_the_true_noise_when_clean_updates_are_identical():
    traces, true, expected = _plug_in_traces("laplace", identical=True)
    np.testing.assert_allclose(expected, true, rtol=1e-12)  # no spread, one common variance
    se = traces.std(ddof=1) / np.sqrt(traces.size)
    assert abs(traces.mean() - true) <= Z * se


@pytest.mark.parametrize("reference", ["bound", "estimate"])
def test_coordinates_no_client_reported_stay_zero_and_finite(reference):
    """m << d: many coordinates of the mean are exactly 0 with plug-in sigma 0 there (no client
    reported them); every aggregator must keep them 0 (l2 "estimate" once gave 0/0 = NaN)."""
    lap = privatizer("laplace", epsilon=2.0)  # m = 1 of d = 200
    updates = lap.privatize(clean_updates(), np.random.default_rng(12))
    unreported = ~updates.any(axis=0)
    assert unreported.sum() > 50
    for name in AGGREGATORS:
        options = {"l2_reference": reference} if name in ("l2", "hdr4me") else {}
        result = aggregate_updates(updates, sample_counts(), name, privatizer=lap, **options)
        assert np.all(np.isfinite(result.estimate)), name
        assert not result.estimate[unreported].any(), name
        assert not result.deviation.sigma[unreported].any()


# --- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change, message",
    [
        (lambda u, w: (u, -w), "weights"),
        (lambda u, w: (u, 0 * w), "positive sum"),
        (lambda u, w: (u, np.where(np.arange(w.size) == 0, np.nan, w)), "weights"),
        (lambda u, w: (u, w[:-1]), "shape"),
        (lambda u, w: (u[0], w), "clients, d"),
        (lambda u, w: (u[None], w), "clients, d"),
        (lambda u, w: (u[:, :0], w), "clients, d"),
        (lambda u, w: (np.where(u == u[0, 0], np.nan, u), w), "NaN"),
        (lambda u, w: (np.where(u == u[0, 0], np.inf, u), w), "NaN"),
    ],
)
def test_bad_updates_or_weights_raise(change, message):
    lap = privatizer("laplace")
    updates, counts = change(lap.privatize(clean_updates(), np.random.default_rng(10)), sample_counts())
    with pytest.raises(LDPValueError, match=message):
        aggregate_updates(updates, counts, "hdr4me", privatizer=lap)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"aggregator": "median"}, "unknown aggregator"),
        ({"aggregator": 3}, "aggregator"),
        ({"aggregator": "hdr4me", "alpha": 1.5}, "alpha"),
        ({"aggregator": "mean", "alpha": 0.9}, "alpha"),
        ({"aggregator": "l1", "l2_reference": "bound"}, "option"),
        ({"aggregator": aggregation.get("l1"), "alpha": 0.9}, "constructor"),
        ({"aggregator": "l1", "deviation": "oracle"}, "deviation"),
        ({"aggregator": "l1", "privatizer": None}, "privatizer"),
        (
            {"aggregator": "l1", "privatizer": UpdatePrivatizer("laplace", 2.0, CLIP, report_dims=DIMS + 1)},
            "report_dims",
        ),
    ],
)
def test_bad_options_raise(kwargs, message):
    lap = privatizer("laplace")
    updates = lap.privatize(clean_updates(), np.random.default_rng(11))
    kwargs = {"privatizer": lap, **kwargs}
    with pytest.raises(LDPValueError, match=message):
        aggregate_updates(updates, sample_counts(), **kwargs)

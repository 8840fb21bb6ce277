"""Longitudinal frequency oracles (ldpfed.frequency.longitudinal): parameters and variances against
multi-freq-ldpy 0.2.5 (live when installed, else the vectors stored by
tests/data/make_multi_freq_ldpy_reference.py), Monte Carlo variances, the guarantees by enumeration,
and memoization over rounds."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import ldpfed.frequency as frequency
from ldpfed.audit.auditor import run_audit
from ldpfed.audit.subject import AuditSubject
from ldpfed.frequency.longitudinal import (
    BasicRAPPOR,
    DBitFlipPM,
    LongitudinalGRR,
    LongitudinalOSUE,
    Memo,
    MemoizedReporter,
    memoized_versus_fresh,
)
from ldpfed.validation import LDPValueError

REFERENCE = np.load(Path(__file__).parent / "data" / "multi_freq_ldpy_reference.npz")
CHAINED = {"rappor": BasicRAPPOR, "l-osue": LongitudinalOSUE, "l-grr": LongitudinalGRR}
GRID = [(eps, k) for eps in (1.0, 2.0, 4.0) for k in (2, 16, 128)]
FAST = [(eps, k) for eps in (1.0, 4.0) for k in (2, 16)]


def _parameters(oracle) -> np.ndarray:
    probabilities = oracle.probabilities
    return np.array([probabilities[name] for name in ("p1", "q1", "p2", "q2")])


def _variance_long_pure(p1, q1, p2, q2, n=1, f=0.0):
    """multi-freq-ldpy's VAR_Long_Pure, for the live comparison's other side."""
    from multi_freq_ldpy.long_freq_est.Variance_LONG_PURE import VAR_Long_Pure

    return VAR_Long_Pure(p1, q1, p2, q2, n, f)


# ---- against multi-freq-ldpy -----------------------------------------------------------------
@pytest.mark.parametrize("name", ["rappor", "l-osue", "l-grr"])
def test_parameters_and_variance_match_the_stored_multi_freq_ldpy_vectors(name):
    rows = REFERENCE[f"longitudinal_{name}"]  # eps_inf, eps_1, k, p1, q1, p2, q2, variance (n=1, f=0)
    for eps_inf, eps_1, k, *reference, variance in rows:
        oracle = CHAINED[name](eps_inf, int(k), epsilon_1=eps_1)
        if name == "l-grr" and k > 2:
            continue  # the library calibrates eps_1 on the two-category formula: see the next test
        # equal up to the 2^-53 rounding towards more noise
        np.testing.assert_allclose(_parameters(oracle), reference, rtol=1e-12)
        np.testing.assert_allclose(oracle.variance(np.zeros(int(k)), 1)[0], variance, rtol=1e-12)


def test_l_grr_reaches_eps_1_exactly_where_the_library_adds_more_noise():
    """multi-freq-ldpy solves ln((p1 p2 + q1 q2) / (p1 q2 + q1 p2)) = eps_1, which drops the
    (k - 2) q1 q2 of a third category in both probabilities: exact at k = 2, and for k > 2 its one
    round is eps'-LDP with eps' < eps_1. ldpfed solves the exact one-round ratio P / Q."""
    for eps_inf, eps_1, k, p1, q1, p2, q2, _ in REFERENCE["longitudinal_l-grr"]:
        library_p = p1 * p2 + (1 - p1) * q2
        library_q = q1 * p2 + (1 - q1) * q2
        library_epsilon_1 = math.log(library_p / library_q)
        ours = LongitudinalGRR(eps_inf, int(k), epsilon_1=eps_1)
        realized_inf, realized_1 = ours.realized_epsilons()
        assert realized_1 <= eps_1 and realized_1 == pytest.approx(eps_1, rel=1e-9)
        assert realized_inf <= eps_inf and realized_inf == pytest.approx(eps_inf, rel=1e-9)
        if k == 2:
            assert library_epsilon_1 == pytest.approx(eps_1, rel=1e-9)
        else:
            assert library_epsilon_1 < eps_1 - 1e-3
            assert ours.variance(np.zeros(int(k)), 1)[0] < _variance_of(p1, q1, p2, q2)


def _variance_of(p1, q1, p2, q2):
    p, q = p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2
    return q * (1 - q) / (p - q) ** 2


@pytest.mark.parametrize(("eps", "k"), GRID)
def test_variance_equals_the_live_library_closed_form(eps, k):
    pytest.importorskip("multi_freq_ldpy", reason="multi-freq-ldpy not installed (the stored vectors are checked)")
    for cls in CHAINED.values():
        oracle = cls(eps, k, epsilon_1=eps / 2)
        expected = _variance_long_pure(*_parameters(oracle), n=1000, f=0.0)
        assert oracle.variance(np.zeros(k), 1000)[1] == pytest.approx(expected, rel=1e-12)


# ---- Monte Carlo -----------------------------------------------------------------------------
def _variance_tolerance(variance: float, excess_kurtosis: float, repeats: int) -> float:
    """3 standard errors of a sample variance over `repeats` draws: SE^2 = var^2 (2 / (R - 1) +
    kurtosis / R), the normal case's var sqrt(2 / (R - 1)) plus the excess kurtosis of the estimate."""
    return 3 * variance * math.sqrt(2 / (repeats - 1) + excess_kurtosis / repeats)


def _binomial_excess_kurtosis(probabilities) -> float:
    """Excess kurtosis of a sum of independent Bernoullis: sum of 4th cumulants / variance^2."""
    probabilities = np.asarray(probabilities, dtype=float)
    spread = probabilities * (1 - probabilities)
    return float(np.sum(spread * (1 - 6 * spread)) / np.sum(spread) ** 2)


def _one_round_estimates(oracle, categories, repeats, seed):
    """`repeats` independent rounds (fresh permanent reports) of the same users: (repeats, k)."""
    rng = np.random.default_rng(seed)
    users = categories.size
    reports = oracle.perturb(np.tile(categories, repeats), rng)
    return oracle.contributions(reports).reshape(repeats, users, oracle.k).mean(axis=1)


def _check_chained_variance(name, eps, k, repeats=2000, users=100):
    oracle = CHAINED[name](eps, k, epsilon_1=eps / 2)
    categories = np.zeros(users, dtype=np.int64)  # every user holds category 0: category 1 has f = 0
    estimates = _one_round_estimates(oracle, categories, repeats, seed=[int(eps * 10), k, len(name)])
    measured = estimates[:, 1].var(ddof=1)
    expected = _variance_long_pure(*_parameters(oracle), n=users) if _has_library() else None
    exact = oracle.variance(np.eye(k)[0], users)[1]
    if expected is not None:
        assert exact == pytest.approx(expected, rel=1e-12)
    kurtosis = _binomial_excess_kurtosis(np.full(users, oracle.q))
    assert abs(measured - exact) <= _variance_tolerance(exact, kurtosis, repeats), (measured, exact)
    assert abs(estimates[:, 1].mean()) <= 4 * math.sqrt(exact / repeats)  # unbiased


def _has_library() -> bool:
    try:
        import multi_freq_ldpy  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize(("eps", "k"), FAST)
@pytest.mark.parametrize("name", sorted(CHAINED))
def test_one_round_variance_within_three_standard_errors(name, eps, k):
    _check_chained_variance(name, eps, k)


@pytest.mark.slow
@pytest.mark.parametrize(("eps", "k"), [cell for cell in GRID if cell not in FAST])
@pytest.mark.parametrize("name", sorted(CHAINED))
def test_one_round_variance_within_three_standard_errors_full_grid(name, eps, k):
    _check_chained_variance(name, eps, k, repeats=1000, users=50 if k == 128 else 100)


@pytest.mark.parametrize("name", sorted(CHAINED))
def test_exact_variance_at_a_positive_frequency(name):
    """Half the users hold category 0 (f = 1/2): the exact variance mixes P(1-P) and Q(1-Q)."""
    oracle = CHAINED[name](2.0, 4)
    users, repeats = 100, 2000
    categories = np.repeat([0, 2], users // 2)
    estimates = _one_round_estimates(oracle, categories, repeats, seed=7)
    frequencies = np.bincount(categories, minlength=4) / users
    exact = oracle.variance(frequencies, users)[0]
    kurtosis = _binomial_excess_kurtosis(np.repeat([oracle.p, oracle.q], users // 2))
    assert abs(estimates[:, 0].var(ddof=1) - exact) <= _variance_tolerance(exact, kurtosis, repeats)
    assert abs(estimates[:, 0].mean() - 0.5) <= 4 * math.sqrt(exact / repeats)


def test_dbitflippm_variance_within_three_standard_errors():
    """No closed form in multi-freq-ldpy: the exact formula of DBitFlipPM's docstring."""
    oracle = DBitFlipPM(2.0, 16, bits=2)
    users, repeats = 100, 2000
    categories = np.zeros(users, dtype=np.int64)
    estimates = _one_round_estimates(oracle, categories, repeats, seed=11)
    for category in (0, 1):
        exact = oracle.variance(np.eye(16)[0], users)[category]
        values = estimates[:, category]
        # the contribution is not a Bernoulli: SE from the sample's fourth moment, var^2 (m4/var^2 - 1) / R
        excess = np.mean((values - values.mean()) ** 4) / values.var() ** 2 - 3
        assert abs(values.var(ddof=1) - exact) <= _variance_tolerance(exact, max(excess, 0.0), repeats)
        assert abs(values.mean() - (1.0 if category == 0 else 0.0)) <= 4 * math.sqrt(exact / repeats)


@pytest.mark.parametrize("name", ["l-grr", "rappor"])
def test_variance_of_an_average_over_rounds_keeps_the_permanent_share(name):
    """Ten rounds from one memo: Var(average) = variance_of_average(T=10), far above Var(one) / 10."""
    oracle = CHAINED[name](2.0, 4)
    users, repeats, rounds = 100, 1500, 10
    rng = np.random.default_rng(3)
    memo = oracle.memoize(np.zeros(users * repeats, dtype=np.int64), rng)
    total = np.zeros((repeats, 4))
    for _ in range(rounds):
        total += oracle.contributions(oracle.report(memo, rng)).reshape(repeats, users, 4).mean(axis=1)
    average = total[:, 1] / rounds
    exact = oracle.variance_of_average(np.eye(4)[0], users, rounds)[1]
    assert exact > 1.5 * oracle.variance(np.eye(4)[0], users)[1] / rounds
    assert oracle.variance_of_average(np.eye(4)[0], users, 1) == pytest.approx(oracle.variance(np.eye(4)[0], users))
    excess = np.mean((average - average.mean()) ** 4) / average.var() ** 2 - 3
    assert abs(average.var(ddof=1) - exact) <= _variance_tolerance(exact, max(excess, 0.0), repeats)


# ---- guarantees by enumeration ---------------------------------------------------------------
def _all_reports(oracle):
    if isinstance(oracle, LongitudinalGRR):
        return np.arange(oracle.k)
    if isinstance(oracle, DBitFlipPM):
        rows = []
        for sampled in itertools.combinations(range(oracle.k), oracle.bits):
            for bits in itertools.product((0, 1), repeat=oracle.bits):
                row = np.full(oracle.k, -1, dtype=np.int8)
                row[list(sampled)] = bits
                rows.append(row)
        return np.array(rows)
    return np.array(list(itertools.product((0, 1), repeat=oracle.k)), dtype=bool)


@pytest.mark.parametrize(
    "oracle",
    [
        BasicRAPPOR(2.0, 3),
        LongitudinalOSUE(3.0, 3, epsilon_1=1.0),
        LongitudinalGRR(2.0, 5),
        DBitFlipPM(2.0, 4, bits=2),
        DBitFlipPM(2.0, 4, bits=1),
    ],
    ids=lambda o: f"{o.name}-{o.describe().get('bits', '')}",
)
def test_worst_ratio_of_every_output_is_the_budget(oracle):
    """The largest log-ratio over all outputs and pairs of values: eps_inf for the permanent report,
    eps_1 for one round; the probabilities of all outputs sum to one."""
    reports = _all_reports(oracle)
    permanent = np.array([oracle.permanent_log_probability(reports, c) for c in range(oracle.k)])
    one_round = np.array([oracle.log_probability(reports, c) for c in range(oracle.k)])
    np.testing.assert_allclose(np.exp(permanent).sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.exp(one_round).sum(axis=1), 1.0, rtol=1e-12)
    worst_permanent = (permanent.max(axis=0) - permanent.min(axis=0)).max()
    worst_round = (one_round.max(axis=0) - one_round.min(axis=0)).max()
    assert worst_permanent <= oracle.epsilon_inf + 1e-12
    assert worst_permanent == pytest.approx(oracle.epsilon_inf, rel=1e-9)
    assert worst_round <= oracle.epsilon_1 + 1e-12
    assert worst_round == pytest.approx(oracle.epsilon_1, rel=1e-9)


@pytest.mark.parametrize(
    "oracle", [BasicRAPPOR(2.0, 4), LongitudinalGRR(2.0, 4), DBitFlipPM(2.0, 4, bits=2)], ids=lambda o: o.name
)
def test_audit_classes_determine_the_log_ratio_of_categories_0_and_1(oracle):
    reports = _all_reports(oracle)
    ratio = oracle.log_probability(reports, 0) - oracle.log_probability(reports, 1)
    classes = oracle.audit_classes(reports)
    for label in np.unique(classes):
        np.testing.assert_allclose(ratio[classes == label], ratio[classes == label][0], atol=1e-12)
    assert np.unique(classes).size > 1


def test_sampled_reports_follow_log_probability():
    """Empirical output frequencies of one round match exp(log_probability) (L-GRR, k = 3)."""
    oracle = LongitudinalGRR(1.5, 3)
    n = 60_000
    reports = oracle.perturb(np.zeros(n, dtype=np.int64), np.random.default_rng(5))
    expected = np.exp(oracle.log_probability(np.arange(3), 0))
    counts = np.bincount(reports, minlength=3)
    assert np.all(np.abs(counts - n * expected) <= 4 * np.sqrt(n * expected * (1 - expected)))


def _one_round_subject(oracle, claimed: float) -> AuditSubject:
    """One round's report on categories 0 and 1, claimed eps_1-LDP."""
    return AuditSubject(
        name=oracle.name,
        epsilon=claimed,
        delta=0.0,
        sampler="discrete",
        inputs=("category 0", "category 1"),
        draw=lambda which, n, rng: oracle.perturb(np.full(n, which), rng),
        output="discrete",
        log_ratio=lambda reports: oracle.log_probability(reports, 0) - oracle.log_probability(reports, 1),
        classes=oracle.audit_classes,
    )


def _permanent_subject(oracle, claimed: float) -> AuditSubject:
    """The permanent report (what an observer of every round learns), claimed eps_inf-LDP."""
    return AuditSubject(
        name=f"{oracle.name}[permanent]",
        epsilon=claimed,
        delta=0.0,
        sampler="discrete",
        inputs=("category 0", "category 1"),
        draw=lambda which, n, rng: oracle.memoize(np.full(n, which), rng).permanent,
        output="discrete",
        log_ratio=lambda reports: (
            oracle.permanent_log_probability(reports, 0) - oracle.permanent_log_probability(reports, 1)
        ),
        classes=oracle.audit_classes,
    )


@pytest.mark.parametrize("eps", [1.0, 4.0])
@pytest.mark.parametrize("cls", [BasicRAPPOR, LongitudinalOSUE, LongitudinalGRR, DBitFlipPM], ids=lambda c: c.name)
def test_audit_passes_and_a_variant_at_twice_the_budget_fails(cls, eps):
    """The one-round report passes at eps_1 and the permanent one at eps_inf; an oracle built with
    twice the budget (its one round at 2 eps_1, its permanent report at 2 eps_inf) fails both claims."""
    oracle, doubled = cls(eps, 8), cls(2 * eps, 8)
    assert run_audit(_one_round_subject(oracle, oracle.epsilon_1), samples=100_000, seed=1).verdict == "pass"
    assert run_audit(_permanent_subject(oracle, oracle.epsilon), samples=100_000, seed=2).verdict == "pass"
    assert run_audit(_one_round_subject(doubled, oracle.epsilon_1), samples=100_000, seed=3).verdict == "fail"
    assert run_audit(_permanent_subject(doubled, oracle.epsilon), samples=100_000, seed=4).verdict == "fail"


# ---- memoization over rounds -----------------------------------------------------------------
@pytest.mark.parametrize("name", ["rappor", "l-osue", "l-grr", "dbitflippm"])
def test_the_permanent_report_and_eps_inf_do_not_change_over_rounds(name):
    cls = {**CHAINED, "dbitflippm": DBitFlipPM}[name]
    oracle = cls(2.0, 8)
    categories = np.arange(40) % 8
    charges = {}
    for rounds in (1, 10, 100):
        reporter = MemoizedReporter(oracle, categories, np.random.default_rng([1, 2]))  # the client's secret
        kept = reporter.memo.permanent.copy()
        round_rng = np.random.default_rng([1, 3])
        reports = [reporter.report(round_rng) for _ in range(rounds)]
        np.testing.assert_array_equal(reporter.memo.permanent, kept)  # never redrawn, never mutated
        charges[rounds] = reporter.charge
        assert reporter.charge.rounds == rounds
        if name != "dbitflippm" and rounds > 1:
            assert any(not np.array_equal(reports[0], r) for r in reports[1:])  # fresh instantaneous noise
        if name == "dbitflippm":
            assert all(np.array_equal(r, kept) for r in reports)
    assert {c.epsilon_inf for c in charges.values()} == {2.0}
    assert {c.epsilon_1 for c in charges.values()} == {oracle.epsilon_1}
    assert charges[100].against_rounds(100) == 2.0
    assert charges[1].against_rounds(1) == oracle.epsilon_1
    assert "charged once" in charges[100].statement()


def test_memoized_versus_fresh_at_one_budget():
    """eps_inf = 2 over T rounds: fresh GRR at 2 / T every round against L-GRR's memo. At T = 1 the
    fresh oracle (one randomization at the whole budget) is better; at T = 100 the memo is, and the
    fresh one's guarantee against one round is then 100 times smaller."""
    f = np.array([0.4, 0.3, 0.2, 0.1])
    memoized = LongitudinalGRR(2.0, 4)
    one = memoized_versus_fresh(memoized, frequency.get("grr", 2.0, 4), f, 1000, 1)
    assert np.all(one["fresh"]["variance_of_average"] < one["memoized"]["variance_of_average"])
    hundred = memoized_versus_fresh(memoized, frequency.get("grr", 2.0 / 100, 4), f, 1000, 100)
    assert np.all(hundred["memoized"]["variance_of_average"] < hundred["fresh"]["variance_of_average"])
    assert hundred["memoized"]["against_all_rounds"] == hundred["memoized"]["charged"] == 2.0
    assert hundred["fresh"]["against_all_rounds"] == pytest.approx(2.0)
    with pytest.raises(LDPValueError, match="eps_inf / rounds"):
        memoized_versus_fresh(memoized, frequency.get("grr", 1.0, 4), f, 1000, 10)


def test_the_same_secret_gives_the_same_permanent_reports():
    oracle = BasicRAPPOR(2.0, 6)
    categories = np.arange(30) % 6
    first = oracle.memoize(categories, np.random.default_rng([9, 0]))
    again = oracle.memoize(categories, np.random.default_rng([9, 0]))
    other = oracle.memoize(categories, np.random.default_rng([9, 1]))
    np.testing.assert_array_equal(first.permanent, again.permanent)
    assert not np.array_equal(first.permanent, other.permanent)


def test_bad_parameters_fail():
    with pytest.raises(LDPValueError, match="epsilon_1"):
        LongitudinalGRR(1.0, 4, epsilon_1=2.0)
    with pytest.raises(LDPValueError, match="instantaneous"):
        DBitFlipPM(1.0, 4, epsilon_1=0.5)
    with pytest.raises(LDPValueError, match="bits"):
        DBitFlipPM(1.0, 4, bits=5)
    with pytest.raises(LDPValueError, match="Memo"):
        BasicRAPPOR(1.0, 4).report(np.zeros((2, 4), dtype=bool), np.random.default_rng(0))
    assert isinstance(BasicRAPPOR(1.0, 4).memoize([0, 1], np.random.default_rng(0)), Memo)


def test_eps_1_equal_to_eps_inf_leaves_the_least_second_round_noise():
    oracle = LongitudinalOSUE(2.0, 4, epsilon_1=2.0)
    assert oracle.probabilities["q2"] == 2.0**-53
    realized_inf, realized_1 = oracle.realized_epsilons()
    assert realized_1 <= realized_inf <= 2.0


def test_registered_on_the_frequency_registry():
    for name, cls in {**CHAINED, "dbitflippm": DBitFlipPM}.items():
        assert name in frequency.available()
        assert frequency.get_class(name) is cls
    built = frequency.get("l-grr", 2.0, 4, epsilon_1=0.5)
    assert (built.epsilon_inf, built.epsilon_1) == (2.0, 0.5)
    assert frequency.get("dbitflippm", 2.0, 6, bits=2).bits == 2
    with pytest.raises(LDPValueError, match="takes options"):
        frequency.get("rappor", 2.0, 4, bits=2)

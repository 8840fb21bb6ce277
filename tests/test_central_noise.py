"""The central trust model's noise (spec: trust-models.md, Central DP in a federation): the noise on
each round's sum is scaled by the clip that clipped that round, the adaptive clip moves toward the
quantile of UNCLIPPED updates, the noise is ldpfed's floating-point-safe discrete Gaussian from the
server's noise secret, and the accounted eps is dp-accounting's on the multiplier applied.

Flower 1.42's own adaptive wrapper is driven through the same check and shown to fail it (its noise
follows the clip of the next round, and its clip shrinks while every update is clipped)."""

import math

import mpmath
import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant as LibraryRdpAccountant
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS
from flwr.app import ArrayRecord, MetricRecord
from flwr.serverapp.strategy import DifferentialPrivacyServerSideAdaptiveClipping, dp_adaptive_clipping

from ldpfed.accounting import DiscreteGaussianVectorDpEvent
from ldpfed.accounting.central import adaptive_effective_multiplier
from ldpfed.protocols.central import CentralServer, clip_updates
from ldpfed.tasks import resolve
from server.central import CentralServerSideAdaptiveClipping, CentralStrategy, TrainOnlyStrategy, central_strategy

CLIENTS = 100  # all sampled (fraction 1): m = 100 updates a round, count noise sigma_b = 5
SPREAD = 4.5  # tolerances: this many standard errors of the sample standard deviation


def central_server(rounds: int, clipping: str = "adaptive", clip: float = 0.1, fraction: float = 1.0):
    config = resolve(
        None,
        {
            "task": "train",
            "trust": "central",
            "max_epsilon": 20.0,
            "clients": CLIENTS,
            "rounds": rounds,
            "fraction": fraction,
            "clip": clip,
            "clipping": clipping,
        },
    )
    return CentralServer(config, data_seed=0, server_seed=1, noise_secret=2)


class Content(dict):
    """A reply's RecordDict as the wrappers use it: named ArrayRecords, replaceable by name."""

    @property
    def array_records(self) -> dict:
        return dict(self)


class Reply:
    """A client's reply as the wrapper reads it: one ArrayRecord of its local model."""

    def __init__(self, arrays):
        self.content = Content(arrays=ArrayRecord(arrays))

    def has_error(self) -> bool:
        return False


def flat(arrays) -> np.ndarray:
    return np.concatenate([np.asarray(a, dtype=float).ravel() for a in arrays])


def unflat(vector, like):
    splits = np.cumsum([a.size for a in like])[:-1]
    return [part.reshape(a.shape).astype(a.dtype) for part, a in zip(np.split(vector, splits), like)]


def drive(strategy, server, norm: float, rounds: int):
    """`rounds` rounds of the wrapper's aggregation, every client's update of L2 norm `norm` in a fixed
    random direction; per round (clip that clipped, noise measured on the sum, stddev recorded)."""
    rng = np.random.default_rng(11)
    weights = [np.asarray(w) for w in server.weights]
    dims = flat(weights).size
    directions = rng.standard_normal((CLIENTS, dims))
    updates = norm * directions / np.linalg.norm(directions, axis=1, keepdims=True)
    inner = strategy.strategy
    out = []
    for server_round in range(1, rounds + 1):
        clip = float(strategy.clipping_norm)
        inner.current, inner.sampled = ArrayRecord(weights), list(range(CLIENTS))
        strategy.current_arrays = inner.current  # what Flower's configure_train keeps
        current = flat(weights)
        replies = [Reply(unflat(current + u, weights)) for u in updates]
        arrays, _ = strategy.aggregate_train(server_round, replies)
        new = flat(arrays.to_numpy_ndarrays())
        clipped, _ = clip_updates(updates.astype(np.float32).astype(float), clip)
        noise = server.plan.expected_clients * (new - current) - clipped.sum(axis=0)
        recorded = server.rounds[-1]["noise_stddev_of_sum"] if server.rounds else None
        out.append((clip, float(np.std(noise)), recorded))
        weights = arrays.to_numpy_ndarrays()
    return out


def check_noise_follows_clip(rows, multiplier_per_clip: float, dims: int) -> None:
    """Round by round and pooled: the noise's sd on the sum is multiplier_per_clip x the clip that clipped."""
    ratios = np.array([measured / (multiplier_per_clip * clip) for clip, measured, _ in rows])
    error = 1.0 / math.sqrt(2 * dims)  # relative standard error of a sample sd over d coordinates
    assert np.all(np.abs(ratios - 1.0) < SPREAD * error), ratios
    assert abs(ratios.mean() - 1.0) < SPREAD * error / math.sqrt(len(rows)), ratios.mean()


def test_adaptive_noise_is_scaled_by_the_clip_that_clipped_each_round():
    server = central_server(rounds=12)
    strategy = central_strategy(server)
    assert type(strategy) is CentralServerSideAdaptiveClipping
    rows = drive(strategy, server, norm=1.0, rounds=12)  # every update clipped: the clip grows each round
    clips = [clip for clip, _, _ in rows]
    assert all(b > a for a, b in zip(clips, clips[1:]))
    noise = server.plan.noise
    per_clip = noise.stddev_of_sum(1.0)
    grid = noise.update
    assert per_clip == pytest.approx(server.plan.update_multiplier * grid.grid_sensitivity / grid.grid_steps, rel=1e-12)
    assert 1.0 < per_clip / server.plan.update_multiplier < 1.0 + 2.0**-10 + 1e-9  # the grid's inflation
    assert [recorded for _, _, recorded in rows] == pytest.approx([per_clip * clip for clip in clips], rel=1e-12)
    check_noise_follows_clip(rows, per_clip, flat(server.weights).size)


class FixedDenominatorMean(TrainOnlyStrategy):
    """What Flower's wrapper expects inside: the mean of the replies over the expected count m."""

    def __init__(self, m: float) -> None:
        self.m, self.current, self.sampled = m, ArrayRecord(), []

    def configure_train(self, server_round, arrays, config, grid):
        return []

    def aggregate_train(self, server_round, replies):
        current = flat(self.current.to_numpy_ndarrays())
        total = sum(flat(next(iter(r.content.array_records.values())).to_numpy_ndarrays()) - current for r in replies)
        return ArrayRecord(unflat(current + total / self.m, self.current.to_numpy_ndarrays())), MetricRecord({})


def test_flowers_adaptive_wrapper_fails_the_same_check(monkeypatch):
    """The check above can fail: Flower 1.42's wrapper scales the noise with the updated clip C_{t+1}
    and counts clipped updates, so with every update clipped its clip shrinks and its noise is
    exp(-0.1) ~ 0.905 of the sensitivity's each round."""
    server = central_server(rounds=12)
    plan = server.plan
    flower = DifferentialPrivacyServerSideAdaptiveClipping(
        FixedDenominatorMean(plan.expected_clients),
        plan.noise_multiplier,
        plan.expected_clients,
        initial_clipping_norm=plan.clip,
        clipped_count_stddev=plan.count_stddev,
    )
    assert flower.noise_multiplier == pytest.approx(plan.update_multiplier, rel=1e-9)  # the same split
    # Flower draws from numpy's global generator: its two draws are replaced by a seeded Generator's
    rng = np.random.default_rng(5)

    def add_noise(arrays, stdv):
        for array in arrays:
            array += rng.normal(0.0, stdv, array.shape)

    monkeypatch.setattr(dp_adaptive_clipping, "add_gaussian_noise_inplace", add_noise)
    monkeypatch.setattr(
        flower, "_noisy_fraction", lambda count, total: rng.normal(count, flower.clipped_count_stddev) / total
    )
    rows = drive(flower, server, norm=1.0, rounds=12)
    clips = [clip for clip, _, _ in rows]
    assert all(b < a for a, b in zip(clips, clips[1:]))  # the wrong direction: every update is clipped
    with pytest.raises(AssertionError):
        check_noise_follows_clip(rows, plan.update_multiplier, flat(server.weights).size)


@pytest.mark.parametrize("start,norm", [(0.05, 1.0), (20.0, 1.0)])
def test_the_adaptive_clip_converges_to_the_median_norm_from_both_sides(start, norm):
    server = central_server(rounds=60, clip=start)
    rows = drive(central_strategy(server), server, norm=norm, rounds=60)
    clips = np.array([clip for clip, _, _ in rows])
    early = np.diff(clips[:15])
    assert np.all(early > 0) if start < norm else np.all(early < 0)
    assert np.all(np.abs(np.log(clips[-10:] / norm)) < 0.35)  # within ~40% of the median norm, and staying


def test_the_accounted_epsilon_is_dp_accounting_on_the_applied_multiplier():
    rounds = 10
    server = central_server(rounds=rounds)
    strategy = central_strategy(server)
    rows = drive(strategy, server, norm=1.0, rounds=rounds)
    grid = server.plan.noise.update
    applied = rows[0][2] / rows[0][0] / (grid.grid_sensitivity / grid.grid_steps)  # z_u from the noise applied
    effective = adaptive_effective_multiplier(applied, server.plan.count_stddev)
    direct = LibraryRdpAccountant().compose(SelfComposedDpEvent(GaussianDpEvent(effective), rounds))
    spent = server.ledger.max_spent("rdp", 1e-5)
    assert abs(spent.epsilon - direct.get_epsilon(1e-5)) < 1e-6
    assert server.plan.record()["central_epsilon"] == pytest.approx(spent.epsilon, abs=1e-9)
    assert spent.epsilon <= 20.0


def test_sampled_rounds_are_accounted_as_dp_accountings_sampled_gaussian_at_integer_orders():
    rounds = 5
    server = central_server(rounds=rounds, clipping="fixed", fraction=0.3)
    for server_round in range(1, rounds + 1):
        server.record_round(server_round, {"clip": 0.1})
    orders = [order for order in DEFAULT_RDP_ORDERS if order == int(order)]
    direct = LibraryRdpAccountant(orders).compose(
        SelfComposedDpEvent(PoissonSampledDpEvent(0.3, GaussianDpEvent(server.plan.noise_multiplier)), rounds)
    )
    assert abs(server.ledger.max_spent("rdp", 1e-5).epsilon - direct.get_epsilon(1e-5)) < 1e-6


def _lattice_divergences(sigma: float, shift, q: float, alpha: int) -> tuple[float, float]:
    """D_alpha(mixture || base) and D_alpha(base || mixture) of the Poisson-sampled product of
    discrete Gaussians N_Z(0, sigma^2) shifted by the integer vector `shift`, summed exactly on the
    lattice at 40 digits."""
    mpmath.mp.dps = 40
    radius = int(12 * sigma) + 2 * max(abs(s) for s in shift) + 4
    points = range(-radius, radius + 1)

    def masses(v):
        weights = [mpmath.e ** (-(mpmath.mpf(z - v) ** 2) / (2 * sigma**2)) for z in points]
        total = mpmath.fsum(weights)
        return [w / total for w in weights]

    base = [masses(0) for _ in shift]
    moved = [masses(v) for v in shift]

    def joint(tables, index):
        return mpmath.fprod(table[i] for table, i in zip(tables, index))

    import itertools

    forward = backward = mpmath.mpf(0)
    for index in itertools.product(range(len(points)), repeat=len(shift)):
        p0 = joint(base, index)
        mix = (1 - q) * p0 + q * joint(moved, index)
        forward += mix**alpha * p0 ** (1 - alpha)
        backward += p0**alpha * mix ** (1 - alpha)
    return float(mpmath.log(forward) / (alpha - 1)), float(mpmath.log(backward) / (alpha - 1))


@pytest.mark.parametrize(
    "sigma,shift,q", [(0.7, (1,), 0.3), (2.0, (1,), 0.1), (1.5, (2,), 0.8), (1.2, (1, 1), 0.4), (2.5, (2, 1), 0.2)]
)
def test_the_sampled_discrete_gaussian_has_the_continuous_curve_at_integer_orders(sigma, shift, q):
    """The identity the central accounting rests on (ldpfed.accounting.events,
    DiscreteGaussianVectorDpEvent): for an integer shift v and integer alpha the lattice's
    D_alpha(mixture || base) is the continuous sampled Gaussian's at z = sigma / |v|, and
    D_alpha(base || mixture) is below it; fractional orders get no bound."""
    z = sigma / math.sqrt(sum(v * v for v in shift))
    orders = [2.0, 3.0, 5.0, 2.5]
    curve = DiscreteGaussianVectorDpEvent(z, sampling_prob=q).rdp(orders)
    assert math.isinf(curve[-1])
    for alpha, ours in zip(orders[:-1], curve):
        forward, backward = _lattice_divergences(sigma, shift, q, int(alpha))
        library = LibraryRdpAccountant([alpha]).compose(PoissonSampledDpEvent(q, GaussianDpEvent(z)))
        assert ours == pytest.approx(library._rdp[0], rel=1e-12)
        assert forward == pytest.approx(ours, rel=1e-9, abs=1e-14)
        assert backward <= forward * (1 + 1e-12)


def test_central_noise_comes_from_the_servers_secret_never_from_numpys_global_generator(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("numpy's global generator was used")

    monkeypatch.setattr(np.random, "normal", refuse)
    server = central_server(rounds=3, clipping="fixed")
    current = [np.asarray(w) for w in server.weights]
    models = [[w + 0.01 for w in current] for _ in range(5)]
    state = np.random.get_state()
    first, record = server.aggregate(1, current, models, 0.1)
    again, _ = central_server(rounds=3, clipping="fixed").aggregate(1, current, models, 0.1)
    other_config = central_server(rounds=3, clipping="fixed").config
    other, _ = CentralServer(other_config, data_seed=0, server_seed=1, noise_secret=3).aggregate(
        1, current, models, 0.1
    )
    assert all(np.array_equal(a, b) for a, b in zip(first, again))  # the same secret: the same noise
    assert not np.allclose(flat(first), flat(other))  # another secret: other noise
    assert all(np.array_equal(s, t) for s, t in zip(np.random.get_state()[1:], state[1:]))
    assert record["noise_stddev_of_sum"] == pytest.approx(server.plan.noise.stddev_of_sum(0.1))
    assert isinstance(central_strategy(server).strategy, CentralStrategy)


def test_who_is_sampled_comes_from_the_servers_secret_not_the_public_run_seed():
    """Amplification by Poisson sampling holds only against a party that cannot re-draw the sample:
    the same run seed with another noise secret samples other clients; the same secret, the same."""
    server = central_server(rounds=3, clipping="fixed", fraction=0.3)
    again = CentralServer(server.config, data_seed=0, server_seed=1, noise_secret=2)
    other = CentralServer(server.config, data_seed=0, server_seed=1, noise_secret=3)
    rounds = range(1, 4)
    assert [server.sample(r) for r in rounds] == [again.sample(r) for r in rounds]
    assert [server.sample(r) for r in rounds] != [other.sample(r) for r in rounds]

"""The noise figures of `compare --trust` (simulations.trust_compare.figures) against the measured
spread of what each trust model releases: local training's privatized updates (the m-of-d mask and
its d/m scale included), the mean task's per-dimension estimates, and the central server's noise.

Each figure is a variance per coordinate of the aggregate; the Monte Carlo statistic is the mean
square of the aggregate's noise in one repetition (its expectation is that variance exactly), and
the tolerance is four standard errors of its mean over the repetitions, measured."""

import math

import numpy as np
import pytest

from ldpfed.mechanisms.multidim import mean_estimate
from ldpfed.protocols import seeds
from ldpfed.protocols.mean import collect_sums
from ldpfed.protocols.mean import mechanism as mean_mechanism
from ldpfed.protocols.session import World
from ldpfed.protocols.train import federated_data
from ldpfed.protocols.train import privatizer as train_privatizer
from ldpfed.tasks import resolve
from simulations.trust import CentralRun
from simulations.trust_compare import figures


def _within(statistics: np.ndarray, predicted: float) -> None:
    mean, standard_error = statistics.mean(), statistics.std(ddof=1) / math.sqrt(statistics.size)
    assert abs(mean - predicted) <= 4 * standard_error, (mean, predicted, standard_error)


def test_local_training_noise_on_the_mean_is_the_privatized_updates_spread():
    # digits logreg: d = 650 coordinates, eps 0.2 per round -> m = 1 reported coordinate scaled by 650
    config = resolve(
        None,
        {"task": "train", "data": "digits", "model": "logreg", "clients": 20, "epsilon": 0.2, "coordinate_clip": 0.05},
    )
    dims = 650
    row = figures(config, {"parameters": dims, "final_accuracy": 0.1}, "local")
    privatizer = train_privatizer(config)
    sizes = np.asarray(federated_data(config, seeds.data_seed(config.run.seed)).client_sizes, dtype=float)
    p = sizes / sizes.sum()
    clean = np.full((config.federation.clients, dims), privatizer.clip)  # |t| = 1: Laplace's worst case
    root = np.random.SeedSequence(2024)
    statistics = []
    for child in root.spawn(300):
        rngs = [np.random.default_rng(s) for s in child.spawn(config.federation.clients)]
        noise = p @ (privatizer.privatize_rows(clean, rngs) - clean)
        statistics.append(np.mean(noise**2))
    _within(np.asarray(statistics), row["noise_sd_on_mean"] ** 2)
    # the noise added to one reported value, before the server's d/m rescaling
    assert row["noise_sd"] == pytest.approx(privatizer.clip * math.sqrt(200.0), rel=0.01)  # Laplace b = 2/0.2


def test_mean_task_noise_on_the_mean_counts_the_reports_per_dimension():
    # 2 of 4 dimensions per user: each dimension's estimate averages about users / 2 reports
    config = resolve(None, {"task": "mean", "users": 4000, "dims": 4, "report_dims": 2, "epsilon": 1.0})
    row = figures(config, {"mean_mse_over_rounds": 0.0}, "local")
    mechanism = mean_mechanism(config)
    values = np.full((4000, 4), 0.5)
    statistics = []
    for child in np.random.SeedSequence(7).spawn(200):
        estimate = mean_estimate(collect_sums(values, mechanism, 2, child))
        statistics.append(np.mean((estimate - 0.5) ** 2))
    _within(np.asarray(statistics), row["noise_sd_on_mean"] ** 2)
    assert row["noise_sd"] ** 2 == pytest.approx(float(mechanism.variance(0.5)), rel=1e-9)  # Laplace: any value


@pytest.mark.parametrize("clipping,clients", [("fixed", 20), ("adaptive", 100)])
def test_central_noise_on_the_mean_is_what_the_server_adds(clipping, clients):
    config = resolve(
        None,
        {"task": "train", "trust": "central", "max_epsilon": 3.0, "rounds": 4, "clients": clients,
         "fraction": 0.5, "clipping": clipping, "clip": 1.0},
    )  # fmt: skip
    run = CentralRun(config, World.from_config(config, 0), None, None)
    row = figures(config, run.summary(interrupted=False), "central")
    # no client replies: the model's change is the noise on the mean; 200 rounds of d = 650
    # coordinates make the relative standard error of the measured sd 0.2%, so 1% is five of them
    current = [np.asarray(w, dtype=float) for w in run.server.weights]
    flat = np.concatenate([w.ravel() for w in current])
    changes = [
        np.concatenate([w.ravel() for w in run.server.aggregate(r, current, [], 1.0)[0]]) - flat for r in range(200)
    ]
    assert np.sqrt(np.mean(np.square(changes))) == pytest.approx(row["noise_sd_on_mean"], rel=0.01)

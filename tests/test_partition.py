"""Client partitions (federated.md, Clients, partitions): disjoint, covering, non-empty,
label skew as designed, deterministic from the seed, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.data.partition import PARTITION_SCHEMES, partition
from ldpfed.validation import LDPValueError

CLASSES = 10


def _labels(per_class: int = 200, seed: int = 0) -> np.ndarray:
    """Balanced labels in shuffled order, plus a few extra of class 0 (unequal class sizes)."""
    labels = np.concatenate([np.repeat(np.arange(CLASSES), per_class), np.zeros(7, dtype=int)])
    return np.random.default_rng(seed).permutation(labels)


def _check_valid(parts: list[np.ndarray], n: int, num_clients: int) -> None:
    assert len(parts) == num_clients
    assert all(part.size > 0 for part in parts)
    joined = np.concatenate(parts)
    assert joined.size == n  # disjoint ...
    assert np.array_equal(np.sort(joined), np.arange(n))  # ... and covering


def _mean_label_tv(labels: np.ndarray, parts: list[np.ndarray]) -> float:
    """Mean total-variation distance between each client's label distribution and the global one."""
    global_p = np.bincount(labels, minlength=CLASSES) / labels.size
    return float(
        np.mean([0.5 * np.abs(np.bincount(labels[p], minlength=CLASSES) / p.size - global_p).sum() for p in parts])
    )


@pytest.mark.parametrize("scheme", PARTITION_SCHEMES)
@pytest.mark.parametrize("num_clients", [5, 7, 10, 40])
def test_partitions_are_disjoint_covering_and_non_empty(scheme, num_clients):
    labels = _labels()
    parts = partition(labels, num_clients, scheme, np.random.default_rng(3), alpha=0.3)
    _check_valid(parts, labels.size, num_clients)


@pytest.mark.parametrize("scheme", ["iid", "dirichlet"])
def test_a_single_client_gets_everything(scheme):
    labels = _labels()
    _check_valid(partition(labels, 1, scheme, np.random.default_rng(0)), labels.size, 1)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_k_classes_gives_at_most_k_classes_per_client(k):
    labels = _labels()
    parts = partition(labels, 20, "k-classes", np.random.default_rng(1), classes_per_client=k)
    _check_valid(parts, labels.size, 20)
    counts = [np.unique(labels[p]).size for p in parts]
    assert max(counts) <= k
    assert min(counts) >= 1


def test_dirichlet_repairs_empty_clients_when_skew_is_extreme():
    labels = _labels(per_class=10)
    parts = partition(labels, 60, "dirichlet", np.random.default_rng(0), alpha=0.01)
    _check_valid(parts, labels.size, 60)


def test_label_skew_statistic_orders_the_schemes():
    """Under iid, a client of n_k samples has E[TV] <= 0.5 sum_c sqrt(p_c (1-p_c) / n_k) (Jensen on the
    multinomial; sampling without replacement is tighter still). Dirichlet(0.1) and 2 classes per
    client must be far above that bound; Dirichlet(100) close to iid."""
    labels = _labels()
    clients = 10
    p = np.bincount(labels) / labels.size
    n_k = labels.size // clients
    iid_bound = 0.5 * np.sum(np.sqrt(p * (1 - p) / n_k))
    tv = {
        name: _mean_label_tv(labels, partition(labels, clients, scheme, np.random.default_rng(5), alpha=alpha))
        for name, scheme, alpha in [
            ("iid", "iid", 0.5),
            ("dir0.1", "dirichlet", 0.1),
            ("dir100", "dirichlet", 100.0),
            ("k2", "k-classes", 0.5),
        ]
    }
    assert tv["iid"] <= iid_bound
    assert tv["dir100"] <= 2 * iid_bound
    assert tv["dir0.1"] > 3 * iid_bound
    # Two classes of ten: each client's distribution puts mass 1 on two classes of global mass ~0.2.
    assert tv["k2"] > 0.7


@pytest.mark.parametrize("scheme", PARTITION_SCHEMES)
def test_partition_is_deterministic_in_the_seed(scheme):
    labels = _labels()
    first = partition(labels, 10, scheme, np.random.default_rng(42))
    again = partition(labels, 10, scheme, np.random.default_rng(42))
    other = partition(labels, 10, scheme, np.random.default_rng(43))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(num_clients=5, scheme="shards"), "unknown partition scheme"),
        (dict(num_clients=0, scheme="iid"), "num_clients"),
        (dict(num_clients=10_000, scheme="iid"), "num_clients must be <="),
        (dict(num_clients=3, scheme="k-classes", classes_per_client=2), "num_clients \\* classes_per_client"),
        (dict(num_clients=3, scheme="k-classes", classes_per_client=0), "classes_per_client"),
        (
            dict(num_clients=3, scheme="k-classes", classes_per_client=11),
            "at most the data's number of classes \\(10\\)",
        ),
        (dict(num_clients=3, scheme="dirichlet", alpha=0.0), "alpha"),
        (dict(num_clients=3, scheme="dirichlet", alpha=float("nan")), "alpha"),
    ],
)
def test_bad_partition_arguments_raise(kwargs, match):
    with pytest.raises(LDPValueError, match=match):
        partition(_labels(), rng=np.random.default_rng(0), **kwargs)


def test_empty_labels_raise():
    with pytest.raises(LDPValueError, match="labels"):
        partition(np.array([], dtype=int), 2, "iid", np.random.default_rng(0))

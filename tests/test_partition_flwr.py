"""ldpfed's partitioners against flwr-datasets 0.6.1 (the optional extra `flwr-datasets`), offline.

For the same labels and seed (flwr-datasets' `seed`, ldpfed's `np.random.default_rng(seed)`), each
native partitioner must give every client exactly the indices flwr-datasets gives it: the
definitions draw the same random numbers in the same order (the order within a client, which
flwr-datasets shuffles, is not compared; ldpfed sorts). Label counts are compared through
flwr-datasets' own `metrics.compute_counts`. flwr-datasets runs here directly, as the reference;
the adapter `flwr:NAME[:ARGS]` is then checked against the same reference, with sockets closed.
"""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest

os.environ["HF_DATASETS_OFFLINE"] = "1"  # before `datasets` is imported: no hub look-ups
os.environ["HF_HUB_OFFLINE"] = "1"
partitioners = pytest.importorskip(
    "flwr_datasets.partitioner", reason="flwr-datasets (the optional extra flwr-datasets) is not installed"
)
datasets = pytest.importorskip("datasets")
from flwr_datasets.metrics import compute_counts  # noqa: E402

from ldpfed.data.partition import balanced_sizes, partition  # noqa: E402
from ldpfed.data.partition_counts import label_counts  # noqa: E402

CLIENTS = 8
POSITION = "position"


def _labels(seed: int = 0) -> np.ndarray:
    """10 classes of unequal sizes (40..130 samples) in random order: 850 samples."""
    labels = np.repeat(np.arange(10), np.arange(40, 140, 10))
    return np.random.default_rng(seed).permutation(labels)


def _reference(partitioner, labels: np.ndarray, columns: dict | None = None) -> list[np.ndarray]:
    """flwr-datasets' partitions as sorted index arrays."""
    table = {"label": labels, POSITION: np.arange(labels.size), **(columns or {})}
    partitioner.dataset = datasets.Dataset.from_dict(table)
    return [np.sort(np.asarray(partitioner.load_partition(pid)[POSITION])) for pid in range(partitioner.num_partitions)]


def _assert_same(ours: list[np.ndarray], theirs: list[np.ndarray]) -> None:
    assert len(ours) == len(theirs)
    for pid, (mine, reference) in enumerate(zip(ours, theirs)):
        assert np.array_equal(mine, reference), f"client {pid}: {mine.size} vs {reference.size} samples"


CASES = {
    "inner-dirichlet 0.3": (
        lambda s: partitioners.InnerDirichletPartitioner(
            partition_sizes=balanced_sizes(850, CLIENTS).tolist(), partition_by="label", alpha=0.3, seed=s
        ),
        dict(scheme="inner-dirichlet", alpha=0.3),
    ),
    "inner-dirichlet 5": (
        lambda s: partitioners.InnerDirichletPartitioner(
            partition_sizes=balanced_sizes(850, CLIENTS).tolist(), partition_by="label", alpha=5, seed=s
        ),
        dict(scheme="inner-dirichlet:5"),
    ),
    **{
        f"pathological {k} {mode}": (
            lambda s, k=k, mode=mode: partitioners.PathologicalPartitioner(
                num_partitions=CLIENTS,
                partition_by="label",
                num_classes_per_partition=k,
                class_assignment_mode=mode,
                seed=s,
            ),
            dict(scheme=f"pathological:{k},mode={mode}"),
        )
        for k in (1, 2, 5)
        for mode in ("random", "deterministic", "first-deterministic")
    },
    "shard 2 per client": (
        lambda s: partitioners.ShardPartitioner(
            num_partitions=CLIENTS, partition_by="label", num_shards_per_partition=2, seed=s
        ),
        dict(scheme="shard", classes_per_client=2),
    ),
    "shard 3 per client, keep incomplete": (
        lambda s: partitioners.ShardPartitioner(
            num_partitions=CLIENTS, partition_by="label", num_shards_per_partition=3, keep_incomplete_shard=True, seed=s
        ),
        dict(scheme="shard:3,keep-incomplete=true"),
    ),
    "shard of 30": (
        lambda s: partitioners.ShardPartitioner(num_partitions=CLIENTS, partition_by="label", shard_size=30, seed=s),
        dict(scheme="shard:size=30"),
    ),
    "shard of 30, keep incomplete": (
        lambda s: partitioners.ShardPartitioner(
            num_partitions=CLIENTS, partition_by="label", shard_size=30, keep_incomplete_shard=True, seed=s
        ),
        dict(scheme="shard:size=30,keep-incomplete=true"),
    ),
    "shard 2 of 40": (
        lambda s: partitioners.ShardPartitioner(
            num_partitions=CLIENTS, partition_by="label", num_shards_per_partition=2, shard_size=40, seed=s
        ),
        dict(scheme="shard:shards=2,size=40"),
    ),
    "linear": (lambda s: partitioners.LinearPartitioner(num_partitions=CLIENTS), dict(scheme="size:linear")),
    "square": (lambda s: partitioners.SquarePartitioner(num_partitions=CLIENTS), dict(scheme="size:square")),
    "exponential": (  # 8 clients would leave the first empty (e / sum e^i * 850 < 1)
        lambda s: partitioners.ExponentialPartitioner(num_partitions=6),
        dict(scheme="size:exponential", num_clients=6),
    ),
    "id to size": (
        lambda s: partitioners.IdToSizeFncPartitioner(num_partitions=CLIENTS, partition_id_to_size_fn=np.sqrt),
        dict(scheme="size", size_fn=np.sqrt),
    ),
}


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("case", sorted(CASES))
def test_native_partitioners_give_flwr_datasets_clients(case, seed):
    make, arguments = CASES[case]
    labels = _labels(seed)
    reference = make(seed)
    theirs = _reference(reference, labels)
    ours = partition(labels, rng=np.random.default_rng(seed), **{"num_clients": CLIENTS, **arguments})
    _assert_same(ours, theirs)
    counts = compute_counts(reference, column_name="label")
    counts = counts.reindex(columns=sorted(counts.columns), fill_value=0)
    assert np.array_equal(label_counts(labels, ours).to_numpy(), counts.to_numpy())


def test_natural_id_gives_flwr_datasets_clients():
    labels = _labels()
    writers = np.random.default_rng(1).choice(np.array([f"w{i:02d}" for i in range(CLIENTS)]), labels.size)
    theirs = _reference(partitioners.NaturalIdPartitioner(partition_by="writer"), labels, {"writer": writers})
    ours = partition(labels, CLIENTS, "natural-id:writer", np.random.default_rng(0), columns={"writer": writers})
    _assert_same(ours, theirs)


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection fails: a download attempt would raise."""

    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize(
    ("spec", "make"),
    [
        (
            "flwr:DirichletPartitioner:alpha=0.5,min_partition_size=5,seed=3",
            lambda: partitioners.DirichletPartitioner(
                num_partitions=CLIENTS, partition_by="label", alpha=0.5, min_partition_size=5, seed=3
            ),
        ),
        (
            "flwr:inner-dirichlet:alpha=0.3,seed=3",
            lambda: partitioners.InnerDirichletPartitioner(
                partition_sizes=balanced_sizes(850, CLIENTS).tolist(), partition_by="label", alpha=0.3, seed=3
            ),
        ),
        (
            "flwr:pathological:num-classes-per-partition=2,seed=3",
            lambda: partitioners.PathologicalPartitioner(
                num_partitions=CLIENTS, partition_by="label", num_classes_per_partition=2, seed=3
            ),
        ),
        ("flwr:iid", lambda: partitioners.IidPartitioner(num_partitions=CLIENTS)),
    ],
)
def test_the_flwr_adapter_hands_any_partitioner_ldpfeds_data_offline(no_network, spec, make):
    labels = _labels()
    ours = partition(labels, CLIENTS, spec, np.random.default_rng(0))
    _assert_same(ours, _reference(make(), labels))


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("flwr:nosuch", "no such flwr-datasets partitioner"),
        ("flwr:iid:bogus=1", "IidPartitioner takes no bogus"),
        ("flwr:pathological:num_classes_per_partition=11", "greater than the number of unique classes"),
        ("flwr:natural-id:partition_by=writer", "makes 850 partitions|writer"),
    ],
)
def test_the_flwr_adapters_errors_are_one_line(spec, match):
    from ldpfed.validation import LDPValueError

    with pytest.raises(LDPValueError, match=match) as error:
        partition(_labels(), CLIENTS, spec, np.random.default_rng(0))
    assert "\n" not in str(error.value)

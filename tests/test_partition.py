"""Client partitions (federated.md, Clients, partitions): disjoint, covering, non-empty,
label skew as designed, deterministic from the seed, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from ldpfed.data.partition import PARTITION_SCHEMES, check_scheme, parse_scheme, partition
from ldpfed.data.partition_counts import label_count_files, label_counts
from ldpfed.validation import LDPValueError

CLASSES = 10
COVERING = ("iid", "k-classes", "dirichlet", "inner-dirichlet", "size")  # every sample placed
RANDOM = ("iid", "k-classes", "dirichlet", "inner-dirichlet", "pathological", "shard")


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


def test_every_scheme_is_tested():
    assert set(PARTITION_SCHEMES) == {*COVERING, *RANDOM, "natural-id"}


@pytest.mark.parametrize("scheme", COVERING)
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


@pytest.mark.parametrize("scheme", RANDOM)
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


# --- flwr-datasets' definitions (their parity with flwr-datasets: test_partition_flwr.py) ---------
def _check_disjoint(parts: list[np.ndarray], n: int) -> np.ndarray:
    joined = np.concatenate(parts)
    assert all(part.size > 0 for part in parts)
    assert np.unique(joined).size == joined.size and joined.max() < n
    return joined


def test_inner_dirichlet_has_balanced_sizes_and_label_skew():
    labels = _labels()
    parts = partition(labels, 10, "inner-dirichlet", np.random.default_rng(2), alpha=0.1)
    _check_valid(parts, labels.size, 10)
    assert max(p.size for p in parts) - min(p.size for p in parts) <= 1
    n_k = labels.size // 10
    p = np.bincount(labels) / labels.size
    iid_bound = 0.5 * np.sum(np.sqrt(p * (1 - p) / n_k))  # as in the ordering test above
    assert _mean_label_tv(labels, parts) > 3 * iid_bound


@pytest.mark.parametrize("mode", ["random", "deterministic", "first-deterministic"])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_pathological_gives_exactly_k_classes(mode, k):
    labels = _labels()
    parts = partition(labels, 12, f"pathological:{k},mode={mode}", np.random.default_rng(4))
    _check_disjoint(parts, labels.size)
    assert [np.unique(labels[p]).size for p in parts] == [k] * 12


def test_pathological_deterministic_classes_follow_the_client_id():
    labels = _labels()
    parts = partition(labels, 12, "pathological:classes=2,mode=deterministic", np.random.default_rng(0))
    assert [sorted(np.unique(labels[p]).tolist()) for p in parts[:3]] == [[0, 1], [1, 2], [2, 3]]
    assert sorted(np.unique(labels[parts[9]]).tolist()) == [0, 9]


def test_shards_are_label_sorted_blocks_that_may_straddle_classes():
    """100 samples of 4 classes, 5 clients x 2 shards of 10: each client holds two whole blocks of
    the label-sorted data; blocks 2 and 7 hold two classes (boundaries at 25 and 75)."""
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(4), 25))
    parts = partition(labels, 5, "shard", np.random.default_rng(0), classes_per_client=2)
    assert _check_disjoint(parts, labels.size).size == 100
    rank = np.empty(100, dtype=int)
    rank[np.argsort(labels, kind="stable")] = np.arange(100)
    blocks = [np.unique(rank[p] // 10, return_counts=True) for p in parts]
    assert all(ids.size == 2 and np.all(counts == 10) for ids, counts in blocks)
    in_sorted_order = np.sort(labels)
    two_classes = {b for b in range(10) if np.unique(in_sorted_order[b * 10 : b * 10 + 10]).size == 2}
    assert two_classes == {2, 7}


def test_shard_size_alone_sets_the_number_of_shards():
    labels = _labels()  # 2007 samples: 20 shards of 100, 7 left out
    parts = partition(labels, 6, "shard:size=100", np.random.default_rng(0))
    assert sorted(p.size for p in parts) == [300, 300, 300, 300, 400, 400]
    kept = partition(labels, 6, "shard:size=100,keep-incomplete=true", np.random.default_rng(0))
    assert sum(p.size for p in kept) == labels.size


@pytest.mark.parametrize(
    ("kind", "weights"),
    [("linear", np.arange(1, 6.0)), ("square", np.arange(1, 6.0) ** 2), ("exponential", np.exp(np.arange(1, 6.0)))],
)
def test_size_skew_shares_follow_the_client_id(kind, weights):
    labels = _labels()
    parts = partition(labels, 5, f"size:{kind}", np.random.default_rng(0))
    _check_valid(parts, labels.size, 5)
    expected = np.floor(weights / weights.sum() * labels.size)
    assert np.array_equal([p.size for p in parts[:-1]], expected[:-1])
    assert np.array_equal(np.concatenate(parts), np.arange(labels.size))  # contiguous, in order


def test_size_takes_an_id_to_size_function():
    parts = partition(_labels(), 4, "size", np.random.default_rng(0), size_fn=lambda ids: np.sqrt(ids))
    weights = np.sqrt(np.arange(1, 5.0))
    assert parts[0].size == int(weights[0] / weights.sum() * 2007)


def test_natural_id_gives_each_id_its_client():
    labels = _labels()
    writers = np.random.default_rng(0).choice(np.array(["ann", "bob", "cy"]), labels.size)
    parts = partition(labels, 3, "natural-id:writer", np.random.default_rng(0), columns={"writer": writers})
    _check_valid(parts, labels.size, 3)
    assert [set(writers[p]) for p in parts] == [{"ann"}, {"bob"}, {"cy"}]


def test_label_counts_are_the_clients_label_histograms():
    labels = _labels()
    parts = partition(labels, 7, "pathological:2", np.random.default_rng(1))
    counts = label_counts(labels, parts)
    assert counts.shape == (7, CLASSES) and counts.index.name == "partition_id"
    for pid, part in enumerate(parts):
        assert np.array_equal(counts.loc[pid].to_numpy(), np.bincount(labels[part], minlength=CLASSES))
    files = label_count_files(counts)
    table = files["label_counts.csv"]
    assert list(table.columns) == ["partition_id", "label", "count"] and table["count"].sum() == counts.to_numpy().sum()
    assert hasattr(files["label_counts.png"], "savefig")


def test_scheme_arguments_parse_and_check():
    assert parse_scheme("Shard:size=30,keep_incomplete=yes") == ("shard", {"size": "30", "keep-incomplete": "yes"})
    assert parse_scheme("flwr:DirichletPartitioner:alpha=0.3") == (
        "flwr",
        {"name": "DirichletPartitioner", "args": "alpha=0.3"},
    )
    assert check_scheme("pathological:3") == "pathological:3"
    for bad, match in [("shard:bogus=1", "no argument 'bogus'"), ("pathological:two", "classes must be int")]:
        with pytest.raises(LDPValueError, match=match):
            check_scheme(bad)


@pytest.mark.parametrize(
    ("scheme", "kwargs", "match"),
    [
        ("pathological:11", {}, "more than the data's number of classes \\(10\\)"),
        ("pathological:2,mode=sorted", {}, "mode must be one of"),
        ("pathological:2", {"num_clients": 1500}, "held by .* clients but has"),
        ("inner-dirichlet", {"alpha": 0.0}, "alpha .* must be > 0"),
        ("inner-dirichlet:-1", {}, "alpha .* must be > 0"),
        ("inner-dirichlet:0.001", {"num_clients": 50}, "left a client no weight"),
        ("dirichlet:0", {}, "alpha"),
        ("natural-id:writer", {}, "no column 'writer'"),
        ("natural-id", {"columns": {"w": np.zeros(2007)}}, "name the column .* natural-id:COLUMN \\(columns: w\\)"),
        ("natural-id:w", {"columns": {"w": np.arange(2007) % 4}}, "names 4 clients, not num_clients=5"),
        ("shard:shards=500", {}, "more than the 2007 samples"),
        ("shard:size=1000", {}, "cannot give each of 5 clients one"),
        ("size:exponential", {"num_clients": 50}, "leave some client empty"),
        ("size:cubic", {}, "kind must be one of"),
    ],
)
def test_bad_arguments_of_the_new_schemes_raise_one_line(scheme, kwargs, match):
    arguments = {"num_clients": 5, **kwargs}
    with pytest.raises(LDPValueError, match=match) as error:
        partition(_labels(), scheme=scheme, rng=np.random.default_rng(0), **arguments)
    assert "\n" not in str(error.value)


def test_a_training_run_writes_each_clients_label_counts(tmp_path):
    """`--partition pathological:2`: label_counts.csv (and its plot) in the run's output, each client
    holding at most 2 classes, the counts adding up to the clients' training examples."""
    import pandas as pd
    from typer.testing import CliRunner

    from ldpfed.cli.main import app
    from ldpfed.data.federated import load_federated
    from ldpfed.protocols.seeds import data_seed

    out = tmp_path / "run"
    arguments = ["simulate", "--task", "train", "--engine", "local", "--rounds", "1", "--clients", "4"]
    arguments += ["--mechanism", "none", "--partition", "pathological:2", "--out", str(out)]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    counts = pd.read_csv(out / "label_counts.csv").pivot(index="partition_id", columns="label", values="count")
    assert (out / "label_counts.png").stat().st_size > 0
    assert ((counts > 0).sum(axis=1) <= 2).all()
    data = load_federated("digits", 4, partition="pathological:2", seed=data_seed(0))  # the run seed's data
    assert counts.sum(axis=1).tolist() == data.client_sizes

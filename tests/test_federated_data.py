"""Federated data sets (federated.md, Clients, partitions): FedProx synthetic, digits, and the
MNIST / CIFAR-10 readers on tiny fake files in the official formats; never a download."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest

from ldpfed.data.federated import FEDPROX_MAX_SAMPLES, FEDPROX_MIN_SAMPLES, load_federated
from ldpfed.validation import LDPValueError

Z = 5.0


# --- fake files in the official formats ----------------------------------------------------------
def _write_idx(path, array: np.ndarray, compress: bool) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, dtype=">i4").tobytes()
    data = header + array.astype(np.uint8).tobytes()
    if compress:
        with gzip.open(str(path) + ".gz", "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)


def _fake_mnist(folder, rng, compress=False, n_train=40, n_test=12):
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28)),
        "train-labels-idx1-ubyte": np.arange(n_train) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28)),
        "t10k-labels-idx1-ubyte": np.arange(n_test) % 10,
    }
    for name, array in arrays.items():
        _write_idx(folder / name, array, compress)
    return arrays


def _fake_cifar(folder, rng, rows=6, test_rows=4):
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        n = test_rows if name == "test_batch" else rows
        batch = {b"data": rng.integers(0, 256, (n, 3072)).astype(np.uint8), b"labels": list(rng.integers(0, 10, n))}
        with open(folder / name, "wb") as handle:
            pickle.dump(batch, handle)
        batches[name] = batch
    return batches


# --- synthetic-fedprox ---------------------------------------------------------------------------
def test_fedprox_shapes_natural_partition_and_sizes():
    data = load_federated("synthetic-fedprox", 30, seed=2)
    assert data.input_shape == (60,) and data.num_classes == 10 and data.num_clients == 30
    assert data.partition == "natural"
    for k in range(data.num_clients):
        x, y = data.client(k)
        assert x.dtype == np.float32 and y.dtype == np.int64 and x.shape == (y.size, 60)
        # device size in [50, 1000], 80% of it for training
        assert int(0.8 * FEDPROX_MIN_SAMPLES) <= y.size <= int(0.8 * FEDPROX_MAX_SAMPLES) + 1
        assert y.min() >= 0 and y.max() <= 9
    test_x, test_y = data.test
    assert test_x.shape == (test_y.size, 60)
    # the test set is a held-out slice of each device: ~20% of all samples
    total = test_y.size + sum(data.client_sizes)
    assert abs(test_y.size / total - 0.2) < 30 / total + 0.01


def test_fedprox_feature_covariance_is_j_power_minus_1_2():
    """Within a device, Var(x_j) = j^-1.2; the sample variance has SE sqrt(2/(n-1)) * sigma_j^2."""
    data = load_federated("synthetic-fedprox", 40, seed=0)
    k = int(np.argmax(data.client_sizes))
    x, _ = data.client(k)
    n = x.shape[0]
    expected = np.arange(1, 61) ** -1.2
    observed = x.astype(float).var(axis=0, ddof=1)
    assert n >= 200
    assert np.all(np.abs(observed - expected) <= Z * np.sqrt(2.0 / (n - 1)) * expected)


def test_fedprox_is_reproducible_and_heterogeneity_matters():
    a = load_federated("synthetic-fedprox", 5, seed=7)
    b = load_federated("synthetic-fedprox", 5, seed=7)
    c = load_federated("synthetic-fedprox", 5, seed=7, fedprox_alpha=0.0, fedprox_beta=0.0)
    assert np.array_equal(a.client(3)[0], b.client(3)[0]) and np.array_equal(a.test[1], b.test[1])
    assert not np.array_equal(a.client(0)[0], c.client(0)[0])


def test_fedprox_rejects_other_partitions():
    with pytest.raises(LDPValueError, match="natural"):
        load_federated("synthetic-fedprox", 5, partition="dirichlet")


# --- digits --------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["iid", "k-classes", "dirichlet"])
def test_digits_split_and_partition(scheme):
    data = load_federated("digits", 10, partition=scheme, seed=1, test_fraction=0.25)
    assert data.input_shape == (1, 8, 8) and data.num_classes == 10
    test_x, test_y = data.test
    assert test_y.size == round(0.25 * 1797)
    assert sum(data.client_sizes) + test_y.size == 1797
    xs = [data.client(k)[0] for k in range(10)]
    assert all(x.shape[1:] == (1, 8, 8) for x in xs)
    pooled = np.concatenate(xs)
    assert pooled.min() >= 0.0 and pooled.max() <= 1.0 and pooled.max() == 1.0
    if scheme == "k-classes":
        assert max(np.unique(data.client(k)[1]).size for k in range(10)) <= 2


def test_digits_seed_changes_split():
    a, b = load_federated("digits", 4, seed=0), load_federated("digits", 4, seed=1)
    assert not np.array_equal(a.test[1], b.test[1])
    assert np.array_equal(a.client(2)[1], load_federated("digits", 4, seed=0).client(2)[1])


# --- MNIST ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("layout", [".", "MNIST/raw"])
def test_mnist_idx_files(tmp_path, compress, layout):
    arrays = _fake_mnist(tmp_path / layout, np.random.default_rng(0), compress=compress)
    data = load_federated("mnist", 4, data_dir=tmp_path, seed=0)
    assert data.input_shape == (1, 28, 28) and data.num_classes == 10
    test_x, test_y = data.test
    np.testing.assert_allclose(test_x[:, 0], arrays["t10k-images-idx3-ubyte"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(test_y, arrays["t10k-labels-idx1-ubyte"])
    pooled_x, pooled_y = data.train_data()
    np.testing.assert_allclose(pooled_x[:, 0], arrays["train-images-idx3-ubyte"] / 255.0, rtol=1e-6)
    # every client's rows are rows of the training set with their own labels
    x0, y0 = data.client(0)
    np.testing.assert_array_equal(x0, pooled_x[data.parts[0]])
    np.testing.assert_array_equal(y0, arrays["train-labels-idx1-ubyte"][data.parts[0]])


def test_mnist_npz(tmp_path):
    rng = np.random.default_rng(1)
    x_train, x_test = (
        rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
        rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
    )
    np.savez(tmp_path / "mnist.npz", x_train=x_train, y_train=np.arange(20) % 10, x_test=x_test, y_test=np.arange(5))
    data = load_federated("mnist", 2, data_dir=tmp_path)
    np.testing.assert_allclose(data.test[0][:, 0], x_test / 255.0, rtol=1e-6)
    assert sum(data.client_sizes) == 20


def test_mnist_truncated_file_is_a_clear_error(tmp_path):
    _fake_mnist(tmp_path, np.random.default_rng(0))
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(LDPValueError, match="truncated"):
        load_federated("mnist", 2, data_dir=tmp_path)


# --- CIFAR-10 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("nested", [True, False])
def test_cifar10_python_batches(tmp_path, nested):
    folder = tmp_path / "cifar-10-batches-py" if nested else tmp_path
    batches = _fake_cifar(folder, np.random.default_rng(2))
    data = load_federated("cifar10", 3, data_dir=tmp_path)
    assert data.input_shape == (3, 32, 32)
    test_x, test_y = data.test
    raw = batches["test_batch"][b"data"]
    # channel-major layout: pixel (c, r, col) is raw[c*1024 + r*32 + col]
    assert test_x[1, 2, 5, 7] == pytest.approx(raw[1, 2 * 1024 + 5 * 32 + 7] / 255.0)
    np.testing.assert_array_equal(test_y, batches["test_batch"][b"labels"])
    assert sum(data.client_sizes) == 30


def test_cifar10_npz_in_keras_layout(tmp_path):
    rng = np.random.default_rng(3)
    x_train = rng.integers(0, 256, (8, 32, 32, 3), dtype=np.uint8)  # NHWC
    x_test = rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    np.savez(
        tmp_path / "cifar10.npz",
        x_train=x_train,
        y_train=np.arange(8)[:, None],
        x_test=x_test,
        y_test=np.arange(4)[:, None],
    )
    data = load_federated("cifar10", 2, data_dir=tmp_path)
    assert data.test[0][2, 1, 4, 9] == pytest.approx(x_test[2, 4, 9, 1] / 255.0)
    np.testing.assert_array_equal(data.test[1], np.arange(4))


# --- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"), [("mnist", "train-images-idx3-ubyte"), ("cifar10", "cifar-10-batches-py")]
)
def test_missing_files_name_what_to_download(tmp_path, name, expected):
    for data_dir in (tmp_path, None, tmp_path / "absent"):
        with pytest.raises(LDPValueError, match=expected) as info:
            load_federated(name, 2, data_dir=data_dir)
        assert "never downloads" in str(info.value)


def test_npz_missing_arrays(tmp_path):
    np.savez(tmp_path / "mnist.npz", x_train=np.zeros((2, 28, 28), dtype=np.uint8))
    with pytest.raises(LDPValueError, match="y_train"):
        load_federated("mnist", 1, data_dir=tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(name="imagenet", num_clients=2), "unknown federated data set"),
        (dict(name="digits", num_clients=0), "num_clients"),
        (dict(name="digits", num_clients=2, partition="shards"), "unknown partition"),
        (dict(name="digits", num_clients=2, test_fraction=1.0), "test_fraction"),
        (dict(name="synthetic-fedprox", num_clients=2, fedprox_alpha=-1.0), "fedprox_alpha"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(LDPValueError, match=match):
        load_federated(**kwargs)


def test_client_id_out_of_range():
    data = load_federated("digits", 3)
    for bad in (-1, 3, "0", 1.0):
        with pytest.raises(LDPValueError, match="partition_id"):
            data.client(bad)

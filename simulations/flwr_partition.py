"""Any flwr-datasets partitioner over ldpfed's data ("flwr:NAME[:KEY=VALUE,...]"), offline.

A plugin of `ldpfed.data.partition` (entry-point group `ldpfed.partitioners`, name "flwr"), so the
core library never imports a Flower package. flwr-datasets (the optional extra `flwr-datasets`) is
imported only when such a scheme is used. Its partitioners read a Hugging Face `datasets.Dataset`; one is
built in memory from the labels (column "label"), any other columns given (natural-id's client
column) and each sample's position, so nothing is downloaded or cached and the partition comes
back as index arrays like ldpfed's own (`ldpfed.data.partition`).

NAME is a class of `flwr_datasets.partitioner` with or without "Partitioner", in any case, with
"-" or "_" between words ("DirichletPartitioner", "dirichlet", "inner-dirichlet"). ARGS are the
constructor's keywords (kebab or snake case), each value a Python literal or else a string
("alpha=0.3,min_partition_size=5"). Left out: `num_partitions` is the number of clients,
`partition_by` "label", `seed` drawn from the run's generator, `partition_sizes` (inner-Dirichlet)
near-equal sizes.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping

import numpy as np

from ldpfed.data.partition import ForeignPartitioners
from ldpfed.validation import LDPValueError, canonical_name

EXTRA_HELP = "needs flwr-datasets, the optional extra: pip install 'ldpfed[flwr-datasets]'"
LABEL, POSITION = "label", "ldpfed_position"


def _module():
    try:
        import flwr_datasets.partitioner as partitioners
    except ImportError:
        raise LDPValueError(f"partition flwr:...: {EXTRA_HELP}") from None
    return partitioners


def _key(name: str) -> str:
    return canonical_name(name).replace("-", "").removesuffix("partitioner")


def partitioner_class(name: str):
    """The flwr-datasets partitioner class called `name` (see the module docstring)."""
    module = _module()
    found = (getattr(module, name) for name in module.__all__ if name != "Partitioner")
    classes = {_key(cls.__name__): cls for cls in found}
    if _key(name) not in classes:
        known = ", ".join(sorted(cls.__name__ for cls in classes.values()))
        raise LDPValueError(f"partition flwr:{name}: no such flwr-datasets partitioner; available: {known}")
    return classes[_key(name)]


def parse_arguments(text: str) -> dict[str, object]:
    """{snake_case keyword: value} of "KEY=VALUE,..." (a value is a Python literal, else a string)."""
    arguments = {}
    for item in filter(None, (piece.strip() for piece in str(text).split(","))):
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise LDPValueError(f"partition flwr arguments must be KEY=VALUE, got {item!r}")
        try:
            arguments[canonical_name(key).replace("-", "_")] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            arguments[canonical_name(key).replace("-", "_")] = value.strip()
    return arguments


def _keywords(cls, name: str, text: str) -> tuple[dict[str, object], set[str]]:
    arguments = parse_arguments(text)
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = sorted(set(arguments) - accepted)
    if unknown:
        raise LDPValueError(
            f"partition flwr:{name}: {cls.__name__} takes no {', '.join(unknown)}; "
            f"it takes {', '.join(sorted(accepted))}"
        )
    return arguments, accepted


def check(name: str, text: str) -> None:
    """The partitioner exists and takes the keywords given (flwr-datasets must be installed)."""
    _keywords(partitioner_class(name), name, text)


def split(
    labels: np.ndarray,
    num_clients: int,
    name: str,
    text: str,
    rng: np.random.Generator,
    *,
    columns: Mapping[str, np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Each client's indices into `labels` under flwr-datasets' partitioner `name` with keywords `text`."""
    cls = partitioner_class(name)
    arguments, accepted = _keywords(cls, name, text)
    n = labels.size
    defaults = {
        "num_partitions": num_clients,
        "partition_by": LABEL,
        "seed": int(rng.integers(2**32)),
        "partition_sizes": np.full(num_clients, n // num_clients) + (np.arange(num_clients) < n % num_clients),
    }
    arguments = {**{key: value for key, value in defaults.items() if key in accepted}, **arguments}
    import datasets

    datasets.disable_progress_bars()
    table = {LABEL: np.asarray(labels), POSITION: np.arange(n)}
    table.update({key: np.asarray(values) for key, values in (columns or {}).items()})
    try:
        partitioner = cls(**arguments)
        partitioner.dataset = datasets.Dataset.from_dict(table)
        if partitioner.num_partitions != num_clients:
            raise LDPValueError(
                f"partition flwr:{name} makes {partitioner.num_partitions} partitions, not num_clients={num_clients}"
            )
        # flwr-datasets hands out one partition per call
        parts = [np.asarray(partitioner.load_partition(pid)[POSITION], dtype=np.int64) for pid in range(num_clients)]
    except (ValueError, TypeError, KeyError, ArithmeticError) as error:
        if isinstance(error, LDPValueError):
            raise
        message = " ".join(str(error).split())
        raise LDPValueError(f"partition flwr:{name}: {type(error).__name__}: {message}") from None
    if any(part.size == 0 for part in parts):
        raise LDPValueError(f"partition flwr:{name} leaves a client without samples; use fewer clients")
    return parts


FLWR = ForeignPartitioners(check=check, split=split, summary="a flwr-datasets partitioner")

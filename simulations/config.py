"""The options of a Flower simulation, resolved once and shared by `ldpfed simulate`, `flwr run`
and the tests (spec: federated.md).

Options come from three places, later ones winning: the defaults below (the default job), a TOML
file (`--config configs/NAME.toml`, keys spelled like the CLI flags: `local-steps = 5`), and CLI
flags. Under `flwr run` they come from `[tool.flwr.app.config]` in pyproject.toml plus
`--run-config` overrides, spelled the same way. Everything is validated here, before any work
starts, so a bad option is one clear `LDPValueError` (exit 2) and nothing is written.

Decisions where the issue is silent:
- `delta = 0` means "pure" (no delta); `report-dims = 0` means "all dimensions".
- The mean task's tuples come from `tuples` (a synthetic set name or a file path), the training
  data from `data`, so one file can hold both without ambiguity.
- For the mean task a round is one independent collection from the same users (fresh local
  randomness); each user spends epsilon per round, and the ledger records it.
- `fail-clients` is a fault-injection option for tests and demos: the listed partition ids raise
  in every round they are sampled.
- Training aggregators (issue 6): `aggregator` is one of the recalibrating aggregators (mean, l1,
  l2, hdr4me, james-stein; all through `ldpfed.aggregation.updates.aggregate_updates`) or
  `fedavg`, Flower's own weighted average (`aggregate_arrayrecords`), the plain baseline;
  `deviation` (plug-in | model) is the deviation model of the recalibration.
- `measure-noise` (train, default 1 = on): SIMULATION-ONLY measurement channel. Each client also
  returns its clipped, noise-free update on a separate field, which the server uses only to
  measure the aggregate noise against its CLT prediction, never to aggregate. A deployment must
  not have it (it would leak the update); set 0 to send only the privatized update and the sample
  count (the unprivatized local training loss then stays on the client too; `train_loss` is NaN).
  It carries nothing with mechanism `none` (the update is then the clipped update itself).
- `engine` (flower | local): `local` runs the same client and server functions sequentially in
  this process, without Flower or Ray, for large sweeps (`ldpfed compare --task train`).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ldpfed.data.federated import FEDERATED_DATASETS as TRAIN_DATA
from ldpfed.data.partition import PARTITION_SCHEMES as PARTITIONS
from ldpfed.validation import LDPValueError, check_epsilon, check_positive_int

TASKS = ("mean", "train")
MODELS = ("logreg", "mlp", "cnn")  # = ldpfed.training.models.MODEL_NAMES, which imports torch
NO_MECHANISM = "none"
FEDAVG = "fedavg"  # Flower's own FedAvg aggregation of the replies (train only)
TRAIN_DEVIATIONS = ("plug-in", "model")
ENGINES = ("flower", "local")


@dataclass(frozen=True)
class SimulationConfig:
    """Every option of a simulation. The defaults are the default job (configs/default.toml)."""

    task: str = "mean"
    clients: int = 10
    rounds: int = 5
    seed: int = 0
    cpus_per_client: float = 1.0
    cpus: int = 0  # CPUs Ray may use in total; 0 = all of the machine
    fraction: float = 1.0
    mechanism: str = "laplace"
    epsilon: float = 2.0
    delta: float = 0.0
    report_dims: int = 0
    aggregator: str = "mean"
    alpha: float = 0.95
    deviation: str = "plug-in"  # train: deviation model of the recalibration
    engine: str = "flower"
    # mean task
    users: int = 10_000
    dims: int = 10
    tuples: str = "gaussian"
    # train task
    data: str = "digits"
    data_dir: str = ""
    partition: str = "iid"
    classes_per_client: int = 2
    dirichlet_alpha: float = 0.5
    model: str = "logreg"
    local_steps: int = 10
    lr: float = 0.1
    batch_size: int = 32
    clip: float = 0.05
    measure_noise: int = 1  # train: simulation-only channel of the clean update (module docstring)
    fail_clients: str = ""
    out: str = ""

    # ---- derived values -------------------------------------------------------------------
    @property
    def delta_or_none(self) -> float | None:
        return self.delta if self.delta > 0 else None

    @property
    def report_dims_or_none(self) -> int | None:
        return self.report_dims if self.report_dims > 0 else None

    @property
    def failing_partitions(self) -> frozenset[int]:
        return frozenset(int(item) for item in self.fail_clients.split(",") if item.strip())

    @property
    def private(self) -> bool:
        return self.mechanism != NO_MECHANISM

    # ---- conversions ----------------------------------------------------------------------
    def to_flat(self) -> dict:
        """Kebab-case keys and scalar values: a Flower run config / ConfigRecord / TOML table."""
        return {name.replace("_", "-"): value for name, value in asdict(self).items()}

    def validated(self) -> "SimulationConfig":
        """Check every value's range and every name; returns self (raises LDPValueError)."""
        import ldpfed.aggregation as aggregation
        import ldpfed.mechanisms as mechanisms

        _choice("task", self.task, TASKS)
        check_positive_int(self.clients, "clients")
        check_positive_int(self.rounds, "rounds")
        check_positive_int(self.seed, "seed", minimum=0)
        check_positive_int(self.cpus, "cpus", minimum=0)
        _positive("cpus-per-client", self.cpus_per_client)
        if not 0.0 < self.fraction <= 1.0:
            raise LDPValueError(f"fraction must be in (0, 1], got {self.fraction!r}")
        if self.mechanism != NO_MECHANISM or self.task == "mean":
            mechanisms.get_class(self.mechanism)
            check_epsilon(self.epsilon)
        if not 0.0 <= self.delta < 1.0:
            raise LDPValueError(f"delta must be in [0, 1) (0 = pure), got {self.delta!r}")
        check_positive_int(self.report_dims, "report-dims", minimum=0)
        _choice("engine", self.engine, ENGINES)
        if self.task == "train":
            _choice("aggregator", self.aggregator, (*aggregation.available(), FEDAVG))
        else:
            aggregation.get_class(self.aggregator)
        if not 0.0 < self.alpha < 1.0:
            raise LDPValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if self.task == "mean":
            check_positive_int(self.users, "users")
            check_positive_int(self.dims, "dims")
            if self.users < self.clients:
                raise LDPValueError(f"users ({self.users}) must be >= clients ({self.clients})")
            if self.report_dims > self.dims:
                raise LDPValueError(f"report-dims must be in [0, dims={self.dims}], got {self.report_dims}")
        else:
            _choice("deviation", self.deviation, TRAIN_DEVIATIONS)
            _choice("data", self.data, TRAIN_DATA)
            _choice("partition", self.partition, PARTITIONS)
            _choice("model", self.model, MODELS)
        # Numbers of the train task are checked for either task: a malformed value is an error
        # even where the task does not use it (issue 11, item 10).
        if self.measure_noise not in (0, 1):
            raise LDPValueError(f"measure-noise must be 0 (off) or 1 (on), got {self.measure_noise!r}")
        check_positive_int(self.classes_per_client, "classes-per-client")
        _positive("dirichlet-alpha", self.dirichlet_alpha)
        check_positive_int(self.local_steps, "local-steps")
        _positive("lr", self.lr)
        check_positive_int(self.batch_size, "batch-size")
        _positive("clip", self.clip)
        try:
            failing = self.failing_partitions
        except ValueError:
            raise LDPValueError(
                f"fail-clients must be comma-separated partition ids, got {self.fail_clients!r}"
            ) from None
        if any(not 0 <= pid < self.clients for pid in failing):
            raise LDPValueError(f"fail-clients ids must be in [0, {self.clients - 1}], got {self.fail_clients!r}")
        return self


def _choice(name: str, value: str, allowed) -> None:
    if value not in allowed:
        raise LDPValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise LDPValueError(f"{name} must be a finite number > 0, got {value!r}")


_FIELDS = {f.name: f for f in fields(SimulationConfig)}


def _coerce(key: str, value, source: str):
    """Type-check one option against the dataclass field (an int is a valid float, a bool is not)."""
    name = key.replace("-", "_")
    if name not in _FIELDS:
        allowed = ", ".join(sorted(k.replace("_", "-") for k in _FIELDS))
        raise LDPValueError(f"{source}: unknown option {key!r}; allowed: {allowed}")
    expected = _FIELDS[name].type
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
    }[expected]
    if not ok:
        article = "an" if expected[0] in "aeiou" else "a"
        raise LDPValueError(f"{source}: option {key!r} must be {article} {expected}, got {value!r}")
    return name, float(value) if expected == "float" else value


def from_mapping(mapping: dict, base: SimulationConfig | None = None, source: str = "config") -> SimulationConfig:
    """Overlay `mapping` (kebab- or snake-case keys) on `base`; unknown keys or wrong types raise."""
    updates = dict(_coerce(key, value, source) for key, value in mapping.items())
    return replace(base or SimulationConfig(), **updates)


def load_file(path: str | Path, base: SimulationConfig | None = None) -> SimulationConfig:
    """Read a TOML config file (a flat table of options) over `base`."""
    path = Path(path)
    if path.is_dir():
        raise LDPValueError(f"config file {str(path)!r} is a directory; give a .toml file")
    if not path.is_file():
        raise LDPValueError(f"config file {str(path)!r} not found")
    try:
        table = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise LDPValueError(f"config file {path}: not valid TOML ({error})") from None
    nested = [key for key, value in table.items() if isinstance(value, dict)]
    if nested:
        raise LDPValueError(f"config file {path}: expected a flat table of options, found section(s) {nested}")
    return from_mapping(table, base, source=f"config file {path}")


def resolve(config_file: str | Path | None = None, overrides: dict | None = None) -> SimulationConfig:
    """Defaults < config file < overrides (e.g. CLI flags that were given), validated."""
    config = SimulationConfig()
    if config_file:
        config = load_file(config_file, config)
    given = {key: value for key, value in (overrides or {}).items() if value is not None}
    return from_mapping(given, config, source="option").validated()


def to_toml(config: SimulationConfig) -> str:
    """The resolved config as a TOML file that `--config` reads back."""
    import tomli_w

    return tomli_w.dumps(config.to_flat())

"""The one typed, nested configuration of a federation (spec: federated.md).

Sections are dataclasses defined once below; everything else is derived from them:
- TOML files (`configs/*.toml`, `--config`, the run's `config.toml`) hold one table per section
  (`[privacy]` `epsilon = 2.0`); keys are the field names in kebab case;
- Flower's run config (`[tool.flwr.app.config]` in pyproject.toml) holds the same tables, which
  Flower flattens to "section.key" (`privacy.epsilon`), read by `from_flat`;
- CLI flags are the field names in kebab case (a field may name another flag in its metadata:
  `data.name` is `--data`, as for `predict` and `compare`); booleans are `--flag/--no-flag`.
tests/test_config.py fails if any of these drifts from the dataclasses.

Decisions where the spec is silent (docs/decisions.md, Federated protocol):
- `data.name` "" means the task's default data: "gaussian" tuples (mean), "digits" (train) or "zipf"
  categorical tuples (frequency; `data.dims` is then the number of attributes).
- `privacy.delta = 0` means pure; `privacy.report-dims = 0` means all dimensions (mean) or Wang's
  m (train).
- `data.users = 0` / `data.dims = 0` (the defaults) mean the shape of the data: a file's rows and
  columns, or 10,000 x 10 for a synthetic set; the harness replaces them with
  the shape read before the run (`ldpfed.protocols.mean.bound`), so config.toml records it.
- `data.domain`, `data.header`, `data.out-of-domain` are the `--domain`, `--header/--no-header`
  and `--out-of-domain` of `predict` and `compare` (ldpfed.data.read_tuples); `header` is a string
  (auto | yes | no) because TOML and Flower's run config have no null.
- `run.seed` is the run seed that the harness (`ldpfed simulate`) spawns the server's seed and the
  data seed from (ldpfed.protocols.seeds); it is never sent to the server, but being small it is
  guessable, so the clients' secrets derive from a separate noise root instead: 128 bits of OS
  entropy per run, or `simulate --noise-seed`, which is deliberately not a config field (the
  config is written to config.toml and, under `flwr run`, read by the server). `run.fresh-noise`
  gives each client its own OS entropy, recorded nowhere.
- `output.diagnostics` (default on): clients write their clean statistics to the run's local
  output for the noise-measured-vs-predicted figures; nothing clean is ever sent to the server.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path

import ldpfed.accounting as accounting
import ldpfed.gradient_noise as gradient_noise
from ldpfed.accounting.names import DEFAULT_DELTA_TARGET, check_accountant
from ldpfed.directional import MAGNITUDES, ROTATIONS, WINDOWS
from ldpfed.directional.windows import check_beta
from ldpfed.training.cohort import DEVICES
from ldpfed.training.models import MODEL_NAMES
from ldpfed.validation import LDPValueError, check_positive_int, out_of_domain_policy, parse_domain

TASKS = ("mean", "train", "frequency")
ENGINES = ("flower", "local")
NO_MECHANISM = "none"
FEDAVG = "fedavg"  # Flower's own FedAvg aggregation (train only)
TRAIN_DEVIATIONS = ("plug-in", "model")
MODELS = MODEL_NAMES
PERTURBATIONS = ("numeric", "ldpvec")
LDPVEC_AGGREGATORS = ("mean", FEDAVG)  # no per-coordinate noise model for the re-calibrating ones
DEFAULT_DATA = {"mean": "gaussian", "train": "digits", "frequency": "zipf"}
NODE_REPLIES = ("clients", "sum")  # what a node sends (ldpfed.protocols.nodes): per-client arrays | their sum
HEADERS = {"auto": None, "yes": True, "no": False}  # data.header -> ldpfed.data.read_tuples(header=)


@dataclass(frozen=True)
class RunConfig:
    """[run]: the task, its rounds, the engine, and the run seed (of the data and of public choices;
    never of a client's noise, which comes from its node)."""

    task: str = "mean"
    rounds: int = 5
    seed: int = 0
    engine: str = "flower"
    fresh_noise: bool = False


@dataclass(frozen=True)
class DataConfig:
    """[data]: the data the users hold (a synthetic set or a local file) and its split among clients."""

    name: str = field(default="", metadata={"flag": "data"})
    data_dir: str = ""
    users: int = 0  # mean: 0 = the data file's rows, or DEFAULT_USERS (10,000) of a synthetic set
    dims: int = 0  # mean: 0 = the data file's columns, or DEFAULT_DIMS (10) of a synthetic set
    domain: str = "-1,1"  # mean: LOW,HIGH, the declared domain of a data file's values
    header: str = "auto"  # mean: a CSV file's first row is a header: auto (detected) | yes | no
    out_of_domain: str = "error"  # mean: a file's values outside the domain: error | clip
    categories: str = ""  # frequency: a CSV's categories or the synthetic counts ("" = inferred / 10), as --categories
    partition: str = "iid"
    classes_per_client: int = 2
    dirichlet_alpha: float = 0.5


@dataclass(frozen=True)
class FederationConfig:
    """[federation]: the clients, the share that takes part in a round, and where they run."""

    clients: int = 10
    fraction: float = 1.0
    cpus: int = 0  # CPUs Ray may use in total; 0 = all of the machine
    cpus_per_client: float = 1.0
    fail_clients: str = ""  # fault injection: comma-separated partition ids that raise
    nodes: int = 0  # Flower nodes hosting the clients (contiguous blocks); 0: min(clients, CPUs) or fewer
    device: str = "auto"  # train: where a node trains its clients: auto | cpu | cuda
    gpus_per_node: float = 0.0  # GPUs (a fraction allowed) Ray gives each node
    node_reply: str = "clients"  # a node replies per client | with their "sum" (train: mean/fedavg only)
    ray_address: str = ""  # an existing Ray cluster to run on ("auto": RAY_ADDRESS); "" = start a local Ray
    ray_timeout: float = 60.0  # seconds the run waits for the cluster of ray-address to answer, then fails
    # deployments: seconds a round waits for an offline node that hosts sampled clients (a restarting SuperNode)
    node_wait: float = 60.0


@dataclass(frozen=True)
class PrivacyConfig:
    """[privacy]: each client's randomizer and per-round budget, its budget over the run, the
    accountant that tracks it, and who is trusted (local, shuffle, central)."""

    mechanism: str = "laplace"
    epsilon: float = 2.0
    delta: float = 0.0
    report_dims: int = 0
    max_epsilon: float = 0.0  # per-client budget over the run (0 = none): a client stops before exceeding it
    max_delta: float = 0.0  # the budget's delta (0 = 1e-5, the delta every figure is reported at); needs max-epsilon
    accountant: str = "basic"  # the run's accountant (epsilon spent, max-epsilon): basic | advanced | rdp | pld
    # EPS[,DELTA]: a client's total over the run ("" = none); `ldpfed simulate` turns it into the per-round
    # epsilon (and delta) and the max-epsilon budget of `ldpfed plan` (ldpfed.planning.run)
    budget: str = ""
    trust: str = "local"  # who is trusted (ldpfed.accounting.trust): local | shuffle | central
    clipping: str = "fixed"  # central: Flower's fixed or adaptive clipping of client updates
    clipping_side: str = "server"  # central: who clips, server | client (Flower's fixedclipping_mod)
    bits: int = 16  # secagg: bits per value b, the modulus 2^b of the secure sum


@dataclass(frozen=True)
class AggregationConfig:
    """[aggregation]: how the server combines the reports (the plain mean or a re-calibrating aggregator)."""

    aggregator: str = "mean"
    alpha: float = 0.95
    deviation: str = "plug-in"


@dataclass(frozen=True)
class TrainingConfig:
    """[training] (task train): the model, the local steps, and how a client clips and perturbs its update."""

    model: str = "logreg"
    local_steps: int = 10
    lr: float = 0.1
    batch_size: int = 32
    clip: float = 0.05  # L2 norm bound C of an update (gradient noises, ldpvec)
    coordinate_clip: float = 0.05  # per-coordinate bound C, each coordinate to [-C, C] (scalar mechanisms, none)
    chunk_clients: int = 0  # clients a node trains at once; 0 = as many as a memory budget allows
    # how the update is perturbed: numeric (per coordinate, or a gradient noise) or
    # ldpvec (directional, ldpfed.directional; --mechanism is its base randomizer)
    perturbation: str = "numeric"
    beta: float = 1.0  # ldpvec: angle window width beta*pi (1 = no angle clipping)
    window: str = "fixed"  # ldpvec: fixed (the thesis) | centred (on the previous global step, public)
    magnitude: str = "split"  # ldpvec: split | normalize | exact-unsafe (not private)
    rotation: str = "none"  # ldpvec: none | hadamard (public per-round seed from the server)
    canaries: int = 0  # canary clients of the in-run privacy audit (ids clients .. clients+canaries-1)


@dataclass(frozen=True)
class OutputConfig:
    """[output]: where the run's files go."""

    out: str = ""
    overwrite: bool = False  # replace another run's results in `out` (ldpfed.outputs.OutputDir)
    diagnostics: bool = True
    plot: bool = True  # draw the run's figures (plot.png, label_counts.png); `ldpfed plot DIR` draws plot.png later


SECTIONS = {
    "run": RunConfig,
    "data": DataConfig,
    "federation": FederationConfig,
    "privacy": PrivacyConfig,
    "aggregation": AggregationConfig,
    "training": TrainingConfig,
    "output": OutputConfig,
}


@dataclass(frozen=True)
class Config:
    """Every option of a federation, by section. The defaults are the default job."""

    run: RunConfig = RunConfig()
    data: DataConfig = DataConfig()
    federation: FederationConfig = FederationConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    aggregation: AggregationConfig = AggregationConfig()
    training: TrainingConfig = TrainingConfig()
    output: OutputConfig = OutputConfig()

    # ---- derived values -------------------------------------------------------------------
    @property
    def data_name(self) -> str:
        return self.data.name or DEFAULT_DATA[self.run.task]

    @property
    def delta_or_none(self) -> float | None:
        return self.privacy.delta if self.privacy.delta > 0 else None

    @property
    def report_dims_or_none(self) -> int | None:
        return self.privacy.report_dims if self.privacy.report_dims > 0 else None

    @property
    def failing_partitions(self) -> frozenset[int]:
        return frozenset(int(item) for item in self.federation.fail_clients.split(",") if item.strip())

    @property
    def budget(self):
        """The per-client privacy budget (ldpfed.accounting.Budget), or None without max-epsilon."""
        if self.privacy.max_epsilon == 0.0:
            return None
        return accounting.Budget(self.privacy.max_epsilon, self.privacy.accountant, self.delta_target)

    @property
    def delta_target(self) -> float:
        """The delta at which the run's epsilon spent is reported: the budget's max-delta, else 1e-5."""
        return self.privacy.max_delta or DEFAULT_DELTA_TARGET

    @property
    def gradient_noise(self) -> bool:
        """The mechanism is one of ldpfed.gradient_noise's (train only, L2 clipping)."""
        return self.privacy.mechanism in gradient_noise.available()

    @property
    def update_clip(self) -> float:
        """The bound a client update is clipped to (spec: federated.md): its L2 norm for the gradient
        noises and ldpvec (`clip`), each coordinate to [-C, C] otherwise (`coordinate-clip`)."""
        return self.training.clip if self.l2_clipped else self.training.coordinate_clip

    @property
    def l2_clipped(self) -> bool:
        """The update's L2 norm is clipped (`clip`): the gradient noises, ldpvec, and the trust models
        whose Gaussian noise is calibrated to that norm (central's, secagg's discrete shares)."""
        return self.gradient_noise or self.directional or self.privacy.trust in ("central", "secagg")

    @property
    def directional(self) -> bool:
        """The update is perturbed by LDPVec (ldpfed.directional; the train task's alone)."""
        return self.training.perturbation == "ldpvec"

    @property
    def noisy(self) -> bool:
        return self.privacy.mechanism != NO_MECHANISM

    def with_options(self, options: dict, source: str = "option") -> Config:
        """Overlay {flag name or 'section.key': value} (None values are skipped); types checked."""
        by_section: dict[str, dict] = {}
        for key, value in options.items():
            if value is None:
                continue
            section, name = _locate(key, source)
            by_section.setdefault(section, {})[name] = _coerce(section, name, value, source, key)
        return replace(self, **{s: replace(getattr(self, s), **v) for s, v in by_section.items()})

    # ---- conversions ----------------------------------------------------------------------
    def to_nested(self) -> dict:
        """{section: {kebab-key: value}}: a TOML file / Flower's app config tables."""
        return {section: {_kebab(k): v for k, v in asdict(getattr(self, section)).items()} for section in SECTIONS}

    def to_flat(self) -> dict:
        """{"section.key": value}: Flower's flattened run config."""
        return {f"{s}.{k}": v for s, table in self.to_nested().items() for k, v in table.items()}

    def validated(self) -> Config:
        """Check every value's range and every name that does not depend on the task; returns self
        (raises LDPValueError). The full check, the task's own included: `ldpfed.tasks.validated`."""
        run, data, fed, privacy, agg, train = (
            self.run,
            self.data,
            self.federation,
            self.privacy,
            self.aggregation,
            self.training,
        )
        choice("task", run.task, TASKS)
        check_positive_int(run.rounds, "rounds")
        check_positive_int(run.seed, "seed", minimum=0)
        choice("engine", run.engine, ENGINES)
        check_positive_int(fed.clients, "clients")
        check_positive_int(fed.cpus, "cpus", minimum=0)
        _positive("cpus-per-client", fed.cpus_per_client)
        check_positive_int(fed.nodes, "nodes", minimum=0)
        if fed.nodes > fed.clients:
            raise LDPValueError(f"nodes ({fed.nodes}) must be <= clients ({fed.clients}) (0 = the default)")
        choice("device", fed.device, DEVICES)
        if not (math.isfinite(fed.gpus_per_node) and fed.gpus_per_node >= 0.0):
            raise LDPValueError(f"gpus-per-node must be a finite number >= 0, got {fed.gpus_per_node!r}")
        _check_node_reply(self)
        _check_ray_address(fed)
        if not (math.isfinite(fed.node_wait) and fed.node_wait >= 0.0):
            raise LDPValueError(f"node-wait must be a finite number of seconds >= 0, got {fed.node_wait!r}")
        if not 0.0 < fed.fraction <= 1.0:
            raise LDPValueError(f"fraction must be in (0, 1], got {fed.fraction!r}")
        _check_perturbation_options(self)
        if not 0.0 <= privacy.delta < 1.0:
            raise LDPValueError(f"delta must be in [0, 1) (0 = pure), got {privacy.delta!r}")
        check_positive_int(privacy.report_dims, "report-dims", minimum=0)
        check_accountant(privacy.accountant)
        if not 0.0 <= privacy.max_delta < 1.0:
            raise LDPValueError(f"max-delta must be in [0, 1) (0 = 1e-5), got {privacy.max_delta!r}")
        if privacy.max_delta != 0.0 and privacy.max_epsilon == 0.0:
            raise LDPValueError("max-delta is the delta of a budget: give max-epsilon too")
        if privacy.max_epsilon != 0.0:
            if not self.noisy:
                raise LDPValueError("max-epsilon needs a private mechanism, not none")
            self.budget  # noqa: B018 (checks the numbers; the round's cost is checked in preflight)
        if not 0.0 < agg.alpha < 1.0:
            raise LDPValueError(f"alpha must be in (0, 1), got {agg.alpha!r}")
        # Options of every task are checked for all: a malformed value is an error even where the
        # task does not use it (the task's own checks: ldpfed.tasks, `Task.validate`).
        parse_domain(data.domain)
        out_of_domain_policy(data.out_of_domain)
        choice("header", data.header, HEADERS)
        check_positive_int(data.classes_per_client, "classes-per-client")
        _positive("dirichlet-alpha", data.dirichlet_alpha)
        check_positive_int(train.local_steps, "local-steps")
        _positive("lr", train.lr)
        check_positive_int(train.batch_size, "batch-size")
        _positive("clip", train.clip)
        _positive("coordinate-clip", train.coordinate_clip)
        accounting.trust.check_config(self)
        check_positive_int(train.chunk_clients, "chunk-clients", minimum=0)
        check_positive_int(train.canaries, "canaries", minimum=0)
        try:
            failing = self.failing_partitions
        except ValueError:
            raise LDPValueError(
                f"fail-clients must be comma-separated partition ids, got {fed.fail_clients!r}"
            ) from None
        if any(not 0 <= pid < fed.clients for pid in failing):
            raise LDPValueError(f"fail-clients ids must be in [0, {fed.clients - 1}], got {fed.fail_clients!r}")
        return self


def _check_ray_address(fed: FederationConfig) -> None:
    """`ray-address`: "" (a local Ray), "auto" (RAY_ADDRESS, read when the run starts) or the GCS HOST:PORT;
    `cpus` sizes a local Ray only, so the two exclude each other; `ray-timeout` bounds the wait for the cluster."""
    address = fed.ray_address
    if address and address != "auto" and not re.fullmatch(r"[A-Za-z0-9_.\-]+:[0-9]{1,5}", address):
        raise LDPValueError(f"ray-address must be auto or HOST:PORT (the head's GCS address), got {address!r}")
    if address and fed.cpus:
        raise LDPValueError("cpus sizes a local Ray; with ray-address the cluster's nodes give the CPUs (drop one)")
    if not (math.isfinite(fed.ray_timeout) and fed.ray_timeout > 0.0):
        raise LDPValueError(f"ray-timeout must be a finite number of seconds > 0, got {fed.ray_timeout!r}")


def _check_node_reply(config: Config) -> None:
    """node-reply: clients | sum (where sum applies: `ldpfed.tasks`, the task's own checks)."""
    choice("node-reply", config.federation.node_reply, NODE_REPLIES)


def _check_perturbation_options(config: Config) -> None:
    """The perturbation's options, checked for every task (a malformed value is an error even where
    it does not apply)."""
    train = config.training
    choice("perturbation", train.perturbation, PERTURBATIONS)
    check_beta(train.beta)
    choice("window", train.window, WINDOWS)
    choice("magnitude", train.magnitude, MAGNITUDES)
    choice("rotation", train.rotation, ROTATIONS)


# ---- option names ----------------------------------------------------------------------------
def _kebab(name: str) -> str:
    return name.replace("_", "-")


def option_names() -> dict[str, tuple[str, str]]:
    """{CLI flag name (kebab case, no dashes): (section, field name)} for every option."""
    names = {}
    for section, cls in SECTIONS.items():
        for item in fields(cls):
            names[item.metadata.get("flag", _kebab(item.name))] = (section, item.name)
    return names


OPTIONS = option_names()


def option_default(flag: str):
    section, name = OPTIONS[flag]
    item = next(f for f in fields(SECTIONS[section]) if f.name == name)
    return item.default if item.default is not MISSING else None


def _locate(key: str, source: str) -> tuple[str, str]:
    """(section, field) of a flag name ('local-steps', 'local_steps') or a 'section.key'."""
    if "." in key:
        section, _, name = key.partition(".")
        name = name.replace("-", "_")
        if section in SECTIONS and name in {f.name for f in fields(SECTIONS[section])}:
            return section, name
    else:
        flag = _kebab(key)
        if flag in OPTIONS:
            return OPTIONS[flag]
    allowed = ", ".join(sorted(OPTIONS))
    raise LDPValueError(f"{source}: unknown option {key!r}; allowed: {allowed}")


def _coerce(section: str, name: str, value, source: str, key: str):
    """Type-check one value against its field (an int is a valid float; a bool only a bool)."""
    expected = next(f for f in fields(SECTIONS[section]) if f.name == name).type
    ok = {
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
    }[expected]
    if not ok:
        article = "an" if expected[0] in "aeiou" else "a"
        raise LDPValueError(f"{source}: option {key!r} must be {article} {expected}, got {value!r}")
    return float(value) if expected == "float" else value


def check_tuple_shape(data: DataConfig, fed: FederationConfig, privacy: PrivacyConfig) -> None:
    """Users and dims (attributes, for frequency) of the tuple tasks; 0 = from the data, checked again
    once the data is read (ldpfed.protocols.mean.bound, ldpfed.protocols.frequency.bound)."""
    check_positive_int(data.users, "users", minimum=0)
    check_positive_int(data.dims, "dims", minimum=0)
    if 0 < data.users < fed.clients:
        raise LDPValueError(f"users ({data.users}) must be >= clients ({fed.clients})")
    if data.dims and privacy.report_dims > data.dims:
        raise LDPValueError(f"report-dims must be in [0, dims={data.dims}], got {privacy.report_dims}")


def choice(name: str, value: str, allowed) -> None:
    """`value` is one of `allowed`, else LDPValueError naming them."""
    if value not in allowed:
        raise LDPValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise LDPValueError(f"{name} must be a finite number > 0, got {value!r}")


# ---- reading and writing ---------------------------------------------------------------------
def from_nested(table: dict, base: Config | None = None, source: str = "config") -> Config:
    """Overlay {section: {key: value}} on `base`; unknown sections/keys or wrong types raise."""
    flat = {}
    for section, values in table.items():
        if section not in SECTIONS or not isinstance(values, dict):
            raise LDPValueError(f"{source}: unknown section {section!r}; sections: {', '.join(SECTIONS)}")
        flat.update({f"{section}.{key}": value for key, value in values.items()})
    return from_flat(flat, base, source)


def from_flat(mapping: dict, base: Config | None = None, source: str = "config") -> Config:
    """Overlay {"section.key": value} (Flower's flattened run config) on `base`."""
    for key in mapping:
        if "." not in key:
            raise LDPValueError(f"{source}: option {key!r} must be 'section.key' (sections: {', '.join(SECTIONS)})")
    return (base or Config()).with_options(mapping, source)


def load_file(path: str | Path, base: Config | None = None) -> Config:
    """Read a TOML config file (one table per section) over `base`."""
    path = Path(path)
    if path.is_dir():
        raise LDPValueError(f"config file {str(path)!r} is a directory; give a .toml file")
    if not path.is_file():
        raise LDPValueError(f"config file {str(path)!r} not found")
    try:
        table = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise LDPValueError(f"config file {path}: not valid TOML ({error})") from None
    return from_nested(table, base, source=f"config file {path}")


def resolve_file(config_file: str | Path | None = None, flags: dict | None = None) -> Config:
    """Defaults < config file < flags that were given (None = not given), not yet validated
    (`ldpfed.tasks.resolve` validates it)."""
    config = Config()
    if config_file:
        config = load_file(config_file, config)
    return config.with_options(flags or {})


def to_toml(config: Config) -> str:
    """The resolved config as a TOML file that `--config` reads back. Without noise there is no
    budget, so `privacy.epsilon`, `privacy.delta` and the budget's options are left out.
    `output.overwrite` is left out too: a recorded run, read back, never replaces results silently."""
    import tomli_w

    nested = config.to_nested()
    nested["output"].pop("overwrite")
    if not config.noisy:
        for key in ("epsilon", "delta", "report-dims", "max-epsilon", "max-delta", "accountant", "budget"):
            nested["privacy"].pop(key)
    return tomli_w.dumps(nested)

"""Splitting a labelled data set over federated clients (spec: federated.md, Clients, partitions).

`partition(labels, num_clients, scheme, rng)` returns one index array per client: disjoint, every
client non-empty, and the same for the same rng seed. `scheme` is a name of `PARTITIONERS`, with
optional arguments after a colon: "NAME[:VALUE][,KEY=VALUE...]" (a bare VALUE sets the scheme's
main argument: "pathological:3", "size:square", "natural-id:writer"), or "PREFIX:NAME[:ARGS]" for a
family of foreign partitioners registered as a plugin (entry-point group `ldpfed.partitioners`):
"flwr:NAME[:ARGS]" is any partitioner of flwr-datasets (`simulations.flwr_partition`, the optional
extra `flwr-datasets`), so this module never imports a Flower package.

ldpfed's own schemes, which cover every sample:
- "iid": a uniform random permutation cut into near-equal parts.
- "k-classes": label skew by shards (McMahan et al. 2017; the thesis uses k = 2). Unlike
  McMahan's shards of the label-sorted data, which can straddle a class boundary and give a
  client up to 2k classes, shards here are cut inside each class, so a client holds at most k
  classes. Every class gets at least one shard and the rest are shared in proportion to class
  size, so this needs num_clients * k >= number of classes present.
- "dirichlet": label skew of Hsu et al. (2019): for each class, client shares ~ Dirichlet(alpha);
  small alpha concentrates each class on few clients. Clients left empty are repaired by moving
  one sample from the largest client (a deterministic, documented repair; resampling until
  nothing is empty can loop for a long time when alpha is small and clients are many).

flwr-datasets 0.6.1's definitions, drawing the same random numbers from a Generator seeded as its
`seed` (so the same seed gives the same clients; tests/test_partition_flwr.py compares them):
- "inner-dirichlet" (InnerDirichletPartitioner; Acar et al. 2021): balanced sizes (near-equal, or
  `sizes`); a client's class prior ~ Dirichlet(alpha), then sample by sample a client not yet full
  is drawn uniformly and a class from its prior, exhausted classes renormalized away.
- "pathological" (PathologicalPartitioner): each client draws `classes` (default: classes_per_client)
  distinct classes (mode random; deterministic: classes p..p+k-1; first-deterministic: class p mod
  C first, then random); each class's samples are cut evenly among the clients holding it. Classes
  no client drew are left out, as there.
- "shard" (ShardPartitioner; McMahan et al. 2017): the label-sorted data is cut into shards of
  `size` samples, which straddle class boundaries, and each client gets `shards` random ones
  (default: classes_per_client shards of n / (clients * shards) samples); what no shard covers
  is left out (keep-incomplete keeps a last short shard).
- "size" (LinearPartitioner, SquarePartitioner, ExponentialPartitioner, IdToSizeFncPartitioner):
  client i in 1..N gets a share f(i) / sum_j f(j) of the data in its order, f = i, i^2, e^i or
  `size_fn`, in contiguous blocks (the last takes the rounding's remainder). Not random: the order
  is the data's (ldpfed's digits and mnist-5k training sets are already in a seeded random order).
- "natural-id" (NaturalIdPartitioner): a column names each sample's client (`columns[COLUMN]`);
  client p holds the p-th smallest id's samples, so num_clients must equal the number of ids.
Python loops here run over classes, clients' draws or (inner-dirichlet) samples only where the
definition draws one random number after another: the same stream needs the same calls.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points

import numpy as np

from ldpfed.registry import Registry
from ldpfed.validation import LDPValueError, canonical_name, check_generator, check_positive, check_positive_int

PLUGIN_GROUP = "ldpfed.partitioners"
SIZE_FUNCTIONS = {"linear": lambda ids: ids, "square": np.square, "exponential": np.exp}
CLASS_MODES = ("random", "deterministic", "first-deterministic")


@dataclass(frozen=True)
class Scheme:
    """One partition scheme: `split(labels, num_clients, rng, **arguments)`, its main argument (what a
    bare VALUE after the colon sets) and the arguments a spec may name, with their types."""

    name: str
    split: Callable
    summary: str
    main: str = ""
    arguments: tuple[tuple[str, type], ...] = ()
    takes: tuple[str, ...] = ()  # the keywords of `partition` it uses (classes_per_client as "classes", ...)


@dataclass(frozen=True)
class ForeignPartitioners:
    """A plugin family of partitioners named "PREFIX:NAME[:ARGS]" (entry-point group `ldpfed.partitioners`,
    the entry's name is PREFIX): `check(name, args)` before any data is read, and
    `split(labels, num_clients, name, args, rng, *, columns)` giving each client's indices."""

    check: Callable[[str, str], None]
    split: Callable[..., list[np.ndarray]]
    summary: str


@functools.cache
def foreign_partitioners() -> dict[str, ForeignPartitioners]:
    """{prefix: family} of the installed plugins (looked up once, only for a name not native here)."""
    return {canonical_name(point.name): point.load() for point in entry_points(group=PLUGIN_GROUP)}


def _foreign(name: str) -> ForeignPartitioners | None:
    return None if name in PARTITIONERS else foreign_partitioners().get(name)


def parse_scheme(spec) -> tuple[str, dict[str, str]]:
    """("name", {argument: text}) of "NAME[:VALUE][,KEY=VALUE...]"; a plugin's "PREFIX:NAME[:ARGS]"
    gives ("PREFIX", {"name": NAME, "args": ARGS})."""
    text = str(spec).strip()
    head, _, rest = text.partition(":")
    name = canonical_name(head)
    if (family := _foreign(name)) is not None:
        foreign_name, _, foreign_args = rest.partition(":")
        if not foreign_name.strip():
            raise LDPValueError(f"partition {text!r}: give {family.summary}, {name}:NAME[:KEY=VALUE,...]")
        return name, {"name": foreign_name.strip(), "args": foreign_args.strip()}
    arguments: dict[str, str] = {}
    for item in filter(None, (piece.strip() for piece in rest.split(","))):
        key, equals, value = item.partition("=")
        arguments[canonical_name(key) if equals else ""] = (value if equals else key).strip()
    return name, arguments


def _typed(scheme: Scheme, given: dict[str, str], spec) -> dict[str, object]:
    """The spec's arguments by name, converted to their types (a bare value is the main argument)."""
    types = dict(scheme.arguments)
    typed = {}
    for key, text in given.items():
        key = key or scheme.main
        if key not in types:
            known = ", ".join(types) or "none"
            raise LDPValueError(f"partition {spec!r}: {scheme.name} takes no argument {key or text!r} (known: {known})")
        kind = types[key]
        try:
            typed[key] = text.lower() in ("1", "true", "yes") if kind is bool else kind(text)
        except ValueError:
            raise LDPValueError(f"partition {spec!r}: {key} must be {kind.__name__}, got {text!r}") from None
    return typed


def check_scheme(spec) -> str:
    """`spec` checked before any data is read (the name, its arguments' names and types); returns it."""
    name, given = parse_scheme(spec)
    if (family := _foreign(name)) is not None:
        family.check(given["name"], given["args"])
        return str(spec).strip()
    _typed(PARTITIONERS.get_class(name), given, spec)
    return str(spec).strip()


def partition(
    labels: np.ndarray,
    num_clients: int,
    scheme: str,
    rng: np.random.Generator,
    *,
    classes_per_client: int = 2,
    alpha: float = 0.5,
    columns: Mapping[str, np.ndarray] | None = None,
    size_fn: Callable | None = None,
) -> list[np.ndarray]:
    """Index arrays (int64, sorted) of each client's samples under `scheme` (module docstring).

    `classes_per_client` is k of k-classes and pathological, and shard's shards per client;
    `alpha` is dirichlet's and inner-dirichlet's concentration; `columns` are the data's other
    columns by name (natural-id's client column); `size_fn` is size's f(i), i = 1..N."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise LDPValueError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    num_clients = check_positive_int(num_clients, "num_clients")
    if num_clients > labels.size:
        raise LDPValueError(
            f"num_clients must be <= the number of samples ({labels.size}) so that no client is "
            f"empty, got {num_clients}"
        )
    check_generator(rng)
    name, given = parse_scheme(scheme)
    if (family := _foreign(name)) is not None:
        parts = family.split(labels, num_clients, given["name"], given["args"], rng, columns=columns)
    else:
        entry = PARTITIONERS.get_class(name)
        defaults = {"classes": classes_per_client, "shards": classes_per_client, "alpha": alpha}
        options = {key: value for key, value in {**defaults, "columns": columns, "size_fn": size_fn}.items()}
        options = {key: options[key] for key in entry.takes}
        spec_options = {key.replace("-", "_"): value for key, value in _typed(entry, given, scheme).items()}
        if "size" in spec_options and "shards" not in spec_options:
            options.pop("shards", None)  # shard:size=S alone: the number of shards follows from S
        parts = entry.split(labels, num_clients, rng, **{**options, **spec_options})
    return [np.sort(part).astype(np.int64) for part in parts]


def _check_alpha(alpha: float) -> float:
    return check_positive(alpha, "alpha (Dirichlet concentration)")


def _owner_parts(owner: np.ndarray, num_clients: int) -> list[np.ndarray]:
    """Client k's indices from each sample's owner (-1: left out), in index order."""
    kept = np.flatnonzero(owner >= 0)
    order = kept[np.argsort(owner[kept], kind="stable")]
    return np.split(order, np.cumsum(np.bincount(owner[kept], minlength=num_clients))[:-1])


# --- ldpfed's own ------------------------------------------------------------------------------
def _iid(labels: np.ndarray, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    return np.array_split(rng.permutation(labels.size), num_clients)


def _k_classes(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, classes: int) -> list[np.ndarray]:
    k = check_positive_int(classes, "classes_per_client")
    classes, sizes = np.unique(labels, return_counts=True)
    if k > classes.size:  # a client's shards would repeat classes: it could not hold k of them
        raise LDPValueError(
            f"k-classes: classes_per_client must be at most the data's number of classes ({classes.size}), got {k}"
        )
    total_shards = num_clients * k
    if total_shards < classes.size:
        raise LDPValueError(
            f"k-classes needs num_clients * classes_per_client >= the number of classes "
            f"({classes.size}) to place every sample; got {num_clients} * {k} = {total_shards}"
        )
    # One shard per class, the rest by largest remainder in proportion to class size, and never
    # more shards than samples in a class.
    shards = np.ones(classes.size, dtype=int)
    extra = total_shards - classes.size
    if extra:
        quota = extra * sizes / sizes.sum()
        shards += np.floor(quota).astype(int)
        remainder = total_shards - shards.sum()
        shards[np.argsort(-(quota - np.floor(quota)), kind="stable")[:remainder]] += 1
    if np.any(shards > sizes):
        raise LDPValueError(
            f"k-classes: too many shards ({total_shards}) for the class sizes {sizes.tolist()}; "
            "use fewer clients or a smaller classes_per_client"
        )
    pieces = []
    for cls, count in zip(classes, shards):  # loop over classes, not samples
        members = rng.permutation(np.flatnonzero(labels == cls))
        pieces.extend(np.array_split(members, count))
    order = rng.permutation(total_shards)
    return [np.concatenate([pieces[s] for s in order[i * k : (i + 1) * k]]) for i in range(num_clients)]


def _dirichlet(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, alpha: float) -> list[np.ndarray]:
    alpha = _check_alpha(alpha)
    owner = np.empty(labels.size, dtype=np.int64)
    for cls in np.unique(labels):  # loop over classes
        members = rng.permutation(np.flatnonzero(labels == cls))
        shares = rng.dirichlet(np.full(num_clients, alpha))
        cuts = np.round(np.cumsum(shares)[:-1] * members.size).astype(int)
        owner[members] = np.repeat(np.arange(num_clients), np.diff(np.concatenate([[0], cuts, [members.size]])))
    counts = np.bincount(owner, minlength=num_clients)
    for empty in np.flatnonzero(counts == 0):  # repair: at most num_clients moves
        donor = int(np.argmax(counts))
        moved = rng.choice(np.flatnonzero(owner == donor))
        owner[moved] = empty
        counts[donor] -= 1
        counts[empty] += 1
    order = np.argsort(owner, kind="stable")
    return np.split(order, np.cumsum(counts)[:-1])


# --- flwr-datasets 0.6.1's definitions ---------------------------------------------------------
def balanced_sizes(n: int, num_clients: int) -> np.ndarray:
    """Near-equal sizes summing to n (the first n mod N clients one larger)."""
    return np.full(num_clients, n // num_clients) + (np.arange(num_clients) < n % num_clients)


def _cdf(priors: np.ndarray) -> np.ndarray:
    """Each row's cumulative sums, normalised to end at 1, as `Generator.choice(p=row)` forms them."""
    cdf = np.cumsum(priors, axis=1)
    return cdf / cdf[:, -1:]


def _inner_dirichlet(labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, alpha) -> list[np.ndarray]:
    """InnerDirichletPartitioner at balanced sizes, with the same draws in the same order: its
    `rng.choice(ids)` is `rng.integers(0, len(ids))` and its `rng.choice(C, p=row)` a uniform
    `rng.random()` looked up in the row's normalised cumulative sums (numpy's Generator.choice)."""
    classes, codes = np.unique(labels, return_inverse=True)
    alphas = np.asarray(alpha, dtype=float).reshape(-1)
    alphas = np.repeat(alphas, classes.size) if alphas.size == 1 else alphas
    if alphas.size != classes.size or not np.all(np.isfinite(alphas) & (alphas > 0)):
        raise LDPValueError(f"inner-dirichlet: alpha (Dirichlet concentration) must be > 0, got {alpha!r}")
    priors = rng.dirichlet(alpha=alphas, size=num_clients)
    cdf = _cdf(priors)
    members = [np.flatnonzero(codes == c) for c in range(classes.size)]
    left_in_class = [m.size for m in members]
    left = balanced_sizes(labels.size, num_clients).tolist()
    owner = np.full(labels.size, -1, dtype=np.int64)
    not_full = list(range(num_clients))
    remaining = labels.size
    while remaining:  # sample by sample: each draw depends on the exhausted classes so far
        slot = int(rng.integers(0, len(not_full)))
        client = not_full[slot]
        if left[client] == 0:
            not_full.pop(slot)
            continue
        left[client] -= 1
        remaining -= 1
        while True:
            cls = int(cdf[client].searchsorted(rng.random(), side="right"))
            if left_in_class[cls] == 0:
                priors[:, cls] = 0
                with np.errstate(invalid="ignore", divide="ignore"):
                    priors = priors / priors.sum(axis=1, keepdims=True)
                if not np.all(np.isfinite(priors)):  # flwr-datasets fails here too (NaN probabilities)
                    raise LDPValueError(
                        f"inner-dirichlet: alpha={alpha!r} left a client no weight on the classes that remain; "
                        "use a larger alpha"
                    )
                cdf = _cdf(priors)
                continue
            left_in_class[cls] -= 1
            owner[members[cls][left_in_class[cls]]] = client
            break
    return _owner_parts(owner, num_clients)


def _class_sets(classes: np.ndarray, num_clients: int, k: int, mode: str, rng: np.random.Generator) -> np.ndarray:
    """(num_clients, C) bool: which classes each client holds (PathologicalPartitioner's modes)."""
    count = classes.size
    held = np.zeros((num_clients, count), dtype=bool)
    if mode == "deterministic":
        held[np.arange(num_clients)[:, None], (np.arange(num_clients)[:, None] + np.arange(k)) % count] = True
    elif mode == "random":
        for client in range(num_clients):  # one draw per client, as flwr-datasets draws them
            held[client, np.searchsorted(classes, rng.choice(classes, size=k, replace=False))] = True
    elif mode == "first-deterministic":
        held[np.arange(num_clients), np.arange(num_clients) % count] = True
        for client in range(num_clients):  # rejection draws per client, as flwr-datasets draws them
            while held[client].sum() < k:
                held[client, np.searchsorted(classes, rng.choice(classes, size=1)[0])] = True
    else:
        raise LDPValueError(f"pathological: mode must be one of {', '.join(CLASS_MODES)}, got {mode!r}")
    return held


def _pathological(
    labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, classes: int, mode: str = "random"
) -> list[np.ndarray]:
    k = check_positive_int(classes, "pathological: classes per client")
    values, sizes = np.unique(labels, return_counts=True)
    if k > values.size:
        raise LDPValueError(
            f"pathological: classes per client ({k}) is more than the data's number of classes ({values.size})"
        )
    held = _class_sets(values, num_clients, k, canonical_name(mode), rng)
    holders = held.sum(axis=0)
    if np.any(holders > sizes):
        worst = int(np.argmax(holders - sizes))
        raise LDPValueError(
            f"pathological: class {values[worst]} is held by {holders[worst]} clients but has {sizes[worst]} "
            "samples; use fewer clients or classes per client"
        )
    owner = np.full(labels.size, -1, dtype=np.int64)
    for c in np.flatnonzero(holders):  # loop over classes: cut evenly among the clients holding it
        members = np.flatnonzero(labels == values[c])
        pieces = [piece.size for piece in np.array_split(members, holders[c])]
        owner[members] = np.repeat(np.flatnonzero(held[:, c]), pieces)
    return _owner_parts(owner, num_clients)


def _shard_layout(n: int, num_clients: int, shards: int | None, size: int | None, keep: bool):
    """(shard size, usable shards, shards per client) as ShardPartitioner computes them."""
    if shards is not None:
        shards = check_positive_int(shards, "shard: shards per client")
        used = num_clients * shards
        if size is None:
            if used > n:
                raise LDPValueError(f"shard: {num_clients} clients x {shards} shards is more than the {n} samples")
            size = n // used
            usable = -(-n // size) if keep else n // size
        else:
            size = check_positive_int(size, "shard: size")
            if size * used > n:
                raise LDPValueError(
                    f"shard: {num_clients} clients x {shards} shards of {size} samples need more than the {n} samples"
                )
            usable = n // size
        per_client = np.full(num_clients, shards)
    else:
        size = check_positive_int(size, "shard: size")
        used = usable = -(-n // size) if keep else n // size
        per_client = np.full(num_clients, used // num_clients) + (np.arange(num_clients) < used % num_clients)
    if usable < num_clients:
        raise LDPValueError(f"shard: {usable} shards of {size} samples cannot give each of {num_clients} clients one")
    return size, usable, per_client


def _shard(
    labels: np.ndarray,
    num_clients: int,
    rng: np.random.Generator,
    *,
    shards: int | None = None,
    size: int | None = None,
    keep_incomplete: bool = False,
) -> list[np.ndarray]:
    size, usable, per_client = _shard_layout(labels.size, num_clients, shards, size, keep_incomplete)
    chosen = rng.permutation(usable)[: int(per_client.sum())]
    shard_owner = np.full(usable, -1, dtype=np.int64)
    shard_owner[chosen] = np.repeat(np.arange(num_clients), per_client)
    sorted_order = np.argsort(labels, kind="stable")  # the label-sorted data, ties in data order
    shard_of = np.arange(labels.size) // size
    owner = np.full(labels.size, -1, dtype=np.int64)
    inside = shard_of < usable
    owner[sorted_order[inside]] = shard_owner[shard_of[inside]]
    return _owner_parts(owner, num_clients)


def size_shares(n: int, num_clients: int, size_fn: Callable) -> np.ndarray:
    """Client sizes f(i) / sum_j f(j) * n truncated, the remainder to the last (IdToSizeFncPartitioner)."""
    with np.errstate(over="ignore", invalid="ignore"):
        units = np.asarray(size_fn(np.linspace(start=1, stop=num_clients, num=num_clients)), dtype=float)
        sizes = np.array(units / units.sum() * n, dtype=np.int64) if np.all(np.isfinite(units)) else None
    if sizes is None or np.any(sizes[:-1] < 1) or sizes[:-1].sum() >= n:
        raise LDPValueError(f"size: {num_clients} clients of {n} samples leave some client empty; use fewer clients")
    sizes[-1] += n - sizes.sum()
    return sizes


def _size(
    labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, kind: str = "linear", size_fn=None
) -> list[np.ndarray]:
    if size_fn is None:
        key = canonical_name(kind)
        if key not in SIZE_FUNCTIONS:
            raise LDPValueError(f"size: kind must be one of {', '.join(SIZE_FUNCTIONS)} (or a size_fn), got {kind!r}")
        size_fn = SIZE_FUNCTIONS[key]
    sizes = size_shares(labels.size, num_clients, size_fn)
    return np.split(np.arange(labels.size), np.cumsum(sizes)[:-1])


def _natural_id(
    labels: np.ndarray, num_clients: int, rng: np.random.Generator, *, column: str = "", columns=None
) -> list[np.ndarray]:
    available = dict(columns or {})
    matches = [name for name in available if name == column or canonical_name(name) == canonical_name(column)]
    known = ", ".join(available) or "none"
    if not column:
        raise LDPValueError(
            f"natural-id: name the column that names each sample's client, natural-id:COLUMN (columns: {known})"
        )
    if not matches:
        raise LDPValueError(
            f"natural-id: the data has no column {column!r} naming each sample's client (columns: {known})"
        )
    ids = np.asarray(available[matches[0]])
    if ids.shape != labels.shape:
        raise LDPValueError(f"natural-id: column {column!r} has {ids.size} values for {labels.size} samples")
    values, owner = np.unique(ids, return_inverse=True)
    if values.size != num_clients:
        raise LDPValueError(f"natural-id: column {column!r} names {values.size} clients, not num_clients={num_clients}")
    return _owner_parts(owner.astype(np.int64), num_clients)


PARTITIONERS: Registry[Scheme] = Registry(
    "partition scheme",
    [
        Scheme("iid", _iid, "uniform random, near-equal sizes"),
        Scheme(
            "k-classes",
            _k_classes,
            "k classes per client, shards cut inside classes",
            "classes",
            (("classes", int),),
            ("classes",),
        ),
        Scheme(
            "dirichlet",
            _dirichlet,
            "per-class Dirichlet(alpha) shares (Hsu et al.)",
            "alpha",
            (("alpha", float),),
            ("alpha",),
        ),
        Scheme(
            "inner-dirichlet",
            _inner_dirichlet,
            "balanced sizes, per-client Dirichlet class priors",
            "alpha",
            (("alpha", float),),
            ("alpha",),
        ),
        Scheme(
            "pathological",
            _pathological,
            "explicit classes per client",
            "classes",
            (("classes", int), ("mode", str)),
            ("classes",),
        ),
        Scheme(
            "shard",
            _shard,
            "label-sorted shards straddling class boundaries (McMahan et al.)",
            "shards",
            (("shards", int), ("size", int), ("keep-incomplete", bool)),
            ("shards",),
        ),
        Scheme(
            "size",
            _size,
            "size skew: linear, square or exponential in the client id",
            "kind",
            (("kind", str),),
            ("size_fn",),
        ),
        Scheme(
            "natural-id",
            _natural_id,
            "a column names each sample's client",
            "column",
            (("column", str),),
            ("columns",),
        ),
    ],
)
PARTITION_SCHEMES = tuple(PARTITIONERS.available())
PARTITION_HELP = (
    f"train: {' | '.join(PARTITION_SCHEMES)}; arguments after a colon (pathological:3, shard:size=30, "
    "size:square, natural-id:COLUMN, inner-dirichlet:0.3); flwr:NAME[:KEY=VALUE,...] for any flwr-datasets "
    "partitioner (the optional extra flwr-datasets)."
)

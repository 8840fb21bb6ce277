"""Splitting a labelled data set over federated clients (spec: federated.md, Clients, partitions).

`partition(labels, num_clients, scheme, rng)` returns one index array per client: disjoint,
covering every sample, every client non-empty, and the same for the same rng seed.

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
"""

from __future__ import annotations

import numpy as np

from ldpfed.validation import LDPValueError, canonical_name, check_generator, check_positive, check_positive_int

PARTITION_SCHEMES = ("iid", "k-classes", "dirichlet")


def partition(
    labels: np.ndarray,
    num_clients: int,
    scheme: str,
    rng: np.random.Generator,
    *,
    classes_per_client: int = 2,
    alpha: float = 0.5,
) -> list[np.ndarray]:
    """Index arrays (int64, sorted) of each client's samples under `scheme`."""
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
    key = canonical_name(scheme)
    if key == "iid":
        parts = _iid(labels.size, num_clients, rng)
    elif key == "k-classes":
        k = check_positive_int(classes_per_client, "classes_per_client")
        parts = _k_classes(labels, num_clients, k, rng)
    elif key == "dirichlet":
        parts = _dirichlet(labels, num_clients, _check_alpha(alpha), rng)
    else:
        raise LDPValueError(f"unknown partition scheme {scheme!r}; available: {', '.join(PARTITION_SCHEMES)}")
    return [np.sort(part).astype(np.int64) for part in parts]


def _check_alpha(alpha: float) -> float:
    return check_positive(alpha, "alpha (Dirichlet concentration)")


def _iid(n: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    return np.array_split(rng.permutation(n), num_clients)


def _k_classes(labels: np.ndarray, num_clients: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
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


def _dirichlet(labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
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

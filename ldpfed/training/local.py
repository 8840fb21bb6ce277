"""A client's local work in federated LDP-SGD: E SGD steps on its data, and evaluation
(spec: federated.md, Federated LDP-SGD).

Minibatches are drawn without replacement within an epoch from a permutation made by a
`torch.Generator` seeded with `seed` (reshuffled when exhausted), so the same seed gives the
same steps. Plain SGD, cross-entropy loss. Clients train inside `single_thread()` (below).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np

from ldpfed.validation import LDPValueError, check_positive, check_positive_int

if TYPE_CHECKING:
    import torch
    from torch import nn


def _tensors(X, y) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    x = torch.as_tensor(np.asarray(X, dtype=np.float32))
    labels = torch.as_tensor(np.asarray(y, dtype=np.int64))
    if x.shape[0] != labels.shape[0] or labels.ndim != 1:
        raise LDPValueError(
            f"X and y must have the same number of rows; got {tuple(x.shape)} and {tuple(labels.shape)}"
        )
    if labels.numel() == 0:
        raise LDPValueError("a client needs at least one training sample")
    return x, labels


def train_local(model: nn.Module, X, y, *, steps: int, lr: float, batch_size: int, seed: int) -> dict:
    """Run `steps` SGD steps on (X, y) in place; returns {"loss": mean minibatch loss, "steps", "samples"}.

    The loss of each step is the minibatch loss before that step's update.
    """
    import torch
    from torch import nn

    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    lr = check_positive(lr, "lr")
    x, labels = _tensors(X, y)
    n = labels.numel()
    batch = min(batch_size, n)
    generator = torch.Generator().manual_seed(check_positive_int(seed, "seed", minimum=0))
    optimizer = torch.optim.SGD(model.parameters(), lr=float(lr))
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    order, position, total = torch.randperm(n, generator=generator), 0, 0.0
    for _ in range(steps):
        if position + batch > n:
            order, position = torch.randperm(n, generator=generator), 0
        index = order[position : position + batch]
        position += batch
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[index]), labels[index])
        loss.backward()
        optimizer.step()
        total += float(loss.detach())
    return {"loss": total / steps, "steps": steps, "samples": n}


def evaluate(model: nn.Module, X, y, batch_size: int = 1024) -> tuple[float, float]:
    """(mean cross-entropy loss, accuracy) of `model` on (X, y)."""
    import torch
    from torch import nn

    batch_size = check_positive_int(batch_size, "batch_size")
    x, labels = _tensors(X, y)
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, labels.numel(), batch_size):
            logits = model(x[start : start + batch_size])
            target = labels[start : start + batch_size]
            loss_sum += float(nn.functional.cross_entropy(logits, target, reduction="sum"))
            correct += int((logits.argmax(dim=1) == target).sum())
    return loss_sum / labels.numel(), correct / labels.numel()


@contextlib.contextmanager
def single_thread():
    """Run torch on one intra-op thread and restore the previous setting afterwards.

    Client training uses it in every engine: a matmul's reduction order depends on the thread
    count, and Ray actors and the local process have different defaults, so without it the same
    seed gave slightly different models under `--engine local` and Flower.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)

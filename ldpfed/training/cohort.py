"""Many clients' local SGD at once (spec: scale.md, Design; federated.md, Federated LDP-SGD).

A node trains its sampled clients of a round as one batched computation: the model's parameters
stacked over clients, the minibatch loss `torch.func.vmap`ped over them and differentiated by
autograd (`torch.autograd.grad` of the clients' summed losses: client k's loss depends on its own
parameters only, so the gradient of the sum is each client's own gradient), per-client minibatches
gathered from a padded per-client data tensor, plain SGD. Not `vmap(grad(loss))`: torch.func's
`grad` imports torch._dynamo on its first call (about 1 s of a node's first round, torch 2.13);
the two agree to float32 rounding (3e-8 on the three models) and both give a client the same
result whatever the other clients of its chunk. Each client's minibatch order comes from
its own `torch.Generator` (seeded from its secret by the caller) exactly as `train_local` draws
it, so a client's steps do not depend on which clients share its node or its chunk. Drawing the
indices is a short per-client loop of `randperm` calls; the training steps are vectorized.

A client whose sample count n_k is below `batch_size` uses batches of n_k (as `train_local`); the
batch axis is padded to the federation's largest batch and padded rows get loss weight 0, so the
gradient is that of the mean loss over the real rows. Clients are processed in chunks of at most
`chunk` clients, so memory stays bounded (`chunk_size` picks one from a memory budget).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ldpfed.validation import LDPValueError

if TYPE_CHECKING:
    import torch
    from torch import nn

DEVICES = ("auto", "cpu", "cuda")
CHUNK_MEMORY_BYTES = 512 * 2**20  # working memory of one chunk (automatic chunk size)


def resolve_device(name: str) -> torch.device:
    """`auto`: cuda when torch sees a GPU, else cpu; `cuda` without a GPU is an LDPValueError."""
    import torch

    if name not in DEVICES:
        raise LDPValueError(f"device must be one of {', '.join(DEVICES)}; got {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise LDPValueError("device cuda: torch sees no CUDA GPU here (use --device cpu or auto)")
    return torch.device(name)


def minibatch_indices(size: int, steps: int, batch_size: int, seed: int) -> torch.Tensor:
    """(steps, min(batch_size, size)) sample indices of one client: `train_local`'s order
    (a permutation from `torch.Generator(seed)`, reshuffled when fewer than a batch remain)."""
    import torch

    batch = min(batch_size, size)
    per_epoch = size // batch
    generator = torch.Generator().manual_seed(seed)
    epochs = math.ceil(steps / per_epoch)
    orders = torch.stack([torch.randperm(size, generator=generator) for _ in range(epochs)])
    return orders[:, : per_epoch * batch].reshape(-1, batch)[:steps]


def padded_data(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(X (clients, n_max, *shape) float32, y (clients, n_max) int64), zero-padded."""
    import torch

    n_max = max(y.size for _, y in parts)
    shape = parts[0][0].shape[1:]
    x = np.zeros((len(parts), n_max, *shape), dtype=np.float32)
    y = np.zeros((len(parts), n_max), dtype=np.int64)
    for row, (xk, yk) in enumerate(parts):
        x[row, : yk.size], y[row, : yk.size] = xk, yk
    return torch.from_numpy(x), torch.from_numpy(y)


def activation_elements(model: nn.Module, input_shape) -> int:
    """Elements of every module's output for one sample (the chunk size's memory estimate)."""
    import torch

    total = 0

    def count(module, inputs, output) -> None:
        nonlocal total
        total += output.numel()

    handles = [module.register_forward_hook(count) for module in model.modules()]
    try:
        with torch.no_grad():
            model(torch.zeros((1, *input_shape), device=next(model.parameters()).device))
    finally:
        for handle in handles:
            handle.remove()
    return total


def chunk_size(model: nn.Module, input_shape, batch: int, budget: int = CHUNK_MEMORY_BYTES) -> int:
    """Clients per chunk within `budget` bytes: per client its parameters, gradients and update
    (float32) and the activations of a batch kept for the backward pass, counted three times."""
    parameters = sum(p.numel() for p in model.parameters())
    per_client = 4 * (4 * parameters + 3 * batch * (activation_elements(model, input_shape) + math.prod(input_shape)))
    return max(1, budget // per_client)


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Each row's cross-entropy loss, -log_softmax(logits)[y]: what torch's `cross_entropy`
    (reduction none) computes, the same operations, bit for bit. Under `vmap` torch's own decomposes
    into `nll_loss_forward`, whose shape check imports torch's symbolic shapes and sympy on a
    node's first step (0.7 s of CPU); log_softmax and gather have batching rules of their own."""
    from torch import nn

    return -nn.functional.log_softmax(logits, dim=-1).gather(-1, y[..., None]).squeeze(-1)


class CohortTrainer:
    """E SGD steps for a stack of clients of one model (see module docstring)."""

    def __init__(self, model: nn.Module, device: torch.device, chunk: int | None = None) -> None:
        import torch
        from torch.func import functional_call, vmap

        self.model = model.to(device)
        self.device = device
        # On a GPU every chunk is computed at the width `chunk` (a short chunk is padded with copies
        # of its first client): cuDNN picks its kernels by the batch's shape, so a client's result
        # would otherwise depend on how many clients share its chunk, i.e. on --nodes. TF32 is off
        # and cuDNN deterministic, so the float32 result is what the CPU computes up to rounding.
        self.pad_to = chunk if device.type == "cuda" else None
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
        self.names = [name for name, _ in model.named_parameters()]

        def loss(params: dict, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
            logits = functional_call(self.model, params, (x,))
            return (weight * cross_entropy(logits, y)).sum()

        self._losses = vmap(loss)

    def _step(self, params: dict, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor) -> tuple[dict, torch.Tensor]:
        """(each client's gradient, each client's loss) at the stacked `params`."""
        import torch

        leaves = {name: p.detach().requires_grad_(True) for name, p in params.items()}
        losses = self._losses(leaves, x, y, weight)
        grads = torch.autograd.grad(losses.sum(), [leaves[name] for name in self.names])
        return dict(zip(self.names, grads)), losses.detach()

    def train(
        self,
        start: list[torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        rows: torch.Tensor,
        index: torch.Tensor,
        weight: torch.Tensor,
        lr: float,
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Train the clients `rows` of the padded data (x (clients, n_max, *shape), y (clients,
        n_max), on the trainer's device) from the same `start` parameters (one tensor per
        parameter). index (c, steps, B): each client's minibatch rows; weight (c, B): 1/b_k on a
        client's b_k real rows, 0 on padding. Returns the final parameters (each (c, *shape)) and
        the per-step minibatch losses before each step (c, steps).

        A chunk of one client is computed as a chunk of two (the client and a copy of it): torch's
        vmap of a convolution's gradient runs another kernel for a batch of one than for several,
        which rounds differently (and so does any layer on more than one intra-op thread), so
        without the copy a client's result would depend on whether it was alone in its chunk,
        i.e. on --nodes and on which clients were sampled. From two clients on, each client's
        rows are computed alike (tests/test_cohort_nodes.py)."""
        import torch

        clients, steps, _ = index.shape
        width = max(2, self.pad_to or 2)
        if clients < width and (clients == 1 or self.pad_to):  # pad with copies of the first client
            pad = width - clients
            rows = torch.cat([rows, rows[:1].repeat(pad)])
            index = torch.cat([index, index[:1].repeat(pad, 1, 1)])
            weight = torch.cat([weight, weight[:1].repeat(pad, 1)])
            trained, losses = self.train(start, x, y, rows, index, weight, lr)
            return [p[:clients] for p in trained], losses[:clients]
        params = {
            name: p.detach().to(self.device).expand(clients, *p.shape).clone() for name, p in zip(self.names, start)
        }
        rows = rows.to(self.device)[:, None]
        index, weight = index.to(self.device), weight.to(self.device)
        losses = torch.empty((clients, steps), device=self.device)
        for step in range(steps):
            chosen = index[:, step]
            grads, losses[:, step] = self._step(params, x[rows, chosen], y[rows, chosen], weight)
            for name in self.names:  # torch.optim.SGD's update, in place
                params[name].add_(grads[name], alpha=-lr)
        return [params[name] for name in self.names], losses


def batch_plan(
    sizes: list[int], seeds: list[int], steps: int, batch_size: int, width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(index (c, steps, width), weight (c, width)) of clients with `sizes` and minibatch `seeds`;
    `width` >= every client's batch min(batch_size, n_k) (the federation's largest, so shapes do
    not depend on which clients are batched together)."""
    import torch

    index = torch.zeros((len(sizes), steps, width), dtype=torch.long)
    weight = torch.zeros((len(sizes), width))
    for row, (size, seed) in enumerate(zip(sizes, seeds)):
        batches = minibatch_indices(size, steps, batch_size, seed)
        index[row, :, : batches.shape[1]] = batches
        weight[row, : batches.shape[1]] = 1.0 / batches.shape[1]
    return index, weight

"""The models of federated LDP-SGD, sized to the data (spec: federated.md; the thesis' models).

- logreg: flatten + linear (multinomial logistic regression).
- mlp: the thesis' MLP, one hidden layer of 200 tanh units.
- cnn: the thesis' CNN, two 5x5 convolutions of 10 and 20 channels, each followed by ReLU and
  2x2 max-pooling, then FC 50 (ReLU) and FC classes. Decision: padding=2 keeps the spatial size
  through each convolution, so the same network runs on 8x8 digits (8 -> 4 -> 2) as well as
  28x28 MNIST and 32x32 CIFAR-10; the FC input size is 20 * (H//4) * (W//4).

Initialization is PyTorch's default (Kaiming-uniform weights, uniform biases) drawn from a
`torch.Generator` seeded with `seed`, so the same seed gives the same model without touching
torch's global random state. `parameter_count` gives a model's size without torch.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ldpfed.validation import LDPValueError, canonical_name, check_positive_int

if TYPE_CHECKING:
    import torch
    from torch import nn

MODEL_NAMES = ("logreg", "mlp", "cnn")
MLP_HIDDEN = 200
CNN_CHANNELS = (10, 20)
CNN_KERNEL = 5
CNN_FC = 50


def build_model(name: str, input_shape, num_classes: int, *, seed: int = 0) -> nn.Module:
    """The model `name` for inputs of `input_shape` (without batch axis) and `num_classes` outputs."""
    import torch

    key, shape, num_classes = _checked(name, input_shape, num_classes)
    generator = torch.Generator().manual_seed(check_positive_int(seed, "seed", minimum=0))
    # torch's own initialization of the layers draws from its global generator: inside fork_rng,
    # which restores that generator's state, then every parameter is drawn again from `generator`.
    # Not built on the meta device instead: its first use imports torch's meta kernels and sympy
    # (0.7-1 s of CPU in each process that builds a model: the driver and every node of a run).
    with torch.random.fork_rng(devices=[]):
        model = _layers(key, shape, num_classes)
    _initialize(model, generator)
    return model


def parameter_count(name: str, input_shape, num_classes: int) -> int:
    """The number of parameters of `build_model(name, input_shape, num_classes)`, from the shapes
    alone (no torch: a run's preflight sizes the update without building the model); the same
    errors for a model that does not fit the data."""
    key, shape, num_classes = _checked(name, input_shape, num_classes)
    features = math.prod(shape)
    if key == "logreg":
        return features * num_classes + num_classes
    if key == "mlp":
        return features * MLP_HIDDEN + MLP_HIDDEN + MLP_HIDDEN * num_classes + num_classes
    channels, height, width = shape
    first, second = CNN_CHANNELS
    kernel = CNN_KERNEL * CNN_KERNEL
    convolutions = channels * first * kernel + first + first * second * kernel + second
    flat = second * (height // 4) * (width // 4)
    return convolutions + flat * CNN_FC + CNN_FC + CNN_FC * num_classes + num_classes


def _checked(name: str, input_shape, num_classes: int) -> tuple[str, tuple, int]:
    """(model key, input shape, classes) once the model is known and fits the shapes."""
    key = canonical_name(name)
    if key not in MODEL_NAMES:
        raise LDPValueError(f"unknown model {name!r}; available: {', '.join(MODEL_NAMES)}")
    shape = tuple(int(s) for s in input_shape)
    if not shape or any(s < 1 for s in shape):
        raise LDPValueError(f"input_shape must be a non-empty tuple of positive sizes, got {input_shape!r}")
    num_classes = check_positive_int(num_classes, "num_classes", minimum=2)
    if key == "cnn":
        _check_image(shape)
    return key, shape, num_classes


def _check_image(shape: tuple) -> None:
    if len(shape) != 3:
        raise LDPValueError(
            f"cnn needs image inputs of shape (channels, height, width), got {shape}; "
            "use logreg or mlp for vector data such as synthetic-fedprox"
        )
    height, width = shape[1:]
    if height < 4 or width < 4:
        raise LDPValueError(f"cnn needs images of at least 4x4 pixels (two 2x2 poolings), got {height}x{width}")


def _layers(key: str, shape: tuple, num_classes: int) -> nn.Module:
    from torch import nn

    features = math.prod(shape)
    if key == "logreg":
        return nn.Sequential(nn.Flatten(), nn.Linear(features, num_classes))
    if key == "mlp":
        return nn.Sequential(
            nn.Flatten(), nn.Linear(features, MLP_HIDDEN), nn.Tanh(), nn.Linear(MLP_HIDDEN, num_classes)
        )
    channels, height, width = shape
    first, second = CNN_CHANNELS
    padding = CNN_KERNEL // 2
    return nn.Sequential(
        nn.Conv2d(channels, first, CNN_KERNEL, padding=padding),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(first, second, CNN_KERNEL, padding=padding),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(second * (height // 4) * (width // 4), CNN_FC),
        nn.ReLU(),
        nn.Linear(CNN_FC, num_classes),
    )


def _initialize(model: nn.Module, generator: torch.Generator) -> None:
    """PyTorch's default reset_parameters for Linear/Conv, drawn from `generator`."""
    import torch
    from torch import nn

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                fan_in = module.weight[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                nn.init.uniform_(module.bias, -bound, bound, generator=generator)

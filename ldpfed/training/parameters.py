"""Model weights as lists of numpy arrays (what Flower's ArrayRecords carry) and as one flat
vector (what the privatizer perturbs).

The list order is `model.state_dict()` order, the same on every client and the server for the
same model name and input shape.
"""

from __future__ import annotations

import numpy as np

from ldpfed.validation import LDPValueError


def get_weights(model) -> list[np.ndarray]:
    """Copies of the model's state (parameters and buffers) as numpy arrays, in state_dict order."""
    return [tensor.detach().cpu().numpy().copy() for tensor in model.state_dict().values()]


def set_weights(model, weights: list) -> None:
    """Load `weights` (in `get_weights` order) into `model`, checking count and shapes."""
    import torch

    state = model.state_dict()
    if len(weights) != len(state):
        raise LDPValueError(f"expected {len(state)} weight arrays for this model, got {len(weights)}")
    new_state = {}
    for (key, current), array in zip(state.items(), weights):
        array = np.asarray(array)
        if tuple(array.shape) != tuple(current.shape):
            raise LDPValueError(f"weight {key!r} must have shape {tuple(current.shape)}, got {array.shape}")
        new_state[key] = torch.as_tensor(array, dtype=current.dtype).clone()
    model.load_state_dict(new_state)


def flatten(arrays: list) -> np.ndarray:
    """Concatenate arrays into one float64 vector (the update the privatizer sees)."""
    if not arrays:
        return np.zeros(0)
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


def unflatten(vector, like: list) -> list[np.ndarray]:
    """Split `vector` back into arrays shaped and typed like `like`."""
    vector = np.asarray(vector)
    sizes = [np.asarray(a).size for a in like]
    if vector.ndim != 1 or vector.size != sum(sizes):
        raise LDPValueError(f"vector must be 1-D with {sum(sizes)} entries, got shape {vector.shape}")
    pieces = np.split(vector, np.cumsum(sizes)[:-1])
    return [piece.reshape(np.shape(a)).astype(np.asarray(a).dtype) for piece, a in zip(pieces, like)]

"""What a training run loads before its first round (spec: scale.md): the preflight sizes the model
from the data's shapes without torch, a model is built without torch's meta device (whose first use
imports sympy), a node's batched cross-entropy is torch's own bit for bit without its decomposition
(which imports sympy under vmap), the digits are read without scikit-learn, and a local Ray's
workers preload Flower's actor class without Flower's simulation entry points."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ldpfed.config import Config
from ldpfed.data.federated import _digits
from ldpfed.protocols.train import check_device
from ldpfed.training.cohort import cross_entropy
from ldpfed.training.models import MODEL_NAMES, build_model, parameter_count
from ldpfed.validation import LDPValueError

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(60,), (1, 8, 8), (1, 28, 28), (3, 32, 32), (2, 4, 9)]

# One fresh process, each step followed by the top-level packages loaded so far. Fails on code
# whose preflight imports torch, whose model building or batched training step imports sympy,
# whose digits import scikit-learn, or whose workers' preload imports Flower's SuperLink state
# (SQLAlchemy) or sympy.
PROBE = """
import importlib, json, sys

def loaded():
    return sorted({name.partition(".")[0] for name in sys.modules})

steps = {}
from ldpfed.config import Config
from ldpfed.tasks import preflight, validated
config = validated(Config().with_options({"task": "train", "clients": 20, "nodes": 2}))
config, _ = preflight(config)
steps["preflight"] = loaded()

import torch
from ldpfed.data.federated import load_federated
from ldpfed.training.cohort import CohortTrainer, batch_plan, padded_data
from ldpfed.training.models import build_model
data = load_federated("digits", 4, seed=1)
model = build_model("cnn", data.input_shape, 10, seed=2)
steps["build"] = loaded()
x, y = padded_data([data.client(k) for k in range(4)])
index, weight = batch_plan([data.client_sizes[k] for k in range(4)], [1, 2, 3, 4], 2, 8, 8)
start = [p.detach().clone() for p in model.parameters()]
CohortTrainer(model, torch.device("cpu"), 4).train(start, x, y, torch.arange(4), index, weight, 0.1)
steps["train"] = loaded()

from simulations.runner import node_modules
for name in node_modules(config):
    importlib.import_module(name)
steps["node modules"] = loaded()
from flwr.simulation import run_simulation  # the deferred package still gives its names
steps["flower's runner"] = callable(run_simulation)
print(json.dumps(steps))
"""


@pytest.fixture(scope="module")
def loaded_after():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_training_run_s_preflight_imports_neither_torch_nor_scikit_learn(loaded_after):
    assert not {"torch", "sklearn"} & set(loaded_after["preflight"])


def test_building_a_model_and_a_batched_training_step_import_no_sympy(loaded_after):
    assert "sympy" not in loaded_after["build"]
    assert "sympy" not in loaded_after["train"] and "sklearn" not in loaded_after["train"]


def test_a_training_node_s_preload_imports_no_superlink_state_and_leaves_flower_s_names(loaded_after):
    assert not {"sqlalchemy", "alembic", "fastapi", "sympy", "sklearn"} & set(loaded_after["node modules"])
    assert {"torch", "flwr", "numba"} <= set(loaded_after["node modules"])
    assert loaded_after["flower's runner"] is True


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_parameter_count_is_the_built_model_s_and_raises_as_building_does(name, shape):
    try:
        model = build_model(name, shape, 7)
    except LDPValueError as error:
        with pytest.raises(LDPValueError, match=str(error)[:30]):
            parameter_count(name, shape, 7)
        return
    assert parameter_count(name, shape, 7) == sum(p.numel() for p in model.parameters())


def test_parameter_count_rejects_an_unknown_model():
    with pytest.raises(LDPValueError, match="unknown model"):
        parameter_count("resnet", (1, 8, 8), 10)


def test_cross_entropy_is_torch_s_bit_for_bit_with_its_gradient_under_vmap():
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(5, 16, 10, generator=generator) * 4
    labels = torch.randint(0, 10, (5, 16), generator=generator)

    def both(function):
        leaf = logits.clone().requires_grad_(True)
        losses = torch.func.vmap(function)(leaf, labels)
        (gradient,) = torch.autograd.grad((losses * torch.linspace(0.5, 2, 16)).sum(), [leaf])
        return losses.detach(), gradient

    ours = both(cross_entropy)
    torch_s = both(lambda z, y: torch.nn.functional.cross_entropy(z, y, reduction="none"))
    assert torch.equal(ours[0], torch_s[0]) and torch.equal(ours[1], torch_s[1])


def test_the_digits_are_scikit_learn_s():
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    x, y, shape, scale = _digits()
    expected_x, expected_y = sklearn_datasets.load_digits(return_X_y=True)
    assert np.array_equal(x, expected_x.astype(np.float32)) and np.array_equal(y, expected_y)
    assert x.dtype == np.float32 and y.dtype == np.int64 and shape == (1, 8, 8) and scale == 1 / 16


def test_the_device_checks_still_refuse_a_gpu_node_training_on_the_cpu():
    config = Config().with_options({"task": "train", "device": "cpu", "gpus-per-node": 0.5}).validated()
    with pytest.raises(LDPValueError, match="needs --device cuda"):
        check_device(config)
    check_device(Config().with_options({"task": "train", "device": "auto"}).validated())  # nothing to refuse
    if not torch.cuda.is_available():
        with pytest.raises(LDPValueError, match="sees no CUDA GPU"):
            check_device(Config().with_options({"task": "train", "device": "cuda"}).validated())

"""The validated configuration of a training run on digits with logistic regression, the run the
benchmarks of a whole federation time; each benchmark adds the options it varies."""

from __future__ import annotations

from ldpfed.config import Config
from ldpfed.tasks import validated


def digits_train_config(options: dict) -> Config:
    """`ldpfed simulate --task train --data digits --model logreg --seed 0` with `options` on top."""
    return validated(
        Config().with_options({"task": "train", "data": "digits", "model": "logreg", "seed": 0, **options})
    )

"""Frequency estimation over categories (spec: mechanisms.md, Frequency estimation by histogram
encoding): the frequency oracles and their registry (`oracles`), and the sampling of m of d
categorical attributes per user (`categorical`).

>>> import numpy as np, ldpfed.frequency as frequency
>>> grr = frequency.get("grr", epsilon=1.0, k=4)
>>> reports = grr.perturb(np.array([0, 1, 2, 3]), np.random.default_rng(0))
"""

from ldpfed.frequency.categorical import COUNTING_ORACLES, AttributeOracles, available_frequency_mechanisms, oracle_kind
from ldpfed.frequency.oracles import (
    FrequencyOracle,
    GeneralizedRR,
    HistogramEncoding,
    OptimizedUnaryEncoding,
    available,
    get,
    get_class,
)

__all__ = [
    "COUNTING_ORACLES",
    "AttributeOracles",
    "FrequencyOracle",
    "GeneralizedRR",
    "HistogramEncoding",
    "OptimizedUnaryEncoding",
    "available",
    "available_frequency_mechanisms",
    "get",
    "get_class",
    "oracle_kind",
]

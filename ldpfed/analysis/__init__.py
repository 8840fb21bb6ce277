"""Predicting utility before running: the CLT framework of analysis.md.

    >>> from ldpfed.analysis import predict
    >>> p = predict("laplace", epsilon=1.0, users=10_000, dims=10, report_dims=10)
    >>> round(p.mse, 6)  # 8 m d / (eps^2 n) = 0.08
    0.08

Modules: moments (column moments), predictor (Theorem 1 with the sampling term), berry_esseen
(Theorem 2), confidence (xi_j(alpha)), breakeven (Algorithm 3), personalized (Theorem 3),
federated (Theorems 12-13, corrected), montecarlo (the empirical counterpart).
"""

from ldpfed.analysis.berry_esseen import BerryEsseenBound, berry_esseen
from ldpfed.analysis.breakeven import BreakEven, break_even
from ldpfed.analysis.confidence import ErrorSupremum, error_supremum
from ldpfed.analysis.federated import RoundPrediction, clipped_coordinate_noise, predict_round
from ldpfed.analysis.moments import ColumnMoments
from ldpfed.analysis.montecarlo import MonteCarloDeviations, simulate_deviations
from ldpfed.analysis.personalized import PersonalizedGroup, predict_personalized
from ldpfed.analysis.predictor import Prediction, load_moments, predict

__all__ = [
    "BerryEsseenBound",
    "BreakEven",
    "ColumnMoments",
    "ErrorSupremum",
    "MonteCarloDeviations",
    "PersonalizedGroup",
    "Prediction",
    "RoundPrediction",
    "berry_esseen",
    "break_even",
    "clipped_coordinate_noise",
    "error_supremum",
    "load_moments",
    "predict",
    "predict_personalized",
    "predict_round",
    "simulate_deviations",
]

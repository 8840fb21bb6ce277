"""Membership inference against a model trained by `ldpfed dpsgd --mia` (thesis section
5.3.5, Table 5.4).

The target model trains on a random half of the training data (the members); the other half are
the non-members. Two attacks score every example of the pool:
- loss threshold (Yeom et al. 2018): score = -loss of the target model on the example;
- LiRA, offline (Carlini et al. 2022): `shadows` reference models are trained with the same
  algorithm, noise and budget on random halves of the pool; for each example the logit-scaled
  confidence phi = log(p_y / (1 - p_y)) of the reference models that did NOT train on it is fitted
  by a Gaussian, and the score is the target's phi standardized by it (one-sided: members are
  more confident).
Each attack's threshold is chosen on a random half of the pool (selection) and evaluated on the
other half: accuracy with its exact (Clopper–Pearson) 95% interval, and the AUC (Mann–Whitney)
with a 95% interval from the Hanley–McNeil standard error. Chance is 50% accuracy, AUC 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.stats import beta as beta_distribution
from scipy.stats import norm, rankdata

MIA_STREAM = 1_300  # spawn key of the membership split and the attack halves (independent of training)
CONFIDENCE = 0.95


def member_split(n: int, seed: int) -> np.ndarray:
    """Boolean mask of the members: a uniformly random half of the n training examples."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(MIA_STREAM,)))
    mask = np.zeros(n, dtype=bool)
    mask[rng.permutation(n)[: n // 2]] = True
    return mask


def example_scores(model, x, y) -> tuple[np.ndarray, np.ndarray]:
    """(cross-entropy loss, logit-scaled confidence phi) of each example."""
    import torch

    with torch.no_grad():
        model.eval()
        log_probs = torch.log_softmax(model(x), dim=1).double()
    log_true = log_probs[torch.arange(len(y)), y]
    others = log_probs.clone()
    others[torch.arange(len(y)), y] = -math.inf
    log_rest = torch.logsumexp(others, dim=1)  # log(1 - p_y), computed without cancellation
    return (-log_true).numpy(), (log_true - log_rest).numpy()


def auc_with_interval(member_scores, non_member_scores) -> dict:
    """AUC = P(score of a member > score of a non-member) (ties count 1/2), Hanley–McNeil interval."""
    m, n = len(member_scores), len(non_member_scores)
    ranks = rankdata(np.concatenate([member_scores, non_member_scores]))
    auc = (ranks[:m].sum() - m * (m + 1) / 2.0) / (m * n)
    q1, q2 = auc / (2.0 - auc), 2.0 * auc * auc / (1.0 + auc)
    se = math.sqrt(max(auc * (1 - auc) + (m - 1) * (q1 - auc * auc) + (n - 1) * (q2 - auc * auc), 0.0) / (m * n))
    z = norm.ppf(0.5 + CONFIDENCE / 2.0)
    return {"auc": float(auc), "auc_low": float(max(0.0, auc - z * se)), "auc_high": float(min(1.0, auc + z * se))}


def accuracy_with_interval(correct: int, total: int) -> dict:
    alpha = 1.0 - CONFIDENCE
    low = beta_distribution.ppf(alpha / 2, correct, total - correct + 1) if correct > 0 else 0.0
    high = beta_distribution.ppf(1 - alpha / 2, correct + 1, total - correct) if correct < total else 1.0
    return {"accuracy": correct / total, "accuracy_low": float(low), "accuracy_high": float(high)}


def evaluate_attack(scores, is_member, rng: np.random.Generator) -> dict:
    """Threshold chosen on a random half (best accuracy of `score >= c`), evaluated on the other."""
    order = rng.permutation(len(scores))
    selection, held_out = order[: len(order) // 2], order[len(order) // 2 :]
    candidates = np.unique(scores[selection])
    sel_scores, sel_member = scores[selection], is_member[selection]
    # accuracy of predicting "member" when score >= c, for every candidate c (sorted sweep)
    sorted_scores = np.sort(sel_scores)
    member_sorted = np.sort(sel_scores[sel_member])
    members_above = len(member_sorted) - np.searchsorted(member_sorted, candidates, side="left")
    all_above = len(sorted_scores) - np.searchsorted(sorted_scores, candidates, side="left")
    non_members_below = (len(sel_scores) - sel_member.sum()) - (all_above - members_above)
    threshold = candidates[np.argmax(members_above + non_members_below)]
    predicted = scores[held_out] >= threshold
    correct = int(np.sum(predicted == is_member[held_out]))
    result = {"threshold": float(threshold), "evaluated_on": int(len(held_out))}
    result.update(accuracy_with_interval(correct, len(held_out)))
    result.update(auc_with_interval(scores[held_out][is_member[held_out]], scores[held_out][~is_member[held_out]]))
    return result


def membership_inference(
    train_shadow: Callable, seed: int, x_all, y_all, members: np.ndarray, model, *, shadows: int = 8
) -> dict:
    """Both attacks on the target `model` trained on the examples where `members` is True.
    `train_shadow(x, y, seed)` trains one of the attacker's reference models as the target was
    trained (the attacker knows the training code), from the attacker's own `seed`."""
    n = len(members)
    loss, phi = example_scores(model, x_all, y_all)
    shadow_phi, shadow_in = np.empty((shadows, n)), np.empty((shadows, n), dtype=bool)
    for k in range(shadows):
        shadow_seed = int(np.random.SeedSequence(seed, spawn_key=(MIA_STREAM, k + 1)).generate_state(1)[0])
        shadow_in[k] = member_split(n, shadow_seed)
        # the attacker's own reference models: its own randomness, reproducible from the run's seed
        shadow = train_shadow(x_all[shadow_in[k]], y_all[shadow_in[k]], shadow_seed)
        shadow_phi[k] = example_scores(shadow, x_all, y_all)[1]
    out = ~shadow_in  # references that did not train on the example
    count_out = out.sum(axis=0)
    mean_out = np.where(out, shadow_phi, 0.0).sum(axis=0) / np.maximum(count_out, 1)
    var_out = np.where(out, (shadow_phi - mean_out) ** 2, 0.0).sum(axis=0) / np.maximum(count_out, 1)
    pooled_sd = math.sqrt(np.sum(np.where(out, (shadow_phi - mean_out) ** 2, 0.0)) / max(int(count_out.sum()), 1))
    # Examples with fewer than 2 OUT references get the pooled sd (and, with none, the mean of all).
    mean_out = np.where(count_out > 0, mean_out, np.sum(np.where(out, shadow_phi, 0.0)) / max(int(count_out.sum()), 1))
    sd_out = np.where(count_out > 1, np.maximum(np.sqrt(var_out), 1e-3), max(pooled_sd, 1e-3))
    lira = (phi - mean_out) / sd_out
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(MIA_STREAM, 0)))
    return {
        "members": int(members.sum()),
        "non_members": int(n - members.sum()),
        "shadows": shadows,
        "confidence": CONFIDENCE,
        "attacks": {
            "loss-threshold": evaluate_attack(-loss, members, rng),
            "lira-offline": evaluate_attack(lira, members, rng),
        },
    }

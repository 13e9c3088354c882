"""How close a judge's P is to a reference's binary answer (the teacher's guess, or the experts' gold): the
numbers the side-by-side of base model, student and teacher shows, and bench/distill.py reports."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_auc_score

from models_llm.metrics.calibration_error import brier, ece


@dataclass(frozen=True)
class Agreement:
    """AUROC (None when the reference has one class only), ECE (10 equal-width bins, DIRAS's), Brier and the
    accuracy of P >= 0.5, over `n` pairs."""

    n: int
    auroc: float | None
    ece: float | None
    brier: float | None
    accuracy: float | None


def agreement(p, reference) -> Agreement:
    """`p` (P(relevant) per pair) against `reference` (0/1 per pair)."""
    p, y = np.asarray(p, dtype=float), np.asarray(reference, dtype=int)
    if p.shape != y.shape:
        raise ValueError(f"{p.size} probabilities for {y.size} reference answers")
    if p.size == 0:
        return Agreement(n=0, auroc=None, ece=None, brier=None, accuracy=None)
    auroc = float(roc_auc_score(y, p)) if 0 < y.sum() < y.size else None
    return Agreement(n=int(p.size), auroc=auroc, ece=ece(p, y), brier=brier(p, y),
                     accuracy=float(np.mean((p >= 0.5) == (y == 1))))

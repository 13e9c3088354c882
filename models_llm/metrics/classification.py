"""Agreement of binary calls with binary gold from confusion counts (precision, recall, F1, accuracy, Cohen's
kappa), vectorised so that bootstrap draws reuse it, plus kappa per query-metadata group (DisastIR)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def ratio(numerator, denominator) -> np.ndarray:
    """numerator / denominator, nan where the denominator is 0 (no warning: undefined, not an error)."""
    numerator, denominator = np.broadcast_arrays(np.asarray(numerator, float), np.asarray(denominator, float))
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


@dataclass(frozen=True)
class Confusion:
    """Counts of (prediction, gold) pairs; each field is a scalar or an array of draws."""

    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    tn: np.ndarray

    @classmethod
    def of(cls, gold, predicted) -> Confusion:
        gold, predicted = np.asarray(gold, bool), np.asarray(predicted, bool)
        counts = np.bincount(2 * gold + predicted, minlength=4)
        return cls(tp=counts[3], fp=counts[1], fn=counts[2], tn=counts[0])

    @classmethod
    def from_columns(cls, counts: np.ndarray) -> Confusion:
        """From an (..., 4) array ordered tp, fp, fn, tn."""
        return cls(tp=counts[..., 0], fp=counts[..., 1], fn=counts[..., 2], tn=counts[..., 3])

    @property
    def n(self):
        return self.tp + self.fp + self.fn + self.tn

    def precision(self) -> np.ndarray:
        return ratio(self.tp, self.tp + self.fp)

    def recall(self) -> np.ndarray:
        return ratio(self.tp, self.tp + self.fn)

    def f1(self) -> np.ndarray:
        # 2TP / (2TP + FP + FN) equals the harmonic mean of precision and recall wherever both exist, and is
        # 0 (not undefined) when the judge calls nothing relevant but gold has relevant pairs, as in sklearn.
        return ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn)

    def accuracy(self) -> np.ndarray:
        return ratio(self.tp + self.tn, self.n)

    def kappa(self) -> np.ndarray:
        """Cohen's kappa; nan unless gold has both classes. With one gold class observed and chance agreement
        are equal whatever the judge says, so kappa would be 0 (or 0/0): a number that says nothing."""
        n = np.asarray(self.n, float)
        gold_pos, gold_neg = self.tp + self.fn, self.fp + self.tn
        observed = ratio(self.tp + self.tn, n)
        expected = ratio((self.tp + self.fp) * gold_pos + (self.fn + self.tn) * gold_neg, n * n)
        kappa = ratio(observed - expected, 1.0 - expected)
        return np.where((gold_pos > 0) & (gold_neg > 0), kappa, np.nan)


def cohen_kappa(a: np.ndarray, b: np.ndarray, labels: list[int]) -> float | None:
    """Unweighted Cohen's kappa of two raters over the same items with labels from `labels`; None when it
    is undefined: no items, or chance agreement 1 (both raters used one and the same label throughout)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if a.size == 0:
        return None
    known = np.asarray(sorted(labels))
    k = known.size
    matrix = np.bincount(np.searchsorted(known, a) * k + np.searchsorted(known, b), minlength=k * k).reshape(k, k)
    n = a.size
    observed = np.trace(matrix) / n
    expected = float(matrix.sum(axis=1) @ matrix.sum(axis=0)) / (n * n)
    if expected == 1.0:
        return None
    return float((observed - expected) / (1.0 - expected))


@dataclass(frozen=True)
class GroupKappa:
    """Kappa of the judge vs gold (both binary) over the pairs whose query has `value` under a metadata key."""

    value: str
    n: int
    kappa: float | None
    reason: str | None


def _is_missing(values: np.ndarray) -> np.ndarray:
    # Elementwise on the object array (no Python loop); v != v is true only for nan.
    return (values == None) | (values != values)  # noqa: E711


def group_kappas(values: np.ndarray, gold: np.ndarray, predicted: np.ndarray) -> list[GroupKappa]:
    """One GroupKappa per distinct non-missing value (None or nan is missing), in sorted order of str(value)."""
    present = ~_is_missing(values)
    names, code = np.unique(values[present].astype(str), return_inverse=True)
    cells = np.bincount(
        4 * code.reshape(-1) + 2 * gold[present] + predicted[present], minlength=4 * names.size
    ).reshape(-1, 4)
    confusion = Confusion(tp=cells[:, 3], fp=cells[:, 1], fn=cells[:, 2], tn=cells[:, 0])
    kappas = confusion.kappa()
    out = []
    for name, n, kappa, pos, neg in zip(names, confusion.n, kappas, confusion.tp + confusion.fn,
                                        confusion.fp + confusion.tn):
        reason = None if np.isfinite(kappa) else single_class_reason(int(pos), int(neg))
        out.append(GroupKappa(str(name), int(n), None if reason else float(kappa), reason))
    return out


def single_class_reason(n_relevant: int, n_not_relevant: int) -> str:
    n = n_relevant + n_not_relevant
    if n == 0:
        return "no gold-judged pairs"
    which = "relevant" if n_not_relevant == 0 else "non-relevant"
    return f"needs both relevant and non-relevant gold pairs; all {n} are {which}"

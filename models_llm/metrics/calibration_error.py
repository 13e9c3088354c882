"""How well probabilities match outcomes: expected calibration error (equal-width and equal-count bins),
Brier score, and the reliability-diagram bins behind them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability diagram: P in (lower, upper] (the first bin also holds P = lower)."""

    lower: float
    upper: float
    count: int
    mean_p: float | None
    fraction_relevant: float | None


def _as_arrays(p, y) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p, dtype=float)
    y = np.asarray(y, dtype=float)
    if p.shape != y.shape or p.ndim != 1:
        raise ValueError(f"p and y must be 1-d arrays of one length, got shapes {p.shape} and {y.shape}")
    if p.size and (np.nanmin(p) < 0.0 or np.nanmax(p) > 1.0 or np.isnan(p).any()):
        raise ValueError("p must hold probabilities within [0, 1]")
    return p, y


def equal_width_bin_index(p, bins: int = 10) -> np.ndarray:
    """Bin of each P among `bins` equal-width bins closed on the right: [0, 1/b], (1/b, 2/b], ..., ((b-1)/b, 1]."""
    # Edges as k / bins (correctly rounded, so 0.3 is the float 0.3), not k * 0.1 or ceil(p * bins): with
    # those, P = 0.3 lands in (0.3, 0.4].
    edges = np.arange(1, bins) / bins
    return np.searchsorted(edges, np.asarray(p, dtype=float), side="left")


def reliability_bins(p, y, bins: int = 10) -> list[ReliabilityBin]:
    """The equal-width bins of a reliability diagram, empty ones included (count 0, means None)."""
    p, y = _as_arrays(p, y)
    index = equal_width_bin_index(p, bins)
    counts = np.bincount(index, minlength=bins)
    sum_p = np.bincount(index, weights=p, minlength=bins)
    sum_y = np.bincount(index, weights=y, minlength=bins)
    out = []
    for b in range(bins):
        n = int(counts[b])
        out.append(
            ReliabilityBin(
                lower=b / bins,
                upper=(b + 1) / bins,
                count=n,
                mean_p=float(sum_p[b] / n) if n else None,
                fraction_relevant=float(sum_y[b] / n) if n else None,
            )
        )
    return out


def ece(p, y, bins: int = 10) -> float:
    """Expected calibration error with equal-width bins closed on the right: sum over bins of
    (bin size / n) * |mean P - fraction relevant| (as `uncertainty-calibration`'s get_ece, used by DIRAS)."""
    p, y = _as_arrays(p, y)
    if p.size == 0:
        raise ValueError("ECE of no predictions")
    index = equal_width_bin_index(p, bins)
    sum_p = np.bincount(index, weights=p, minlength=bins)
    sum_y = np.bincount(index, weights=y, minlength=bins)
    return float(np.abs(sum_p - sum_y).sum() / p.size)


def ece_adaptive(p, y, bins: int = 10) -> float:
    """ECE with `bins` equal-count bins over P sorted ascending (sizes differ by at most one)."""
    p, y = _as_arrays(p, y)
    if p.size == 0:
        raise ValueError("ECE of no predictions")
    order = np.argsort(p, kind="stable")
    total = 0.0
    for chunk in np.array_split(order, min(bins, p.size)):
        total += abs(p[chunk].sum() - y[chunk].sum())
    return float(total / p.size)


def brier(p, y) -> float:
    """Mean squared difference between P and the binary outcome."""
    p, y = _as_arrays(p, y)
    if p.size == 0:
        raise ValueError("Brier score of no predictions")
    return float(np.mean((p - y) ** 2))

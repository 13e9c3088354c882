"""DIRAS App. M, hand-checking a judge against the human labels: a re-annotation sample drawn within each cell
of the judge-vs-human confusion matrix, stratified by the judge's confidence, and the agreement-vs-confidence
threshold curve (Fig. 4, 16-18).

App. M: "we sample 6 (document, query) pairs per question/query ... two samples with a Llama3-Ask confidence
above 0.9, two between 0.9 and 0.7, and two below 0.7"; and "the percentage of agreement between model and our
human annotation as well as the data remaining when adjusting the confidence threshold".

The judge says relevant when P >= `threshold`; its confidence is the confidence of what it says: P for a Yes,
1 - P for a No (for an Ask judge at 0.5, its stated [Confidence])."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models_llm.metrics.classification import cohen_kappa

# The paper's bands: above 0.9, between 0.9 and 0.7, below 0.7 (0.9 itself is "between"; 0.7 too).
BANDS: tuple[str, ...] = ("high", "mid", "low")
# judge says, human says -> the cell. The paper takes the model as the reference and names the cells after
# the human: "false negatives (model says relevant, ClimRetrieve-human says not relevant)".
CELLS: dict[tuple[bool, bool], str] = {
    (True, True): "judge_yes_human_yes", (True, False): "judge_yes_human_no",
    (False, True): "judge_no_human_yes", (False, False): "judge_no_human_no",
}
PAPER_NAMES = {"judge_yes_human_yes": "TP", "judge_yes_human_no": "FN", "judge_no_human_yes": "FP",
               "judge_no_human_no": "TN"}
# The curve's confidence thresholds: from the least a judge's own label can have (0.5) to 0.99 (Fig. 4 reads
# "higher than 99%").
CURVE_THRESHOLDS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


def judge_confidence(p: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """The confidence of the judge's label: P where P >= threshold (Yes), else 1 - P."""
    p = np.asarray(p, float)
    return np.where(p >= threshold, p, 1.0 - p)


def confidence_band(confidence: np.ndarray) -> np.ndarray:
    """Each confidence's band name: high (> 0.9), mid (0.7 to 0.9, both ends), low (< 0.7)."""
    confidence = np.asarray(confidence, float)
    return np.select([confidence > 0.9, confidence >= 0.7], ["high", "mid"], "low").astype(object)


@dataclass(frozen=True)
class Drawn:
    """One sampled pair: its index in the arrays given, its cell, band and the judge's confidence."""

    index: int
    cell: str
    band: str
    confidence: float


def reannotation_sample(query: np.ndarray, p: np.ndarray, human_yes: np.ndarray, *, threshold: float = 0.5,
                        per_band: int = 2, seed: int = 0, cells: tuple[str, ...] | None = None) -> list[Drawn]:
    """Within each confusion cell (all of CELLS, or `cells`), each query and each confidence band, `per_band`
    pairs drawn without replacement (all of them where fewer), seeded: the same arrays and seed draw the same
    pairs. In cell, query, band order."""
    if per_band < 1:
        raise ValueError(f"per_band must be 1 or more, got {per_band}")
    unknown = sorted(set(cells or ()) - set(CELLS.values()))
    if unknown:
        raise ValueError(f"unknown cells {unknown}; the cells are {list(CELLS.values())}")
    query, p, human_yes = np.asarray(query), np.asarray(p, float), np.asarray(human_yes, bool)
    judge_yes = p >= threshold
    confidence = judge_confidence(p, threshold)
    band = confidence_band(confidence)
    rng = np.random.default_rng(seed)
    drawn: list[Drawn] = []
    for (says, truth), cell in CELLS.items():
        if cells is not None and cell not in cells:
            continue
        in_cell = (judge_yes == says) & (human_yes == truth)
        for q in sorted(set(query[in_cell].tolist()), key=str):
            for name in BANDS:
                pool = np.flatnonzero(in_cell & (query == q) & (band == name))
                chosen = np.sort(rng.choice(pool, size=min(per_band, pool.size), replace=False)) if pool.size else pool
                drawn += [Drawn(int(i), cell, name, float(confidence[i])) for i in chosen]
    return drawn


@dataclass(frozen=True)
class CurvePoint:
    """Among the pairs whose judge confidence is at least `threshold`: how many (`kept`, and as a share of all,
    `remaining`), the share where the human agrees with the judge (`agreement`), and Cohen's kappa (only on the
    curve over both of the judge's labels; None where undefined)."""

    threshold: float
    kept: int
    remaining: float | None
    agreement: float | None
    kappa: float | None


def agreement_curve(p: np.ndarray, human_yes: np.ndarray, *, threshold: float = 0.5, side: bool | None = None,
                    thresholds: tuple[float, ...] = CURVE_THRESHOLDS) -> list[CurvePoint]:
    """The agreement-vs-confidence curve over the pairs the judge says Yes to (`side` True), No to (False), or all
    (None). `threshold` decides the judge's label; `thresholds` are the confidence cut-offs."""
    p, human_yes = np.asarray(p, float), np.asarray(human_yes, bool)
    judge_yes = p >= threshold
    confidence = judge_confidence(p, threshold)
    on_side = np.ones(p.size, bool) if side is None else judge_yes == side
    total = int(on_side.sum())
    points = []
    for cut in thresholds:
        kept = on_side & (confidence >= cut)
        n = int(kept.sum())
        agree = float(np.mean(judge_yes[kept] == human_yes[kept])) if n else None
        kappa = cohen_kappa(judge_yes[kept].astype(int), human_yes[kept].astype(int), [0, 1]) \
            if side is None and n else None
        points.append(CurvePoint(threshold=cut, kept=n, remaining=n / total if total else None, agreement=agree,
                                 kappa=kappa))
    return points

"""Agreement among human annotators of the same pairs (Cohen's kappa per annotator pair, binary and graded;
Krippendorff's ordinal alpha) and which pairs their labels leave uncertain (DIRAS App. C)."""
from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import krippendorff
import numpy as np

from models_llm.metrics.classification import cohen_kappa
from models_llm.metrics.judge_data import ScaleSpec


def is_uncertain(grades: Sequence[int], *, top_grade: int) -> bool:
    """Whether a pair's individual labels disagree enough to call it uncertain: they hold both grade 0 and
    the top grade, or two or more of them are intermediate grades (0 < grade < top)."""
    grades = list(grades)
    intermediate = sum(1 for g in grades if 0 < g < top_grade)
    return (top_grade > 0 and 0 in grades and top_grade in grades) or intermediate >= 2


def _label_matrix(item, annotator, grade) -> tuple[list[str], np.ndarray]:
    """annotators x items, -1 where an annotator did not label the item; a later label of the same
    annotator and item replaces an earlier one."""
    _, item_code = np.unique(np.asarray(item), return_inverse=True)
    names, who = np.unique(np.asarray([str(a) for a in annotator], dtype=str), return_inverse=True)
    item_code, who = item_code.reshape(-1), who.reshape(-1)
    n_items = int(item_code.max()) + 1 if item_code.size else 0
    cell = who * n_items + item_code
    _, last_from_end = np.unique(cell[::-1], return_index=True)
    keep = cell.size - 1 - last_from_end
    matrix = np.full((names.size, n_items), -1, dtype=np.int64)
    matrix[who[keep], item_code[keep]] = np.asarray(grade, dtype=np.int64)[keep]
    return names.tolist(), matrix


def _weighted_mean(pairs: list[dict], key: str) -> float | None:
    scored = [(pair[key], pair["n"]) for pair in pairs if pair[key] is not None]
    total = sum(n for _, n in scored)
    return sum(k * n for k, n in scored) / total if total else None


def _overall_reason(n_annotators: int, n_overlap: int) -> str:
    if n_annotators < 2:
        return f"needs at least two annotators, there is {n_annotators}"
    if n_overlap == 0:
        return "no pair is labelled by two annotators"
    return "undefined for every annotator pair: each gave all pairs it shares with the other one same label"


def _alpha(matrix: np.ndarray, grades: list[int]) -> tuple[float | None, str | None]:
    shared = matrix[:, (matrix >= 0).sum(axis=0) >= 2]
    if shared.shape[0] < 2 or shared.shape[1] == 0:
        return None, _overall_reason(shared.shape[0], shared.shape[1])
    if np.unique(shared[shared >= 0]).size < 2:
        return None, "every label of the pairs labelled twice or more is the same grade: nothing to agree on"
    data = np.where(shared >= 0, shared, np.nan)
    return float(krippendorff.alpha(reliability_data=data, value_domain=grades, level_of_measurement="ordinal")), None


def human_agreement(item: Sequence[int], annotator: Sequence[str], grade: Sequence[int], scale: ScaleSpec) -> dict:
    """Agreement of the annotators: Cohen's kappa on binary labels (grade >= relevant_from) and on grades
    (unweighted) for each annotator pair over the items both labelled, their means weighted by that
    overlap, and Krippendorff's alpha (ordinal) over all annotators. One row per label."""
    if not len(item) == len(annotator) == len(grade):
        raise ValueError("item, annotator and grade need one entry per label")
    scale.gain_of(np.asarray(grade, dtype=np.int64))
    names, matrix = _label_matrix(item, annotator, grade)
    labelled = matrix >= 0
    n_overlap = int((labelled.sum(axis=0) >= 2).sum())
    reasons: dict[str, str] = {}
    pairs = []
    for (i, a), (j, b) in combinations(enumerate(names), 2):
        both = labelled[i] & labelled[j]
        ga, gb = matrix[i, both], matrix[j, both]
        pair = {
            "a": a,
            "b": b,
            "n": int(both.sum()),
            "kappa_binary": cohen_kappa(ga >= scale.relevant_from, gb >= scale.relevant_from, [0, 1]),
            "kappa_graded": cohen_kappa(ga, gb, scale.grades),
        }
        for key in ("kappa_binary", "kappa_graded"):
            if pair[key] is None:
                reasons[f"annotator_pairs[{a}, {b}].{key}"] = (
                    "no pair labelled by both" if pair["n"] == 0
                    else "chance agreement is 1: both gave every shared pair one and the same label"
                )
        pairs.append(pair)
    out = {
        "human_kappa_binary": _weighted_mean(pairs, "kappa_binary"),
        "human_kappa_graded": _weighted_mean(pairs, "kappa_graded"),
    }
    for key in out:
        if out[key] is None:
            reasons[key] = _overall_reason(len(names), n_overlap)
    out["krippendorff_alpha"], alpha_reason = _alpha(matrix, scale.grades)
    if alpha_reason:
        reasons["krippendorff_alpha"] = alpha_reason
    return {**out, "n_overlap": n_overlap, "annotator_pairs": pairs, "null_reasons": reasons}

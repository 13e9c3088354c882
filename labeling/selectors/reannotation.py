"""DIRAS App. M on a project: the pairs to hand-check again, drawn within each cell of a judge's confusion matrix
against the human gold (judge Yes when P >= threshold; human Yes from the scale's relevant grade) by query and by
the judge's confidence band, seeded; and the agreement-vs-confidence-threshold curve of the judge against the
current gold (models_llm.metrics.reannotation). The judge's P is its raw P on the gold pairs, as the validation
report reads it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labeling.exceptions import DomainError
from labeling.models import Pair, Project
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.scoring import judges_with_judgments
from labeling.selectors.streams import external_ids
from labeling.selectors.validation import ReportOptions, gold_set, judge_arrays
from models_llm.metrics.reannotation import (
    CELLS,
    CURVE_THRESHOLDS,
    PAPER_NAMES,
    CurvePoint,
    agreement_curve,
    reannotation_sample,
)

DEFAULT_PER_BAND = 2  # the paper: "two samples" per band and query
CURVE_SIDES = {"judge_yes": True, "judge_no": False, "all": None}


class ReannotationError(DomainError):
    """The sample or curve cannot be drawn as asked (a threshold outside (0, 1), a per-band count below 1, an
    unknown cell)."""


@dataclass(frozen=True)
class SampledPair:
    query: str
    doc: str
    cell: str
    band: str
    p: float
    confidence: float
    gold: int


@dataclass(frozen=True)
class Reannotation:
    """The sample (in cell, query, band order), each cell's size on the gold pairs, and the curves by side."""

    project: str
    judge: str
    threshold: float
    per_band: int
    seed: int
    cells: dict[str, int]
    sample: list[SampledPair]
    curves: dict[str, list[CurvePoint]]
    n_gold: int
    n_unjudged: int


def _check(threshold: float, per_band: int, cells: tuple[str, ...] | None) -> None:
    if not 0.0 < threshold < 1.0:
        raise ReannotationError(f"threshold must be between 0 and 1 (exclusive), got {threshold}")
    if per_band < 1:
        raise ReannotationError(f"per_band must be 1 or more, got {per_band}")
    unknown = sorted(set(cells or ()) - set(CELLS.values()))
    if unknown:
        raise ReannotationError(f"unknown cells {unknown}; the cells are {list(CELLS.values())}")


def default_reannotation_judge(*, project: Project) -> str:
    """The project's first judge with judgments (by name); ReannotationError when it has none."""
    name = judges_with_judgments(project=project).order_by("name").values_list("name", flat=True).first()
    if name is None:
        raise ReannotationError(f"project {project.slug!r} has no judge with judgments to check")
    return name


def reannotation_report(*, project: Project, judge: str, threshold: float = 0.5, per_band: int = DEFAULT_PER_BAND,
                        seed: int = 0, cells: tuple[str, ...] | None = None, all_pairs: bool = False) -> Reannotation:
    """Judge `judge`'s re-annotation sample and agreement curves on the project's gold pairs (with `all_pairs`,
    pool pairs nobody graded count as human No, ClimRetrieve's setting). NotFound for an unknown judge,
    ReannotationError for bad arguments."""
    _check(threshold, per_band, cells)
    found = judge_by_name(project=project, name=judge)
    gold = gold_set(project, ReportOptions(all_pairs=all_pairs))
    arrays = judge_arrays(gold, found)
    at = np.searchsorted(gold.pair_ids, arrays.pair_ids)
    grades = gold.gold[at]
    human_yes = grades >= project.label_scale.relevant_from
    # The pool's pairs read once by project, not `id IN (...)`: a large gold set passes SQLite's variable limit.
    judged = set(arrays.pair_ids.tolist())
    queries, passages = external_ids(project)
    names = {pair_id: (queries[query_id], passages[passage_id]) for pair_id, query_id, passage_id in
             Pair.objects.filter(project=project).values_list("id", "query_id", "passage_id").iterator(chunk_size=20_000)
             if pair_id in judged}
    query = np.array([names[int(pair_id)][0] for pair_id in arrays.pair_ids], dtype=object)
    drawn = reannotation_sample(query, arrays.p, human_yes, threshold=threshold, per_band=per_band, seed=seed,
                                cells=cells)
    judge_yes = arrays.p >= threshold
    sizes = {cell: int(np.sum((judge_yes == says) & (human_yes == truth))) for (says, truth), cell in CELLS.items()}
    return Reannotation(
        project=project.slug, judge=judge, threshold=threshold, per_band=per_band, seed=seed, cells=sizes,
        sample=[SampledPair(query=names[int(arrays.pair_ids[d.index])][0], doc=names[int(arrays.pair_ids[d.index])][1],
                            cell=d.cell, band=d.band, p=float(arrays.p[d.index]), confidence=d.confidence,
                            gold=int(grades[d.index])) for d in drawn],
        curves={name: agreement_curve(arrays.p, human_yes, threshold=threshold, side=side)
                for name, side in CURVE_SIDES.items()},
        n_gold=int(gold.pair_ids.size), n_unjudged=arrays.n_unjudged,
    )


def reannotation_json(found: Reannotation) -> dict:
    """The report as the API and `reannotation_sample --json` give it."""
    return {
        "project": found.project, "judge": found.judge, "threshold": found.threshold, "per_band": found.per_band,
        "seed": found.seed, "gold_pairs": found.n_gold, "unjudged": found.n_unjudged,
        "cells": {cell: {"pairs": size, "paper": PAPER_NAMES[cell]} for cell, size in found.cells.items()},
        "bands": {"high": "confidence > 0.9", "mid": "0.7 <= confidence <= 0.9", "low": "confidence < 0.7"},
        "sample": [vars(row) for row in found.sample],
        "curve_thresholds": list(CURVE_THRESHOLDS),
        "curves": {name: [vars(point) for point in points] for name, points in found.curves.items()},
    }

"""Whether a judge's grades say anything (models_llm.metrics.degenerate): its calls on every pair it judged, as a
qrels export from it grades them (its relevance rule or the threshold asked, on the calibrated P where the rule
reads it), and against gold on the gold pairs it judged. The Validation page, the Systems page and API,
`evaluate_runs`, the qrels export (page, API, command) and releases all ask here."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from labeling.models import Judge, Project
from labeling.selectors.export import ExportSource, export_source_parse, judge_probabilities
from labeling.selectors.qrels_sources import QrelsSource
from labeling.selectors.validation import GoldGrades, gold_grades
from models_llm.metrics import Degeneracy, degeneracy


def _judged(source: ExportSource, gold: GoldGrades | None) -> Degeneracy:
    project = source.judge.project
    gold = gold if gold is not None else gold_grades(project)
    rows = list(judge_probabilities(source))
    pair_ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    calls = np.asarray(source.rule.relevant(np.fromiter((row[1] for row in rows), dtype=float, count=len(rows))),
                       bool)
    at = np.searchsorted(gold.pair_ids, pair_ids)
    hit = at < gold.pair_ids.size
    hit[hit] = gold.pair_ids[at[hit]] == pair_ids[hit]
    return degeneracy(calls, gold.grades[at[hit]] >= project.label_scale.relevant_from, calls[hit])


def source_degeneracy(*, source: ExportSource, gold: GoldGrades | None = None) -> Degeneracy | None:
    """The degeneracy rule on the judge of `source` as the source grades (None: human grades, no judge). `gold`:
    the project's gold grades when they are at hand (several sources of one report), so that they are read once."""
    return None if source.judge is None else _judged(source, gold)


def judge_degeneracy(*, judge: Judge, gold: GoldGrades | None = None) -> Degeneracy:
    """The rule on `judge` under its own relevance rule: what its `judge:NAME` qrels would grade."""
    return _judged(export_source_parse(project=judge.project, source=f"judge:{judge.name}", threshold=None), gold)


def sources_degeneracy(*, project: Project, sources: Sequence[QrelsSource]) -> dict[str, Degeneracy]:
    """Source key -> the degeneracy of the judge that grades it, as it grades (its threshold, or its own rule for
    an expected source, whose P the rule reads too), for the sources whose judge is degenerate; gold read once."""
    graded = [source for source in sources if source.judge is not None]
    gold = gold_grades(project) if graded else None
    found: dict[tuple[str, float | None], Degeneracy | None] = {}
    out = {}
    for source in graded:
        threshold = None if source.expected else source.threshold
        if (source.judge, threshold) not in found:
            export = export_source_parse(project=project, source=f"judge:{source.judge}", threshold=threshold)
            found[source.judge, threshold] = source_degeneracy(source=export, gold=gold)
        rule = found[source.judge, threshold]
        if rule is not None and rule.degenerate:
            out[source.key] = rule
    return out


def qrels_warning(source: ExportSource) -> str | None:
    """What an export or a release of qrels from `source` warns of: None unless its judge is degenerate as the
    source grades."""
    found = source_degeneracy(source=source)
    if found is None or not found.degenerate:
        return None
    return (f"judge {source.judge.name} is degenerate: {found.reason}. Qrels from it do not tell relevant pairs from "
            f"the others.")

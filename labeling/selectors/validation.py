"""Reads behind the validation report: the gold pairs of a project as arrays (gold grade, uncertain flag,
query metadata) and a judge's P, guess and confidence aligned with them."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from labeling.models import Judge, Label, Project, Query, ValidationResult
from labeling.selectors.streams import definition_version_numbers, gold_pairs, judge_rows
from models_llm.metrics import JudgeData, ScaleSpec, is_uncertain


@dataclass(frozen=True)
class HumanLabels:
    """Current annotator-role labels of gold-set pairs, one row per label (for human agreement)."""

    item: list[int]
    annotator: list[str]
    grade: list[int]


@dataclass(frozen=True)
class GoldSet:
    """The project's pairs with a gold grade, in pool order, and what the report counts around them."""

    pair_ids: np.ndarray
    query: np.ndarray
    gold: np.ndarray
    uncertain: np.ndarray
    groups: dict[str, np.ndarray]
    n_pairs: int
    n_labelled: int
    n_unresolved: int
    n_uncertain: int
    human: HumanLabels


def scale_spec(project: Project) -> ScaleSpec:
    scale = project.label_scale
    return ScaleSpec(gains={g.value: g.gain for g in scale.grades}, relevant_from=scale.relevant_from)


# A metadata key groups queries (search intent, event type) when its values are short scalars shared by
# several queries; free text such as a per-query note would make one "group" per query.
MAX_GROUP_VALUE_LENGTH = 100
MAX_GROUPS = 50


def _group_value(value: object) -> str | None:
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, str) and 0 < len(value) <= MAX_GROUP_VALUE_LENGTH:
        return value
    return None


def _grouping_keys(metadata: dict[int, object]) -> list[str]:
    keys = sorted({key for value in metadata.values() if isinstance(value, dict) for key in value})
    chosen = []
    for key in keys:
        values = [meta.get(key) for meta in metadata.values() if isinstance(meta, dict) and key in meta]
        groups = {_group_value(value) for value in values}
        if None not in groups and 1 <= len(groups) <= MAX_GROUPS and len(groups) < len(values):
            chosen.append(key)
    return chosen


def gold_set(project: Project) -> GoldSet:
    """Every pair with a gold grade; unresolved and uncertain pairs are counted (uncertain ones stay in)."""
    top = project.label_scale.top
    pair_ids, query_ids, golds, uncertain = [], [], [], []
    item, annotator, grade = [], [], []
    n_labelled = n_unresolved = n_uncertain = 0
    for pair in gold_pairs(project):
        individual = [row[3] for row in pair.labels]
        flagged = bool(individual) and is_uncertain(individual, top_grade=top)
        n_labelled += bool(pair.labels)
        n_uncertain += flagged
        if pair.gold is None:
            n_unresolved += 1
            continue
        pair_ids.append(pair.pair_id)
        query_ids.append(pair.query_id)
        golds.append(pair.gold)
        uncertain.append(flagged)
        for row in pair.labels:
            if row[4] == Label.Role.ANNOTATOR:
                item.append(pair.pair_id)
                annotator.append(row[2])
                grade.append(row[3])
    query_index = {qid: i for i, qid in enumerate(dict.fromkeys(query_ids))}
    metadata = dict(Query.objects.filter(id__in=query_index).values_list("id", "metadata"))
    groups = {}
    for key in _grouping_keys(metadata):
        by_query = {
            qid: _group_value(meta[key]) if isinstance(meta, dict) and key in meta else None
            for qid, meta in metadata.items()
        }
        groups[key] = np.array([by_query[qid] for qid in query_ids], dtype=object)
    return GoldSet(
        pair_ids=np.asarray(pair_ids, dtype=np.int64),
        query=np.asarray([query_index[qid] for qid in query_ids], dtype=np.int64),
        gold=np.asarray(golds, dtype=np.int64),
        uncertain=np.asarray(uncertain, dtype=bool),
        groups=groups,
        n_pairs=project.pairs.count(),
        n_labelled=n_labelled,
        n_unresolved=n_unresolved,
        n_uncertain=n_uncertain,
        human=HumanLabels(item=item, annotator=annotator, grade=grade),
    )


@dataclass(frozen=True)
class JudgeArrays:
    """A judge's judgments of the gold pairs (the ones it judged, P ok) and the count it did not judge."""

    data: JudgeData
    pair_ids: np.ndarray
    p: np.ndarray
    n_unjudged: int


def judge_arrays(gold: GoldSet, judge: Judge) -> JudgeArrays:
    """The judge's P, guess and confidence on the gold pairs, under the newest definition version it judged;
    gold pairs it has no ok judgment for are left out and counted."""
    size = gold.pair_ids.size
    p = np.full(size, np.nan)
    guess = np.full(size, np.nan)
    confidence = np.full(size, np.nan)
    if size:
        rows = list(judge_rows(judge, versions=definition_version_numbers(judge.project)))
        judged_ids = np.fromiter((row.pair_id for row in rows), dtype=np.int64, count=len(rows))
        at = np.minimum(np.searchsorted(gold.pair_ids, judged_ids), size - 1)
        hit = gold.pair_ids[at] == judged_ids
        nan = float("nan")
        p[at[hit]] = np.fromiter((row.p for row in rows), dtype=float, count=len(rows))[hit]
        guess[at[hit]] = np.fromiter(
            (nan if row.guess is None else float(row.guess) for row in rows), dtype=float, count=len(rows)
        )[hit]
        confidence[at[hit]] = np.fromiter(
            (nan if row.confidence is None else row.confidence for row in rows), dtype=float, count=len(rows)
        )[hit]
    judged = ~np.isnan(p)
    data = JudgeData(
        query=gold.query[judged],
        gold=gold.gold[judged],
        p=p[judged],
        guess=guess[judged],
        confidence=confidence[judged],
        uncertain=gold.uncertain[judged],
        groups={key: values[judged] for key, values in gold.groups.items()},
    )
    return JudgeArrays(data=data, pair_ids=gold.pair_ids[judged], p=p[judged], n_unjudged=int(size - judged.sum()))


def validation_result_for(project: Project) -> ValidationResult | None:
    return ValidationResult.objects.filter(project=project).first()


# The key of the cached report's data under which the worker stores every judge's metrics by definition version.
BY_DEFINITION = "by_definition"


def holds_report(result: ValidationResult | None) -> bool:
    """Whether the cache holds a report with every part the pages and the API read (one stored before the
    metrics by definition version were cached with it lacks them)."""
    return result is not None and result.data is not None and BY_DEFINITION in result.data


def report_for_judges(data: dict, names: list[str] | None) -> dict:
    """The cached report narrowed to the judges named (all when None), shaped as `validation_report --json`:
    one judge under `judge`, several under `judges`. Raises KeyError naming a judge that is not in it."""
    judges = {section["name"]: section for section in data["judges"]}
    chosen = list(judges.values()) if names is None else [judges[name] for name in names]
    out = {key: data[key] for key in ("project", "computed_at", "counts", "human")}
    if names is not None and len(chosen) == 1:
        out["judge"] = chosen[0]
    else:
        out["judges"] = chosen
    return out

"""Reads behind the validation report: the options it is computed with, the gold pairs of a project as arrays
(gold grade, uncertain flag, ranking unit, query metadata) and a judge's P, guess and confidence aligned with
them."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from django.db.models.fields.json import KeyTransform

from labeling.exceptions import DomainError, NotFound
from labeling.models import Judge, Label, Passage, Project, Query, ValidationResult
from labeling.selectors.streams import CHUNK, definition_version_numbers, gold_pairs, judge_rows
from models_llm.metrics import DEFAULT_CUTOFFS, JudgeData, ScaleSpec, cutoffs_check, is_uncertain


class ReportOptionsError(DomainError):
    """The options asked for are not ones the report can be computed with (a cut-off that is not a whole
    number, a passage metadata key no passage has)."""


class UnitKeyNotFound(ReportOptionsError, NotFound):
    """No passage of the project has the metadata key asked to rank by (404 in the API)."""


# The folds of a judge's calibrator fit (labeling.services.validation.judge_calibrate): it needs at least this many
# relevant and as many non-relevant gold pairs the judge scored.
CALIBRATION_FOLDS = 5

@dataclass(frozen=True)
class ReportOptions:
    """How the report is computed. `all_pairs`: pool pairs nobody graded (no reference grade, no label) count
    as irrelevant, the TREC convention (DIRAS's ClimRetrieve all-pairs setting, Table 4); a pair a judge did not
    judge is not in its run (ranked last in nDCG/MAP) and out of its other metrics. `unit_key`: rank within (query, value of this passage
    metadata key) units instead of within queries (DIRAS's question x report). `cutoffs`: the k of nDCG@k and
    MAP@k. The cached report is computed with the defaults; other options are computed when asked for."""

    all_pairs: bool = False
    unit_key: str | None = None
    cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS

    @property
    def is_default(self) -> bool:
        return self == DEFAULT_OPTIONS

    def as_json(self) -> dict:
        return {"all_pairs": self.all_pairs, "unit_key": self.unit_key, "cutoffs": list(self.cutoffs)}


DEFAULT_OPTIONS = ReportOptions()


# A page offers the metadata keys of this many passages (the first ones): reading every passage's metadata of a
# 1M-passage project to list keys would cost more than the report. A key only later passages have can still be
# named (the API, the command); report_options checks it against every passage.
METADATA_KEY_SAMPLE = 2_000


def passage_metadata_keys(project: Project) -> list[str]:
    """The metadata keys of the project's passages (of its first METADATA_KEY_SAMPLE), sorted."""
    rows = Passage.objects.filter(project=project).order_by("id").values_list("metadata", flat=True)
    return sorted({key for meta in rows[:METADATA_KEY_SAMPLE] if isinstance(meta, dict) for key in meta})


def _cutoffs_parse(text: str) -> tuple[int, ...]:
    try:
        parts = [part for part in text.replace(" ", "").split(",") if part]
        bad = [part for part in parts if not part.isascii() or not part.isdigit()]
        if bad:  # int() would read "+5" or "٥"
            raise ValueError(f"not a whole number: {bad[0]!r}")
        values = tuple(int(part) for part in parts)
        return cutoffs_check(values)
    except ValueError as exc:
        raise ReportOptionsError(f"cut-offs {text!r}: give whole numbers separated by commas, e.g. 5,10,15 "
                                 f"({exc})") from None


def report_options(*, project: Project, all_pairs: bool = False, unit_key: str | None = None,
                   cutoffs: str | None = None) -> ReportOptions:
    """The report options from what a page, the API or the command was given: `cutoffs` as "5,10,15" (empty or
    None: the default), `unit_key` a metadata key some passage of the project has (empty or None: by query).
    ReportOptionsError says what is wrong."""
    unit_key = unit_key or None
    if unit_key is not None and not Passage.objects.filter(project=project, metadata__has_key=unit_key).exists():
        known = ", ".join(passage_metadata_keys(project)) or "none"
        raise UnitKeyNotFound(f"no passage of {project.slug!r} has the metadata key {unit_key!r} "
                                 f"(its passages' keys: {known})")
    parsed = _cutoffs_parse(cutoffs) if cutoffs and cutoffs.strip() else DEFAULT_CUTOFFS
    return ReportOptions(all_pairs=bool(all_pairs), unit_key=unit_key, cutoffs=parsed)


TRUE_FLAGS = ("1", "true", "on", "yes")


def report_options_from(*, project: Project, params: Mapping[str, str]) -> ReportOptions:
    """The report options of a page's or the API's query string: `all_pairs=1`, `unit_key=KEY`,
    `cutoffs=5,10,15`."""
    return report_options(project=project, all_pairs=params.get("all_pairs", "").lower() in TRUE_FLAGS,
                          unit_key=params.get("unit_key"), cutoffs=params.get("cutoffs"))


@dataclass(frozen=True)
class HumanLabels:
    """Current annotator-role labels of gold-set pairs, one row per label (for human agreement)."""

    item: list[int]
    annotator: list[str]
    grade: list[int]


@dataclass(frozen=True)
class GoldSet:
    """The project's pairs with a gold grade, in pool order, and what the report counts around them. With
    all_pairs the pool pairs nobody graded are in it too, with the scale's lowest grade (`n_added` of them);
    `unit` is each pair's ranking unit (its query, or its query and passage metadata value), numbered 0, 1, ..."""

    pair_ids: np.ndarray
    query: np.ndarray
    unit: np.ndarray
    gold: np.ndarray
    uncertain: np.ndarray
    groups: dict[str, np.ndarray]
    n_pairs: int
    n_labelled: int
    n_unresolved: int
    n_uncertain: int
    n_ungraded: int  # pool pairs with no reference grade and no label: what all_pairs adds
    all_pairs: bool
    human: HumanLabels
    unresolved_ids: np.ndarray  # the graded pairs whose labels disagree with no adjudication (left out above)

    @property
    def n_added(self) -> int:
        return self.n_ungraded if self.all_pairs else 0

    @property
    def n_units(self) -> int:
        return int(self.unit.max()) + 1 if self.unit.size else 0


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


def _unit_value(value: object) -> str | None:
    return value if value is None or isinstance(value, str) else json.dumps(value, sort_keys=True)


def _units(project: Project, query_ids: list[int], passage_ids: list[int], unit_key: str | None) -> np.ndarray:
    """Each pair's ranking unit, numbered in order of first appearance: its query, or (query, the passage's
    value of `unit_key`; a passage without the key makes a unit of its own per query)."""
    if unit_key is None:
        keys = query_ids
    else:
        # KeyTransform takes the key as it is: "a__b" is one key, not a path into the JSON.
        values = dict(
            Passage.objects.filter(project=project).annotate(unit=KeyTransform(unit_key, "metadata"))
            .values_list("id", "unit").iterator(chunk_size=CHUNK)
        )
        keys = [(qid, _unit_value(values.get(pid))) for qid, pid in zip(query_ids, passage_ids)]
    numbers: dict[object, int] = {}
    return np.fromiter((numbers.setdefault(key, len(numbers)) for key in keys), dtype=np.int64, count=len(keys))


def gold_set(project: Project, options: ReportOptions = DEFAULT_OPTIONS) -> GoldSet:
    """Every pair with a gold grade; unresolved and uncertain pairs are counted (uncertain ones stay in). With
    `options.all_pairs`, every pool pair nobody graded as well, as the scale's lowest grade (irrelevant); a
    pair whose labels disagree with no adjudication stays unresolved and out: it was graded, not ignored."""
    top, lowest = project.label_scale.top, min(grade.value for grade in project.label_scale.grades)
    pair_ids, query_ids, passage_ids, golds, uncertain = [], [], [], [], []
    item, annotator, grade, unresolved_ids = [], [], [], []
    n_labelled = n_uncertain = n_graded = 0
    for pair in gold_pairs(project, graded_only=not options.all_pairs):
        individual = [row[3] for row in pair.labels]
        flagged = bool(individual) and is_uncertain(individual, top_grade=top)
        graded = bool(pair.labels) or pair.reference_grade is not None
        n_graded += graded
        n_labelled += bool(pair.labels)
        n_uncertain += flagged
        gold = pair.gold if graded else lowest
        if gold is None:
            unresolved_ids.append(pair.pair_id)
            continue
        pair_ids.append(pair.pair_id)
        query_ids.append(pair.query_id)
        passage_ids.append(pair.passage_id)
        golds.append(gold)
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
    n_pairs = project.pairs.count()
    return GoldSet(
        pair_ids=np.asarray(pair_ids, dtype=np.int64),
        query=np.asarray([query_index[qid] for qid in query_ids], dtype=np.int64),
        unit=_units(project, query_ids, passage_ids, options.unit_key),
        gold=np.asarray(golds, dtype=np.int64),
        uncertain=np.asarray(uncertain, dtype=bool),
        groups=groups,
        n_pairs=n_pairs,
        n_labelled=n_labelled,
        n_unresolved=len(unresolved_ids),
        n_uncertain=n_uncertain,
        n_ungraded=n_pairs - n_graded,
        all_pairs=options.all_pairs,
        human=HumanLabels(item=item, annotator=annotator, grade=grade),
        unresolved_ids=np.asarray(unresolved_ids, dtype=np.int64),
    )


@dataclass(frozen=True)
class GoldGrades:
    """The project's gold pairs: their ids, sorted, and their gold grades."""

    pair_ids: np.ndarray
    grades: np.ndarray

    @classmethod
    def of(cls, ids: np.ndarray, grades: np.ndarray) -> GoldGrades:
        order = np.argsort(ids, kind="stable")
        return cls(np.asarray(ids, np.int64)[order], np.asarray(grades, np.int64)[order])


def gold_grades(project: Project, gold: GoldSet | None = None) -> GoldGrades:
    """The gold pairs of `project`: those of `gold` when a report has its gold set at hand (without all_pairs,
    which adds ungraded pairs as irrelevant), else read."""
    if gold is not None and not gold.all_pairs:
        return GoldGrades.of(gold.pair_ids, gold.gold)
    rows = [(pair.pair_id, pair.gold) for pair in gold_pairs(project) if pair.gold is not None]
    return GoldGrades.of(np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)),
                         np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows)))


@dataclass(frozen=True)
class JudgeArrays:
    """A judge on the gold pairs as the metrics take it (`data`), the gold pairs it judged with their P (for a
    calibrator), and the count of gold pairs it did not judge."""

    data: JudgeData
    pair_ids: np.ndarray
    p: np.ndarray
    n_unjudged: int


def judge_data(gold: GoldSet, p: np.ndarray, guess: np.ndarray, confidence: np.ndarray, *,
               keep: np.ndarray | None = None) -> tuple[JudgeData, np.ndarray]:
    """A judge's P, guess and confidence, one per gold pair (P nan: not judged), as the metrics take them, and
    the mask of the gold pairs they hold. Not judged: left out; with all_pairs held as placeholders (P = 0, no
    guess, `judged` False) that only the rankings use, last (the TREC convention: the run lacks them).
    `keep`: only these gold pairs (default: all)."""
    judged = ~np.isnan(p)
    held = np.ones(p.size, bool) if gold.all_pairs else judged.copy()
    if keep is not None:
        held &= keep
    data = JudgeData(
        query=gold.unit[held],
        gold=gold.gold[held],
        p=np.where(judged, p, 0.0)[held],
        guess=guess[held],
        confidence=confidence[held],
        uncertain=gold.uncertain[held],
        groups={key: values[held] for key, values in gold.groups.items()},
        judged=judged[held],
    )
    return data, held


def judge_arrays(gold: GoldSet, judge: Judge) -> JudgeArrays:
    """The judge's P, guess and confidence on the gold pairs, under the newest definition version it judged;
    gold pairs it has no ok judgment for are counted, and left out (with all_pairs: ranked last)."""
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
    data, _ = judge_data(gold, p, guess, confidence)
    return JudgeArrays(data=data, pair_ids=gold.pair_ids[judged], p=p[judged], n_unjudged=int(size - judged.sum()))


# Below this share of non-relevant pairs a gold set cannot show precision, MAP or AUROC: nearly every pair is
# relevant, so any judge calling everything relevant looks precise and any ranking puts relevant pairs first.
MIN_NON_RELEVANT_SHARE = 0.05


def validation_result_for(project: Project) -> ValidationResult | None:
    return ValidationResult.objects.filter(project=project).first()

"""Streaming reads for qrels export: the pool in pool order, merged with its labels, judgments and sources.

Each table is read once through a server-side cursor, ordered by pair id, and merged in Python, so memory
stays flat however large the project is."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from django.db.models import F

from labeling.gold import LabelView, gold_grade
from labeling.models import Judge, Judgment, Label, Pair, PairSource, Passage, Project, Query, RelevanceDefinition

CHUNK = 20_000


class ExportError(ValueError):
    """The export cannot run as asked (unknown judge, threshold out of range...)."""


@dataclass(frozen=True)
class ExportSource:
    """Where exported grades come from: human gold grades, or one judge's P(relevant) >= threshold."""

    judge: Judge | None = None
    threshold: float = 0.5


@dataclass(frozen=True)
class PairRow:
    """One exported pair: ids and the grade of the chosen source (None: no grade from that source)."""

    query_id: str
    doc_id: str
    grade: int | None


def export_source_parse(*, project: Project, source: str, threshold: float | None) -> ExportSource:
    """Parse `human` or `judge:NAME` (and the judge threshold) for `project`."""
    if source == "human":
        if threshold is not None:
            raise ExportError("--threshold applies to a judge source (judge:NAME), not to human labels")
        return ExportSource()
    if not source.startswith("judge:") or not source.removeprefix("judge:"):
        raise ExportError(f"source must be 'human' or 'judge:NAME', got {source!r}")
    name = source.removeprefix("judge:")
    judge = Judge.objects.filter(project=project, name=name).first()
    if judge is None:
        names = ", ".join(Judge.objects.filter(project=project).values_list("name", flat=True)) or "none"
        raise ExportError(f"project {project.slug!r} has no judge {name!r} (its judges: {names})")
    if threshold is None:
        threshold = 0.5
    if not 0.0 <= threshold <= 1.0:
        raise ExportError(f"--threshold must be within [0, 1], got {threshold}")
    return ExportSource(judge=judge, threshold=threshold)


def _external_ids(project: Project) -> tuple[dict[int, str], dict[int, str]]:
    """Query and passage external ids by primary key: the streams below then carry only integers, which
    PostgreSQL reads in index order with no join or sort."""
    queries = dict(Query.objects.filter(project=project).values_list("id", "external_id"))
    passages = dict(Passage.objects.filter(project=project).values_list("id", "external_id").iterator(CHUNK))
    return queries, passages


def _definition_versions(project: Project) -> dict[int, int]:
    return dict(RelevanceDefinition.objects.filter(query__project=project).values_list("id", "version"))


def _pairs(project: Project, *, graded_only: bool = False) -> Iterator[tuple[int, int, int, int | None]]:
    pairs = Pair.objects.filter(project=project)
    columns = ("id", "query_id", "passage_id", "reference_grade")
    if graded_only:
        # Pairs with a reference grade (partial index) or a current label: a gold grade needs one of them.
        labelled = Label.objects.filter(pair__project=project, superseded_at__isnull=True).values("pair_id")
        pairs = pairs.filter(reference_grade__isnull=False).order_by().values_list(*columns).union(
            Pair.objects.filter(project=project, id__in=labelled).order_by().values_list(*columns)
        )
        return pairs.order_by("id").iterator(chunk_size=CHUNK)
    return pairs.order_by("id").values_list(*columns).iterator(chunk_size=CHUNK)


def _current_labels(project: Project) -> Iterator[tuple]:
    return (
        Label.objects.filter(pair__project=project, superseded_at__isnull=True)
        .order_by("pair_id", "id")
        .values_list("pair_id", "id", "annotator__username", "grade", "role", "definition__version", "note")
        .iterator(chunk_size=CHUNK)
    )


def _judgments(project: Project) -> Iterator[tuple]:
    return (
        Judgment.objects.filter(pair__project=project)
        .order_by("pair_id", "judge__name", F("definition__version").desc(nulls_last=True))
        .values_list(
            "pair_id", "judge__name", "definition__version", "p_relevant", "guess", "confidence", "status", "error"
        )
        .iterator(chunk_size=CHUNK)
    )


def _judge_probabilities(judge: Judge) -> Iterator[tuple[int, int | None, float]]:
    """(pair id, definition id, P) of the judge's ok judgments, in pair order (index judgment_judge_pair)."""
    return (
        Judgment.objects.filter(judge=judge, status=Judgment.Status.OK)
        .order_by("pair_id")
        .values_list("pair_id", "definition_id", "p_relevant")
        .iterator(chunk_size=CHUNK)
    )


def _sources(project: Project) -> Iterator[tuple]:
    return (
        PairSource.objects.filter(pair__project=project)
        .order_by("pair_id", "id")
        .values_list("pair_id", "system", "rank")
        .iterator(chunk_size=CHUNK)
    )


class _Grouped:
    """Rows of a stream ordered by pair id, handed out one pair at a time."""

    def __init__(self, rows: Iterator[tuple]) -> None:
        self._groups = groupby(rows, key=lambda row: row[0])
        self._next = next(self._groups, None)

    def take(self, pair_id: int) -> list[tuple]:
        while self._next is not None and self._next[0] < pair_id:
            self._next = next(self._groups, None)
        if self._next is None or self._next[0] != pair_id:
            return []
        rows = list(self._next[1])
        self._next = next(self._groups, None)
        return rows


def _label_views(rows: list[tuple]) -> list[LabelView]:
    return [LabelView(grade=row[3], role=row[4], label_id=row[1]) for row in rows]


def qrels_rows(*, project: Project, source: ExportSource) -> Iterator[PairRow]:
    """The pairs that have a grade from `source`, in pool order. A judge's grade is binary: 1 when its
    P(relevant) (under the newest definition version it judged) is >= the threshold, else 0."""
    queries, passages = _external_ids(project)
    if source.judge is not None:
        versions = _definition_versions(project)
        judged = _Grouped(_judge_probabilities(source.judge))
        for pair_id, query_id, passage_id, _reference in _pairs(project):
            rows = judged.take(pair_id)
            if rows:
                newest = max(rows, key=lambda row: versions.get(row[1], 0))
                yield PairRow(queries[query_id], passages[passage_id], int(newest[2] >= source.threshold))
        return
    labels = _Grouped(_current_labels(project))
    for pair_id, query_id, passage_id, reference in _pairs(project, graded_only=True):
        grade = gold_grade(reference, _label_views(labels.take(pair_id)))
        if grade is not None:
            yield PairRow(queries[query_id], passages[passage_id], grade)


def pair_records(*, project: Project, source: ExportSource) -> Iterator[dict[str, Any]]:
    """Every pair of the pool with everything known about it, in pool order (the JSONL export)."""
    labels = _Grouped(_current_labels(project))
    judgments = _Grouped(_judgments(project))
    sources = _Grouped(_sources(project))
    queries, passages = _external_ids(project)
    for pair_id, query_id, passage_id, reference in _pairs(project):
        label_rows = labels.take(pair_id)
        judgment_rows = judgments.take(pair_id)
        gold = gold_grade(reference, _label_views(label_rows))
        if source.judge is None:
            grade = gold
        else:
            own = [row for row in judgment_rows if row[1] == source.judge.name and row[6] == Judgment.Status.OK]
            grade = int(own[0][3] >= source.threshold) if own else None
        yield {
            "query_id": queries[query_id],
            "doc_id": passages[passage_id],
            "grade": grade,
            "gold_grade": gold,
            "reference_grade": reference,
            "sources": [{"system": system, "rank": rank} for _, system, rank in sources.take(pair_id)],
            "labels": [
                {"annotator": name, "grade": grade_, "role": role, "definition_version": version, "note": note}
                for _, _, name, grade_, role, version, note in label_rows
            ],
            "judgments": [
                {
                    "judge": name,
                    "definition_version": version,
                    "p_relevant": p,
                    "guess": None if guess is None else ("yes" if guess else "no"),
                    "confidence": confidence,
                    "status": status,
                    **({"error": error} if error else {}),
                }
                for _, name, version, p, guess, confidence, status, error in judgment_rows
            ],
        }

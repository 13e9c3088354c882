"""Streams of a project's rows ordered by pair id (server-side cursors, integers where possible), and the
merge that hands them out one pair at a time: the reads behind exports and validation, flat in memory."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby

from labeling.gold import LabelView, gold_grade
from labeling.models import Judge, Judgment, Label, Pair, Passage, Project, Query, RelevanceDefinition

CHUNK = 20_000


@dataclass(frozen=True)
class GoldPair:
    """A pair with its current labels (pair_id, label id, annotator name, grade, role, definition version,
    note) and its gold grade (None: unresolved)."""

    pair_id: int
    query_id: int
    passage_id: int
    reference_grade: int | None
    labels: list[tuple]
    gold: int | None


@dataclass(frozen=True)
class JudgeRow:
    """A judge's ok judgment of a pair under the newest definition version it judged."""

    pair_id: int
    p: float
    guess: bool | None
    confidence: float | None


def external_ids(project: Project) -> tuple[dict[int, str], dict[int, str]]:
    """Query and passage external ids by primary key: the streams then carry only integers, which
    PostgreSQL reads in index order with no join or sort."""
    queries = dict(Query.objects.filter(project=project).values_list("id", "external_id"))
    passages = dict(Passage.objects.filter(project=project).values_list("id", "external_id").iterator(CHUNK))
    return queries, passages


def definition_version_numbers(project: Project) -> dict[int, int]:
    """Definition id -> version number, for every definition of the project's queries."""
    return dict(RelevanceDefinition.objects.filter(query__project=project).values_list("id", "version"))


def pair_stream(project: Project, *, graded_only: bool = False) -> Iterator[tuple[int, int, int, int | None]]:
    """(pair id, query id, passage id, reference grade) in pool order; `graded_only`: only pairs with a
    reference grade or a current label (a gold grade needs one of them)."""
    pairs = Pair.objects.filter(project=project)
    columns = ("id", "query_id", "passage_id", "reference_grade")
    if graded_only:
        labelled = Label.objects.filter(pair__project=project, superseded_at__isnull=True).values("pair_id")
        pairs = pairs.filter(reference_grade__isnull=False).order_by().values_list(*columns).union(
            Pair.objects.filter(project=project, id__in=labelled).order_by().values_list(*columns)
        )
        return pairs.order_by("id").iterator(chunk_size=CHUNK)
    return pairs.order_by("id").values_list(*columns).iterator(chunk_size=CHUNK)


def current_label_stream(project: Project) -> Iterator[tuple]:
    """(pair id, label id, annotator name, grade, role, definition version, note) of current labels."""
    return (
        Label.objects.filter(pair__project=project, superseded_at__isnull=True)
        .order_by("pair_id", "id")
        .values_list("pair_id", "id", "annotator__username", "grade", "role", "definition__version", "note")
        .iterator(chunk_size=CHUNK)
    )


class Grouped:
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


def gold_pairs(project: Project, *, graded_only: bool = True) -> Iterator[GoldPair]:
    """Pairs in pool order with their current labels and gold grade."""
    labels = Grouped(current_label_stream(project))
    for pair_id, query_id, passage_id, reference in pair_stream(project, graded_only=graded_only):
        rows = labels.take(pair_id)
        views = [LabelView(grade=row[3], role=row[4], label_id=row[1]) for row in rows]
        yield GoldPair(pair_id, query_id, passage_id, reference, rows, gold_grade(reference, views))


def judge_rows(judge: Judge, *, versions: dict[int, int]) -> Iterator[JudgeRow]:
    """The judge's ok judgments in pair order, one per pair: the one under the newest definition version
    (`versions`: definition id -> version) it judged (index judgment_judge_pair)."""
    rows = (
        Judgment.objects.filter(judge=judge, status=Judgment.Status.OK)
        .order_by("pair_id")
        .values_list("pair_id", "definition_id", "p_relevant", "guess", "confidence")
        .iterator(chunk_size=CHUNK)
    )
    for pair_id, group in groupby(rows, key=lambda row: row[0]):
        newest = max(group, key=lambda row: versions.get(row[1], 0))
        yield JudgeRow(pair_id, newest[2], newest[3], newest[4])

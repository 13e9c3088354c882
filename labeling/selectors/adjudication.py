"""Reads for adjudication: the pairs whose current annotator labels disagree (among themselves or with the pair's
reference grade), found and counted in the database, and the details (labels, judges' P, gold) of one page of them."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    Count,
    F,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Greatest, Least

from labeling.models import Judgment, Label, Pair, Project, RelevanceDefinition
from labeling.scale import LabelScale
from models_llm.metrics import is_uncertain

KINDS = ("conflict", "disagreement", "all")
STATES = ("unresolved", "resolved", "all")
ITEMS_PER_PAGE = 50


@dataclass(frozen=True)
class LabelRow:
    """A current human label as the adjudicator sees it."""

    label_id: int
    username: str
    grade: int
    grade_name: str
    note: str
    unsure: bool
    time_spent_seconds: float | None
    definition_version: int | None
    created_at: datetime


@dataclass(frozen=True)
class JudgeP:
    judge: str
    p: float
    method: str


@dataclass(frozen=True)
class AdjudicationItem:
    pair: Pair
    labels: tuple[LabelRow, ...]
    judges: tuple[JudgeP, ...]
    gold: LabelRow | None
    conflict: bool
    current_definition_version: int | None


@dataclass(frozen=True)
class AdjudicationPage:
    kind: str
    state: str
    counts: dict[str, int]
    page: Page
    items: tuple[AdjudicationItem, ...]


def _current_annotator_labels(project: Project) -> QuerySet[Label]:
    return Label.objects.filter(pair__project=project, role=Label.Role.ANNOTATOR, superseded_at__isnull=True)


def _adjudicated_pair_ids() -> QuerySet[Label]:
    # Not narrowed to the project: the labels it filters are, and joining the pool again would scan it twice.
    return Label.objects.filter(role=Label.Role.ADJUDICATOR, superseded_at__isnull=True).values("pair_id")


def disagreeing_pairs(*, project: Project, state: str = "all") -> QuerySet:
    """One row per pair of the project whose current annotator labels, with its reference grade if it has one, are
    not all the same grade: {pair_id, pair__query_id, conflict}. An expert's label that contradicts the reference
    qrels is a disagreement to adjudicate like one between experts. One grouped query over the current labels
    (joined to their pairs for the project, the query and the reference grade), never a loop over the pool.
    `conflict` is the DIRAS uncertain rule (models_llm.metrics.is_uncertain) in SQL, the reference grade counted
    as one more grade: grades 0 and top both given, or two or more intermediate grades."""
    if state not in STATES:
        raise ValueError(f"unknown state {state!r}; one of {', '.join(STATES)}")
    top = project.label_scale.top
    labels = _current_annotator_labels(project)
    if state == "resolved":
        labels = labels.filter(pair_id__in=_adjudicated_pair_ids())
    elif state == "unresolved":
        labels = labels.exclude(pair_id__in=_adjudicated_pair_ids())
    reference = F("pair__reference_grade")
    intermediate_reference = Case(When(pair__reference_grade__gt=0, pair__reference_grade__lt=top, then=Value(1)),
                                  default=Value(0), output_field=IntegerField())
    return (
        labels.values("pair_id", "pair__query_id", "pair__reference_grade")
        .annotate(
            labelled_low=Min("grade"),
            labelled_high=Max("grade"),
            n_labelled_intermediate=Count("id", filter=Q(grade__gt=0, grade__lt=top)),
        )
        .annotate(
            low=Least("labelled_low", Coalesce(reference, "labelled_low")),
            high=Greatest("labelled_high", Coalesce(reference, "labelled_high")),
            n_intermediate=F("n_labelled_intermediate") + intermediate_reference,
        )
        # Not all the same grade. MIN < MAX says it without COUNT(DISTINCT), which would force a sort.
        .filter(low__lt=F("high"))
        .annotate(
            conflict=Case(
                When(Q(low=0, high=top) | Q(n_intermediate__gte=2), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            )
        )
        .order_by()
    )


def adjudication_counts(*, project: Project, state: str = "unresolved") -> dict[str, int]:
    """How many pairs each tab lists: conflicts, the milder disagreements, and all of them."""
    # One pass over the grouped rows for both counts. Raw SQL around the ORM's query, because the ORM cannot
    # aggregate over an annotation of a grouped values() queryset.
    sql, params = disagreeing_pairs(project=project, state=state).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*), SUM(CASE WHEN conflict THEN 1 ELSE 0 END) FROM ({sql}) AS disagreeing", params
        )
        total, conflicts = cursor.fetchone()
    conflicts = conflicts or 0
    return {"conflict": conflicts, "disagreement": total - conflicts, "all": total}


def _rows_of_kind(project: Project, kind: str, state: str) -> QuerySet:
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    rows = disagreeing_pairs(project=project, state=state)
    if kind == "conflict":
        rows = rows.filter(conflict=True)
    elif kind == "disagreement":
        rows = rows.filter(conflict=False)
    return rows.order_by("-conflict", "pair__query_id", "pair_id")


def _label_row(label: Label, scale: LabelScale) -> LabelRow:
    names = {grade.value: grade.name for grade in scale.grades}
    return LabelRow(
        label_id=label.id,
        username=label.annotator.get_username(),
        grade=label.grade,
        grade_name=names.get(label.grade, "not on the scale"),
        note=label.note,
        unsure=label.unsure,
        time_spent_seconds=label.time_spent_seconds,
        definition_version=label.definition.version if label.definition is not None else None,
        created_at=label.created_at,
    )


def _newest_per_judge(judgments: Sequence[Judgment]) -> tuple[JudgeP, ...]:
    # A pair may have a judgment per definition version; the newest is the one to weigh.
    newest: dict[str, Judgment] = {}
    for judgment in sorted(judgments, key=lambda j: (j.created_at, j.id)):
        newest[judgment.judge.name] = judgment
    return tuple(
        JudgeP(judge=name, p=j.p_relevant, method=j.method) for name, j in sorted(newest.items())
    )


def adjudication_details(*, project: Project, pair_ids: Sequence[int]) -> list[AdjudicationItem]:
    """The details of the given pairs of the project, in the given order (ids not in the project are left
    out): a fixed number of queries, however many pairs the project has."""
    scale = project.label_scale
    newest_definition = RelevanceDefinition.objects.in_use().filter(query_id=OuterRef("query_id")).order_by("-version")
    pairs = (
        Pair.objects.filter(project=project, id__in=list(pair_ids))
        .select_related("query", "passage")
        .annotate(current_definition_version=Subquery(newest_definition.values("version")[:1]))
        .prefetch_related(
            Prefetch(
                "labels",
                queryset=Label.objects.filter(superseded_at__isnull=True)
                .select_related("annotator", "definition")
                .order_by("created_at", "id"),
                to_attr="current_labels",
            ),
            Prefetch(
                "judgments",
                queryset=Judgment.objects.filter(status=Judgment.Status.OK).select_related("judge"),
                to_attr="ok_judgments",
            ),
        )
    )
    by_id = {pair.id: pair for pair in pairs}
    items = []
    for pair_id in pair_ids:
        pair = by_id.get(pair_id)
        if pair is None:
            continue
        annotations = [label for label in pair.current_labels if label.role == Label.Role.ANNOTATOR]
        golds = [label for label in pair.current_labels if label.role == Label.Role.ADJUDICATOR]
        items.append(
            AdjudicationItem(
                pair=pair,
                labels=tuple(_label_row(label, scale) for label in annotations),
                judges=_newest_per_judge(pair.ok_judgments),
                gold=_label_row(max(golds, key=lambda label: label.id), scale) if golds else None,
                conflict=is_uncertain([label.grade for label in annotations]
                                      + ([] if pair.reference_grade is None else [pair.reference_grade]),
                                      top_grade=scale.top),
                current_definition_version=pair.current_definition_version,
            )
        )
    return items


def adjudication_items(
    *, project: Project, kind: str = "conflict", state: str = "unresolved", page: int | str | None = 1,
    per_page: int = ITEMS_PER_PAGE,
) -> AdjudicationPage:
    """One page of the pairs to adjudicate of a kind ('conflict', 'disagreement': disagreeing but not a
    conflict, 'all'), conflicts first, then by query and pair; with the count of each kind for the tabs."""
    rows = _rows_of_kind(project, kind, state)
    counts = adjudication_counts(project=project, state=state)
    paginator = Paginator(rows, per_page)
    # The tab counts already hold the total: spare the paginator a second pass over the labels.
    paginator.count = counts[kind]
    found = paginator.get_page(page)
    items = adjudication_details(project=project, pair_ids=[row["pair_id"] for row in found.object_list])
    return AdjudicationPage(
        kind=kind, state=state, counts=counts, page=found, items=tuple(items)
    )

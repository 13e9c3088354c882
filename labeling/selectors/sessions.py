"""An expert's labelling session in the workspace: what they labelled since they opened it, how long each item
took, how many of each grade they gave, and (where blind first allows) how many of the items other experts also
labelled they graded alike; the live count of the session's labels and the confirmation of each label saved."""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser

from labeling.models import Label, Pair, Project
from labeling.scale import Grade
from labeling.selectors.disclosure import agreement_shown


@dataclass(frozen=True)
class GradeCount:
    value: int
    name: str
    items: int


@dataclass(frozen=True)
class SessionSummary:
    started_at: datetime
    items: int
    # Every grade of the project's scale, in order, with the items whose first label in the session gave it.
    by_grade: tuple[GradeCount, ...]
    median_seconds: float | None
    total_seconds: float
    # Of the items first labelled in the session, those at least one other expert labelled too; None: not shown.
    overlap_items: int | None
    same_grade: int | None  # of those, how many every other expert gave the same grade; None: not shown
    same_relevance: int | None  # ... the same side of relevant / not relevant; None: not shown


def _session_labels(
    project: Project, annotator: AbstractBaseUser, started_at: datetime,
) -> tuple[dict[int, tuple[datetime, int]], dict[int, tuple[int, float | None]]]:
    """For each item the expert labelled since `started_at`: their first label on it ever (created_at, grade), and
    the grade and time spent of their first label of it in the session. Undone and changed labels included: what
    came first stays first."""
    labels = Label.objects.filter(pair__project=project, annotator=annotator, role=Label.Role.ANNOTATOR)
    rows = (labels.filter(pair_id__in=labels.filter(created_at__gte=started_at).values("pair_id"))
            .order_by("pair_id", "created_at", "id").values_list("pair_id", "created_at", "grade", "time_spent_seconds"))
    first_ever: dict[int, tuple[datetime, int]] = {}
    session_first: dict[int, tuple[int, float | None]] = {}
    for pair_id, created_at, grade, seconds in rows:
        first_ever.setdefault(pair_id, (created_at, grade))
        if created_at >= started_at:
            session_first.setdefault(pair_id, (grade, seconds))
    return first_ever, session_first


def session_summary(*, project: Project, annotator: AbstractBaseUser, role: str | None,
                    started_at: datetime) -> SessionSummary:
    """The items the expert labelled in the project since `started_at`, each counted once with the first label
    they gave it in the session (its grade, and its time from the lease), and, where agreement_shown allows, the
    agreement of the other experts' current labels with the expert's first label ever on the items they first
    labelled in this session. Nothing here moves when the expert changes or undoes a label, so no sequence of their
    own actions can probe another expert's grade: only a first label, given blind, is ever compared."""
    first_ever, session_first = _session_labels(project, annotator, started_at)
    new = {pair_id: grade for pair_id, (created_at, grade) in first_ever.items() if created_at >= started_at}
    others: dict[int, list[int]] = defaultdict(list)
    rows = (Label.objects.filter(pair_id__in=list(new), role=Label.Role.ANNOTATOR, superseded_at__isnull=True)
            .exclude(annotator=annotator).values_list("pair_id", "grade"))
    for pair_id, grade in rows:
        others[pair_id].append(grade)
    scale = project.label_scale
    overlap = [(grade, others[pair_id]) for pair_id, grade in new.items() if others[pair_id]]
    shown = agreement_shown(project=project, role=role, overlap_items=len(overlap))
    seconds = [spent for _, spent in session_first.values() if spent is not None]
    grades = Counter(grade for grade, _ in session_first.values())
    return SessionSummary(
        started_at=started_at,
        items=len(session_first),
        by_grade=tuple(GradeCount(value=g.value, name=g.name, items=grades[g.value]) for g in scale.grades),
        median_seconds=statistics.median(seconds) if seconds else None,
        total_seconds=sum(seconds),
        overlap_items=len(overlap) if shown else None,
        same_grade=sum(all(g == grade for g in theirs) for grade, theirs in overlap) if shown else None,
        same_relevance=sum(all(scale.is_relevant(g) == scale.is_relevant(grade) for g in theirs)
                           for grade, theirs in overlap) if shown else None,
    )


def session_labelled(*, project: Project, annotator: AbstractBaseUser, started_at: datetime) -> int:
    """The expert's labels in the project given since `started_at` and current now: the workspace's live counter,
    which an undo takes back at once (the summary above counts an item once labelled, whatever came after)."""
    return Label.objects.filter(pair__project=project, annotator=annotator, role=Label.Role.ANNOTATOR,
                                superseded_at__isnull=True, created_at__gte=started_at).count()


@dataclass(frozen=True)
class SavedLabel:
    """A label just saved, as the workspace confirms it: the item's query and passage ids and the grade."""

    query: str
    passage: str
    grade: Grade


def saved_label(*, project: Project, label: Label) -> SavedLabel:
    query, passage = Pair.objects.filter(id=label.pair_id).values_list(
        "query__external_id", "passage__external_id").get()
    return SavedLabel(query=query, passage=passage, grade=project.label_scale.grade(label.grade))

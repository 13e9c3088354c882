"""An expert's labelling session in the workspace: what they labelled since they opened it, how long each item
took, and (where blind first allows) how many of the items other experts also labelled they graded alike."""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser

from labeling.models import Label, Project
from labeling.selectors.disclosure import agreement_shown


@dataclass(frozen=True)
class SessionSummary:
    started_at: datetime
    items: int
    median_seconds: float | None
    total_seconds: float
    overlap_items: int  # items of the session that at least one other expert labelled too
    same_grade: int | None  # of those, how many every other expert gave the same grade; None: not shown
    same_relevance: int | None  # ... the same side of relevant / not relevant; None: not shown


def session_summary(*, project: Project, annotator: AbstractBaseUser, role: str | None,
                    started_at: datetime) -> SessionSummary:
    """The expert's current labels in the project made since `started_at` (undone and changed ones count once
    or not at all), with their time per item from the lease, and the agreement with the other experts' current
    labels on the same items when agreement_shown allows it."""
    mine = list(
        Label.objects.filter(pair__project=project, annotator=annotator, role=Label.Role.ANNOTATOR,
                             superseded_at__isnull=True, created_at__gte=started_at)
        .values_list("pair_id", "grade", "time_spent_seconds")
    )
    others: dict[int, list[int]] = defaultdict(list)
    rows = (Label.objects.filter(pair_id__in=[pair for pair, _, _ in mine], role=Label.Role.ANNOTATOR,
                                 superseded_at__isnull=True)
            .exclude(annotator=annotator).values_list("pair_id", "grade"))
    for pair_id, grade in rows:
        others[pair_id].append(grade)
    scale = project.label_scale
    overlap = [(grade, others[pair]) for pair, grade, _ in mine if others[pair]]
    shown = agreement_shown(project=project, role=role, overlap_items=len(overlap))
    seconds = [spent for _, _, spent in mine if spent is not None]
    return SessionSummary(
        started_at=started_at,
        items=len(mine),
        median_seconds=statistics.median(seconds) if seconds else None,
        total_seconds=sum(seconds),
        overlap_items=len(overlap),
        same_grade=sum(all(g == grade for g in theirs) for grade, theirs in overlap) if shown else None,
        same_relevance=sum(all(scale.is_relevant(g) == scale.is_relevant(grade) for g in theirs)
                           for grade, theirs in overlap) if shown else None,
    )

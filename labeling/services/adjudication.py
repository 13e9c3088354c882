"""Adjudication: a project admin settles a pair's gold grade with an adjudicator label (one gold per pair)."""
from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.models import Label, Pair, Project
from labeling.selectors.definitions import current_definition
from labeling.services.labels import MAX_NOTE_CHARS
from labeling.services.validation import validation_request_soon


class AdjudicationError(DomainError):
    """An adjudication that cannot be stored as asked (grade off the scale, pair not in the project...)."""


def _validated_grade(project: Project, grade: object) -> int:
    values = project.label_scale.values
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in values:
        raise AdjudicationError(f"grade {grade!r} is not on this project's scale; the grades are {list(values)}")
    return grade


@transaction.atomic
def adjudication_set(*, project: Project, adjudicator: AbstractBaseUser, pair_id: int, grade: int, note: str = "",
                     now: datetime | None = None) -> Label:
    """Make `grade` the pair's gold grade: a new adjudicator label under the query's current definition.
    The pair's previous gold (whoever gave it) is superseded, and so is the adjudicator's own current label on
    the pair, since a person has one current label per pair."""
    now = now or timezone.now()
    grade = _validated_grade(project, grade)
    if len(note) > MAX_NOTE_CHARS:
        raise AdjudicationError(f"the note has {len(note):,} characters; the limit is {MAX_NOTE_CHARS:,}")
    # The pair row lock serializes two admins adjudicating one pair, so exactly one gold stays current.
    pair = Pair.objects.select_for_update().filter(id=pair_id, project=project).first()
    if pair is None:
        raise AdjudicationError(f"item {pair_id!r} is not in project {project.slug!r}")
    Label.objects.filter(pair=pair, superseded_at__isnull=True).filter(
        Q(role=Label.Role.ADJUDICATOR) | Q(annotator=adjudicator)
    ).update(superseded_at=now)
    label = Label.objects.create(
        pair=pair, annotator=adjudicator, grade=grade, role=Label.Role.ADJUDICATOR,
        definition=current_definition(query=pair.query_id), note=note, created_at=now,
    )
    validation_request_soon(project=project)
    return label

"""Reads of labels: the label list, history included, as a member may see it and filtered as they ask."""
from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from labeling.models import Label, Project
from labeling.selectors.disclosure import labels_visible_to


def label_list(*, project: Project, user: AbstractBaseUser, role: str | None, pair_id: int | None = None,
               annotator: str | None = None, current: bool = False) -> QuerySet[Label]:
    """The project's labels `user` may see (blind first), of one item (`pair_id`), by one annotator (username) and
    only those in force (`current`) when asked, with the annotator and definition loaded."""
    labels = labels_visible_to(project=project, user=user, role=role).select_related("annotator", "definition")
    if pair_id is not None:
        labels = labels.filter(pair_id=pair_id)
    if annotator:
        labels = labels.filter(annotator__username=annotator)
    if current:
        labels = labels.filter(superseded_at__isnull=True)
    return labels

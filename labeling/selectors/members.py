"""Reads for the members page: a project's members with their roles and how many labels each has given, and its
invitations."""
from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from labeling.models import Invitation, Label, Membership, Project


def project_members(*, project: Project) -> QuerySet[Membership]:
    """The project's memberships, admins first then by username, each annotated with `n_labels`: the
    member's current labels in the project."""
    labels = (
        Label.objects.filter(pair__project=project, annotator=OuterRef("user_id"), superseded_at__isnull=True)
        .order_by()
        .values("annotator")
        .annotate(n=Count("id"))
        .values("n")
    )
    return (
        Membership.objects.filter(project=project)
        .select_related("user")
        .annotate(n_labels=Coalesce(Subquery(labels, output_field=IntegerField()), Value(0)))
        .order_by("role", "user__username")
    )


def project_invitations(*, project: Project) -> QuerySet[Invitation]:
    """The project's invitations, newest first, with who made them and who used them."""
    return Invitation.objects.filter(project=project).select_related("created_by", "used_by")

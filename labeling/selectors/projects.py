"""Reads about projects: who may see which project and do what in it (the one access check every page and endpoint
goes through), per-project row counts, and the project's queries, passages and pairs as the HTML pages and the API
list them."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, OuterRef, Prefetch, QuerySet, Subquery, Value
from django.db.models.functions import Lower

from labeling.exceptions import Forbidden, NotFound
from labeling.models import (
    Judgment,
    Label,
    Membership,
    Pair,
    PairSource,
    Passage,
    Project,
    Query,
    RelevanceDefinition,
)
from labeling.selectors.disclosure import BLIND_REPORTS, sees_reports


@dataclass(frozen=True)
class ProjectCounts:
    queries: int = 0
    passages: int = 0
    pairs: int = 0
    labels: int = 0
    judgments: int = 0


@dataclass(frozen=True)
class ProjectSummary:
    project: Project
    counts: ProjectCounts


def projects_visible_to(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Project]:
    """The projects a user may see: those they are a member of; a superuser sees all.

    Every project lookup of the pages and the API goes through this queryset (project_for_user), so a project
    the user may not see is simply absent (404), never forbidden (403), and its existence does not leak.
    """
    if not user.is_authenticated or not user.is_active:
        return Project.objects.none()
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(pk__in=Membership.objects.filter(user=user).values("project_id"))


def _count_by_project(queryset: QuerySet, project_field: str, project_ids: list[int]) -> dict[int, int]:
    rows = (
        queryset.filter(**{f"{project_field}__in": project_ids})
        .order_by()
        .values(project_field)
        .annotate(n=Count("pk"))
        .values_list(project_field, "n")
    )
    return dict(rows)


def project_counts(*, project_ids: list[int]) -> dict[int, ProjectCounts]:
    """Row counts per project: one grouped query per table however many projects there are, because the
    tables hold up to millions of rows and counting project by project would multiply the scans."""
    if not project_ids:
        return {}
    queries = _count_by_project(Query.objects.all(), "project_id", project_ids)
    passages = _count_by_project(Passage.objects.all(), "project_id", project_ids)
    pairs = _count_by_project(Pair.objects.all(), "project_id", project_ids)
    # Labels and judgments have no project column: they reach it through their pair.
    labels = _count_by_project(Label.objects.filter(superseded_at__isnull=True), "pair__project_id", project_ids)
    judgments = _count_by_project(Judgment.objects.all(), "pair__project_id", project_ids)
    return {
        pid: ProjectCounts(
            queries=queries.get(pid, 0),
            passages=passages.get(pid, 0),
            pairs=pairs.get(pid, 0),
            labels=labels.get(pid, 0),
            judgments=judgments.get(pid, 0),
        )
        for pid in project_ids
    }


def project_summaries(*, projects: Iterable[Project]) -> list[ProjectSummary]:
    """Summaries for the given projects, in the given order."""
    projects = list(projects)
    counts = project_counts(project_ids=[p.pk for p in projects])
    return [ProjectSummary(project=p, counts=counts[p.pk]) for p in projects]


def project_list_for_user(*, user: AbstractBaseUser | AnonymousUser) -> list[ProjectSummary]:
    """The projects a user may see, by name, with their row counts."""
    return project_summaries(projects=projects_visible_to(user=user).order_by("name", "slug"))


def project_named(*, name: str, other_than: Project | None = None) -> Project | None:
    """The project (other than `other_than`) whose name is `name` whatever the case: the comparison the database's
    unique constraint on the names makes (its own LOWER), so what this finds is exactly what it would refuse."""
    projects = Project.objects.alias(name_key=Lower("name")).filter(name_key=Lower(Value(name)))
    if other_than is not None:
        projects = projects.exclude(pk=other_than.pk)
    return projects.order_by("id").first()


def queries_with_current_definition(*, project: Project) -> QuerySet[Query]:
    """The project's queries, each annotated with its current (highest) definition version and text, or
    None for both when the query has no definition yet."""
    newest = RelevanceDefinition.objects.in_use().filter(query=OuterRef("pk")).order_by("-version")
    return (
        Query.objects.filter(project=project)
        .annotate(
            current_definition_version=Subquery(newest.values("version")[:1]),
            current_definition_text=Subquery(newest.values("text")[:1]),
        )
        .order_by("id")
    )


def queries_for_project(*, project: Project) -> QuerySet[Query]:
    return Query.objects.filter(project=project).order_by("id")


def passages_for_project(*, project: Project) -> QuerySet[Passage]:
    return Passage.objects.filter(project=project).order_by("id")


def pairs_for_project(*, project: Project, query_external_id: str | None = None) -> QuerySet[Pair]:
    """The project's pool in pool order, with the external ids and sources needed to list it. Query and
    passage texts are deferred: a page of pairs must not drag whole documents along."""
    pairs = Pair.objects.filter(project=project)
    if query_external_id is not None:
        pairs = pairs.filter(query__external_id=query_external_id)
    return (
        pairs.select_related("query", "passage")
        .only(
            "id",
            "reference_grade",
            "reference_source",
            "query__id",
            "query__external_id",
            "passage__id",
            "passage__external_id",
        )
        .prefetch_related(
            Prefetch("sources", queryset=PairSource.objects.only("id", "pair_id", "system", "rank").order_by("id"))
        )
        .order_by("id")
    )


def project_role(*, user: AbstractBaseUser | AnonymousUser, project: Project) -> str | None:
    """The user's role in the project ('admin' for a superuser), or None for a non-member."""
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return Membership.Role.ADMIN
    return Membership.objects.filter(user=user, project=project).values_list("role", flat=True).first()


@dataclass(frozen=True)
class Need:
    """What a member's role must allow for a request on a project to go on (`allows(project=, role=)`), and what a
    member it does not allow is told."""

    allows: Callable[..., bool]
    refused: str


def _is_admin(*, project: Project, role: str | None) -> bool:
    return role == Membership.Role.ADMIN


def _annotates(*, project: Project, role: str | None) -> bool:
    return role in Membership.ANNOTATING_ROLES


def admin_to(to: str) -> Need:
    """Project admins only; another member is told "Only a project admin can <to>."."""
    return Need(allows=_is_admin, refused=f"Only a project admin can {to}.")


ANNOTATE = Need(allows=_annotates, refused="Only the project's experts and admins annotate.")
# Blind first decides who may read the validation reports (labeling.selectors.disclosure).
READ_REPORTS = Need(allows=sees_reports, refused=BLIND_REPORTS)
# get_object_or_404's words, which the pages and the API answered before this check was one function.
PROJECT_NOT_FOUND = "No Project matches the given query."


def role_require(*, user: AbstractBaseUser | AnonymousUser, project: Project, need: Need) -> str | None:
    """The user's role in the project when it meets `need`, else Forbidden with `need.refused`."""
    role = project_role(user=user, project=project)
    need_check(project=project, role=role, need=need)
    return role


def need_check(*, project: Project, role: str | None, need: Need) -> None:
    """Forbidden with `need.refused` unless `role` in `project` meets `need`."""
    if not need.allows(project=project, role=role):
        raise Forbidden(need.refused)


def project_for_user(*, user: AbstractBaseUser | AnonymousUser, slug: str, need: Need | None = None) -> Project:
    """The project `slug` as `user` may use it: NotFound when they may not see it (a non-member cannot tell it from
    a project that does not exist), Forbidden when their role does not meet `need` (None: any member will do)."""
    try:
        project = projects_visible_to(user=user).get(slug=slug)
    except Project.DoesNotExist:
        raise NotFound(PROJECT_NOT_FOUND) from None
    if need is not None:
        role_require(user=user, project=project, need=need)
    return project

"""A query's relevance definition page: the current version, the edit form (admins), the history with each
version's diff, and the judgments made under older versions with a button that re-scores them."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from labeling.models import Judge, Membership, Project, Query
from labeling.selectors.definitions import definition_versions, stale_pairs
from labeling.selectors.projects import project_role, projects_visible_to
from labeling.services.bundle_import import IMPORTED_JUDGE_BACKEND
from labeling.services.definitions import MAX_DEFINITION_CHARS, DefinitionError, definition_save, stale_rescore_start
from labeling.services.scoring import ScoringError


def _project_and_query(request: HttpRequest, slug: str, query_id: int, *, admin: bool) -> tuple[Project, Query, bool]:
    # Scoping to the visible projects makes a non-member's request a 404; a member who may only read gets 403.
    project = get_object_or_404(projects_visible_to(user=request.user), slug=slug)
    query = get_object_or_404(Query, project=project, id=query_id)
    is_admin = project_role(user=request.user, project=project) == Membership.Role.ADMIN
    if admin and not is_admin:
        raise PermissionDenied("Only a project admin can change definitions or start re-scoring.")
    return project, query, is_admin


def _context(project: Project, query: Query, is_admin: bool, **extra: object) -> dict:
    versions = definition_versions(query=query)
    return {
        "project": project,
        "query": query,
        "is_admin": is_admin,
        "current": versions[0].definition if versions else None,
        "versions": versions,
        "stale": stale_pairs(project=project, query=query),
        "max_chars": MAX_DEFINITION_CHARS,
        "imported_backend": IMPORTED_JUDGE_BACKEND,
        "text": versions[0].definition.text if versions else "",
        **extra,
    }


@login_required
@require_http_methods(["GET", "POST"])
def definition_page(request: HttpRequest, slug: str, query_id: int) -> HttpResponse:
    project, query, is_admin = _project_and_query(request, slug, query_id, admin=request.method == "POST")
    if request.method == "POST":
        text = request.POST.get("text", "")
        try:
            definition = definition_save(query=query, text=text, author=request.user)
        except DefinitionError as exc:
            context = _context(project, query, is_admin, text=text, error=str(exc))
            return render(request, "labeling/definition.html", context, status=400)
        messages.success(request, f"Saved version {definition.version}.")
        return redirect("labeling:definition", slug=project.slug, query_id=query.id)
    return render(request, "labeling/definition.html", _context(project, query, is_admin))


@login_required
@require_POST
def stale_rescore_view(request: HttpRequest, slug: str, query_id: int, judge: str) -> HttpResponse:
    project, query, _ = _project_and_query(request, slug, query_id, admin=True)
    found = get_object_or_404(Judge, project=project, name=judge)
    try:
        job = stale_rescore_start(project=project, query=query, judge=found, user=request.user)
    except (DefinitionError, ScoringError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Job {job.id}: re-scoring {job.total:,} stale pair{'s' if job.total != 1 else ''} with {found.name} "
            "under the current definition.",
        )
    return redirect("labeling:definition", slug=project.slug, query_id=query.id)

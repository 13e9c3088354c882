"""The members page (project admins): who is in the project with which role; add a user by username, change
a role, remove a member."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from labeling.models import Membership, Project
from labeling.selectors.members import project_members
from labeling.selectors.projects import project_role, projects_visible_to
from labeling.services.members import MembershipError, membership_remove, membership_set


def _admin_project(request: HttpRequest, slug: str) -> Project:
    # Scoping to the visible projects makes a non-member's request a 404; a member who is not admin gets 403.
    project = get_object_or_404(projects_visible_to(user=request.user), slug=slug)
    if project_role(user=request.user, project=project) != Membership.Role.ADMIN:
        raise PermissionDenied("Only a project admin can manage the members.")
    return project


def _render(request: HttpRequest, project: Project, status: int = 200, **extra: object) -> HttpResponse:
    context = {
        "project": project,
        "members": project_members(project=project),
        "roles": Membership.Role.choices,
        "username": "",
        "role": Membership.Role.EXPERT,
        **extra,
    }
    return render(request, "labeling/members.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def members_page(request: HttpRequest, slug: str) -> HttpResponse:
    project = _admin_project(request, slug)
    if request.method == "GET":
        return _render(request, project)
    username, role = request.POST.get("username", ""), request.POST.get("role", "")
    try:
        membership = membership_set(project=project, username=username, role=role, by=request.user)
    except MembershipError as exc:
        return _render(request, project, status=400, error=str(exc), username=username, role=role)
    messages.success(request, f"{membership.user.get_username()} is now {membership.role} of {project.name}.")
    return redirect("labeling:members", slug=project.slug)


@login_required
@require_POST
def member_remove_view(request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
    project = _admin_project(request, slug)
    try:
        removed = membership_remove(project=project, user_id=user_id, by=request.user)
    except MembershipError as exc:
        return _render(request, project, status=400, error=str(exc))
    messages.success(request, f"Removed {removed.user.get_username()} from {project.name}; their labels stay.")
    return redirect("labeling:members", slug=project.slug)

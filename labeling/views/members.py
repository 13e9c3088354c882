"""The members page (project admins): who is in the project with which role; add a user by username, change
a role, remove a member."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from labeling.models import Membership, Project
from labeling.selectors.members import project_members
from labeling.selectors.projects import admin_to
from labeling.services.members import MembershipError, membership_remove, membership_set
from labeling.views.access import project_view

MANAGE_MEMBERS = admin_to("manage the members")


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
@project_view(MANAGE_MEMBERS)
def members_page(request: HttpRequest, project: Project) -> HttpResponse:
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
@project_view(MANAGE_MEMBERS)
def member_remove_view(request: HttpRequest, project: Project, user_id: int) -> HttpResponse:
    try:
        removed = membership_remove(project=project, user_id=user_id, by=request.user)
    except MembershipError as exc:
        return _render(request, project, status=400, error=str(exc))
    messages.success(request, f"Removed {removed.user.get_username()} from {project.name}; their labels stay.")
    return redirect("labeling:members", slug=project.slug)

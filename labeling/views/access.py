"""Who may open a project page: the lookups the views share."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from labeling.models import Membership, Project
from labeling.selectors.projects import project_role, projects_visible_to


def admin_project(request: HttpRequest, slug: str, *, to: str) -> Project:
    """The project `slug` when the user is its admin. Scoping to the visible projects makes a non-member's
    request a 404; a member who is not admin gets 403 "Only a project admin can <to>."."""
    project = get_object_or_404(projects_visible_to(user=request.user), slug=slug)
    if project_role(user=request.user, project=project) != Membership.Role.ADMIN:
        raise PermissionDenied(f"Only a project admin can {to}.")
    return project

"""handler403: a refused page as a page of the site, with its navigation (the project's tabs where the URL names a
project the user may see) and the reason: the reader's role and what the page needs."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from labeling.models import Membership
from labeling.selectors.projects import projects_visible_to
from labeling.views.access import request_role

# What Django's PermissionDenied says when the code raising it gave no reason.
NO_REASON = "You do not have permission to open this page."


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 403 page: `exception`'s message (the role check's "Only a project admin can ...") and, under a
    project's URL, the project's header and the reader's role in it."""
    slug = request.resolver_match.kwargs.get("slug") if request.resolver_match else None
    project = role = None
    if slug and request.user.is_authenticated:
        project = projects_visible_to(user=request.user).filter(slug=slug).first()
        role = None if project is None else request_role(request, project)
    context = {
        "reason": str(exception) or NO_REASON,
        "project": project,
        "role": Membership.Role(role).label if role else None,
    }
    return render(request, "403.html", context, status=403)

"""The pages' edge for access: one decorator looks the project up for the user through the one access check
(labeling.selectors.projects.project_for_user) and turns the domain's NotFound and Forbidden, from that check or
from any lookup in the view, into Django's 404 and 403. The user's role in a project is looked up once per request
(request_role): the decorator, the view and the project header all ask for it."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from labeling.exceptions import Forbidden, NotFound
from labeling.models import Project
from labeling.selectors.projects import Need, need_check, project_for_user, project_role

# The request's attribute holding its roles, project id -> role (None: not a member).
_ROLES = "_project_roles"


def request_role(request: HttpRequest, project: Project) -> str | None:
    """The request's user's role in `project` ('admin' for a superuser, None for a non-member), looked up on the
    first call of the request and remembered for the rest of it."""
    roles = request.__dict__.setdefault(_ROLES, {})
    if project.id not in roles:
        roles[project.id] = project_role(user=request.user, project=project)
    return roles[project.id]


def project_view(need: Need | None = None) -> Callable:
    """Decorate a view of the URL's project: it is called with the project in place of the `slug` when the user
    may see it and their role meets `need` (None: any member). Put it under login_required and the method checks,
    so that an anonymous visitor is sent to log in and a wrong method is a 405 before the project is looked up."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, slug: str, *args: object, **kwargs: object) -> HttpResponse:
            try:
                project = project_for_user(user=request.user, slug=slug)
                if need is not None:
                    need_check(project=project, role=request_role(request, project), need=need)
                return view(request, project, *args, **kwargs)
            except NotFound as exc:
                raise Http404(str(exc)) from None
            except Forbidden as exc:
                raise PermissionDenied(str(exc)) from None

        # The project header asks it which of its tabs a member may open (labeling.views.navigation): the rule
        # stays the one the view applies. functools.wraps in the decorators above copies it along.
        wrapped.project_need = need
        wrapped.project_scoped = True
        return wrapped

    return decorate

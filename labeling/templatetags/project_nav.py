"""{% project_header project "tab" %}: the project's name and its tabs (labeling.views.navigation)."""
from __future__ import annotations

from django import template

from labeling.models import Project
from labeling.views.access import request_role
from labeling.views.navigation import project_tabs

register = template.Library()


@register.inclusion_tag("labeling/_project_header.html", takes_context=True)
def project_header(context: template.Context, project: Project, active: str, place: str = "") -> dict:
    """`active` is the tab the page belongs to; `place` an optional trail below it (a judge's name, a pair)."""
    request = context["request"]
    tabs = project_tabs(user=request.user, project=project, role=request_role(request, project))
    return {"project": project, "tabs": tabs, "active": active, "place": place}

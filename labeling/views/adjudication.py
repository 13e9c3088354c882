"""The adjudication page (project admins): pairs whose experts disagree, with their labels and the judges' P;
a grade button makes the admin's grade the pair's gold, swapping the item in place (htmx) or redirecting back
to the page (plain forms)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from labeling.highlight import highlight_segments
from labeling.models import Project
from labeling.selectors.adjudication import KINDS, STATES, AdjudicationItem, adjudication_details, adjudication_items
from labeling.selectors.lookups import pair_of_project
from labeling.selectors.projects import admin_to
from labeling.services.adjudication import AdjudicationError, adjudication_set
from labeling.views.access import project_view
from labeling.views.htmx import htmx_partial

ADJUDICATE = admin_to("adjudicate")

TABS = (("conflict", "Conflicts"), ("disagreement", "Other disagreements"), ("all", "All disagreements"))
STATE_NAMES = (("unresolved", "Unresolved"), ("resolved", "Resolved"), ("all", "Both"))


def _shown(item: AdjudicationItem) -> dict:
    query = item.pair.query.text
    return {
        "item": item,
        "title_segments": highlight_segments(item.pair.passage.title, query),
        "passage_segments": highlight_segments(item.pair.passage.text, query),
    }


def _filters(request: HttpRequest) -> tuple[str, str]:
    kind = request.GET.get("kind") or request.POST.get("kind") or "conflict"
    state = request.GET.get("state") or request.POST.get("state") or "unresolved"
    return (kind if kind in KINDS else "conflict"), (state if state in STATES else "unresolved")


@login_required
@require_GET
@project_view(ADJUDICATE)
def adjudication_page(request: HttpRequest, project: Project) -> HttpResponse:
    kind, state = _filters(request)
    found = adjudication_items(project=project, kind=kind, state=state, page=request.GET.get("page"))
    context = {
        "project": project,
        "scale": project.label_scale,
        "found": found,
        "shown": [_shown(item) for item in found.items],
        "tabs": [(value, name, found.counts[value]) for value, name in TABS],
        "states": STATE_NAMES,
    }
    if htmx_partial(request):
        return render(request, "labeling/adjudication.html#adjudication-list", context)
    return render(request, "labeling/adjudication.html", context)


def _render_item(request: HttpRequest, project: Project, pair_id: int, status: int = 200, **extra: object):
    (item,) = adjudication_details(project=project, pair_ids=[pair_id])
    kind, state = _filters(request)
    context = {"project": project, "scale": project.label_scale, "kind": kind, "state": state, **_shown(item),
               **extra}
    return render(request, "labeling/adjudication.html#item", context, status=status)


@login_required
@require_POST
@project_view(ADJUDICATE)
def adjudication_set_view(request: HttpRequest, project: Project, pair_id: int) -> HttpResponse:
    pair_of_project(project=project, pair_id=pair_id)  # an item of another project is a 404
    try:
        grade = int(request.POST.get("grade", ""))
    except ValueError:
        grade = request.POST.get("grade", "")
    try:
        label = adjudication_set(project=project, adjudicator=request.user, pair_id=pair_id, grade=grade,
                                 note=request.POST.get("note", "").strip())
    except AdjudicationError as exc:
        if request.htmx:
            return _render_item(request, project, pair_id, status=400, error=str(exc))
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    if request.htmx:
        return _render_item(request, project, pair_id)
    grade_name = project.label_scale.grade(label.grade).name
    messages.success(request, f"Gold grade of item {pair_id}: {label.grade} ({grade_name}).")
    kind, state = _filters(request)
    return redirect(f"{reverse('labeling:adjudication', kwargs={'slug': project.slug})}?kind={kind}&state={state}")

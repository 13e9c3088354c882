"""HTML: the Systems page's pooling section: admins preview what pooling the chosen runs would add, and add it."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from labeling.exceptions import NotFound
from labeling.forms import PoolForm
from labeling.models import Project, Run
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import admin_to
from labeling.selectors.runs import project_runs, run_by_name
from labeling.services.pooling import PoolingError, pool_add, pool_preview
from labeling.services.scoring import ScoringError
from labeling.views.access import project_view
from labeling.views.systems import pool_form, systems_context


def _pool_request(project: Project, form: PoolForm) -> tuple[list[Run], int] | None:
    """The runs and depth the valid form names, or None with the reason added to the form."""
    if not form.is_valid():
        return None
    try:
        runs = [run_by_name(project=project, name=name) for name in form.cleaned_data["runs"]]
    except NotFound as exc:
        form.add_error("runs", str(exc))
        return None
    return runs, form.cleaned_data["depth"]


@login_required
@project_view(admin_to("pool runs"))
def pool_preview_view(request: HttpRequest, project: Project) -> HttpResponse:
    """What pooling the chosen runs would add (a dry run), with a button that adds it."""
    runs = list(project_runs(project))
    form = pool_form(project, runs, request.GET)
    answer: dict = {"pool_form": form}
    asked = _pool_request(project, form)
    if asked is not None:
        judge = judge_by_name(project=project, name=form.cleaned_data["judge"]) if form.cleaned_data["judge"] else None
        try:
            answer["preview"] = pool_preview(project=project, runs=asked[0], depth=asked[1], judge=judge)
        except (PoolingError, ScoringError) as exc:
            form.add_error(None, str(exc))
    # 200 either way: htmx swaps the answer, errors included, into the page; without htmx, the whole page.
    if request.htmx:
        return render(request, "labeling/systems.html#pool-preview", {"project": project, **answer})
    return render(request, "labeling/systems.html", systems_context(request, project, **answer))


@login_required
@require_POST
@project_view(admin_to("pool runs"))
def pool_add_view(request: HttpRequest, project: Project) -> HttpResponse:
    runs = list(project_runs(project))
    form = pool_form(project, runs, request.POST)
    asked = _pool_request(project, form)
    if asked is not None:
        try:
            written = pool_add(project=project, runs=asked[0], depth=asked[1])
        except PoolingError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Pooled the top {asked[1]} of {', '.join(run.name for run in asked[0])}: "
                                      f"{written['pairs']:,} new pairs, {written['pool sources']:,} sources added.")
            return redirect("labeling:systems", slug=project.slug)
    return render(request, "labeling/systems.html", systems_context(request, project, pool_form=form), status=400)

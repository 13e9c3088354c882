"""HTML: an estimate job (labeling.services.estimates) in place on the page that asked for it, following itself
(htmx) until it has its result or error, or on its own page."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from labeling.models import Estimate, Project
from labeling.selectors.job_states import job_state
from labeling.selectors.lookups import estimate_of_project
from labeling.selectors.projects import admin_to
from labeling.services.estimates import estimate_result
from labeling.views.access import project_view

# The page that asks for each kind, for the estimate's own page's tab and way back.
KIND_PAGES = {Estimate.Kind.SCORING: "judges", Estimate.Kind.RETRIEVAL: "systems", Estimate.Kind.FINETUNE: "finetune"}


def estimate_card(row: Estimate) -> dict:
    """What labeling/_estimate_job.html shows of an estimate: queued (what is ahead of it), running for how long
    within its time limit, then its result or why there is none."""
    running_s = (timezone.now() - row.started_at).total_seconds() if row.started_at else None
    return {"row": row, "state": job_state(row), "running_s": running_s, "time_limit_s": settings.ESTIMATE_TIME_LIMIT,
            "estimate": estimate_result(row), "error": row.error if row.status == Estimate.Status.FAILED else "",
            "page": KIND_PAGES[row.kind]}


@login_required
@project_view(admin_to("see an estimate"))
def estimate_view(request: HttpRequest, project: Project, estimate_id: int) -> HttpResponse:
    """One estimate: htmx, the card alone (what its page polls); else its own page."""
    card = estimate_card(estimate_of_project(project=project, estimate_id=estimate_id))
    template = "labeling/_estimate_job.html" if request.htmx else "labeling/estimate.html"
    return render(request, template, {"project": project, "job": card})

"""HTML pages: a project's judges and their scoring jobs; admins create judges, start, estimate and cancel
jobs."""
from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from labeling.forms import JudgeForm
from labeling.llm_adapter import judge_relevance_rule
from labeling.models import Estimate, Judge, Membership, Project, ScoringJob
from labeling.selectors.disclosure import sees_reports
from labeling.selectors.lookups import judge_by_name, scoring_job_of_project
from labeling.selectors.projects import admin_to
from labeling.selectors.scoring import job_progress, jobs_for_project, judges_for_project
from labeling.services.estimates import estimate_request
from labeling.services.judges import JudgeError, judge_create
from labeling.services.scoring import (
    PriorityError,
    PriorityForbidden,
    ScoringError,
    scoring_job_cancel,
    scoring_job_priority_set,
    scoring_request,
)
from labeling.services.scoring_dispatch import PRIORITY_MIN, priority_max_for
from labeling.views.access import project_view, request_role
from labeling.views.estimates import estimate_card
from labeling.views.htmx import htmx_partial
from models_llm.prompts import DEFAULT_TEMPLATE

# Creating judges and starting, estimating or cancelling jobs: refused with "Only a project admin can do this.".
JUDGE_ADMIN = admin_to("do this")


def _with_rule(judge: Judge) -> Judge:
    judge.relevance_rule = judge_relevance_rule(judge).text
    return judge


def _judges_context(request: HttpRequest, project: Project, form: JudgeForm | None = None) -> dict:
    role = request_role(request, project)
    jobs = [job_progress(job, show_errors=role == Membership.Role.ADMIN) for job in jobs_for_project(project)]
    return {
        "project": project,
        "judges": [_with_rule(judge) for judge in judges_for_project(project)],
        "jobs": jobs,
        "any_running": any(p.job.status == ScoringJob.Status.RUNNING for p in jobs),
        "is_admin": role == Membership.Role.ADMIN,
        "priorities": range(PRIORITY_MIN, priority_max_for(request.user) + 1),
        "sees_reports": sees_reports(project=project, role=role),
        "form": form or JudgeForm(project=project),
        "default_template": json.dumps(DEFAULT_TEMPLATE, indent=2),
    }


@login_required
@project_view()
def judges_page(request: HttpRequest, project: Project) -> HttpResponse:
    context = _judges_context(request, project)
    if htmx_partial(request):
        return render(request, "labeling/judges.html#jobs", context)
    return render(request, "labeling/judges.html", context)


@login_required
@require_POST
@project_view(JUDGE_ADMIN)
def judge_create_view(request: HttpRequest, project: Project) -> HttpResponse:
    form = JudgeForm(request.POST, project=project)
    if form.is_valid():
        try:
            judge = judge_create(project=project, **form.service_arguments())
        except JudgeError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Created judge {judge.name}.")
            return redirect("labeling:judges", slug=project.slug)
    return render(request, "labeling/judges.html", _judges_context(request, project, form), status=400)


@login_required
@require_POST
@project_view(JUDGE_ADMIN)
def job_start_view(request: HttpRequest, project: Project, judge: str) -> HttpResponse:
    found = judge_by_name(project=project, name=judge)
    scope = request.POST.get("scope", ScoringJob.Scope.MISSING)
    try:
        job, created = scoring_request(project=project, judge=found, scope=scope, user=request.user)
    except ScoringError as exc:
        messages.error(request, str(exc))
    else:
        if created:
            messages.success(request, f"Job {job.id}: {job.total:,} pairs queued for {found.name}.")
        else:
            messages.info(request, f"{found.name} already has job {job.id} running: its unwritten chunks were "
                                   "queued again instead of starting a second job.")
    return redirect("labeling:judges", slug=project.slug)


@login_required
@require_POST
@project_view(JUDGE_ADMIN)
def judge_estimate_view(request: HttpRequest, project: Project, judge: str) -> HttpResponse:
    """Ask a worker for a dry run of a job (project admins): time, calls, tokens and cost before anything is sent to
    a model. htmx: the estimate in place, following it until it has its result or error; else its own page."""
    found = judge_by_name(project=project, name=judge)
    scope = request.POST.get("scope", ScoringJob.Scope.MISSING)
    try:
        row = estimate_request(project=project, kind=Estimate.Kind.SCORING, judge=found, scope=scope, user=request.user)
    except ScoringError as exc:
        return render(request, "labeling/_estimate.html", {"project": project, "judge": found, "error": str(exc)},
                      status=400)
    if request.htmx:
        return render(request, "labeling/_estimate_job.html", {"project": project, "job": estimate_card(row)})
    return redirect("labeling:estimate", slug=project.slug, estimate_id=row.id)


@login_required
@require_POST
@project_view(JUDGE_ADMIN)
def job_cancel_view(request: HttpRequest, project: Project, job_id: int) -> HttpResponse:
    job = scoring_job_of_project(project=project, job_id=job_id)
    scoring_job_cancel(job=job)
    messages.info(request, f"Job {job.id} cancelled; what it wrote stays.")
    return redirect("labeling:judges", slug=project.slug)


@login_required
@require_POST
@project_view(JUDGE_ADMIN)
def job_priority_view(request: HttpRequest, project: Project, job_id: int) -> HttpResponse:
    """A running job's part of its project's share of the workers (1 to 10; above 1 staff only, else a 403): it
    sends more of its chunks at once."""
    job = scoring_job_of_project(project=project, job_id=job_id)
    raw = request.POST.get("priority", "")
    try:
        job = scoring_job_priority_set(job=job, priority=int(raw) if raw.isdigit() else raw, by=request.user)
    except PriorityForbidden as exc:
        # A 403, as the API answers, on the page itself so that the admin reads the rule.
        messages.error(request, str(exc))
        return render(request, "labeling/judges.html", _judges_context(request, project), status=403)
    except PriorityError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"Job {job.id} now has priority {job.priority}.")
    return redirect("labeling:judges", slug=project.slug)

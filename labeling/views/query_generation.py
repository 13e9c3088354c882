"""HTML: LLM query generation (DisastIR 3.4), a section of the Systems page: admins estimate a generation (dry run) or
start it, and cancel a running one. The section's jobs and form are labeling.views.systems's query_generation_context;
the services are the command's and the API's."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from labeling.exceptions import DomainError
from labeling.models import Project
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import admin_to
from labeling.selectors.query_generation import (
    query_generation_of_project,
)
from labeling.services.query_generation import (
    query_generation_cancel,
    query_generation_estimate,
    query_generation_plan,
    query_generation_request,
)
from labeling.views.access import project_view
from labeling.views.systems import query_generation_form, systems_context


@login_required
@require_POST
@project_view(admin_to("generate queries"))
def query_generation_start_view(request: HttpRequest, project: Project) -> HttpResponse:
    """Start the query generation the form describes (DisastIR 3.4), or (its Estimate button) say what it would ask
    and cost, asking nothing."""
    form = query_generation_form(project, request.POST)
    if form.is_valid():
        try:
            judge = judge_by_name(project=project, name=form.cleaned_data["judge"])
            plan = query_generation_plan(project=project, judge=judge, **form.plan_arguments())
            if "estimate" in request.POST:
                estimate = query_generation_estimate(project=project, plan=plan)
                return render(request, "labeling/systems.html", systems_context(
                    request, project, generation_form=form, generation_estimate=estimate, generation_plan=plan))
            job = query_generation_request(project=project, plan=plan, user=request.user)
        except DomainError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Query generation {job.id}: {job.total} passage x intent units for query set "
                                      f"{job.query_set!r} queued.")
            return redirect("labeling:systems", slug=project.slug)
    return render(request, "labeling/systems.html", systems_context(request, project, generation_form=form),
                  status=400)


@login_required
@require_POST
@project_view(admin_to("cancel a query generation"))
def query_generation_cancel_view(request: HttpRequest, project: Project, generation_id: int) -> HttpResponse:
    job = query_generation_cancel(job=query_generation_of_project(project=project, job_id=generation_id))
    kept = f"; its {job.created} queries stay" if job.created else ""
    messages.info(request, f"Query generation {job.id} is {job.status}{kept}.")
    return redirect("labeling:systems", slug=project.slug)

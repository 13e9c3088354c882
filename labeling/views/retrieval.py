"""HTML: the Systems page's retrieval section: admins start a built-in retriever (or estimate one), and cancel
its job."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from labeling.models import Estimate, Project
from labeling.selectors.lookups import retrieval_job_of_project
from labeling.selectors.projects import admin_to
from labeling.services.estimates import estimate_request
from labeling.services.retrieval import RetrievalError, retrieval_cancel, retrieval_request
from labeling.views.access import project_view
from labeling.views.estimates import estimate_card
from labeling.views.systems import retrieval_form, systems_context


@login_required
@require_POST
@project_view(admin_to("start a retriever"))
def retrieval_start_view(request: HttpRequest, project: Project) -> HttpResponse:
    """Start the retriever the form describes, or (the form's Estimate button) ask a worker what it would take here
    (it loads and times the models) and show that estimate following itself, starting nothing."""
    form = retrieval_form(project, request.POST)
    estimating = "estimate" in request.POST
    form.fields["name"].required = not estimating
    if estimating and form.is_valid():
        arguments = {key: value for key, value in form.service_arguments().items() if key != "name"}
        try:
            row = estimate_request(project=project, kind=Estimate.Kind.RETRIEVAL, arguments=arguments,
                                   user=request.user)
        except RetrievalError as exc:
            form.add_error(None, str(exc))
        else:
            return render(request, "labeling/systems.html", systems_context(
                request, project, retrieval_form=form, retrieval_estimate=estimate_card(row)))
    elif form.is_valid():
        try:
            job = retrieval_request(project=project, user=request.user, **form.service_arguments())
        except RetrievalError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Job {job.id}: {job.get_retriever_display()} run {job.name} queued.")
            return redirect("labeling:systems", slug=project.slug)
    return render(request, "labeling/systems.html", systems_context(request, project, retrieval_form=form),
                  status=400)


@login_required
@require_POST
@project_view(admin_to("cancel a retrieval job"))
def retrieval_cancel_view(request: HttpRequest, project: Project, retrieval_job_id: int) -> HttpResponse:
    job = retrieval_cancel(job=retrieval_job_of_project(project=project, job_id=retrieval_job_id))
    messages.info(request, f"Job {job.id} is {job.status}.")
    return redirect("labeling:systems", slug=project.slug)

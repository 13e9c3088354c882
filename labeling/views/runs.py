"""HTML: the Systems page's runs section: admins upload run files and delete runs."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from labeling.forms import RunUploadForm
from labeling.models import BundleImportJob, Project
from labeling.runs_upload import run_import_upload, upload_refusal
from labeling.selectors.lookups import run_of_project
from labeling.selectors.projects import admin_to
from labeling.services.runs import RunImportError, run_delete
from labeling.views.access import project_view
from labeling.views.systems import systems_context

RUN_ADMIN = admin_to("change the project's runs")


@csrf_protect
def _run_upload(request: HttpRequest, project: Project) -> HttpResponse:
    form = RunUploadForm(request.POST, request.FILES)
    problems: list[str] = []
    if form.is_valid():
        data = form.cleaned_data
        try:
            run = run_import_upload(project=project, upload=data["file"], name=data["name"],
                                    description=data["description"], user=request.user)
        except RunImportError as exc:
            problems = [*exc.problems.shown]
            if exc.problems.total > len(exc.problems.shown):
                problems.append(f"... and {exc.problems.total - len(exc.problems.shown):,} more problems")
        else:
            if isinstance(run, BundleImportJob):
                messages.info(request, f"{run.file_name} is too large to read here: import {run.id} stores it as "
                                       f"run {run.run_name} on a worker (follow it on the Import page).")
            else:
                messages.success(request, f"Stored run {run.name}: {run.entries:,} entries for {run.queries:,} "
                                          f"queries (depth {run.depth:,}).")
            return redirect("labeling:systems", slug=project.slug)
    context = systems_context(request, project, upload_form=form, upload_problems=problems)
    return render(request, "labeling/systems.html", context, status=400)


# CSRF is checked by _run_upload, after the size: the middleware's check would read the whole body first.
@csrf_exempt
@login_required
@require_POST
@project_view(RUN_ADMIN)
def run_upload_view(request: HttpRequest, project: Project) -> HttpResponse:
    refusal = upload_refusal(request)
    if refusal is not None:
        context = systems_context(request, project, upload_refusal=refusal)
        return render(request, "labeling/systems.html", context, status=413)
    return _run_upload(request, project)


@login_required
@require_POST
@project_view(RUN_ADMIN)
def run_delete_view(request: HttpRequest, project: Project, run_id: int) -> HttpResponse:
    run = run_of_project(project=project, run_id=run_id)
    run_delete(run=run)
    messages.info(request, f"Deleted run {run.name}; the pairs it brought to the pool stay.")
    return redirect("labeling:systems", slug=project.slug)

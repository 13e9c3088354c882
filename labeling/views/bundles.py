"""HTML pages: creating a project (staff, from the project list) and a project's Import page, where its admins
upload a bundle archive and follow the worker's import: its stage while it runs (polled by htmx), then the rows it
wrote or every `file:line` problem that stopped it."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from labeling.forms import BundleUploadForm, ProjectCreateForm
from labeling.models import Project
from labeling.selectors.bundle_imports import bundle_import_of_project, bundle_imports
from labeling.selectors.projects import admin_to, project_list_for_user, project_summaries
from labeling.services.bundle_upload import (
    BundleImportFinished,
    BundleUploadError,
    bundle_import_cancel,
    bundle_import_request,
    bundle_upload_refusal,
)
from labeling.services.projects import (
    PROJECT_CREATE_REFUSED,
    ProjectCreateError,
    ProjectCreateForbidden,
    may_create_projects,
    project_create,
)
from labeling.views.access import project_view
from labeling.views.htmx import htmx_partial

IMPORT_ADMIN = admin_to("import bundles")


@login_required
@require_POST
def project_create_view(request: HttpRequest) -> HttpResponse:
    form = ProjectCreateForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            project = project_create(by=request.user, name=data["name"], slug=data["slug"], scale=data["scale"],
                                     description=data["description"])
        except ProjectCreateForbidden as exc:
            raise PermissionDenied(str(exc)) from None
        except ProjectCreateError as exc:
            for field, message in exc.errors.items():
                form.add_error(field, message)
        else:
            messages.success(request, f"Created project {project.name}: upload its data as a bundle below.")
            return redirect("labeling:bundles", slug=project.slug)
    elif not may_create_projects(request.user):
        # The service refuses a valid form; an invalid one is refused the same, not shown its errors.
        raise PermissionDenied(PROJECT_CREATE_REFUSED)
    context = {"summaries": project_list_for_user(user=request.user), "create_form": form}
    return render(request, "labeling/project_list.html", context, status=400)


def _jobs_context(project: Project) -> dict:
    jobs = list(bundle_imports(project))
    return {"project": project, "jobs": jobs, "any_unfinished": any(job.finished_at is None for job in jobs)}


def _page(request: HttpRequest, project: Project, status: int = 200, **answer: object) -> HttpResponse:
    (summary,) = project_summaries(projects=[project])
    context = {**_jobs_context(project), "counts": summary.counts, "upload_form": BundleUploadForm(), **answer}
    return render(request, "labeling/bundle_import.html", context, status=status)


@login_required
@project_view(IMPORT_ADMIN)
def bundles_page(request: HttpRequest, project: Project) -> HttpResponse:
    if htmx_partial(request):
        # The jobs poll while one is unfinished; once none is, the page reloads to show the project's new counts.
        context = _jobs_context(project)
        response = render(request, "labeling/bundle_import.html#bundle-jobs", context)
        if not context["any_unfinished"]:
            response["HX-Refresh"] = "true"
        return response
    return _page(request, project)


@csrf_protect
def _upload(request: HttpRequest, project: Project) -> HttpResponse:
    form = BundleUploadForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            job = bundle_import_request(project=project, upload=form.cleaned_data["file"],
                                        all_pairs=form.cleaned_data["all_pairs"],
                                        query_set=form.cleaned_data["query_set"], user=request.user)
        except BundleUploadError as exc:
            form.add_error("file", str(exc))
        else:
            messages.info(request, f"Import {job.id} of {job.file_name} queued: a worker unpacks and checks it.")
            return redirect("labeling:bundles", slug=project.slug)
    return _page(request, project, status=400, upload_form=form)


# CSRF is checked by _upload, after the size: the middleware's check would read the whole body first.
@csrf_exempt
@login_required
@require_POST
@project_view(IMPORT_ADMIN)
def bundle_upload_view(request: HttpRequest, project: Project) -> HttpResponse:
    refusal = bundle_upload_refusal(content_length=request.META.get("CONTENT_LENGTH"))
    if refusal is not None:
        return _page(request, project, status=413, upload_refusal=refusal)
    return _upload(request, project)


@login_required
@require_POST
@project_view(IMPORT_ADMIN)
def bundle_cancel_view(request: HttpRequest, project: Project, bundle_job_id: int) -> HttpResponse:
    try:
        job = bundle_import_cancel(job=bundle_import_of_project(project=project, job_id=bundle_job_id))
    except BundleImportFinished as exc:
        messages.info(request, f"{str(exc)[0].upper()}{str(exc)[1:]}.")
    else:
        messages.info(request, f"Import {job.id} cancelled: nothing of it was stored.")
    return redirect("labeling:bundles", slug=project.slug)

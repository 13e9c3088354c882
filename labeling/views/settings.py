"""The project's queue settings page (admins): the queue mix, the queue judge, overlap, leases and blindness, and
the stopping target."""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling.forms import QueueSettingsForm, StoppingForm
from labeling.models import Project
from labeling.selectors.completeness import project_target_met
from labeling.selectors.projects import admin_to
from labeling.selectors.queue_settings import queue_settings_summary
from labeling.services.projects import ProjectSettingsError, project_queue_settings_update, project_stopping_update
from labeling.views.access import project_view


def _render(request: HttpRequest, project: Project, form: QueueSettingsForm, status: int = 200,
            stopping: StoppingForm | None = None) -> HttpResponse:
    context = {"project": project, "form": form, "summary": queue_settings_summary(project=project),
               "stopping": stopping or StoppingForm(project=project),
               "target_met": project_target_met(project=project)}
    return render(request, "labeling/settings.html", context, status=status)


def _add_errors(form: forms.Form, exc: ProjectSettingsError) -> None:
    """The service's errors on the form: under their field where the form has it, else above the form."""
    for field, message in exc.errors.items():
        form.add_error(field if field in form.fields else None, message)


@login_required
@require_http_methods(["GET", "POST"])
@project_view(admin_to("change the queue settings"))
def queue_settings_page(request: HttpRequest, project: Project) -> HttpResponse:
    if request.method == "GET":
        return _render(request, project, QueueSettingsForm(project=project))
    form = QueueSettingsForm(request.POST, project=project)
    if form.is_valid():
        try:
            project_queue_settings_update(project=project, by=request.user, **form.service_arguments())
        except ProjectSettingsError as exc:
            _add_errors(form, exc)
        else:
            messages.success(request, "Queue settings saved")
            return redirect("labeling:settings", slug=project.slug)
    return _render(request, project, form, status=400)


@login_required
@require_http_methods(["POST"])
@project_view(admin_to("change the stopping target"))
def stopping_settings(request: HttpRequest, project: Project) -> HttpResponse:
    form = StoppingForm(request.POST, project=project)
    if form.is_valid():
        data = form.cleaned_data
        try:
            project_stopping_update(project=project, by=request.user, stop_recall=data["stop_recall"],
                                    stop_alpha=data["stop_alpha"], stop_budget=data["stop_budget"],
                                    stop_kappa=data["stop_kappa"])
        except ProjectSettingsError as exc:
            _add_errors(form, exc)
        else:
            messages.success(request, "Stopping target saved")
            return redirect("labeling:settings", slug=project.slug)
    return _render(request, project, QueueSettingsForm(project=project), status=400, stopping=form)

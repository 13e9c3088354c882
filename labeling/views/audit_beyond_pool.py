"""HTML: the Systems page's beyond-the-pool section: admins start an audit of a judge on the entries below the pool."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from labeling.forms import BeyondPoolForm
from labeling.models import AuditJob, Project
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import admin_to
from labeling.services.audit import AuditError, audit_request
from labeling.views.access import project_view
from labeling.views.systems import beyond_pool_judges, systems_context


@login_required
@require_POST
@project_view(admin_to("look beyond the pool"))
def beyond_pool_start_view(request: HttpRequest, project: Project) -> HttpResponse:
    """Start a beyond-the-pool audit of the chosen judge; its page follows the progress."""
    form = BeyondPoolForm(request.POST, judges=beyond_pool_judges(project))
    if form.is_valid():
        try:
            job = audit_request(project=project, judge=judge_by_name(project=project, name=form.cleaned_data["judge"]),
                                kind=AuditJob.Kind.BEYOND_POOL, parameters=form.parameters(), user=request.user)
        except AuditError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Audit {job.id}: {job.total} entries below the pool to score.")
            return redirect("labeling:audit_detail", slug=project.slug, audit_id=job.id)
    return render(request, "labeling/systems.html", systems_context(request, project, beyond_pool_form=form),
                  status=400)

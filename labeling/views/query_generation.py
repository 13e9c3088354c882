"""HTML: LLM query generation (DisastIR 3.4), a section of the Systems page: the project's generation jobs for its
members, and for its admins the form that estimates one (dry run) or starts it (labeling.views.systems's
query_generation_start_view) and a running job's Cancel button. The services are the command's and the API's."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from labeling.forms import QueryGenerationForm
from labeling.models import Membership, Project
from labeling.selectors.disclosure import item_disclosure
from labeling.selectors.projects import admin_to
from labeling.selectors.query_generation import (
    RECENT,
    query_generation_of_project,
    query_generation_row,
    query_generations,
)
from labeling.selectors.scoring import judges_for_project
from labeling.services.query_generation import query_generation_cancel
from labeling.views.access import project_view


def query_generation_form(project: Project, data: dict | None = None) -> QueryGenerationForm:
    return QueryGenerationForm(data, judges=[judge.name for judge in judges_for_project(project)
                                             if judge.is_generative],
                               grades=[(grade.value, grade.name) for grade in project.label_scale.grades])


def query_generation_context(project: Project, role: str | None) -> dict:
    """The page's section: the newest jobs as a member with `role` may see them, and the form (the admins')."""
    disclosure = item_disclosure(project=project, role=role, labelled=False)
    return {"generations": [query_generation_row(job, show_errors=role == Membership.Role.ADMIN, disclosure=disclosure)
                            for job in query_generations(project)[:RECENT]],
            "generation_form": query_generation_form(project)}


@login_required
@require_POST
@project_view(admin_to("cancel a query generation"))
def query_generation_cancel_view(request: HttpRequest, project: Project, generation_id: int) -> HttpResponse:
    job = query_generation_cancel(job=query_generation_of_project(project=project, job_id=generation_id))
    kept = f"; its {job.created} queries stay" if job.created else ""
    messages.info(request, f"Query generation {job.id} is {job.status}{kept}.")
    return redirect("labeling:systems", slug=project.slug)

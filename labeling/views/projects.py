"""HTML pages: the project list and a project's overview (what to do next for the reader's role, its counts, queries
and queue settings)."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from labeling.forms import ProjectCreateForm
from labeling.models import Membership, Project
from labeling.selectors.completeness_report import CompletenessReport, kappa_target_met
from labeling.selectors.coverage import pool_coverage
from labeling.selectors.definitions import stale_counts_for_queries
from labeling.selectors.disclosure import sees_reports
from labeling.selectors.overview import project_overview
from labeling.selectors.projects import (
    project_list_for_user,
    project_summaries,
    queries_with_current_definition,
)
from labeling.selectors.queue_settings import queue_settings_summary
from labeling.selectors.validation import validation_result_for
from labeling.selectors.validation_report import validation_cached
from labeling.services.projects import may_create_projects
from labeling.views.access import project_view, request_role
from labeling.views.htmx import htmx_partial

QUERIES_PER_PAGE = 50


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    summaries = project_list_for_user(user=request.user)
    create_form = ProjectCreateForm() if may_create_projects(request.user) else None
    return render(request, "labeling/project_list.html", {"summaries": summaries, "create_form": create_form})


@login_required
@project_view()
def project_detail(request: HttpRequest, project: Project) -> HttpResponse:
    queries_page = Paginator(queries_with_current_definition(project=project), QUERIES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    table = {
        "project": project,
        "queries_page": queries_page,
        "query_rows": stale_counts_for_queries(project=project, queries=queries_page),
    }
    if htmx_partial(request):
        # Paging through the queries swaps only the table; a history restore needs the whole page.
        return render(request, "labeling/project_detail.html#query-table", table)
    (summary,) = project_summaries(projects=[project])
    role = request_role(request, project)
    context = {
        **table,
        "counts": summary.counts,
        "overview": project_overview(project=project, user=request.user, role=role, counts=summary.counts,
                                     now=timezone.now()),
        "scale": project.label_scale,
        "is_admin": role == Membership.Role.ADMIN,
        "sees_reports": sees_reports(project=project, role=role),
        "queue_summary": queue_settings_summary(project=project),
    }
    if context["sees_reports"]:
        # The export form marks a judge that has not scored the whole pool it would write.
        context["export_judges"] = pool_coverage(project=project, judges=project.judges.order_by("name"))
        report = validation_cached(validation_result_for(project))
        # And one whose qrels would say nothing, as the validation report last found it (under its own rule).
        context["export_degenerate"] = sorted(report.degenerate_judges().items()) if report else []
        completeness = report.completeness if report else None
        context["completeness"] = completeness
        context["kappa_met"] = isinstance(completeness, CompletenessReport) and kappa_target_met(
            stop_kappa=project.stop_kappa, accuracy=completeness.judge_accuracy)
    return render(request, "labeling/project_detail.html", context)

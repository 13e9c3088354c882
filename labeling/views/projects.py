"""HTML pages: the project list, a project's overview, validation and judges. Views parse input, call a
selector or a service and render."""
from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from labeling.charts import f1_curve_chart, reliability_chart
from labeling.forms import JudgeForm
from labeling.models import Judge, Membership, Project, ScoringJob, ValidationResult
from labeling.selectors.adjudication import adjudication_counts
from labeling.selectors.definition_metrics import (
    cached_metrics_by_definition,
    default_comparison_judge,
    judges_with_judgments,
)
from labeling.selectors.definitions import stale_counts_for_queries
from labeling.selectors.disclosure import BLIND_REPORTS, sees_reports
from labeling.selectors.projects import (
    project_list_for_user,
    project_role,
    project_summaries,
    projects_visible_to,
    queries_with_current_definition,
)
from labeling.selectors.queue_settings import queue_settings_summary
from labeling.selectors.scoring import job_progress, jobs_for_project, judges_for_project
from labeling.selectors.validation import (
    METRIC_ROWS,
    holds_report,
    human_rows,
    metric_rows,
    validation_result_for,
)
from labeling.services.judges import JudgeError, judge_create
from labeling.services.scoring import ScoringError, scoring_job_cancel, scoring_job_estimate, scoring_job_start
from labeling.services.validation import ValidationError, judge_calibrate, validation_request_refresh
from labeling.views.access import admin_project
from models_llm.prompts import DEFAULT_TEMPLATE

QUERIES_PER_PAGE = 50


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    summaries = project_list_for_user(user=request.user)
    return render(request, "labeling/project_list.html", {"summaries": summaries})


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    # Scoping the lookup to the visible projects makes a non-member's request a 404, not a 403.
    project = get_object_or_404(projects_visible_to(user=request.user), slug=slug)
    queries_page = Paginator(queries_with_current_definition(project=project), QUERIES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    table = {
        "project": project,
        "queries_page": queries_page,
        "query_rows": stale_counts_for_queries(project=project, queries=queries_page),
    }
    if request.htmx and not request.htmx.history_restore_request:
        # Paging through the queries swaps only the table; a history restore needs the whole page.
        return render(request, "labeling/project_detail.html#query-table", table)
    (summary,) = project_summaries(projects=[project])
    role = project_role(user=request.user, project=project)
    context = {
        **table,
        "counts": summary.counts,
        "scale": project.label_scale,
        "is_admin": role == Membership.Role.ADMIN,
        "sees_reports": sees_reports(project=project, role=role),
        "queue_summary": queue_settings_summary(project=project),
    }
    if context["is_admin"]:
        context["adjudication_counts"] = adjudication_counts(project=project)
    return render(request, "labeling/project_detail.html", context)


def _validation_context(project: Project, result: ValidationResult | None, role: str | None) -> dict:
    data = result.data if result is not None else None
    judges, columns = [], []
    if data is not None:
        for section in data["judges"]:
            columns.append(metric_rows(section))
            judges.append(
                {
                    "section": section,
                    "reliability": reliability_chart(section["reliability"]) if section.get("reliability") else None,
                    "f1_curve": f1_curve_chart(section["f1_curve"]) if section.get("f1_curve") else None,
                }
            )
    return {
        "project": project,
        "result": result,
        "data": data,
        "judges": judges,
        "human_rows": human_rows(data["human"]) if data else [],
        "is_admin": role == Membership.Role.ADMIN,
        "metric_table": [
            {"label": label, "cells": [rows[index] for rows in columns]}
            for index, (_, label, _) in enumerate(METRIC_ROWS)
        ],
    }


def _by_definition_context(project: Project, result: ValidationResult | None, judge_name: str | None) -> dict:
    """The "By definition version" section for one judge (`judge_name`; default: the queues' judge, else the
    first judge with judgments), read from the cached report: the worker computes it with the report, so a
    re-score shows once the report is recomputed, and no request computes it."""
    judges = judges_with_judgments(project=project)
    if judge_name:
        judge = get_object_or_404(Judge, project=project, name=judge_name)
    else:
        judge = default_comparison_judge(project=project, judges=judges)
    comparison = None
    if judge is not None and holds_report(result):
        comparison = cached_metrics_by_definition(report=result.data, judge=judge)
    return {
        "project": project,
        "definition_judges": judges,
        "definition_judge": judge,
        "comparison": comparison,
    }


def _report_project(request: HttpRequest, slug: str) -> Project:
    project = get_object_or_404(projects_visible_to(user=request.user), slug=slug)
    if not sees_reports(project=project, role=project_role(user=request.user, project=project)):
        raise PermissionDenied(BLIND_REPORTS)
    return project


@login_required
def validation_dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    project = _report_project(request, slug)
    partial = request.htmx and not request.htmx.history_restore_request
    result = validation_result_for(project)
    if partial and request.htmx.target == "by-definition":
        context = _by_definition_context(project, result, request.GET.get("judge"))
        return render(request, "labeling/validation.html#by-definition", context)
    if result is None or (not holds_report(result) and not result.is_stale):
        validation_request_refresh(project=project)
        result = validation_result_for(project)
    context = _validation_context(project, result, project_role(user=request.user, project=project))
    if partial:
        # The report polls while it is recomputed: only its body, not the live section below it.
        return render(request, "labeling/validation.html#validation-body", context)
    context |= _by_definition_context(project, result, request.GET.get("judge"))
    return render(request, "labeling/validation.html", context)


@login_required
@require_POST
def validation_refresh(request: HttpRequest, slug: str) -> HttpResponse:
    project = admin_project(request, slug, to="ask for a recomputation")
    validation_request_refresh(project=project)
    messages.info(request, "Recomputing the report: this page updates when it is ready.")
    return redirect("labeling:validation", slug=project.slug)


@login_required
@require_POST
def judge_calibrate_view(request: HttpRequest, slug: str, judge: str) -> HttpResponse:
    project = get_object_or_404(projects_visible_to(user=request.user), slug=slug)
    if project_role(user=request.user, project=project) != Membership.Role.ADMIN:
        return HttpResponseForbidden("Only a project admin can fit a calibrator.")
    found = get_object_or_404(Judge, project=project, name=judge)
    try:
        calibration = judge_calibrate(judge=found, user=request.user)
    except ValidationError as exc:
        messages.error(request, str(exc))
    else:
        cv = calibration.cv
        messages.success(
            request,
            f"Calibrated {found.name} with {calibration.method} on {calibration.n:,} gold pairs: cross-validated ECE "
            f"{cv['raw']['ece']:.3f} -> {cv['calibrated']['ece']:.3f}, Brier {cv['raw']['brier']:.3f} -> "
            f"{cv['calibrated']['brier']:.3f}. Exports of this judge now use the calibrated P.",
        )
    return redirect("labeling:validation", slug=project.slug)


def _judges_context(request: HttpRequest, project: Project, form: JudgeForm | None = None) -> dict:
    role = project_role(user=request.user, project=project)
    jobs = [job_progress(job, show_errors=role == Membership.Role.ADMIN) for job in jobs_for_project(project)]
    return {
        "project": project,
        "judges": judges_for_project(project),
        "jobs": jobs,
        "any_running": any(p.job.status == ScoringJob.Status.RUNNING for p in jobs),
        "is_admin": role == Membership.Role.ADMIN,
        "form": form or JudgeForm(project=project),
        "default_template": json.dumps(DEFAULT_TEMPLATE, indent=2),
    }


@login_required
def judges_page(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(projects_visible_to(user=request.user), slug=slug)
    context = _judges_context(request, project)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "labeling/judges.html#jobs", context)
    return render(request, "labeling/judges.html", context)



@login_required
@require_POST
def judge_create_view(request: HttpRequest, slug: str) -> HttpResponse:
    project = admin_project(request, slug, to="do this")
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
def job_start_view(request: HttpRequest, slug: str, judge: str) -> HttpResponse:
    project = admin_project(request, slug, to="do this")
    found = get_object_or_404(Judge, project=project, name=judge)
    scope = request.POST.get("scope", ScoringJob.Scope.MISSING)
    try:
        job, created = scoring_job_start(project=project, judge=found, scope=scope, user=request.user)
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
def judge_estimate_view(request: HttpRequest, slug: str, judge: str) -> HttpResponse:
    """A dry run of a job (project admins): calls, tokens and cost before anything is sent to a model."""
    project = admin_project(request, slug, to="do this")
    found = get_object_or_404(Judge, project=project, name=judge)
    scope = request.GET.get("scope", ScoringJob.Scope.MISSING)
    context = {"project": project, "judge": found, "scope": scope}
    try:
        context["estimate"] = scoring_job_estimate(project=project, judge=found, scope=scope)
    except ScoringError as exc:
        context["error"] = str(exc)
    # 200 either way: htmx swaps the answer, error included, into the Judges page; without htmx, a page of its own.
    template = "labeling/_estimate.html" if request.htmx else "labeling/judge_estimate.html"
    return render(request, template, context)


@login_required
@require_POST
def job_cancel_view(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    project = admin_project(request, slug, to="do this")
    job = get_object_or_404(ScoringJob, project=project, id=job_id)
    scoring_job_cancel(job=job)
    messages.info(request, f"Job {job.id} cancelled; what it wrote stays.")
    return redirect("labeling:judges", slug=project.slug)

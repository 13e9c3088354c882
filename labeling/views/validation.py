"""HTML pages: a project's validation report (judges against the human labels, by definition version), its
recomputation, and fitting a judge's calibrator from it."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from labeling.charts import f1_curve_chart, reliability_chart
from labeling.models import Membership, Project, ValidationResult
from labeling.selectors.definition_metrics import cached_metrics_by_definition, default_comparison_judge
from labeling.selectors.distill import student_comparisons
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import READ_REPORTS, admin_to, project_role
from labeling.selectors.scoring import judges_with_judgments
from labeling.selectors.validation import holds_report, validation_result_for
from labeling.services.validation import ValidationReportError, judge_calibrate, validation_request_refresh
from labeling.views.access import project_view
from labeling.views.htmx import htmx_partial
from models_llm.metrics import human_rows, metric_table


def _validation_context(project: Project, result: ValidationResult | None, role: str | None) -> dict:
    data = result.data if result is not None else None
    judges = []
    if data is not None:
        for section in data["judges"]:
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
        "metric_table": metric_table(data["judges"] if data else []),
        "students": student_comparisons(project),
    }


def _by_definition_context(project: Project, result: ValidationResult | None, judge_name: str | None) -> dict:
    """The "By definition version" section for one judge (`judge_name`; default: the queues' judge, else the
    first judge with judgments), read from the cached report: the worker computes it with the report, so a
    re-score shows once the report is recomputed, and no request computes it."""
    judges = list(judges_with_judgments(project=project))
    if judge_name:
        judge = judge_by_name(project=project, name=judge_name)
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


@login_required
@project_view(READ_REPORTS)
def validation_dashboard(request: HttpRequest, project: Project) -> HttpResponse:
    partial = htmx_partial(request)
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
@project_view(admin_to("ask for a recomputation"))
def validation_refresh(request: HttpRequest, project: Project) -> HttpResponse:
    validation_request_refresh(project=project, user=request.user)
    messages.info(request, "Recomputing the report: this page updates when it is ready.")
    return redirect("labeling:validation", slug=project.slug)


@login_required
@require_POST
@project_view(admin_to("fit a calibrator"))
def judge_calibrate_view(request: HttpRequest, project: Project, judge: str) -> HttpResponse:
    found = judge_by_name(project=project, name=judge)
    try:
        calibration = judge_calibrate(judge=found, user=request.user)
    except ValidationReportError as exc:
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

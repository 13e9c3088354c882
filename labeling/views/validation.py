"""HTML pages: a project's validation report (judges against the human labels, by definition version), its
recomputation, and fitting a judge's calibrator from it.

The report with the default options is the cached one a worker keeps; other options (all pairs, ranking units,
cut-offs) are computed in the request, as the API and the command compute them: on the sample (7,136 pairs,
4 judges, 1,000 bootstrap draws) that takes about a second, less than queueing a job and polling it would add.
A project past PAGE_COMPUTE_MAX_PAIRS pairs is sent to the command or the API instead, so that no page
request runs for minutes."""
from __future__ import annotations

import time
from dataclasses import replace
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from labeling.charts import f1_curve_chart, reliability_chart
from labeling.exceptions import DomainError
from labeling.models import Membership, Project, ValidationResult
from labeling.selectors.completeness_report import CompletenessReport
from labeling.selectors.coverage import include_partial_from, is_ranked
from labeling.selectors.definition_metrics import cut_keys, default_comparison_judge, judge_metrics_by_definition
from labeling.selectors.finetune import student_comparisons
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import READ_REPORTS, admin_to
from labeling.selectors.reannotation import reannotation_report
from labeling.selectors.scoring import judges_with_judgments
from labeling.selectors.validation import (
    DEFAULT_OPTIONS,
    MIN_NON_RELEVANT_SHARE,
    ReportOptions,
    ReportOptionsError,
    passage_metadata_keys,
    report_options_from,
    validation_result_for,
)
from labeling.selectors.validation_report import ValidationReport, validation_cached
from labeling.services.validation import (
    ValidationReportError,
    judge_calibrate,
    validation_compute,
    validation_request,
)
from labeling.views.access import project_view, request_role
from labeling.views.htmx import htmx_partial
from models_llm.metrics import human_rows, metric_table, metrics_for

# Above this many pool pairs the page does not compute a report with other options in the request (the sample's
# 7,136 take about a second; time grows about linearly with pairs and judges).
PAGE_COMPUTE_MAX_PAIRS = 100_000


def _options_query(options: ReportOptions) -> str:
    """The options as the page's query string ("" for the defaults), for links that keep them."""
    if options.is_default:
        return ""
    params = {"all_pairs": "1"} if options.all_pairs else {}
    params |= {"unit_key": options.unit_key} if options.unit_key else {}
    params |= {"cutoffs": ",".join(map(str, options.cutoffs))} if options.cutoffs != DEFAULT_OPTIONS.cutoffs else {}
    return urlencode(params)


def _options_context(project: Project, options: ReportOptions, error: str | None) -> dict:
    return {
        "options": options,
        "options_query": _options_query(options),
        # The same report with the pool pairs nobody graded counted as irrelevant: what a gold set of relevant
        # pairs only needs to show precision, MAP and AUROC.
        "all_pairs_query": _options_query(replace(options, all_pairs=True)),
        "options_error": error,
        "unit_keys": passage_metadata_keys(project),
        "cutoffs_text": ",".join(map(str, options.cutoffs)),
    }


ACCURACY_LABELS = {"precision": "precision", "recall": "recall", "f1": "F1", "kappa": "Cohen's kappa",
                   "accuracy": "accuracy", "auroc": "AUROC", "ece": "ECE (10 bins)"}


def _unbiased(cached: ValidationReport | None) -> dict | None:
    """The queue judge's accuracy on the random validation sample beside the gold set, from the cached report."""
    completeness = cached.completeness if cached is not None else None
    if not isinstance(completeness, CompletenessReport) or completeness.judge_accuracy is None:
        return None
    accuracy = completeness.judge_accuracy
    rows = [{"name": name, "label": label,
             "cells": [{"part": part, **(table.get(name) or {"value": None, "interval": None})}
                       for part, table in (("sample", accuracy.sample), ("gold", accuracy.gold))]}
            for name, label in ACCURACY_LABELS.items()]
    return {"judge": completeness.judge, "threshold": accuracy.threshold, "rule": accuracy.rule,
            "sample_n": accuracy.sample["n"], "gold_n": accuracy.gold["n"], "rows": rows}


def _validation_context(project: Project, result: ValidationResult | None, cached: ValidationReport | None,
                        role: str | None, report: ValidationReport | None = None,
                        include_partial: bool = False) -> dict:
    """`cached`: the report `result` holds; `report`: one computed for this request with other options. Only the
    judges that are complete, or all with `include_partial`, compete for the best value of a metric's line, and
    never a degenerate one (models_llm.metrics.degenerate): its calls say nothing, whatever its numbers."""
    report = report if report is not None else cached
    few = report.counts.few_non_relevant if report else False
    judges = [
        {
            "section": section,
            "coverage": section.coverage,
            "ranked": is_ranked(section.coverage, include_partial=include_partial),
            "degenerate": section.degenerate if section.is_degenerate else None,
            "reliability": reliability_chart(section.reliability) if section.reliability else None,
            "f1_curve": f1_curve_chart(section.f1_curve) if section.f1_curve else None,
        }
        for section in (report.judges if report else [])
    ]
    return {
        "project": project,
        "result": result,
        "data": report,
        "judges": judges,
        "unbiased": _unbiased(cached),
        "human_rows": human_rows(report.human) if report else [],
        "is_admin": role == Membership.Role.ADMIN,
        "metric_table": metric_table([section.to_dict() for section in report.judges] if report else [],
                                     report.cutoffs if report else DEFAULT_OPTIONS.cutoffs,
                                     ranked=[judge["ranked"] and not judge["degenerate"] for judge in judges],
                                     few_non_relevant=few),
        "include_partial": include_partial,
        "any_partial": any(judge["coverage"] is not None and judge["coverage"].partial for judge in judges),
        "few_non_relevant": few,
        # What a judge has to have judged, for the partial marks' titles.
        "needed_words": "pool pairs, gold or counted as irrelevant" if report and report.options
        and report.options.all_pairs else "gold pairs",
        "min_non_relevant": MIN_NON_RELEVANT_SHARE,
        "students": student_comparisons(project),
    }


def _by_definition_context(project: Project, cached: ValidationReport | None, judge_name: str | None,
                           options: ReportOptions, options_query: str) -> dict:
    """The "By definition version" section for one judge (`judge_name`; default: the queues' judge, else the
    first judge with judgments). With the default options read from the cached report: the worker computes it
    with the report, so a re-score shows once the report is recomputed. With others computed now."""
    judges = list(judges_with_judgments(project=project))
    if judge_name:
        judge = judge_by_name(project=project, name=judge_name)
    else:
        judge = default_comparison_judge(project=project, judges=judges)
    explained = {key: metric.explain for key, metric in metrics_for(options.cutoffs).items()}
    comparison = None
    if judge is not None and not options.is_default:
        comparison = judge_metrics_by_definition(judge=judge, options=options)
    elif judge is not None and cached is not None and cached.complete:
        comparison = cached.metrics_by_definition(judge.name)
    return {
        "project": project,
        "definition_judges": judges,
        "definition_judge": judge,
        "comparison": comparison,
        "cut_labels": [key.replace("ndcg", "nDCG").replace("map", "MAP") for key in cut_keys(comparison.cutoffs)]
        if comparison else [],
        "metric_explain": explained,
        "cut_columns": [(key.replace("ndcg", "nDCG").replace("map", "MAP"), explained.get(key, ""))
                        for key in cut_keys(comparison.cutoffs)] if comparison else [],
        "all_pairs": options.all_pairs,
        "options_query": options_query,
    }


def _options(request: HttpRequest, project: Project) -> tuple[ReportOptions, str | None]:
    """The options the page was asked for, or the defaults and why they could not be used."""
    try:
        options = report_options_from(project=project, params=request.GET)
    except ReportOptionsError as exc:
        return DEFAULT_OPTIONS, str(exc)
    if not options.is_default and project.pairs.count() > PAGE_COMPUTE_MAX_PAIRS:
        return DEFAULT_OPTIONS, (
            f"The project has more than {PAGE_COMPUTE_MAX_PAIRS:,} pairs: compute a report with these options with "
            f"`manage.py validation_report --project {project.slug} --judge NAME` or the API "
            f"(/api/projects/{project.slug}/validation/?{_options_query(options)}).")
    return options, None


@login_required
@project_view(READ_REPORTS)
def validation_dashboard(request: HttpRequest, project: Project) -> HttpResponse:
    partial = htmx_partial(request)
    result = validation_result_for(project)
    cached = validation_cached(result)
    options, error = _options(request, project)
    options_context = _options_context(project, options, error)
    if partial and request.htmx.target == "by-definition":
        context = _by_definition_context(project, cached, request.GET.get("judge"), options,
                                         options_context["options_query"])
        return render(request, "labeling/validation.html#by-definition", context)
    if result is None or (not (cached is not None and cached.complete) and not result.is_stale):
        validation_request(project=project)
        result = validation_result_for(project)
    role = request_role(request, project)
    include_partial = include_partial_from(request.GET)
    if options.is_default:
        context = _validation_context(project, result, cached, role, include_partial=include_partial) | {
            "on_request": False}
    else:
        started = time.perf_counter()
        report = validation_compute(project=project, options=options)
        context = _validation_context(project, result, cached, role, report, include_partial=include_partial) | {
            "on_request": True, "seconds": time.perf_counter() - started}
    context |= options_context
    if partial:
        # The report polls while it is recomputed: only its body, not the live section below it.
        return render(request, "labeling/validation.html#validation-body", context)
    context |= _by_definition_context(project, cached, request.GET.get("judge"), options,
                                      options_context["options_query"])
    context |= _reannotation_context(request, project, options)
    return render(request, "labeling/validation.html", context)


def _reannotation_context(request: HttpRequest, project: Project, options: ReportOptions) -> dict:
    """DIRAS App. M's agreement-vs-confidence curves for the judge asked (`reannotation_judge`), with the report's
    all-pairs option; computed only when asked, as it reads every gold pair."""
    context: dict = {"reannotation_judges": list(judges_with_judgments(project=project).values_list("name", flat=True)),
                     "reannotation_threshold": 0.5}
    asked = request.GET.get("reannotation_judge")
    if not asked:
        return context
    try:
        found = reannotation_report(project=project, judge=asked, all_pairs=options.all_pairs)
    except DomainError as exc:
        return context | {"reannotation_error": str(exc)}
    sides = list(found.curves.values())
    rows = [{"threshold": f"{points[0].threshold:g}", "points": points} for points in zip(*sides)]
    return context | {"reannotation": found, "reannotation_rows": rows}


@login_required
@require_POST
@project_view(admin_to("ask for a recomputation"))
def validation_refresh(request: HttpRequest, project: Project) -> HttpResponse:
    validation_request(project=project, user=request.user)
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

"""HTML pages: a project's retrieval systems. Any member sees the runs and the retrieval jobs; admins upload run
files, start retrievers, pool from runs and delete runs; members who may read the reports (blind first) see how
the runs rank under each qrels source and how far the sources agree."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from labeling.charts import Scatter, scatter_chart
from labeling.exceptions import DomainError, NotFound
from labeling.forms import BeyondPoolForm, PoolForm, RetrievalForm, RunUploadForm
from labeling.models import AuditJob, BundleImportJob, Estimate, Membership, Project, Run
from labeling.run_upload import run_import_upload, upload_refusal
from labeling.selectors.audits import beyond_pool_latest
from labeling.selectors.coverage import include_partial_from
from labeling.selectors.disclosure import BLIND_REPORTS, sees_reports
from labeling.selectors.lookups import judge_by_name, retrieval_job_of_project, run_of_project
from labeling.selectors.lvhq import LvhqGroup, LvhqReport
from labeling.selectors.pair_tau import pair_tau_report
from labeling.selectors.projects import admin_to
from labeling.selectors.qrels_sources import HUMAN, JUDGE, qrels_sources
from labeling.selectors.retrieval_jobs import retrieval_jobs
from labeling.selectors.runs import project_runs, run_by_name
from labeling.selectors.scoring import judges_for_project, judges_with_judgments
from labeling.selectors.significance import (
    SignificanceOptionError,
    SignificanceOptions,
    significance_options,
)
from labeling.selectors.systems import JUDGED, SystemsReport
from labeling.selectors.systems_cache import SystemsChoice, systems_cached, systems_status
from labeling.services.audit import AuditError, audit_request
from labeling.services.estimates import estimate_request
from labeling.services.pooling import PoolingError, pool_add, pool_preview
from labeling.services.query_generation import (
    query_generation_estimate,
    query_generation_plan,
    query_generation_request,
)
from labeling.services.retrieval import RetrievalError, retrieval_cancel, retrieval_request
from labeling.services.retrieval_rerank import rerank_refusal
from labeling.services.runs import RunImportError, run_delete
from labeling.services.scoring import ScoringError
from labeling.services.systems_cache import SystemsBusy, systems_evaluation
from labeling.views.access import project_view, request_role
from labeling.views.estimates import estimate_card
from labeling.views.htmx import htmx_partial
from labeling.views.query_generation import query_generation_context, query_generation_form
from models_llm.relevance_rule import is_probability
from models_llm.retrieval.agreement import COEFFICIENT_EXPLAIN, COEFFICIENTS, MIN_SYSTEMS, Agreement
from models_llm.retrieval.evaluation import MEASURE_DEPTHS, MEASURE_EXPLAIN, SAMPLE_MEASURES
from models_llm.retrieval.significance import CORRECTIONS, TESTS, Comparison

RUN_ADMIN = admin_to("change the project's runs")
# A run whose top 10 the source judged less than this share of is marked: its unjudged passages count as not
# relevant, so its score is a lower bound, and a system that did not contribute to the pool is the one it hurts.
LOW_JUDGED = 0.5
# The measure the scatter plots compare the sources on.
SCATTER_MEASURE = "nDCG@10"
# Parameters the runs table's summary leaves out: the retriever is the Kind column, the texts say the same as
# use_definition.
SUMMARY_SKIPS = {"retriever", "query_text", "passage_text"}
# The sources the page evaluates unless others are chosen: the human gold and each judge's thresholded qrels. Every
# source pair's agreement is bootstrapped, which makes all of them (four per judge) slow to show on every visit.
DEFAULT_KINDS = (HUMAN, JUDGE)
# The page's judge threshold control steps by this much (its `step`): a threshold between two steps is no choice the
# page offers, and each distinct choice may be a worker's computation.
THRESHOLD_STEP = Decimal("0.01")


@dataclass(frozen=True)
class Cell:
    """A measure's Estimate on a leaderboard; `muted` where the source is partial on the measure."""

    mean: float | None
    low: float | None
    high: float | None
    muted: bool = False


@dataclass(frozen=True)
class LeaderboardRow:
    run: str
    cells: list[Cell]  # one per measure of the board
    judged: float | None
    mark: str = ""  # on the lead measure: "best", "tied" (indistinguishable from the best) or ""
    seconds: float | None = None  # the built-in retriever's wall time, its stages summed (None: not recorded)

    @property
    def low_judged(self) -> bool:
        return self.judged is not None and self.judged < LOW_JUDGED


@dataclass(frozen=True)
class ScatterCard:
    x_source: str
    y_source: str
    chart: Scatter


def _leaderboards(report: SystemsReport, significance: dict[str, dict[str, Comparison]] | None = None,
                  seconds: dict[str, float] | None = None) -> list[dict]:
    """Per source: its runs x measures (judged@10 apart, as the warning column), best first on the first measure
    (nDCG@10), runs without a value last; a source partial on that measure (coverage within the depth it reads)
    that is not ranked keeps the runs in name order. A measure the source is partial on carries its own mark and
    its values are shown muted (a judge that has scored the runs' top 10 ranks them on nDCG@10 while AP, which
    reads every rank, waits for the rest). `seconds`: each run's recorded retrieval time, shown beside its measures
    (the crisis paper's Table 5: time and effectiveness of each retriever, with the significance marks). A source
    graded by a degenerate judge carries why, and marks no run best."""
    seconds = seconds or {}
    asked = [measure for measure in report.measures if measure != JUDGED]
    boards = []
    for source in report.sources:
        # A sample defines only its own measures, the other sources all but those: each board shows what it has.
        measures = [measure for measure in asked if (measure in SAMPLE_MEASURES) == source.sampled] or asked
        by_measure = report.measure_coverage.get(source.key, {})
        muted = [bool(by_measure.get(measure) and by_measure[measure].partial) for measure in measures]
        rows = []
        ranked = report.ranked(source.key)
        compared = (significance or {}).get(source.key, {})
        # A sample's board is ordered and marked on the first of its own measures.
        lead_measure = measures[0] if source.sampled else report.lead_measure
        first = measures.index(lead_measure) if lead_measure in measures else 0
        degenerate = report.degenerate.get(source.key)
        # A degenerate judge's ordering says nothing (every run ties at the top): no run is marked best under it.
        lead = compared.get(lead_measure) if ranked and degenerate is None else None
        for run in report.runs:
            scores = report.scores[run][source.key]
            cells = [Cell(scores[measure].mean, scores[measure].low, scores[measure].high, mute)
                     for measure, mute in zip(measures, muted)]
            mark = "" if lead is None else "best" if run == lead.best else "tied" if run in lead.tied_with_best else ""
            rows.append(LeaderboardRow(run=run, cells=cells, judged=scores[JUDGED].mean if JUDGED in scores else None,
                                       mark=mark, seconds=seconds.get(run)))
        if ranked:
            rows.sort(key=lambda row: (row.cells[first].mean is None, -(row.cells[first].mean or 0.0), row.run))
        lead_coverage = by_measure.get(report.lead_measure)
        columns = []
        for measure in measures:
            found = by_measure.get(measure)
            # The caption carries the lead measure's mark; a column is marked where the source is partial there
            # only (complete on the lead measure, partial on a deeper one).
            partial = found if found is not None and found.partial and not (
                lead_coverage is not None and lead_coverage.partial) else None
            columns.append({"name": measure, "explain": MEASURE_EXPLAIN[measure], "coverage": partial,
                            "ranked": report.ranked(source.key, measure), "depth_words": _depth_words(measure)})
        boards.append({"source": source, "queries": report.overall.queries.get(source.key, 0), "rows": rows,
                       "measures": columns, "coverage": lead_coverage, "ranked": ranked,
                       "comparison": lead, "lead_measure": lead_measure, "degenerate": degenerate,
                       "matrices": _p_matrices(compared, [row.run for row in rows])})
    return boards


def _p_matrices(compared: dict[str, Comparison], order: list[str]) -> list[dict]:
    """Per measure, the corrected p-values of every two runs (rows and columns in the leaderboard's order), each cell
    with the mean difference row - column and its interval for the tooltip."""
    matrices = []
    for measure, found in compared.items():
        by_pair = {frozenset((pair.a, pair.b)): pair for pair in found.pairs}
        rows = []
        for a in order:
            cells = []
            for b in order:
                pair = by_pair.get(frozenset((a, b)))
                if pair is None:
                    cells.append(None)
                    continue
                sign = 1 if pair.a == a else -1
                low, high = (pair.low, pair.high) if sign == 1 else (
                    None if pair.high is None else -pair.high, None if pair.low is None else -pair.low)
                effect = None if pair.effect_size is None else sign * pair.effect_size
                difference = sign * pair.mean_difference
                # Formatted here, not by the template's floatformat: a page of 10 runs holds thousands of these, and
                # floatformat (Decimal and locale) took most of the cached page's time.
                title = (f"mean difference {difference:.4f}"
                         + ("" if low is None else f" [{low:.4f}, {high:.4f}]")
                         + ("" if effect is None else f", d_z {effect:.2f}")
                         + ("" if pair.p is None else f"; raw p {pair.p:.4f}"))
                cells.append({"p": pair.p_corrected, "title": title,
                              "difference_text": f"{difference:.3f}",
                              "p_text": None if pair.p_corrected is None else f"{pair.p_corrected:.4f}",
                              "significant": pair.p_corrected is not None and pair.p_corrected < found.alpha})
            rows.append({"run": a, "cells": cells})
        matrices.append({"measure": measure, "comparison": found, "rows": rows})
    return matrices


def _left_out_deeper(report: SystemsReport) -> list[tuple[str, tuple[str, ...], str]]:
    """(measure, sources, what they lack in words) for the agreement measures past the first on which sources
    that are in the main agreement are left out as partial (scored the top 10, not yet the whole rankings)."""
    lines = []
    for measure, keys in list(report.left_out_by_measure.items())[1:]:
        deeper = tuple(key for key in keys if key not in report.left_out)
        if deeper:
            lines.append((measure, deeper, _depth_words(measure)))
    return lines


def _depth_words(measure: str) -> str:
    """What a judge has to have scored for `measure`, in words, for the partial marks."""
    depth = MEASURE_DEPTHS[measure]
    within = "rankings" if depth is None else f"top {depth}"
    return f"pool pairs the runs retrieve in their {within}"


def _needed_words(report: SystemsReport) -> str:
    """What a judge of the report has to have scored to be ranked (on the lead measure), in words."""
    return _depth_words(report.lead_measure)


@dataclass(frozen=True)
class Coefficient:
    name: str  # one of COEFFICIENTS
    value: float | None  # None: undefined (every run tied under a source)
    interval: tuple[float, float] | None


@dataclass(frozen=True)
class AgreementRow:
    a: str
    b: str
    measure: str
    coefficients: list[Coefficient] | None  # COEFFICIENTS' order; None: too few runs or no shared query
    largest_change: tuple[str, int, int] | None  # (run, rank under a, rank under b)
    queries: int
    span: int  # the rows of this source pair (one per measure both sources are ranked on)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _coefficient(agreement: Agreement, name: str) -> Coefficient:
    value, interval = getattr(agreement, name), agreement.intervals.get(name)
    shown = interval if interval is not None and all(_finite(end) for end in interval) else None
    return Coefficient(name=name, value=value if _finite(value) else None, interval=shown)


# The LVHQ card's coefficients (DisastIR reports Kendall's tau; tau-AP weighs the top).
LVHQ_COEFFICIENTS = ("kendall_tau", "tau_ap")


def _lvhq_groups(lvhq: LvhqReport) -> list[tuple[LvhqGroup, list[Coefficient]]]:
    """Each LVHQ group (all queries, then each intent) with its coefficients as the agreement table shows them."""
    return [(group, [] if group.agreement is None else [_coefficient(group.agreement, name)
                                                        for name in LVHQ_COEFFICIENTS])
            for group in (lvhq.overall, *lvhq.intents)]


def _agreement_rows(report: SystemsReport) -> list[AgreementRow]:
    rows = []
    for (a, b), by_measure in report.agreement.items():
        for measure, found in by_measure.items():
            rows.append(AgreementRow(
                a=a, b=b, measure=measure, span=len(by_measure),
                coefficients=None if found is None else [_coefficient(found, name) for name in COEFFICIENTS],
                largest_change=None if found is None else found.largest_change,
                queries=0 if found is None else found.n_queries,
            ))
    return rows


def _scatters(report: SystemsReport) -> list[ScatterCard]:
    """Human (x) against each judge's thresholded qrels (y) on SCATTER_MEASURE, one point per run."""
    keys = {source.key for source in report.sources}
    if HUMAN not in keys or SCATTER_MEASURE not in report.measures:
        return []
    cards = []
    for source in report.sources:
        if source.kind != JUDGE or not report.ranked(source.key, SCATTER_MEASURE):
            continue
        points = [(run, report.scores[run][HUMAN][SCATTER_MEASURE].mean,
                   report.scores[run][source.key][SCATTER_MEASURE].mean) for run in report.runs]
        points = [(run, x, y) for run, x, y in points if x is not None and y is not None]
        if points:
            cards.append(ScatterCard(x_source=HUMAN, y_source=source.key, chart=scatter_chart(points)))
    return cards


def _threshold(request: HttpRequest) -> tuple[float | None, str]:
    """The request's judge threshold (empty: each judge's own relevance rule) and what is wrong with it: one of the
    values the page's control offers (0 to 1 in steps of THRESHOLD_STEP), or nothing is evaluated."""
    text = request.GET.get("threshold", "").strip()
    if not text:
        return None, ""
    if not is_probability(text) or Decimal(text) % THRESHOLD_STEP:
        return None, (f"The threshold must be a number from 0 to 1 in steps of {THRESHOLD_STEP}, got {text[:40]!r}: "
                      f"nothing is evaluated until it is one.")
    return float(text), ""


def _source_error(request: HttpRequest, sources: list) -> str:
    """What is wrong with the request's sources: each must be one the page lists, or nothing is evaluated."""
    offered = {source.key for source in sources}
    unknown = [key for key in request.GET.getlist("source") if key not in offered]
    if not unknown:
        return ""
    return (f"{unknown[0][:100]!r} is not one of this project's qrels sources (those listed above): nothing is "
            f"evaluated until only those are chosen.")


def _choice(request: HttpRequest, project: Project, options: SignificanceOptions) -> tuple[list, SystemsChoice]:
    """The project's sources and what the request chose (sources asked, in the order the page lists them, else
    DEFAULT_KINDS), each judge and combined source at the request's threshold when it gives one."""
    sources = qrels_sources(project)
    asked = request.GET.getlist("source")
    chosen = [source.key for source in sources if (source.key in asked if asked else source.kind in DEFAULT_KINDS)]
    return sources, SystemsChoice(sources=tuple(chosen), include_partial=include_partial_from(request.GET),
                                  incomplete=request.GET.get("incomplete") == "true", test=options.test,
                                  correction=options.correction, threshold=_threshold(request)[0])


def _evaluation(request: HttpRequest, project: Project, runs: list[Run], options: SignificanceOptions) -> dict:
    """The leaderboards, agreement and scatter plots of the request's choice: computed here when the runs are small
    (computes_inline: well under a second), else read from the cache, computed by a worker while the page shows its
    progress (and the stored result, marked stale, while a newer one is computed). Only what the page's controls
    offer is evaluated (each distinct choice may be a worker's computation), and no more than SYSTEMS_MAX_PENDING
    computations of the project at once: past it the page says the evaluation is busy."""
    sources, choice = _choice(request, project, options)
    threshold_error, source_error = _threshold(request)[1], _source_error(request, sources)
    context: dict = {"qrels_sources": sources, "threshold": choice.threshold, "threshold_error": threshold_error,
                     "threshold_step": THRESHOLD_STEP, "source_error": source_error,
                     "chosen_sources": request.GET.getlist("source") or [
                         source.key for source in sources if source.kind in DEFAULT_KINDS],
                     "include_partial": choice.include_partial, "incomplete": choice.incomplete,
                     "min_systems": MIN_SYSTEMS, "measure_explain": MEASURE_EXPLAIN,
                     "coefficient_explain": COEFFICIENT_EXPLAIN, "significance_options": options, "tests": TESTS,
                     "corrections": CORRECTIONS}
    if not runs or not choice.sources or threshold_error or source_error:
        return context
    try:
        found = systems_evaluation(project=project, choice=choice, user=request.user)
    except SystemsBusy as exc:
        found = systems_cached(project=project, choice=choice)
        context["systems_busy"] = str(exc)
    context |= {"systems_result": found.result, "systems_fresh": found.fresh, "status_query": _status_query(request)}
    bundle = found.bundle
    if bundle is None:
        return context
    if bundle.report is None:
        return {**context, "evaluation_error": bundle.evaluation_error}
    report = bundle.report
    context |= {"reusability": bundle.reusability} if bundle.reusability is not None else {}
    context |= {"reusability_error": bundle.reusability_error} if bundle.reusability_error else {}
    context |= {"lvhq": bundle.lvhq, "lvhq_error": bundle.lvhq_error,
                "lvhq_groups": _lvhq_groups(bundle.lvhq) if bundle.lvhq else []}
    return {**context, "report": report, "leaderboards": _leaderboards(report, bundle.significance, {
                run.name: total for run in runs if (total := _stage_total(run.parameters)) is not None}),
            "needed_words": _needed_words(report),
            "agreement_rows": _agreement_rows(report), "left_out_deeper": _left_out_deeper(report),
            "too_few_runs": len(report.runs) < MIN_SYSTEMS, "scatters": _scatters(report)}


def _parameters_summary(parameters: dict) -> str:
    """The run's scalar parameters on one line ("depth 1000, k1 0.9, use_definition True"), then its re-rank stages
    ("re-ranked by NAME to 60"); other nested ones (the encoder, BM25's tokenizer) are left to the full listing."""
    scalars = [f"{key} {value}" for key, value in sorted(parameters.items())
               if key not in SUMMARY_SKIPS and isinstance(value, str | int | float | bool)]
    rerank = parameters.get("rerank")
    stages = [f"re-ranked by {stage.get('judge')} to {stage.get('keep')}" for stage in rerank
              if isinstance(stage, dict)] if isinstance(rerank, list) else []
    crisis = parameters.get("crisis")
    if isinstance(crisis, dict) and "filtered_corpus" in crisis:
        stages.append(f"crisis double cascade: BM25 {crisis.get('lexical_depth')}, re-ranked by {crisis.get('judge')} "
                      f"to {crisis.get('lexical_keep')}, filtered corpus {crisis.get('filtered_corpus')}, dense "
                      f"{crisis.get('dense_cut')}, re-ranked to {crisis.get('final_keep')}")
    return ", ".join(scalars + stages)


def _stage_seconds(parameters: dict) -> list[tuple[str, float]]:
    """The run's recorded wall time per stage (a built-in retriever's: each stage, its re-rankings included), in
    order; empty for an imported run or one written before times were recorded."""
    stages = parameters.get("stage_seconds")
    if not isinstance(stages, list):
        return []
    return [(str(stage["stage"]), float(stage["seconds"])) for stage in stages
            if isinstance(stage, dict) and isinstance(stage.get("seconds"), int | float)]


def _stage_total(parameters: dict) -> float | None:
    stages = _stage_seconds(parameters)
    return sum(seconds for _, seconds in stages) if stages else None


def _run_kind(run: Run) -> str:
    """The Kind column: the crisis preset is a cascade of four stages, not the plain cascade's two; a run re-ranked
    by judges (retrieval_rerank) says so."""
    if run.kind == Run.Kind.CASCADE and isinstance(run.parameters.get("crisis"), dict):
        return "crisis double cascade (BM25, cross-encoder, dense on the filtered corpus, cross-encoder)"
    if run.kind in (Run.Kind.CASCADE, Run.Kind.BM25, Run.Kind.DENSE) and run.parameters.get("rerank"):
        return f"{run.get_kind_display()}, then re-ranked by judges"
    return run.get_kind_display()


def _run_rows(runs: list[Run]) -> list[dict]:
    return [{"run": run, "kind": _run_kind(run), "summary": _parameters_summary(run.parameters),
             "stages": _stage_seconds(run.parameters),
             "seconds": _stage_total(run.parameters),
             "parameters": json.dumps(run.parameters, indent=2, sort_keys=True) if run.parameters else ""}
            for run in runs]


def _generative_judges(project: Project) -> list[str]:
    # Only a judge that writes text has prompts to count: the others cost nothing to estimate.
    return [judge.name for judge in judges_for_project(project) if judge.is_generative]


def _retrieval_form(project: Project, data: dict | None = None) -> RetrievalForm:
    # Only the judges that may re-rank are offered; the service checks again (a judge changed meanwhile).
    return RetrievalForm(data, judges=[judge.name for judge in judges_for_project(project)
                                       if rerank_refusal(judge) is None])


def _pool_form(project: Project, runs: list[Run], data: dict | None = None) -> PoolForm:
    return PoolForm(data, runs=[run.name for run in runs], judges=_generative_judges(project))


def _jobs_context(project: Project, role: str | None) -> dict:
    jobs = retrieval_jobs(project, show_errors=role == Membership.Role.ADMIN)
    return {"project": project, "jobs": jobs, "any_unfinished": any(row.unfinished for row in jobs),
            "is_admin": role == Membership.Role.ADMIN}


def _systems_context(request: HttpRequest, project: Project, **answer: object) -> dict:
    """The whole page; `answer` holds what a form's request adds or replaces (a bound form, its problems)."""
    role = request_role(request, project)
    runs = list(project_runs(project).select_related("created_by"))
    reads = sees_reports(project=project, role=role)
    context = {
        **_jobs_context(project, role),
        "runs": _run_rows(runs),
        "sees_reports": reads,
        "blind_reports": BLIND_REPORTS,
        "low_judged": LOW_JUDGED,
        "scatter_measure": SCATTER_MEASURE,
        "upload_form": RunUploadForm(),
        "retrieval_form": _retrieval_form(project),
        "pool_form": _pool_form(project, runs),
        **query_generation_context(project, role),
        **answer,
    }
    if reads:
        try:
            options = significance_options(test=request.GET.get("test"), correction=request.GET.get("correction"))
        except SignificanceOptionError as exc:
            context["significance_error"] = str(exc)
            options = SignificanceOptions()
        context |= _evaluation(request, project, runs, options)
        context |= _beyond_pool_context(project, context.get("beyond_pool_form"))
        context |= _pair_tau_context(request, project, runs)
    return context


def _pair_tau_context(request: HttpRequest, project: Project, runs: list[Run]) -> dict:
    """DIRAS Table 5 for the judge asked (`tau_judge`): computed only when asked, as it reads every run entry."""
    judges = list(judges_with_judgments(project=project).values_list("name", flat=True))
    context: dict = {"pair_tau_judges": judges}
    asked = request.GET.get("tau_judge")
    if not asked or not runs:
        return context
    try:
        return context | {"pair_tau": pair_tau_report(project=project, judge=asked)}
    except DomainError as exc:
        return context | {"pair_tau_error": str(exc)}


def _beyond_pool_judges(project: Project) -> list[str]:
    """The judges that can score entries below the pool: a model of their own (not imported, not an ensemble)."""
    return [judge.name for judge in judges_for_project(project) if not judge.is_imported and not judge.is_ensemble]


def _beyond_pool_context(project: Project, form: BeyondPoolForm | None) -> dict:
    """The newest beyond-the-pool report of the project (and one being made), and the admins' form to make one."""
    done, unfinished = beyond_pool_latest(project)
    return {"beyond_pool": done, "beyond_pool_running": unfinished,
            "beyond_pool_form": form or BeyondPoolForm(judges=_beyond_pool_judges(project))}


# The htmx poll of an evaluation being computed asks for this part of the page.
STATUS_PART = "status"


def _evaluation_status(request: HttpRequest, project: Project) -> HttpResponse:
    """The progress of the evaluation being computed for the request's choice; once it is stored and fresh, the
    page reloads to show it."""
    role = request_role(request, project)
    if not sees_reports(project=project, role=role):
        raise NotFound("the evaluation is hidden from you until you have labelled (blind first)")
    try:
        options = significance_options(test=request.GET.get("test"), correction=request.GET.get("correction"))
    except SignificanceOptionError:
        options = SignificanceOptions()
    result, fresh = systems_status(project=project, choice=_choice(request, project, options)[1])
    response = render(request, "labeling/systems.html#evaluation-status",
                      {"project": project, "systems_result": result, "systems_fresh": fresh,
                       "status_query": _status_query(request)})
    if fresh:
        response["HX-Refresh"] = "true"
    return response


def _status_query(request: HttpRequest) -> str:
    """The request's choice as the status poll's query string."""
    query = request.GET.copy()
    query["part"] = STATUS_PART
    return query.urlencode()


@login_required
@project_view()
def systems_page(request: HttpRequest, project: Project) -> HttpResponse:
    if htmx_partial(request) and request.GET.get("part") == STATUS_PART:
        return _evaluation_status(request, project)
    if htmx_partial(request):
        # The jobs table polls while a job runs; once none does, the page reloads to show the new run scored.
        context = _jobs_context(project, request_role(request, project))
        response = render(request, "labeling/systems.html#retrieval-jobs", context)
        if not context["any_unfinished"]:
            response["HX-Refresh"] = "true"
        return response
    return render(request, "labeling/systems.html", _systems_context(request, project))


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
    context = _systems_context(request, project, upload_form=form, upload_problems=problems)
    return render(request, "labeling/systems.html", context, status=400)


# CSRF is checked by _run_upload, after the size: the middleware's check would read the whole body first.
@csrf_exempt
@login_required
@require_POST
@project_view(RUN_ADMIN)
def run_upload_view(request: HttpRequest, project: Project) -> HttpResponse:
    refusal = upload_refusal(request)
    if refusal is not None:
        context = _systems_context(request, project, upload_refusal=refusal)
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


@login_required
@require_POST
@project_view(admin_to("look beyond the pool"))
def beyond_pool_start_view(request: HttpRequest, project: Project) -> HttpResponse:
    """Start a beyond-the-pool audit of the chosen judge; its page follows the progress."""
    form = BeyondPoolForm(request.POST, judges=_beyond_pool_judges(project))
    if form.is_valid():
        try:
            job = audit_request(project=project, judge=judge_by_name(project=project, name=form.cleaned_data["judge"]),
                                kind=AuditJob.Kind.BEYOND_POOL, parameters=form.parameters(), user=request.user)
        except AuditError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Audit {job.id}: {job.total} entries below the pool to score.")
            return redirect("labeling:audit_detail", slug=project.slug, audit_id=job.id)
    return render(request, "labeling/systems.html", _systems_context(request, project, beyond_pool_form=form),
                  status=400)


@login_required
@require_POST
@project_view(admin_to("start a retriever"))
def retrieval_start_view(request: HttpRequest, project: Project) -> HttpResponse:
    """Start the retriever the form describes, or (the form's Estimate button) ask a worker what it would take here
    (it loads and times the models) and show that estimate following itself, starting nothing."""
    form = _retrieval_form(project, request.POST)
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
            return render(request, "labeling/systems.html", _systems_context(
                request, project, retrieval_form=form, retrieval_estimate=estimate_card(row)))
    elif form.is_valid():
        try:
            job = retrieval_request(project=project, user=request.user, **form.service_arguments())
        except RetrievalError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Job {job.id}: {job.get_retriever_display()} run {job.name} queued.")
            return redirect("labeling:systems", slug=project.slug)
    return render(request, "labeling/systems.html", _systems_context(request, project, retrieval_form=form),
                  status=400)


@login_required
@require_POST
@project_view(admin_to("cancel a retrieval job"))
def retrieval_cancel_view(request: HttpRequest, project: Project, retrieval_job_id: int) -> HttpResponse:
    job = retrieval_cancel(job=retrieval_job_of_project(project=project, job_id=retrieval_job_id))
    messages.info(request, f"Job {job.id} is {job.status}.")
    return redirect("labeling:systems", slug=project.slug)


def _pool_request(project: Project, form: PoolForm) -> tuple[list[Run], int] | None:
    """The runs and depth the valid form names, or None with the reason added to the form."""
    if not form.is_valid():
        return None
    try:
        runs = [run_by_name(project=project, name=name) for name in form.cleaned_data["runs"]]
    except NotFound as exc:
        form.add_error("runs", str(exc))
        return None
    return runs, form.cleaned_data["depth"]


@login_required
@project_view(admin_to("pool runs"))
def pool_preview_view(request: HttpRequest, project: Project) -> HttpResponse:
    """What pooling the chosen runs would add (a dry run), with a button that adds it."""
    runs = list(project_runs(project))
    form = _pool_form(project, runs, request.GET)
    answer: dict = {"pool_form": form}
    asked = _pool_request(project, form)
    if asked is not None:
        judge = judge_by_name(project=project, name=form.cleaned_data["judge"]) if form.cleaned_data["judge"] else None
        try:
            answer["preview"] = pool_preview(project=project, runs=asked[0], depth=asked[1], judge=judge)
        except (PoolingError, ScoringError) as exc:
            form.add_error(None, str(exc))
    # 200 either way: htmx swaps the answer, errors included, into the page; without htmx, the whole page.
    if request.htmx:
        return render(request, "labeling/systems.html#pool-preview", {"project": project, **answer})
    return render(request, "labeling/systems.html", _systems_context(request, project, **answer))


@login_required
@require_POST
@project_view(admin_to("pool runs"))
def pool_add_view(request: HttpRequest, project: Project) -> HttpResponse:
    runs = list(project_runs(project))
    form = _pool_form(project, runs, request.POST)
    asked = _pool_request(project, form)
    if asked is not None:
        try:
            written = pool_add(project=project, runs=asked[0], depth=asked[1])
        except PoolingError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Pooled the top {asked[1]} of {', '.join(run.name for run in asked[0])}: "
                                      f"{written['pairs']:,} new pairs, {written['pool sources']:,} sources added.")
            return redirect("labeling:systems", slug=project.slug)
    return render(request, "labeling/systems.html", _systems_context(request, project, pool_form=form), status=400)


@login_required
@require_POST
@project_view(admin_to("generate queries"))
def query_generation_start_view(request: HttpRequest, project: Project) -> HttpResponse:
    """Start the query generation the form describes (DisastIR 3.4), or (its Estimate button) say what it would ask
    and cost, asking nothing."""
    form = query_generation_form(project, request.POST)
    if form.is_valid():
        try:
            judge = judge_by_name(project=project, name=form.cleaned_data["judge"])
            plan = query_generation_plan(project=project, judge=judge, **form.plan_arguments())
            if "estimate" in request.POST:
                estimate = query_generation_estimate(project=project, plan=plan)
                return render(request, "labeling/systems.html", _systems_context(
                    request, project, generation_form=form, generation_estimate=estimate, generation_plan=plan))
            job = query_generation_request(project=project, plan=plan, user=request.user)
        except DomainError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Query generation {job.id}: {job.total} passage x intent units for query set "
                                      f"{job.query_set!r} queued.")
            return redirect("labeling:systems", slug=project.slug)
    return render(request, "labeling/systems.html", _systems_context(request, project, generation_form=form),
                  status=400)

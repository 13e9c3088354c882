"""HTML: a project's Systems page. Any member sees the runs and the retrieval jobs; members who may read the reports
(blind first) see how the runs rank under each qrels source and how far the sources agree. `systems_context` is the
whole page with each section's form: the views that answer those forms (labeling.views.runs, labeling.views.retrieval,
labeling.views.pooling, labeling.views.audit_beyond_pool, labeling.views.query_generation) render it again with
their answer."""
from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from labeling.exceptions import DomainError, NotFound
from labeling.forms import BeyondPoolForm, PoolForm, QueryGenerationForm, RetrievalForm, RunUploadForm
from labeling.models import Membership, Project, Run
from labeling.selectors.audit import beyond_pool_latest
from labeling.selectors.coverage import include_partial_from
from labeling.selectors.disclosure import BLIND_REPORTS, item_disclosure, sees_reports
from labeling.selectors.qrels_sources import HUMAN, JUDGE, qrels_sources
from labeling.selectors.query_generation import (
    RECENT,
    query_generation_row,
    query_generations,
)
from labeling.selectors.retrieval_jobs import retrieval_jobs
from labeling.selectors.runs import project_runs
from labeling.selectors.runs_table import run_rows, stage_total
from labeling.selectors.scoring import judges_for_project, judges_with_judgments
from labeling.selectors.systems_cache import SystemsChoice, systems_cached, systems_status
from labeling.selectors.systems_leaderboard import (
    LOW_JUDGED,
    SCATTER_MEASURE,
    agreement_rows,
    leaderboards,
    left_out_deeper,
    lvhq_groups,
    needed_words,
    scatters,
)
from labeling.selectors.systems_pair_tau import pair_tau_report
from labeling.selectors.systems_significance import (
    SignificanceOptionError,
    SignificanceOptions,
    significance_options,
)
from labeling.services.retrieval_rerank import rerank_refusal
from labeling.services.systems_cache import SystemsBusy, systems_evaluation
from labeling.views.access import project_view, request_role
from labeling.views.htmx import htmx_partial
from models_llm.relevance_rule import is_probability
from models_llm.systems.agreement import COEFFICIENT_EXPLAIN, MIN_SYSTEMS
from models_llm.systems.evaluation import MEASURE_EXPLAIN
from models_llm.systems.significance import CORRECTIONS, TESTS

# The sources the page evaluates unless others are chosen: the human gold and each judge's thresholded qrels. Every
# source pair's agreement is bootstrapped, which makes all of them (four per judge) slow to show on every visit.
DEFAULT_KINDS = (HUMAN, JUDGE)

# The page's judge threshold control steps by this much (its `step`): a threshold between two steps is no choice the
# page offers, and each distinct choice may be a worker's computation.
THRESHOLD_STEP = Decimal("0.01")


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
                "lvhq_groups": lvhq_groups(bundle.lvhq) if bundle.lvhq else []}
    return {**context, "report": report, "leaderboards": leaderboards(report, bundle.significance, {
                run.name: total for run in runs if (total := stage_total(run.parameters)) is not None}),
            "needed_words": needed_words(report),
            "agreement_rows": agreement_rows(report), "left_out_deeper": left_out_deeper(report),
            "too_few_runs": len(report.runs) < MIN_SYSTEMS, "scatters": scatters(report)}


def _generative_judges(project: Project) -> list[str]:
    # Only a judge that writes text has prompts to count: the others cost nothing to estimate.
    return [judge.name for judge in judges_for_project(project) if judge.is_generative]


def retrieval_form(project: Project, data: dict | None = None) -> RetrievalForm:
    # Only the judges that may re-rank are offered; the service checks again (a judge changed meanwhile).
    return RetrievalForm(data, judges=[judge.name for judge in judges_for_project(project)
                                       if rerank_refusal(judge) is None])


def pool_form(project: Project, runs: list[Run], data: dict | None = None) -> PoolForm:
    return PoolForm(data, runs=[run.name for run in runs], judges=_generative_judges(project))


def _jobs_context(project: Project, role: str | None) -> dict:
    jobs = retrieval_jobs(project, show_errors=role == Membership.Role.ADMIN)
    return {"project": project, "jobs": jobs, "any_unfinished": any(row.unfinished for row in jobs),
            "is_admin": role == Membership.Role.ADMIN}


def systems_context(request: HttpRequest, project: Project, **answer: object) -> dict:
    """The whole page; `answer` holds what a form's request adds or replaces (a bound form, its problems)."""
    role = request_role(request, project)
    runs = list(project_runs(project).select_related("created_by"))
    reads = sees_reports(project=project, role=role)
    context = {
        **_jobs_context(project, role),
        "runs": run_rows(runs),
        "sees_reports": reads,
        "blind_reports": BLIND_REPORTS,
        "low_judged": LOW_JUDGED,
        "scatter_measure": SCATTER_MEASURE,
        "upload_form": RunUploadForm(),
        "retrieval_form": retrieval_form(project),
        "pool_form": pool_form(project, runs),
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


def beyond_pool_judges(project: Project) -> list[str]:
    """The judges that can score entries below the pool: a model of their own (not imported, not an ensemble)."""
    return [judge.name for judge in judges_for_project(project) if not judge.is_imported and not judge.is_ensemble]


def _beyond_pool_context(project: Project, form: BeyondPoolForm | None) -> dict:
    """The newest beyond-the-pool report of the project (and one being made), and the admins' form to make one."""
    done, unfinished = beyond_pool_latest(project)
    return {"beyond_pool": done, "beyond_pool_running": unfinished,
            "beyond_pool_form": form or BeyondPoolForm(judges=beyond_pool_judges(project))}


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
    return render(request, "labeling/systems.html", systems_context(request, project))

"""The Definitions page: every query's definition with its current version, how many versions it has and when and
by whom it was last changed. A query's relevance definition page: the current version, the edit form (admins), LLM
drafts (admins ask a judge for one, see the requests, and review a draft into a new current version), the history
with each version's diff, and the judgments made under older versions with a button that re-scores them."""
from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from labeling.forms import DefinitionDraftForm
from labeling.ids import IdError, parse_id
from labeling.models import Judge, Membership, Project, Query, RelevanceDefinition
from labeling.selectors.definitions import (
    definition_summaries,
    definition_versions,
    queries_with_a_definition,
    stale_pairs,
)
from labeling.selectors.drafting import definition_of_query, draft_requests, generative_judges
from labeling.selectors.lookups import judge_by_name, query_of_project
from labeling.selectors.projects import admin_to, queries_for_project, role_require
from labeling.services.definitions import MAX_DEFINITION_CHARS, DefinitionError, definition_save, stale_rescore_request
from labeling.services.drafting import DraftingError, definition_draft_request
from labeling.services.scoring import ScoringError
from labeling.views.access import project_view, request_role
from labeling.views.htmx import htmx_partial

CHANGE_DEFINITIONS = admin_to("change definitions, ask for drafts or start re-scoring")
QUERIES_PER_PAGE = 50


@login_required
@require_GET
@project_view()
def definitions_list(request: HttpRequest, project: Project) -> HttpResponse:
    queries_page = Paginator(queries_for_project(project=project), QUERIES_PER_PAGE).get_page(request.GET.get("page"))
    context = {"project": project, "queries_page": queries_page,
               "summaries": definition_summaries(queries=queries_page)}
    if htmx_partial(request):
        return render(request, "labeling/definitions.html#definitions-table", context)
    context.update(defined=queries_with_a_definition(project=project), total=queries_page.paginator.count)
    return render(request, "labeling/definitions.html", context)


def _query_and_is_admin(request: HttpRequest, project: Project, query_id: int, *, admin: bool) -> tuple[Query, bool]:
    # The query before the role: a query of another project is a 404 for every member; a member who may only read
    # gets 403 when `admin` is asked.
    query = query_of_project(project=project, query_id=query_id)
    if admin:
        role_require(user=request.user, project=project, need=CHANGE_DEFINITIONS)
        return query, True
    return query, request_role(request, project) == Membership.Role.ADMIN


def _context(project: Project, query: Query, is_admin: bool, *, text: str | None = None,
             based_on: RelevanceDefinition | None = None, **extra: object) -> dict:
    versions = definition_versions(query=query)
    current = next((entry.definition for entry in versions if entry.is_current), None)
    context = {
        "project": project,
        "query": query,
        "is_admin": is_admin,
        "current": current,
        "versions": versions,
        # Drafts newer than the current version that no admin has saved yet, oldest first.
        "unreviewed": [entry.definition for entry in reversed(versions) if entry.definition.is_draft
                       and not entry.reviewed_as and (current is None or entry.definition.version > current.version)],
        "next_version": versions[0].definition.version + 1 if versions else 1,
        "stale": stale_pairs(project=project, query=query),
        "max_chars": MAX_DEFINITION_CHARS,
        "text": text if text is not None else (current.text if current is not None else ""),
        "based_on": based_on,
        **extra,
    }
    if is_admin:
        context.update(_drafts_context(project, query))
        context["draft_form"] = DefinitionDraftForm(judges=generative_judges(project=project))
        context["generative_backends"] = " or ".join(Judge.Backend.generative())
    return context


# A draft request still unfinished after this long says a worker may not be running.
DRAFT_STALLED_AFTER = timedelta(minutes=2)


def _drafts_context(project: Project, query: Query) -> dict:
    drafts = draft_requests(query=query)
    return {"drafts": drafts, "drafts_pending": any(draft.finished_at is None for draft in drafts),
            "stalled_before": timezone.now() - DRAFT_STALLED_AFTER}


@login_required
@require_http_methods(["GET", "POST"])
@project_view()
def definition_page(request: HttpRequest, project: Project, query_id: int) -> HttpResponse:
    query, is_admin = _query_and_is_admin(request, project, query_id, admin=request.method == "POST")
    if request.method == "POST":
        return _definition_post(request, project, query)
    if htmx_partial(request) and is_admin:
        # The draft requests poll while one is pending; the answer that finds none pending brings the history
        # too (out of band), so the new draft version shows without reloading the page.
        context = {"project": project, "query": query, "is_admin": is_admin, **_drafts_context(project, query)}
        if not context["drafts_pending"]:
            context.update(_context(project, query, is_admin), history_oob=True)
        return render(request, "labeling/definition.html#drafts-poll", context)
    review = None
    if is_admin and "from" in request.GET:
        try:
            review_id = parse_id(request.GET["from"], name="from (the draft to review)")
        except IdError as exc:
            return render(request, "labeling/definition.html", _context(project, query, is_admin, error=str(exc)),
                          status=400)
        review = definition_of_query(query=query, definition_id=review_id)
        review = review if review is not None and review.is_draft else None
    text = review.text if review is not None else None
    return render(request, "labeling/definition.html", _context(project, query, is_admin, text=text, based_on=review))


def _definition_post(request: HttpRequest, project: Project, query: Query) -> HttpResponse:
    text = request.POST.get("text", "")
    based_on = None

    def refused(error: str) -> HttpResponse:
        reviewing = based_on if based_on is not None and based_on.is_draft else None
        context = _context(project, query, True, text=text, based_on=reviewing, error=error)
        return render(request, "labeling/definition.html", context, status=400)

    if request.POST.get("based_on"):
        try:
            based_on = definition_of_query(query=query, definition_id=parse_id(request.POST["based_on"], name="draft"))
        except IdError:
            based_on = None
        if based_on is None:
            return refused("the draft being reviewed is not a version of this query")
    try:
        definition = definition_save(query=query, text=text, author=request.user, based_on=based_on)
    except DefinitionError as exc:
        return refused(str(exc))
    if based_on is not None:
        messages.success(request, f"Saved version {definition.version} from LLM draft version {based_on.version}: "
                                  "it is the current definition now.")
    else:
        messages.success(request, f"Saved version {definition.version}.")
    return redirect("labeling:definition", slug=project.slug, query_id=query.id)


@login_required
@require_POST
@project_view()
def definition_draft_view(request: HttpRequest, project: Project, query_id: int) -> HttpResponse:
    query, _ = _query_and_is_admin(request, project, query_id, admin=True)
    form = DefinitionDraftForm(request.POST, judges=generative_judges(project=project))
    if not form.is_valid():
        # Like any form that does not validate (a judge id that is none of these included): 400, not a redirect.
        messages.error(request, f"Choose one of the project's judges that write text (backend "
                                f"{' or '.join(Judge.Backend.generative())}).")
        return render(request, "labeling/definition.html", _context(project, query, True), status=400)
    judge, refine = form.cleaned_data["judge"], form.cleaned_data["refine"]
    try:
        definition_draft_request(query=query, judge=judge, refine=refine, user=request.user)
    except DraftingError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Asked {judge.name} for a {'refined ' if refine else ''}draft. It appears in the history as a draft "
            "version, which becomes current only once an admin reviews and saves it.",
        )
    return redirect(reverse("labeling:definition", args=[project.slug, query.id]) + "#drafting")


@login_required
@require_POST
@project_view()
def stale_rescore_view(request: HttpRequest, project: Project, query_id: int, judge: str) -> HttpResponse:
    query, _ = _query_and_is_admin(request, project, query_id, admin=True)
    found = judge_by_name(project=project, name=judge)
    try:
        job = stale_rescore_request(project=project, query=query, judge=found, user=request.user)
    except (DefinitionError, ScoringError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Job {job.id}: re-scoring {job.total:,} stale pair{'s' if job.total != 1 else ''} with {found.name} "
            "under the current definition.",
        )
    return redirect("labeling:definition", slug=project.slug, query_id=query.id)

"""The browse pages (any member; blind first applies item by item inside the selectors): the project's queries
with their pair counts, a query's pairs a keyset page at a time with filters, and everything known about a pair."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET

from labeling.models import Judge, Membership, Project
from labeling.selectors.browse import (
    DISAGREEMENTS,
    MAX_PAGE_SIZE,
    NO_GOLD,
    PAGE_SIZE,
    BrowseError,
    BrowseFilters,
    browse_filters_parse,
    browse_page,
    query_pair_counts,
)
from labeling.selectors.browse_pair import pair_detail
from labeling.selectors.disclosure import item_disclosure
from labeling.selectors.lookups import query_of_project
from labeling.selectors.projects import queries_with_current_definition
from labeling.views.access import project_view, request_role
from labeling.views.htmx import htmx_partial

QUERIES_PER_PAGE = 50
# The query-string keys of the filters: a cursor link keeps them and swaps only the cursor.
FILTER_KEYS = ("q", "gold", "judge", "p_min", "p_max", "disagreement", "threshold", "n")


@login_required
@require_GET
@project_view()
def browse_queries(request: HttpRequest, project: Project) -> HttpResponse:
    queries_page = Paginator(queries_with_current_definition(project=project), QUERIES_PER_PAGE).get_page(
        request.GET.get("page"))
    counts = query_pair_counts(project=project, queries=list(queries_page))
    context = {
        "project": project,
        "queries_page": queries_page,
        "query_rows": [(query, *counts[query.id]) for query in queries_page],
    }
    if htmx_partial(request):
        return render(request, "labeling/browse_queries.html#browse-queries-table", context)
    return render(request, "labeling/browse_queries.html", context)


def _link(params: QueryDict, **cursor: int) -> str:
    kept = QueryDict(mutable=True)
    for key in FILTER_KEYS:
        if params.get(key):
            kept[key] = params[key]
    for key, value in cursor.items():
        kept[key] = str(value)
    return f"?{kept.urlencode()}" if kept else "?"


@login_required
@require_GET
@project_view()
def browse_query(request: HttpRequest, project: Project, query_id: int) -> HttpResponse:
    query = query_of_project(project=project, query_id=query_id)
    role = request_role(request, project)
    judges = list(Judge.objects.filter(project=project).order_by("name"))
    blind = not item_disclosure(project=project, role=role, labelled=False).everything
    context = {
        "project": project,
        "query": query,
        "blind": blind,
        "is_expert": role == Membership.Role.EXPERT,
        "params": request.GET,
        "scale": project.label_scale,
        "no_gold": NO_GOLD,
        "judges": judges,
        "disagreements": DISAGREEMENTS,
        "page_size": PAGE_SIZE,
        "max_page_size": MAX_PAGE_SIZE,
        "pair_total": query.pairs.count(),
        "filters": BrowseFilters(),
    }
    status = 200
    try:
        filters = browse_filters_parse(project=project, params=request.GET, judges=judges)
        page = browse_page(project=project, query=query, user=request.user, role=role, filters=filters,
                           judges=judges, params=request.GET)
    except BrowseError as exc:
        context["error"], status = str(exc), 400
    else:
        # Each row with its judges' P paired with their names (a judge that has not judged the pair: None), for
        # the one cell that lists them all: a column per judge no longer fits the screen past two or three.
        rows = [(row, tuple(zip(page.judges, row.judges))) for row in page.rows]
        context.update(filters=filters, page=page, rows=rows, first_url=_link(request.GET))
        if page.next_after is not None:
            context["next_url"] = _link(request.GET, after=page.next_after)
        if page.previous_before is not None:
            context["previous_url"] = _link(request.GET, before=page.previous_before)
    if htmx_partial(request):
        return render(request, "labeling/browse_query.html#pair-table", context, status=status)
    return render(request, "labeling/browse_query.html", context, status=status)


@login_required
@require_GET
@project_view()
def browse_pair(request: HttpRequest, project: Project, pair_id: int) -> HttpResponse:
    role = request_role(request, project)
    detail = pair_detail(project=project, pair_id=pair_id, user=request.user, role=role)
    return render(request, "labeling/browse_pair.html", {
        "project": project,
        "detail": detail,
        "pair": detail.pair,
        "scale": project.label_scale,
        "is_expert": role == Membership.Role.EXPERT,
        "reveals": project.reveal_llm_after_submit,
    })

"""The Releases page (#34, #48): the project's frozen qrels, each exported byte for byte as it was frozen (TREC,
BEIR, JSONL), the difference between two of them, and for admins the form that freezes the current qrels. Readers
are those blind first lets read the qrels, as in the API (labeling/api/releases.py)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from labeling.exceptions import Conflict, DomainError
from labeling.models import Membership, Project
from labeling.selectors.export import READ_QRELS, QrelsFormat, utf8_chunks
from labeling.selectors.projects import admin_to
from labeling.selectors.releases import (
    ReleaseDiff,
    ReleaseNotFound,
    release_before,
    release_by_name,
    release_diff,
    release_file_name,
    release_lines,
    release_verify,
    releases_of,
)
from labeling.services.releases import release_create
from labeling.views.access import project_view, request_role

# A diff lists at most this many pairs of each kind on the page (the counts and the per-query table are whole; the
# API's diff has every pair).
DIFF_ROWS_SHOWN = 200


def _diff(project: Project, params: dict) -> tuple[ReleaseDiff | None, str | None]:
    """The diff the page was asked for (`b` against `a`, or against the release frozen before `b`), or its error."""
    later = params.get("b", "")
    if not later:
        return None, None
    try:
        b = release_by_name(project=project, name=later)
        earlier = params.get("a", "")
        a = release_by_name(project=project, name=earlier) if earlier else release_before(b)
        return release_diff(a, b), None
    except DomainError as exc:
        return None, str(exc)


def _render(request: HttpRequest, project: Project, *, status: int = 200, form_error: str | None = None,
            form: dict | None = None) -> HttpResponse:
    diff, diff_error = _diff(project, request.GET)
    releases = releases_of(project)
    context = {
        "project": project, "releases": releases, "formats": list(QrelsFormat),
        "is_admin": request_role(request, project) == Membership.Role.ADMIN,
        "judges": project.judges.order_by("name"), "form": form or {}, "form_error": form_error,
        "diff": diff, "diff_error": diff_error, "diff_rows": DIFF_ROWS_SHOWN,
        "diff_a": request.GET.get("a", ""), "diff_b": request.GET.get("b", ""),
    }
    return render(request, "labeling/releases.html", context, status=status if not diff_error else 400)


@login_required
@require_GET
@project_view(READ_QRELS)
def releases_page(request: HttpRequest, project: Project) -> HttpResponse:
    return _render(request, project)


@login_required
@require_POST
@project_view(admin_to("freeze qrels"))
def release_create_view(request: HttpRequest, project: Project) -> HttpResponse:
    data = request.POST
    form = {key: data.get(key, "") for key in ("name", "source", "threshold", "description")}
    try:
        threshold = float(form["threshold"]) if form["threshold"].strip() else None
    except ValueError:
        return _render(request, project, status=400, form=form,
                       form_error=f"the threshold must be a number from 0 to 1, got {form['threshold']!r}")
    try:
        frozen = release_create(project=project, by=request.user, name=form["name"], source=form["source"] or "human",
                                threshold=threshold, description=form["description"].strip())
    except DomainError as exc:
        return _render(request, project, status=409 if isinstance(exc, Conflict) else 400, form=form,
                       form_error=str(exc))
    messages.success(request, f"Frozen release {frozen.name!r}: {frozen.graded} graded pairs of {frozen.pairs}.")
    return redirect("labeling:releases", slug=project.slug)


@login_required
@require_GET
@project_view(READ_QRELS)
def release_export_view(request: HttpRequest, project: Project, release: str) -> HttpResponse:
    """The release as the asked format, streamed: the API's bytes (labeling.api.releases.ReleaseExportView)."""
    try:
        found = release_by_name(project=project, name=release)
    except ReleaseNotFound as exc:
        raise Http404(str(exc)) from None
    asked = request.GET.get("format", "trec")
    try:
        fmt = QrelsFormat(asked)
        release_verify(found)  # before the first byte: a damaged release is a message, not a truncated download
    except (ValueError, DomainError) as exc:
        messages.error(request, f"Export of {found.name!r}: {exc}")
        return redirect("labeling:releases", slug=project.slug)
    response = StreamingHttpResponse(utf8_chunks(release_lines(found, fmt, verify=False)), content_type=fmt.media_type)
    response["Content-Disposition"] = content_disposition_header(True, release_file_name(found, fmt))
    return response

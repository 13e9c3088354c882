"""The experts' annotation workspace: one item at a time from the project's queues; submitting, skipping or
undoing swaps in the next item (htmx) or redirects back to the page (plain forms)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_http_methods, require_POST

from labeling.exceptions import Forbidden
from labeling.highlight import Segment, highlight_segments
from labeling.ids import IdError, parse_id
from labeling.models import Project
from labeling.selectors.completeness import project_target_met
from labeling.selectors.definitions import DefinitionNews, definition_news
from labeling.selectors.disclosure import AGREEMENT_MIN_ITEMS, item_disclosure, revealed_after_submit
from labeling.selectors.projects import ANNOTATE
from labeling.selectors.queues import queue_progress
from labeling.selectors.sessions import SessionSummary, saved_label, session_labelled, session_summary
from labeling.services.labels import (
    Claim,
    LabelError,
    item_skip,
    label_submit,
    label_undo,
    lease_restart,
    queue_next_for_annotator,
    queue_prefetch_for_annotator,
)
from labeling.views.access import project_view, request_role
from labeling.views.htmx import htmx_partial

# The workspace's answers say what they hold ("page": the whole workspace, "advance": only what follows a
# label); workspace.js names the prefetched item it now shows in ADVANCE_HEADER when it posts a label.
WORKSPACE_HEADER = "X-Workspace"
ADVANCE_HEADER = "X-Workspace-Shown"
SESSION_KEY = "annotate-session-started:{project}"


@dataclass(frozen=True)
class ItemView:
    """A claimed item as the workspace shows it: the passage and title split for query-term marks, a fresh
    idempotency key for its form, what changed in its definition since the expert last labelled under it, and the
    queue that served it where blind first lets the member see it (None: not shown)."""

    claim: Claim
    queue: str | None
    client_key: str
    passage_segments: list[Segment]
    title_segments: list[Segment]
    lease_minutes: int
    news: DefinitionNews | None


def _item_view(request: HttpRequest, project: Project, claim: Claim | None) -> ItemView | None:
    if claim is None:
        return None
    pair = claim.pair
    disclosure = item_disclosure(project=project, role=request_role(request, project),
                                 labelled=False)
    return ItemView(
        claim=claim,
        queue=claim.queue if disclosure.queue else None,
        client_key=uuid.uuid4().hex,
        passage_segments=highlight_segments(pair.passage.text, pair.query.text),
        title_segments=highlight_segments(pair.passage.title, pair.query.text),
        lease_minutes=project.lease_minutes,
        news=None if claim.definition is None else definition_news(annotator=request.user,
                                                                    definition=claim.definition),
    )


def _queue(request: HttpRequest) -> str | None:
    return request.GET.get("queue") or request.POST.get("queue") or None


def _session_start(request: HttpRequest, project: Project, now: datetime) -> datetime:
    """When this browser session started labelling the project (kept in the session; set on first use)."""
    key = SESSION_KEY.format(project=project.id)
    started = parse_datetime(request.session.get(key) or "")
    if started is None:
        started = now
        request.session[key] = now.isoformat()
    return started


def _summary(request: HttpRequest, project: Project, now: datetime) -> SessionSummary:
    return session_summary(project=project, annotator=request.user,
                           role=request_role(request, project),
                           started_at=_session_start(request, project, now))


def _context(request: HttpRequest, project: Project, claim: Claim | None, upcoming: Claim | None,
             shown: int | None = None, **extra: object) -> dict:
    """The workspace's context: `claim` the item to show (None: the queue is empty, unless `shown` says which
    item the browser shows already) and `upcoming` the prefetched one after it."""
    now = timezone.now()
    shown = claim.pair.id if claim is not None else shown
    context = {
        "project": project,
        "scale": project.label_scale,
        "current": _item_view(request, project, claim),
        "upcoming": _item_view(request, project, upcoming),
        "progress": queue_progress(project=project, annotator=request.user, now=now, shown=shown),
        # The project header's count of items waiting (the one on screen included): workspace.js keeps the header,
        # which a label's answer does not bring, in step with it.
        "waiting": queue_progress(project=project, annotator=request.user, now=now).left_display,
        "session_labelled": session_labelled(project=project, annotator=request.user,
                                             started_at=_session_start(request, project, now)),
        "queue_param": _queue(request) or "",
        "agreement_min_items": AGREEMENT_MIN_ITEMS,
        "shown_pair": shown,
        **extra,
    }
    if shown is None:
        context["summary"] = _summary(request, project, now)
    return context


def _render_next(request: HttpRequest, project: Project, status: int = 200, **extra: object) -> HttpResponse:
    """The workspace with the item the expert holds (or the next one, leased now) and the item after it,
    leased too and sent along hidden, so that labelling shows it at once (workspace.js)."""
    queue = _queue(request)
    _session_start(request, project, timezone.now())
    try:
        claim = queue_next_for_annotator(project=project, annotator=request.user, strategy=queue)
        upcoming = None if claim is None else queue_prefetch_for_annotator(
            project=project, annotator=request.user, shown=claim.pair.id, strategy=queue)
    except LabelError as exc:
        # An expert naming one queue is refused (403): they get the project's mix, as in the API.
        status = 403 if isinstance(exc, Forbidden) else 400
        claim, upcoming, extra = None, None, {**extra, "error": str(exc), "queue_refused": status == 403}
    if claim is None and "error" not in extra:
        # Experts are told the project's stopping target is met (they get no more items); admins may go on.
        extra = {**extra, "target_met": project_target_met(project=project)}
    context = _context(request, project, claim, upcoming, **extra)
    template = "labeling/workspace.html#item" if htmx_partial(request) else "labeling/workspace.html"
    response = render(request, template, context, status=status)
    response[WORKSPACE_HEADER] = "page"
    return response


def _advance(request: HttpRequest, project: Project, shown: int, **extra: object) -> HttpResponse:
    """After a label, when the browser already shows the prefetched item `shown`: its lease restarts now, and
    the answer is only the new progress, the message and the item after it. When the expert no longer holds
    `shown` (its lease ran out meanwhile), the whole workspace instead."""
    queue = _queue(request)
    if not lease_restart(project=project, annotator=request.user, pair_id=shown):
        return _render_next(request, project, notice="The item you were shown had gone to someone else in the "
                            "meantime; here is your next one.", **extra)
    try:
        upcoming = queue_prefetch_for_annotator(project=project, annotator=request.user, shown=shown, strategy=queue)
    except LabelError as exc:
        return _render_next(request, project, status=400, error=str(exc))
    context = _context(request, project, None, upcoming, shown=shown, **extra)
    response = render(request, "labeling/workspace.html#advance", context)
    response[WORKSPACE_HEADER] = "advance"
    return response


def _after_post(request: HttpRequest, project: Project, **extra: object) -> HttpResponse:
    if request.htmx:
        return _render_next(request, project, **extra)
    url = reverse("labeling:workspace", kwargs={"slug": project.slug})
    queue = request.POST.get("queue")
    return redirect(f"{url}?queue={queue}" if queue else url)


@login_required
@project_view(ANNOTATE)
def workspace(request: HttpRequest, project: Project) -> HttpResponse:
    return _render_next(request, project)


def _grade(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise LabelError(f"the grade must be a whole number, got {value!r}") from None


def _refused(request: HttpRequest, project: Project, error: IdError) -> HttpResponse:
    # Only a forged form sends an id that is not one: a 400 whether htmx posted it or not, and nothing stored.
    return _render_next(request, project, status=400, error=str(error))


@login_required
@require_POST
@project_view(ANNOTATE)
def workspace_submit(request: HttpRequest, project: Project) -> HttpResponse:
    now = timezone.now()
    try:
        pair_id = parse_id(request.POST.get("pair_id", ""), name="the item id")
        definition = request.POST.get("definition_id") or None
        definition_id = None if definition is None else parse_id(definition, name="the definition id")
        # workspace.js, showing the prefetched item as it posts the label, names that item in this header.
        advanced = request.headers.get(ADVANCE_HEADER)
        shown = None if advanced is None else parse_id(advanced, name="the item shown")
    except IdError as exc:
        return _refused(request, project, exc)
    try:
        grade = _grade(request.POST.get("grade"))
        result = label_submit(
            project=project, annotator=request.user, pair_id=pair_id, grade=grade,
            note=request.POST.get("note", "").strip(), unsure=request.POST.get("unsure") == "on",
            time_spent_from_lease=True, client_key=request.POST.get("client_key", ""),
            definition_id=definition_id, now=now,
        )
    except LabelError as exc:
        if request.htmx:
            return _render_next(request, project, status=400, error=str(exc))
        messages.error(request, str(exc))
        return _after_post(request, project)
    role = request_role(request, project)
    revealed = revealed_after_submit(project=project, role=role, pair_id=result.label.pair_id,
                                     grade=result.label.grade)
    saved = saved_label(project=project, label=result.label)
    if shown is not None:
        return _advance(request, project, shown, saved=saved, revealed=revealed)
    if not request.htmx:
        messages.success(request, "Label saved.")
    return _after_post(request, project, saved=saved, revealed=revealed)


@login_required
@require_POST
@project_view(ANNOTATE)
def workspace_skip(request: HttpRequest, project: Project) -> HttpResponse:
    try:
        pair_id = parse_id(request.POST.get("pair_id", ""), name="the item id")
    except IdError as exc:
        return _refused(request, project, exc)
    try:
        item_skip(project=project, annotator=request.user, pair_id=pair_id)
    except LabelError as exc:
        if request.htmx:
            return _render_next(request, project, status=400, error=str(exc))
        messages.error(request, str(exc))
    return _after_post(request, project, notice="Skipped; you will not be given that item again.")


@login_required
@require_http_methods(["GET", "POST"])
@project_view(ANNOTATE)
def workspace_summary(request: HttpRequest, project: Project) -> HttpResponse:
    """What the expert did in this session (GET); POST starts a new session and goes back to labelling."""
    now = timezone.now()
    if request.method == "POST":
        request.session[SESSION_KEY.format(project=project.id)] = now.isoformat()
        return redirect("labeling:workspace", slug=project.slug)
    return render(request, "labeling/workspace_summary.html", {
        "project": project, "summary": _summary(request, project, now), "agreement_min_items": AGREEMENT_MIN_ITEMS,
    })


@login_required
@require_POST
@project_view(ANNOTATE)
def workspace_undo(request: HttpRequest, project: Project) -> HttpResponse:
    undone = label_undo(project=project, annotator=request.user)
    notice = "Undid your last label; label the item again." if undone else "Nothing to undo."
    if not request.htmx:
        messages.info(request, notice)
    return _after_post(request, project, notice=notice)

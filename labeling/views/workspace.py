"""The experts' annotation workspace: one item at a time from the project's queues; submitting, skipping or
undoing swaps in the next item (htmx) or redirects back to the page (plain forms)."""
from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from labeling.highlight import highlight_segments
from labeling.ids import IdError, parse_id
from labeling.models import Project
from labeling.selectors.disclosure import revealed_after_submit
from labeling.selectors.projects import ANNOTATE, project_role
from labeling.selectors.queues import queue_progress
from labeling.services.labels import (
    Claim,
    LabelError,
    item_skip,
    label_submit,
    label_undo,
    queue_next_for_annotator,
)
from labeling.views.access import project_view
from labeling.views.htmx import htmx_partial


def _context(request: HttpRequest, project: Project, claim: Claim | None, **extra: object) -> dict:
    now = timezone.now()
    context = {
        "project": project,
        "scale": project.label_scale,
        "claim": claim,
        "progress": queue_progress(project=project, annotator=request.user, now=now),
        "queue_param": request.GET.get("queue", "") or request.POST.get("queue", ""),
        **extra,
    }
    if claim is not None:
        pair = claim.pair
        context.update(
            client_key=uuid.uuid4().hex,
            passage_segments=highlight_segments(pair.passage.text, pair.query.text),
            title_segments=highlight_segments(pair.passage.title, pair.query.text),
            lease_seconds_left=max(0, int((claim.lease.expires_at - now).total_seconds())),
        )
    return context


def _render_next(request: HttpRequest, project: Project, status: int = 200, **extra: object) -> HttpResponse:
    queue = request.GET.get("queue") or request.POST.get("queue") or None
    try:
        claim = queue_next_for_annotator(project=project, annotator=request.user, strategy=queue)
    except LabelError as exc:
        claim, status, extra = None, 400, {**extra, "error": str(exc)}
    context = _context(request, project, claim, **extra)
    template = "labeling/workspace.html#item" if htmx_partial(request) else "labeling/workspace.html"
    return render(request, template, context, status=status)


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
    role = project_role(user=request.user, project=project)
    revealed = revealed_after_submit(project=project, role=role, pair_id=result.label.pair_id,
                                     grade=result.label.grade)
    if not request.htmx:
        messages.success(request, "Label saved.")
    return _after_post(request, project, saved=result.label, revealed=revealed)


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
@require_POST
@project_view(ANNOTATE)
def workspace_undo(request: HttpRequest, project: Project) -> HttpResponse:
    undone = label_undo(project=project, annotator=request.user)
    notice = "Undid your last label; label the item again." if undone else "Nothing to undo."
    if not request.htmx:
        messages.info(request, notice)
    return _after_post(request, project, notice=notice)

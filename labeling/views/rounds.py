"""The Rounds page (#33): the loop of humans and judge, a batch at a time. Readers see each round and the chart of
what it bought; admins start the next one."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling.exceptions import Conflict, DomainError
from labeling.models import LabellingRound, Membership, Project
from labeling.selectors.projects import READ_REPORTS, admin_to
from labeling.selectors.rounds import refit_outlook, round_chart, round_rows
from labeling.services.rounds import ROUND_RANDOM_FLOOR, round_request
from labeling.views.access import project_view, request_role

# The judge's figures on the random validation sample that the table shows before -> after, in its column order.
CHANGES = ("auroc", "ece", "kappa", "f1")


def _render(request: HttpRequest, project: Project, status: int = 200, error: str | None = None) -> HttpResponse:
    rows = round_rows(project=project)
    shown = [{**row, "changes": [(name, (row["before"] or {}).get(name), (row["after_refit"] or {}).get(name))
                                 for name in CHANGES],
              "stopping": (row["after_refit"] or row["before"] or {}).get("stopping")} for row in rows]
    context = {
        "project": project, "rounds": shown, "chart": round_chart(rows), "error": error,
        "is_admin": request_role(request, project) == Membership.Role.ADMIN,
        "judges": project.judges.order_by("name"), "random_floor": ROUND_RANDOM_FLOOR,
        "open": any(row["status"] in ("pending", "running") for row in rows),
        "after_choices": LabellingRound.After.choices, "outlook": refit_outlook(project=project),
    }
    return render(request, "labeling/rounds.html", context, status=status)


@login_required
@project_view(READ_REPORTS)
def rounds_page(request: HttpRequest, project: Project) -> HttpResponse:
    return _render(request, project)


@login_required
@require_http_methods(["POST"])
@project_view(admin_to("start a labelling round"))
def round_start_view(request: HttpRequest, project: Project) -> HttpResponse:
    data = request.POST
    try:
        budget = int(data.get("budget", ""))
        random_share = float(data.get("random_share", "")) / 100
        mix = {name: float(data.get(f"share_{name}") or 0) for name in ("uncertain", "disagreement")}
    except ValueError:
        return _render(request, project, status=400, error="budget, shares and the random share must be numbers")
    try:
        started = round_request(project=project, by=request.user, judge=data.get("judge", ""), budget=budget, mix=mix,
                                random_share=random_share, after=data.get("after") or LabellingRound.After.CALIBRATE,
                                graded=data.get("graded") == "on")
    except DomainError as exc:
        return _render(request, project, status=409 if isinstance(exc, Conflict) else 400, error=str(exc))
    messages.success(request, f"Round {started.number} started: experts' queues now serve its batch")
    return redirect("labeling:rounds", slug=project.slug)

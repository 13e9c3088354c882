"""The Replay pages (#50): the labelling loop run again on a project whose truth is known. The form starts a replay
and lists the project's replays; a replay's page follows its progress and then shows its summary table and curves.
Project admins only: a replay reads the truth, which experts and viewers never see (blind first)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from labeling.exceptions import Conflict
from labeling.models import Project
from labeling.selectors.lookups import replay_of_project
from labeling.selectors.projects import admin_to
from labeling.selectors.replay_page import (
    mix_label,
    replay_form_facts,
    replay_notes,
    replay_report,
    replay_row,
    replay_rows,
)
from labeling.services.replay import (
    REPLAY_DEFAULT_BATCH,
    REPLAY_DEFAULT_MIXES,
    REPLAY_DEFAULT_ROUNDS,
    REPLAY_DEFAULT_SEEDS,
    ReplayRequestError,
    replay_cancel,
    replay_delete,
    replay_request,
)
from labeling.views.access import project_view
from labeling.views.htmx import htmx_partial

REPLAY_NEED = admin_to("replay the loop: a replay reads the truth, which experts and viewers never see")
# The queue mixes the form offers, by the value its checkboxes send.
MIX_PRESETS = {
    "uncertain-80": {"uncertain": 80.0, "random": 20.0},
    "random-100": {"random": 100.0},
    "disagreement-80": {"disagreement": 80.0, "random": 20.0},
    "stratified-100": {"stratified": 100.0},
}
DEFAULT_MIXES = tuple(key for key, mix in MIX_PRESETS.items() if mix in REPLAY_DEFAULT_MIXES)
# The form's fields as first shown: what the service (and `manage.py replay`) does by default.
DEFAULTS = {"batch": str(REPLAY_DEFAULT_BATCH), "rounds": str(REPLAY_DEFAULT_ROUNDS),
            "seeds": str(REPLAY_DEFAULT_SEEDS), "refit": True, "target": "0.9", "alpha": "0.1"}
WHOLE, REAL = ("batch", "rounds", "seeds"), ("target", "alpha")


def _asked(data) -> tuple[dict, str | None]:
    """The form's values as replay_request takes them, and the first that is not a number (named), if any."""
    asked = {"judges": data.getlist("judges"), "truth": data.get("truth", ""), "refit": data.get("refit") == "on"}
    unknown = [key for key in data.getlist("mixes") if key not in MIX_PRESETS]
    if unknown:
        return asked, f"mixes: no preset {unknown[0]!r}; the presets are {', '.join(MIX_PRESETS)}"
    asked["mixes"] = [MIX_PRESETS[key] for key in data.getlist("mixes")]
    for name in WHOLE + REAL:
        text = data.get(name, "").strip()
        try:
            asked[name] = int(text) if name in WHOLE else float(text)
        except ValueError:
            kind = "a whole number" if name in WHOLE else "a number"
            return asked, f"{name} must be {kind}, not {text!r}"
    return asked, None


def _render(request: HttpRequest, project: Project, *, shown: dict | None = None, error: str | None = None,
            status: int = 200) -> HttpResponse:
    facts = replay_form_facts(project=project)
    values = shown or {**DEFAULTS, "mixes": list(DEFAULT_MIXES), "judges": [],
                       "truth": "trec" if facts.ungraded else "reference"}
    rows = replay_rows(project=project)
    context = {"project": project, "facts": facts, "values": values, "error": error, "replays": rows,
               "presets": [(key, mix_label(mix)) for key, mix in MIX_PRESETS.items()],
               "any_unfinished": any(row.unfinished for row in rows)}
    if htmx_partial(request):
        return render(request, "labeling/replay.html#replays", context, status=status)
    return render(request, "labeling/replay.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
@project_view(REPLAY_NEED)
def replay_page(request: HttpRequest, project: Project) -> HttpResponse:
    """GET: the form and the project's replays (for htmx, the list alone: it polls while one runs). POST: start a
    replay; a refused one is the form again with the reason, naming the field, and nothing stored."""
    if request.method == "GET":
        return _render(request, project)
    asked, error = _asked(request.POST)
    shown = {**{name: request.POST.get(name, "") for name in WHOLE + REAL}, "judges": asked["judges"],
             "mixes": request.POST.getlist("mixes"), "truth": asked["truth"], "refit": asked["refit"]}
    if error is None:
        try:
            job = replay_request(project=project, by=request.user, **asked)
        except ReplayRequestError as exc:
            return _render(request, project, shown=shown, error=str(exc),
                           status=409 if isinstance(exc, Conflict) else 400)
        messages.success(request, f"Replay {job.id} queued: {job.total:,} runs (mixes x judges x seeds).")
        return redirect("labeling:replay_detail", slug=project.slug, replay_id=job.id)
    return _render(request, project, shown=shown, error=error, status=400)


@login_required
@project_view(REPLAY_NEED)
def replay_detail(request: HttpRequest, project: Project, replay_id: int) -> HttpResponse:
    """The replay's progress, polled while it runs (the partial stops asking once it is finished), then its summary
    table and curves."""
    job = replay_of_project(project=project, replay_id=replay_id)
    context = {"project": project, "row": replay_row(job), "notes": replay_notes(job), "report": replay_report(job)}
    if htmx_partial(request):
        return render(request, "labeling/replay_detail.html#replay-body", context)
    return render(request, "labeling/replay_detail.html", context)


@login_required
@require_POST
@project_view(admin_to("cancel a replay"))
def replay_cancel_view(request: HttpRequest, project: Project, replay_id: int) -> HttpResponse:
    job = replay_cancel(job=replay_of_project(project=project, replay_id=replay_id))
    messages.info(request, f"Replay {job.id} is {job.status}.")
    return redirect("labeling:replay_detail", slug=project.slug, replay_id=job.id)


@login_required
@require_POST
@project_view(admin_to("delete a replay"))
def replay_delete_view(request: HttpRequest, project: Project, replay_id: int) -> HttpResponse:
    job = replay_of_project(project=project, replay_id=replay_id)
    replay_delete(job=job, by=request.user)
    messages.info(request, f"Deleted replay {replay_id}; the project is as it was.")
    return redirect("labeling:replay", slug=project.slug)

"""HTML pages: a project's distillation (DIRAS section 3). Any member sees the training sets and the fine-tuning
jobs with their progress and loss curves; admins sample or import training sets, start, cancel and resume jobs and
have a student score the pool; members who may read the reports (blind first) see how base model, student and
teacher agree with the teacher and with the gold labels."""
from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from labeling.charts import PlotArea, Tick
from labeling.exceptions import DomainError
from labeling.forms import FinetuneForm, TrainingSetImportForm, TrainingSetSampleForm
from labeling.models import BundleImportJob, Estimate, FineTuneJob, Membership, Project, Run
from labeling.selectors.disclosure import BLIND_REPORTS, sees_reports
from labeling.selectors.finetune import COMPARED_JOBS, Comparison, distill_comparison
from labeling.selectors.finetune_jobs import FineTuneJobRow, finetune_job_of_project, finetune_jobs
from labeling.selectors.finetune_training_sets import sample_summary, training_set_by_name, training_sets_of_project
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import admin_to
from labeling.selectors.runs import project_runs, run_by_name
from labeling.selectors.scoring import judges_for_project
from labeling.services.estimates import estimate_request
from labeling.services.finetune import finetune_cancel, finetune_request, finetune_resume, score_pool
from labeling.services.finetune_training_set_upload import training_set_import_upload
from labeling.services.finetune_training_sets import (
    training_set_create,
    training_set_delete,
    training_set_score,
    training_set_upload_refusal,
)
from labeling.views.access import project_view, request_role
from labeling.views.estimates import estimate_card
from labeling.views.htmx import htmx_partial
from models_llm.bundled import BundledModelError, smollm2_folder
from models_llm.finetune.crossencoder_student import CrossEncoderSettings
from models_llm.finetune.lora import LoraSettings

SETS_ADMIN = admin_to("change the project's training sets")
# The loss curve's box, in SVG units.
CURVE_WIDTH, CURVE_HEIGHT, CURVE_LEFT, CURVE_BOTTOM_PAD, CURVE_TOP, CURVE_RIGHT_PAD = 180, 90, 30, 18, 8, 6


@dataclass(frozen=True)
class LossCurve(PlotArea):
    """A job's training loss against the optimizer step, as _chart_axes.html and a polyline draw it."""

    points: str
    x_ticks: list[Tick]
    y_ticks: list[Tick]


def loss_curve(history: list[list[float]], total_steps: int) -> LossCurve | None:
    """The curve of [[step, loss], ...] over steps 0..total (or the last step logged), losses 0..the highest."""
    if not history:
        return None
    last_step = max(total_steps, max(step for step, _ in history), 1)
    top_loss = max(loss for _, loss in history) or 1.0
    left, right = CURVE_LEFT, CURVE_WIDTH - CURVE_RIGHT_PAD
    top, bottom = CURVE_TOP, CURVE_HEIGHT - CURVE_BOTTOM_PAD

    def px(step: float) -> float:
        return round(left + step / last_step * (right - left), 1)

    def py(loss: float) -> float:
        return round(bottom - loss / top_loss * (bottom - top), 1)

    return LossCurve(
        width=CURVE_WIDTH, height=CURVE_HEIGHT, plot_left=left, plot_right=right, plot_top=top, plot_bottom=bottom,
        points=" ".join(f"{px(step)},{py(loss)}" for step, loss in history),
        x_ticks=[Tick(px(0), bottom + 14, "0"), Tick(px(last_step), bottom + 14, f"{last_step:g}")],
        y_ticks=[Tick(left - 4, py(0) + 4, "0"), Tick(left - 4, py(top_loss) + 4, f"{top_loss:.3g}")],
    )


@dataclass(frozen=True)
class JobCard:
    row: FineTuneJobRow
    curve: LossCurve | None
    comparison: Comparison | None  # done jobs whose student exists, for readers of the reports


def _job_cards(project: Project, *, role: str | None, reads: bool) -> list[JobCard]:
    rows = finetune_jobs(project, show_errors=role == Membership.Role.ADMIN)
    compared = {row.job.id for row in rows if row.job.status == FineTuneJob.Status.DONE
                and row.job.student_id is not None}
    compared = set(sorted(compared, reverse=True)[:COMPARED_JOBS]) if reads else set()
    return [JobCard(row=row, curve=loss_curve(row.job.loss_history, row.job.total_steps),
                    comparison=distill_comparison(row.job) if row.job.id in compared else None)
            for row in rows]


def _jobs_context(project: Project, role: str | None) -> dict:
    reads = sees_reports(project=project, role=role)
    cards = _job_cards(project, role=role, reads=reads)
    return {"project": project, "cards": cards, "any_unfinished": any(card.row.unfinished for card in cards),
            "any_student": any(card.row.job.student_id is not None for card in cards),
            "is_admin": role == Membership.Role.ADMIN, "sees_reports": reads, "blind_reports": BLIND_REPORTS}


def _default_run(runs: list[Run]) -> str | None:
    """The run the sample form proposes: the newest dense run (the service's default), else the newest run."""
    dense = [run for run in runs if run.kind == Run.Kind.DENSE]
    newest = max(dense or runs, key=lambda run: (run.created_at, run.id), default=None)
    return None if newest is None else newest.name


def _sample_form(project: Project, data: dict | None = None) -> TrainingSetSampleForm:
    runs = list(project_runs(project))
    return TrainingSetSampleForm(data, runs=[run.name for run in runs], default_run=_default_run(runs))


def _base_model_default() -> str:
    try:
        return str(smollm2_folder(settings.VAR_DIR))
    except BundledModelError:
        return ""


def _finetune_form(project: Project, data: dict | None = None) -> FinetuneForm:
    sets = list(training_sets_of_project(project).values_list("name", flat=True))
    teachers = [judge.name for judge in judges_for_project(project) if not judge.is_ensemble]
    lora = LoraSettings().as_dict()
    cross = CrossEncoderSettings().as_dict()
    initial = ({name: lora[name] for name in FinetuneForm.SETTINGS} | {"base_model": _base_model_default()}
               | {name: cross[field] for name, field in FinetuneForm.CROSSENCODER_SETTINGS.items()})
    return FinetuneForm(data, training_sets=sets, teachers=teachers, initial=initial)


def _page_context(request: HttpRequest, project: Project, **answer: object) -> dict:
    """The whole page; `answer` holds what a form's request adds or replaces (a bound form, a refusal)."""
    role = request_role(request, project)
    context = {**_jobs_context(project, role), "training_sets": list(training_sets_of_project(project))}
    if context["is_admin"]:
        context |= {"sample_form": answer.pop("sample_form", None) or _sample_form(project),
                    "import_form": answer.pop("import_form", None) or TrainingSetImportForm(),
                    "inline_max": settings.TRAINING_SET_INLINE_MAX_BYTES,
                    "finetune_form": answer.pop("finetune_form", None) or _finetune_form(project),
                    "scorers": [judge.name for judge in judges_for_project(project) if not judge.is_imported]}
    return {**context, **answer}


def _page(request: HttpRequest, project: Project, status: int = 200, **answer: object) -> HttpResponse:
    return render(request, "labeling/finetune.html", _page_context(request, project, **answer), status=status)


def _back(project: Project) -> HttpResponse:
    return redirect("labeling:finetune", slug=project.slug)


@login_required
@project_view()
def finetune_page(request: HttpRequest, project: Project) -> HttpResponse:
    if htmx_partial(request):
        # The jobs poll while one is unfinished; once none is, the page reloads to show the comparison.
        context = _jobs_context(project, request_role(request, project))
        response = render(request, "labeling/finetune.html#finetune-jobs", context)
        if not context["any_unfinished"]:
            response["HX-Refresh"] = "true"
        return response
    return _page(request, project)


@login_required
@require_POST
@project_view(SETS_ADMIN)
def training_set_sample_view(request: HttpRequest, project: Project) -> HttpResponse:
    form = _sample_form(project, request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            run = run_by_name(project=project, name=data["run"])
            training_set = training_set_create(project=project, name=data["name"], run=run, top=data["top"],
                                               inside=data["inside"], outside=data["outside"], seed=data["seed"],
                                               held_out=data["held_out"], user=request.user)
        except DomainError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Stored training set {training_set.name} sampled from run {run.name}; its "
                                      "pairs are in the pool for the teacher to judge. "
                                      + sample_summary(training_set.parameters))
            return _back(project)
    return _page(request, project, status=400, sample_form=form)


@csrf_protect
def _import(request: HttpRequest, project: Project) -> HttpResponse:
    form = TrainingSetImportForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        try:
            training_set = training_set_import_upload(
                project=project, name=data["name"], upload=data["file"], held_out=data["held_out"], seed=data["seed"],
                skip_bad=data["skip_bad"], user=request.user)
        except DomainError as exc:
            form.add_error(None, str(exc))
        else:
            if isinstance(training_set, BundleImportJob):
                messages.info(request, f"{training_set.file_name} is too large to read here: import {training_set.id} "
                                       f"stores it as training set {training_set.training_set_name} on a worker "
                                       "(follow it on the Import page).")
                return _back(project)
            skipped = training_set.parameters.get("skipped", 0)
            messages.success(request, f"Imported training set {training_set.name} from {training_set.source}"
                                      + (f" ({skipped:,} bad rows left out)." if skipped else "."))
            return _back(project)
    return _page(request, project, status=400, import_form=form)


# CSRF is checked by _import, after the size: the middleware's check would read the whole body first.
@csrf_exempt
@login_required
@require_POST
@project_view(SETS_ADMIN)
def training_set_import_view(request: HttpRequest, project: Project) -> HttpResponse:
    refusal = training_set_upload_refusal(content_length=request.META.get("CONTENT_LENGTH"))
    if refusal is not None:
        return _page(request, project, status=413, import_refusal=refusal)
    return _import(request, project)


@login_required
@require_POST
@project_view(SETS_ADMIN)
def training_set_delete_view(request: HttpRequest, project: Project, training_set: str) -> HttpResponse:
    found = training_set_by_name(project, training_set)
    try:
        training_set_delete(training_set=found)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"Deleted training set {found.name}; the pairs it pooled stay.")
    return _back(project)


@login_required
@require_POST
@project_view(SETS_ADMIN)
def training_set_score_view(request: HttpRequest, project: Project, training_set: str) -> HttpResponse:
    """The teacher judges the set's pairs it has not answered: an ordinary scoring job."""
    found = training_set_by_name(project, training_set)
    try:
        judge = judge_by_name(project=project, name=request.POST.get("judge", ""))
        job, created = training_set_score(training_set=found, judge=judge, user=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        state = "started" if created else "resumed (its running job)"
        messages.info(request, f"Scoring job {job.id} {state}: {judge.name} judges {job.total} pairs of {found.name}.")
    return _back(project)


@login_required
@require_POST
@project_view(admin_to("start a fine-tuning job"))
def finetune_start_view(request: HttpRequest, project: Project) -> HttpResponse:
    form = _finetune_form(project, request.POST)
    if form.is_valid() and request.POST.get("dry_run"):
        # "Estimate time": a worker on the fine-tuning queue says what the job would take there (it may load the
        # base model and time a few steps); nothing is started, and this request loads no model.
        data = form.cleaned_data
        try:
            training_set_by_name(project, data["training_set"])
            if data["teacher"]:
                judge_by_name(project=project, name=data["teacher"])
            row = estimate_request(project=project, kind=Estimate.Kind.FINETUNE, user=request.user, arguments={
                "training_set": data["training_set"], "teacher": data["teacher"] or None, **form.service_arguments()})
        except DomainError as exc:
            form.add_error(None, str(exc))
            return _page(request, project, status=400, finetune_form=form)
        return _page(request, project, finetune_form=form, finetune_estimate=estimate_card(row))
    if form.is_valid():
        data = form.cleaned_data
        try:
            job = finetune_request(
                project=project, training_set=training_set_by_name(project, data["training_set"]),
                teacher=judge_by_name(project=project, name=data["teacher"]) if data["teacher"] else None,
                student_name=data["student_name"], user=request.user, **form.service_arguments())
        except DomainError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Job {job.id}: fine-tuning {job.student_name} on {job.examples:,} examples "
                                      f"({job.total_steps:,} steps) queued for the workers.")
            return _back(project)
    return _page(request, project, status=400, finetune_form=form)


@login_required
@require_POST
@project_view(admin_to("cancel a fine-tuning job"))
def finetune_cancel_view(request: HttpRequest, project: Project, finetune_job_id: int) -> HttpResponse:
    job = finetune_cancel(job=finetune_job_of_project(project=project, job_id=finetune_job_id))
    messages.info(request, f"Job {job.id} is {job.status}.")
    return _back(project)


@login_required
@require_POST
@project_view(admin_to("resume a fine-tuning job"))
def finetune_resume_view(request: HttpRequest, project: Project, finetune_job_id: int) -> HttpResponse:
    job = finetune_job_of_project(project=project, job_id=finetune_job_id)
    try:
        finetune_resume(job=job)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Job {job.id} queued again: a worker goes on from step {job.checkpoint_step}.")
    return _back(project)


@login_required
@require_POST
@project_view(admin_to("score the pool with a student"))
def finetune_score_pool_view(request: HttpRequest, project: Project, finetune_job_id: int) -> HttpResponse:
    job = finetune_job_of_project(project=project, job_id=finetune_job_id)
    try:
        scoring, created = score_pool(job=job, user=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        verb = "started" if created else "was running already and goes on"
        messages.success(request, f"Scoring job {scoring.id} {verb}: {job.student_name} scores every pair of the "
                                  "pool it has not judged.")
    return _back(project)


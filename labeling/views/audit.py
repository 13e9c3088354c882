"""HTML pages: robustness audits (docs/robustness.md). A judge's Robustness page shows its latest report of each
kind and its audits; project admins estimate an audit (the dry run) and then start it. An audit's page follows its
progress and shows its report; a run's Robustness page shows its multi-condition report. The reports are made of
the judges' P on gold pairs: only members who may read the validation report see them (blind first)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from labeling.forms import PERTURBATION_TEST_LABELS, MulticonditionAuditForm, PerturbationAuditForm
from labeling.models import AuditJob, Judge, Membership, Project
from labeling.selectors.audit import audit_of_project, audit_row, audits_of_judge, latest_reports
from labeling.selectors.audit_multicondition import run_multicondition_report
from labeling.selectors.lookups import judge_by_name, run_of_project
from labeling.selectors.projects import READ_REPORTS, admin_to
from labeling.services.audit import AuditError, audit_cancel, audit_estimate, audit_judge_config, audit_request
from labeling.views.access import project_view, request_role
from labeling.views.audit_report import multicondition_tasks, parameters_text
from labeling.views.htmx import htmx_partial

FORMS = {AuditJob.Kind.PERTURBATION: PerturbationAuditForm, AuditJob.Kind.MULTICONDITION: MulticonditionAuditForm}


def _form(kind: str, data: dict | None = None) -> PerturbationAuditForm | MulticonditionAuditForm:
    # Prefixed: both forms are on one page and both have a seed.
    return FORMS[kind](data, prefix=kind)


def report_context(job: AuditJob | None) -> dict:
    """What the kind's report partial (`report_template`) needs of a done audit's report."""
    if job is None or not job.report:
        return {}
    if job.kind == AuditJob.Kind.MULTICONDITION:
        return {"report": job.report, "tasks": multicondition_tasks(job.report),
                "report_template": "labeling/_audit_multicondition_report.html"}
    if job.kind == AuditJob.Kind.BEYOND_POOL:
        return {"report": job.report, "report_template": "labeling/_audit_beyond_pool_report.html"}
    return {"report": job.report, "test_labels": PERTURBATION_TEST_LABELS,
            "report_template": "labeling/_audit_perturbation_report.html"}


def _audits_context(request: HttpRequest, project: Project, judge: Judge) -> dict:
    is_admin = request_role(request, project) == Membership.Role.ADMIN
    rows = audits_of_judge(judge, show_errors=is_admin)
    return {"project": project, "judge": judge, "is_admin": is_admin,
            "audits": [{"row": row, "parameters": parameters_text(row.job.parameters)} for row in rows],
            "any_unfinished": any(row.unfinished for row in rows)}


def _page_context(request: HttpRequest, project: Project, judge: Judge, **answer: object) -> dict:
    """The whole page; `answer` holds a bound form, its estimate or its error in place of the blank form."""
    context = _audits_context(request, project, judge)
    latest = latest_reports(judge)
    context["reports"] = [{"job": job, **report_context(job)} for job in latest.values()]
    try:
        audit_judge_config(judge)
    except AuditError as exc:
        context["unauditable"] = str(exc)
    if context["is_admin"] and "unauditable" not in context:
        context["cards"] = [answer.get(kind) or {"kind": kind, "form": _form(kind)} for kind in FORMS]
    return context


def _estimate_card(project: Project, judge: Judge, kind: str, data: dict) -> dict:
    """The form `kind` bound to `data`, with its dry-run estimate or the reason there is none."""
    form = _form(kind, data)
    card: dict = {"kind": kind, "form": form}
    if form.is_valid():
        try:
            card["estimate"] = audit_estimate(project=project, judge=judge, kind=kind, parameters=form.parameters())
        except AuditError as exc:
            form.add_error(None, str(exc))
        else:
            # The Start form repeats the estimated settings as hidden inputs, without the fields' ids (an id twice in
            # the page would also make htmx carry the visible field's attributes over to the hidden one).
            card["hidden"] = [(form.add_prefix(name), item) for name, value in form.cleaned_data.items()
                              for item in (value if isinstance(value, list) else [value])]
    return card


@login_required
@project_view(READ_REPORTS)
def judge_robustness(request: HttpRequest, project: Project, judge: str) -> HttpResponse:
    """GET with `kind` (and that form's fields): the form with its estimate (admins); for htmx, the estimate alone
    (swapped in under the form, which keeps what was typed)."""
    found = judge_by_name(project=project, name=judge)
    kind = request.GET.get("kind")
    if kind is not None:
        if kind not in FORMS:
            return redirect("labeling:judge_robustness", slug=project.slug, judge=found.name)
        is_admin = request_role(request, project) == Membership.Role.ADMIN
        card = _estimate_card(project, found, kind, request.GET) if is_admin else None
        if htmx_partial(request) and card is not None:
            return render(request, "labeling/audit_robustness.html#audit-estimate",
                          {"project": project, "judge": found, "card": card})
        return render(request, "labeling/audit_robustness.html",
                      _page_context(request, project, found, **({kind: card} if card else {})))
    if htmx_partial(request):
        # The audits poll while one is unfinished; once none is, the page reloads to show the new report.
        context = _audits_context(request, project, found)
        response = render(request, "labeling/audit_robustness.html#audits", context)
        if not context["any_unfinished"]:
            response["HX-Refresh"] = "true"
        return response
    return render(request, "labeling/audit_robustness.html", _page_context(request, project, found))


@login_required
@require_POST
@project_view(admin_to("start an audit"))
def audit_start_view(request: HttpRequest, project: Project, judge: str) -> HttpResponse:
    found = judge_by_name(project=project, name=judge)
    kind = request.POST.get("kind", "")
    if kind not in FORMS:
        messages.error(request, f"Choose the kind of audit: {' or '.join(FORMS)}.")
        return render(request, "labeling/audit_robustness.html", _page_context(request, project, found), status=400)
    form = _form(kind, request.POST)
    if form.is_valid():
        try:
            job = audit_request(project=project, judge=found, kind=kind, parameters=form.parameters(),
                                user=request.user)
        except AuditError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Audit {job.id}: {job.total:,} probes queued for {found.name}.")
            return redirect("labeling:audit_detail", slug=project.slug, audit_id=job.id)
    return render(request, "labeling/audit_robustness.html",
                  _page_context(request, project, found, **{kind: {"kind": kind, "form": form, "started": True}}),
                  status=400)


@login_required
@project_view(READ_REPORTS)
def audit_detail(request: HttpRequest, project: Project, audit_id: int) -> HttpResponse:
    """The audit's progress, polled while it runs (the partial stops asking once it is finished), then its
    report."""
    job = audit_of_project(project=project, audit_id=audit_id)
    is_admin = request_role(request, project) == Membership.Role.ADMIN
    context = {"project": project, "judge": job.judge, "row": audit_row(job, show_errors=is_admin),
               "parameters": parameters_text(job.parameters), "is_admin": is_admin, **report_context(job)}
    if htmx_partial(request):
        return render(request, "labeling/audit_detail.html#audit-body", context)
    return render(request, "labeling/audit_detail.html", context)


@login_required
@require_POST
@project_view(admin_to("cancel an audit"))
def audit_cancel_view(request: HttpRequest, project: Project, audit_id: int) -> HttpResponse:
    job = audit_cancel(job=audit_of_project(project=project, audit_id=audit_id))
    messages.info(request, f"Audit {job.id} is {job.status}.")
    return redirect("labeling:audit_detail", slug=project.slug, audit_id=job.id)


@login_required
@project_view(READ_REPORTS)
def run_robustness(request: HttpRequest, project: Project, run_id: int) -> HttpResponse:
    """The run's multi-condition report, computed now from its ranks (no model is asked), or why there is none."""
    run = run_of_project(project=project, run_id=run_id)
    context: dict = {"project": project, "run": run}
    try:
        report = run_multicondition_report(run)
    except AuditError as exc:
        context["unavailable"] = str(exc)
    else:
        context |= {"report": report, "tasks": multicondition_tasks(report)}
    return render(request, "labeling/audit_run_robustness.html", context)

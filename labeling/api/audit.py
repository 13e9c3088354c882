"""The API of robustness audits (docs/robustness.md): a judge's audits (list; start one, or its dry-run estimate),
one audit with its progress and report, and a run's multi-condition report. The same services and selectors as the
Robustness pages and the audit_judge / audit_multicondition commands. The reports are made of the judges' P on gold
pairs: reading them follows blind first (READ_REPORTS), starting an audit is for project admins."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from labeling.api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from labeling.models import AuditJob, Membership, Project
from labeling.selectors.audit import AuditRow, audit_of_project, audit_row, audits_of_judge
from labeling.selectors.audit_multicondition import run_multicondition_report
from labeling.selectors.lookups import judge_by_name, run_of_project
from labeling.selectors.projects import READ_REPORTS, admin_to, project_for_user, project_role
from labeling.services.audit import AuditError, AuditEstimate, audit_estimate, audit_request

AUDIT_ADMIN = admin_to("start an audit")


class AuditJobSerializer(serializers.Serializer):
    id = StrictIntegerField(source="job.id")
    url = serializers.SerializerMethodField(help_text="this audit: poll it until finished_at is set")
    kind = serializers.ChoiceField(source="job.kind", choices=AuditJob.Kind.choices)
    judge = StrictCharField(source="job.judge.name")
    parameters = serializers.JSONField(source="job.parameters", help_text="as the kind's service filled them in")
    status = StrictCharField(source="job.status")
    total = StrictIntegerField(source="job.total", help_text="probes to score")
    done = StrictIntegerField(source="job.done", help_text="probes scored")
    progress = StrictFloatField(source="job.progress", help_text="0 to 1")
    calls = StrictIntegerField(source="job.calls", help_text="model calls made")
    prompt_tokens = StrictIntegerField(source="job.prompt_tokens", allow_null=True)
    completion_tokens = StrictIntegerField(source="job.completion_tokens", allow_null=True)
    cost_usd = StrictFloatField(allow_null=True, help_text="the tokens at the judge's prices (null: no prices)")
    verdict = serializers.SerializerMethodField(help_text="a done perturbation audit's overall verdict")
    error = StrictCharField(help_text="why it failed: for project admins; others a generic text")
    attempts = StrictIntegerField(source="job.attempts")
    requested_by = StrictCharField(source="job.requested_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField(source="job.created_at")
    started_at = serializers.DateTimeField(source="job.started_at", allow_null=True)
    finished_at = serializers.DateTimeField(source="job.finished_at", allow_null=True)

    def get_url(self, row: AuditRow) -> str:
        return reverse("api:audit-detail", kwargs={"slug": row.job.project.slug, "audit_id": row.job.id},
                       request=self.context.get("request"))

    def get_verdict(self, row: AuditRow) -> str | None:
        return row.job.report.get("verdict") if row.job.report else None


class AuditJobDetailSerializer(AuditJobSerializer):
    report = serializers.JSONField(source="job.report", help_text="the kind's report once done ({} before); the "
                                                                  "shapes are in docs/robustness.md")


class AuditStartSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=AuditJob.Kind.choices)
    parameters = serializers.DictField(required=False, default=dict,
                                       help_text="perturbation: sample, seed, tests; multicondition: pads, filler; "
                                                 "beyond_pool: sample, seed, runs (the rest keep their defaults)")
    dry_run = StrictBooleanField(default=False, help_text="answer the estimate; start nothing")


class AuditEstimateSerializer(serializers.Serializer):
    probes = StrictIntegerField(help_text="prompts the judge would be asked")
    sampled_probes = StrictIntegerField(help_text="of them, asked with sampling on (self-consistency)")
    calls = StrictIntegerField(source="tokens.calls", allow_null=True, default=None)
    prompt_tokens = StrictIntegerField(source="tokens.prompt_tokens", allow_null=True, default=None)
    completion_tokens = StrictIntegerField(source="tokens.completion_tokens", allow_null=True, default=None)
    exact_prompt_tokens = StrictBooleanField(source="tokens.exact_prompt_tokens", allow_null=True,
                                             default=None, help_text="counted with the model's tokenizer")
    cost_usd = StrictFloatField(allow_null=True, help_text="null: no prices, or an embedding judge")
    build_seconds = StrictFloatField(help_text="time to build the probes (the variant generation)")
    wall_s = StrictFloatField(allow_null=True, help_text="expected seconds of model calls on one worker process "
                                                         "(null: a remote model not timed yet)")
    speed = StrictCharField(help_text="what the wall time rests on (a measured speed, or a timed probe)")
    parameters = serializers.JSONField(help_text="the parameters the audit would run with")


class RunMulticonditionSerializer(serializers.Serializer):
    run = StrictCharField()
    report = serializers.JSONField(allow_null=True, help_text="the MultiConIR report (null: see `unavailable`)")
    unavailable = StrictCharField(allow_null=True, help_text="why there is no report (no multi-condition "
                                                                   "items, or a metadata problem)")


def _show_errors(request: Request, project: Project) -> bool:
    return project_role(user=request.user, project=project) == Membership.Role.ADMIN


class AuditListView(APIView):
    """GET the judge's audits, newest first (members who may read the reports). POST {"kind", "parameters",
    "dry_run"} (project admins): 202 with the audit, queued for a worker; with "dry_run": true, 200 with what it
    would ask and cost, nothing started; 400 with the reason it cannot run (AuditError)."""

    @extend_schema(responses={200: AuditJobSerializer(many=True)})
    def get(self, request: Request, slug: str, judge: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        found = judge_by_name(project=project, name=judge)
        rows = audits_of_judge(found, show_errors=_show_errors(request, project))
        return Response(AuditJobSerializer(rows, many=True, context={"request": request}).data)

    @extend_schema(request=AuditStartSerializer, responses={
        202: AuditJobSerializer, 200: OpenApiResponse(AuditEstimateSerializer, description="the dry run"),
        400: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str, judge: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        found = judge_by_name(project=project, name=judge)
        # After the judge: a judge the project does not have is a 404 for every member.
        project_for_user(user=request.user, slug=slug, need=AUDIT_ADMIN)
        body = AuditStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data["dry_run"]:
            estimate: AuditEstimate = audit_estimate(project=project, judge=found, kind=data["kind"],
                                                     parameters=data["parameters"])
            return Response(AuditEstimateSerializer(estimate).data)
        job = audit_request(project=project, judge=found, kind=data["kind"], parameters=data["parameters"],
                            user=request.user)
        job.refresh_from_db()  # an eager worker (tests, CELERY_TASK_ALWAYS_EAGER) may have finished it already
        return Response(AuditJobSerializer(audit_row(job, show_errors=True), context={"request": request}).data,
                        status=202)


class AuditDetailView(APIView):
    """One audit: its status, progress and tokens, and its report once done (members who may read the reports)."""

    @extend_schema(responses={200: AuditJobDetailSerializer})
    def get(self, request: Request, slug: str, audit_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        job = audit_of_project(project=project, audit_id=audit_id)
        row = audit_row(job, show_errors=_show_errors(request, project))
        return Response(AuditJobDetailSerializer(row, context={"request": request}).data)


class RunMulticonditionView(APIView):
    """The run's MultiConIR report, computed now from its ranks (no model is asked); `report` is null and
    `unavailable` says why when the project has no multi-condition items (members who may read the reports)."""

    @extend_schema(responses={200: RunMulticonditionSerializer})
    def get(self, request: Request, slug: str, run_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        run = run_of_project(project=project, run_id=run_id)
        try:
            answer = {"run": run.name, "report": run_multicondition_report(run), "unavailable": None}
        except AuditError as exc:
            answer = {"run": run.name, "report": None, "unavailable": str(exc)}
        return Response(RunMulticonditionSerializer(answer).data)

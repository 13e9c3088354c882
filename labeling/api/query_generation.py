"""The API of LLM query generation (DisastIR 3.4): a project's generation jobs (list; start one, or its dry-run
estimate) and one job with its progress and the answers it could not read; cancelling one. The same services as the Systems page's
form and `manage.py generate_queries`. Members read the jobs; project admins start them."""
from __future__ import annotations

from collections.abc import Iterable

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from labeling.api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from labeling.models import Membership, Project, QueryGenerationJob
from labeling.selectors.disclosure import item_disclosure
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import admin_to, project_for_user, project_role
from labeling.selectors.query_generation import (
    QueryGenerationRow,
    query_generation_of_project,
    query_generation_row,
    query_generations,
)
from labeling.services.query_generation import (
    query_generation_cancel,
    query_generation_estimate,
    query_generation_plan,
    query_generation_request,
)
from models_llm.cost import usd_cost
from models_llm.query_generation import INTENTS

GENERATION_ADMIN = admin_to("generate queries")
# A metadata key (not blank, no "="), "=", its value.
WHERE_PATTERN = r"^\s*[^=\s\x00][^=\x00]*=[^\x00]*$"  # DRF refuses a NUL anywhere: the schema says so


class QueryGenerationSerializer(serializers.Serializer):
    """Renders a QueryGenerationRow (labeling.selectors.query_generation): the job as the caller may see it."""

    id = StrictIntegerField(source="job.id")
    url = serializers.SerializerMethodField(help_text="this job: poll it until finished_at is set")
    judge = StrictCharField(source="job.judge.name")
    query_set = StrictCharField(source="job.query_set")
    parameters = serializers.JSONField(help_text="intents, prompts (edits), passages, seed, positive_grade, "
                                                 "selection; experts do not get passages and positive_grade (they "
                                                 "label blind: they tell which pairs the job graded)")
    status = StrictCharField(source="job.status")
    total = StrictIntegerField(source="job.total", help_text="passage x intent units")
    done = StrictIntegerField(source="job.done")
    progress = StrictFloatField(source="job.progress", help_text="0 to 1")
    created = StrictIntegerField(source="job.created", help_text="queries written")
    calls = StrictIntegerField(source="job.calls", help_text="model calls made")
    prompt_tokens = StrictIntegerField(source="job.prompt_tokens", allow_null=True)
    completion_tokens = StrictIntegerField(source="job.completion_tokens", allow_null=True)
    cost_usd = serializers.SerializerMethodField(help_text="the tokens at the judge's prices (null: no prices)")
    problems = serializers.JSONField(help_text="[{passage, intent, stage, error, raw}]: units that gave no query; "
                                               "raw (the model's answer) is empty but for project admins")
    error = StrictCharField(help_text="why it failed; its text for project admins only")
    created_at = serializers.DateTimeField(source="job.created_at")
    finished_at = serializers.DateTimeField(source="job.finished_at", allow_null=True)

    def get_url(self, row: QueryGenerationRow) -> str:
        return reverse("api:query-generation-detail", kwargs={"slug": row.job.project.slug,
                                                              "generation_id": row.job.id},
                       request=self.context.get("request"))

    def get_cost_usd(self, row: QueryGenerationRow) -> float | None:
        job = row.job
        return usd_cost(job.prompt_tokens or 0, job.completion_tokens or 0, job.judge.price_in, job.judge.price_out)


class QueryGenerationStartSerializer(serializers.Serializer):
    judge = StrictCharField(help_text="a generative judge (backend hf or openai)")
    query_set = StrictCharField(help_text="the new query set's name")
    intents = serializers.ListField(child=serializers.ChoiceField(choices=INTENTS), required=False,
                                    help_text="default: all six")
    prompts = serializers.DictField(child=serializers.DictField(child=StrictCharField()), required=False,
                                    help_text='edited prompts {intent: {"need": text, "query": text}}')
    sample = StrictIntegerField(required=False, min_value=1, help_text="draw this many passages at random")
    seed = StrictIntegerField(required=False, default=0)
    where = serializers.RegexField(WHERE_PATTERN, required=False,
                                   help_text="KEY=VALUE: the passages whose metadata has this value")
    passages = serializers.ListField(child=StrictCharField(), required=False, help_text="these passages")
    positive_grade = StrictIntegerField(required=False, allow_null=True, default=None,
                                        help_text="a reference grade for the generated positives (default none)")
    dry_run = StrictBooleanField(default=False, help_text="answer the estimate; start nothing")


class QueryGenerationEstimateSerializer(serializers.Serializer):
    units = StrictIntegerField(help_text="passage x intent units")
    calls = StrictIntegerField(source="tokens.calls")
    prompt_tokens = StrictIntegerField(source="tokens.prompt_tokens")
    completion_tokens = StrictIntegerField(source="tokens.completion_tokens")
    exact_prompt_tokens = StrictBooleanField(source="tokens.exact_prompt_tokens")
    cost_usd = StrictFloatField(allow_null=True, help_text="null: the judge has no prices")


def _data(request: Request, project: Project, jobs: Iterable[QueryGenerationJob]) -> list[dict]:
    """The jobs as the caller may see them (a job spans items the caller has not labelled)."""
    role = project_role(user=request.user, project=project)
    disclosure = item_disclosure(project=project, role=role, labelled=False)
    rows = [query_generation_row(job, show_errors=role == Membership.Role.ADMIN, disclosure=disclosure)
            for job in jobs]
    return QueryGenerationSerializer(rows, many=True, context={"request": request}).data


class QueryGenerationListView(APIView):
    """GET the project's generation jobs, newest first (members). POST (project admins): 202 with the job, queued
    for a worker; with "dry_run": true, 200 with its calls, tokens and cost, nothing asked. 409 when the query set
    exists already; 422 with what cannot be done (a judge that cannot write, passages the project lacks)."""

    @extend_schema(responses={200: QueryGenerationSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        return Response(_data(request, project, query_generations(project)))

    @extend_schema(request=QueryGenerationStartSerializer, responses={
        202: QueryGenerationSerializer,
        200: OpenApiResponse(QueryGenerationEstimateSerializer, description="the dry run"),
        400: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT, 422: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=GENERATION_ADMIN)
        body = QueryGenerationStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        judge = judge_by_name(project=project, name=data["judge"])
        key, _, value = data.get("where", "").partition("=")
        where = (key.strip(), value) if "where" in data else None
        plan = query_generation_plan(project=project, judge=judge, query_set=data["query_set"],
                                     intents=data.get("intents"), prompts=data.get("prompts"),
                                     sample=data.get("sample"), seed=data["seed"], where=where,
                                     passages=data.get("passages"), positive_grade=data["positive_grade"])
        if data["dry_run"]:
            return Response(QueryGenerationEstimateSerializer(query_generation_estimate(project=project,
                                                                                        plan=plan)).data)
        job = query_generation_request(project=project, plan=plan, user=request.user)
        job.refresh_from_db()  # an eager worker (CELERY_TASK_ALWAYS_EAGER) may have finished it already
        return Response(_data(request, project, [job])[0], status=202)


class QueryGenerationDetailView(APIView):
    """One generation job: its status, progress, tokens and the units that gave no query (members; its error and
    the model's unreadable answers for project admins)."""

    @extend_schema(responses={200: QueryGenerationSerializer})
    def get(self, request: Request, slug: str, generation_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        job = query_generation_of_project(project=project, job_id=generation_id)
        return Response(_data(request, project, [job])[0])


class QueryGenerationCancelView(APIView):
    """POST stops a queued or running generation (project admins): 200 with the job, cancelled; a running worker
    stops before its next unit and the queries it wrote stay. A finished job is answered as it is (its status says
    so)."""

    @extend_schema(request=None, responses={200: QueryGenerationSerializer})
    def post(self, request: Request, slug: str, generation_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("cancel a query generation"))
        job = query_generation_cancel(job=query_generation_of_project(project=project, job_id=generation_id))
        return Response(_data(request, project, [job])[0])

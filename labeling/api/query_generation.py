"""The API of LLM query generation (DisastIR 3.4): a project's generation jobs (list; start one, or its dry-run
estimate) and one job with its progress and the answers it could not read; cancelling one. The same services as the Systems page's
form and `manage.py generate_queries`. Members read the jobs; project admins start them."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from labeling.api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from labeling.models import QueryGenerationJob
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import admin_to, project_for_user
from labeling.selectors.query_generation import query_generation_of_project, query_generations
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
WHERE_PATTERN = r"^\s*[^=\s][^=]*=[\s\S]*$"


class QueryGenerationSerializer(serializers.Serializer):
    id = StrictIntegerField()
    url = serializers.SerializerMethodField(help_text="this job: poll it until finished_at is set")
    judge = StrictCharField(source="judge.name")
    query_set = StrictCharField()
    parameters = serializers.JSONField(help_text="intents, prompts (edits), passages, seed, positive_grade, "
                                                 "selection")
    status = StrictCharField()
    total = StrictIntegerField(help_text="passage x intent units")
    done = StrictIntegerField()
    progress = StrictFloatField(help_text="0 to 1")
    created = StrictIntegerField(help_text="queries written")
    calls = StrictIntegerField(help_text="model calls made")
    prompt_tokens = StrictIntegerField(allow_null=True)
    completion_tokens = StrictIntegerField(allow_null=True)
    cost_usd = serializers.SerializerMethodField(help_text="the tokens at the judge's prices (null: no prices)")
    problems = serializers.JSONField(help_text="[{passage, intent, stage, error, raw}]: units that gave no query")
    error = StrictCharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_url(self, job: QueryGenerationJob) -> str:
        return reverse("api:query-generation-detail", kwargs={"slug": job.project.slug, "generation_id": job.id},
                       request=self.context.get("request"))

    def get_cost_usd(self, job: QueryGenerationJob) -> float | None:
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


class QueryGenerationListView(APIView):
    """GET the project's generation jobs, newest first (members). POST (project admins): 202 with the job, queued
    for a worker; with "dry_run": true, 200 with its calls, tokens and cost, nothing asked. 409 when the query set
    exists already; 422 with what cannot be done (a judge that cannot write, passages the project lacks)."""

    @extend_schema(responses={200: QueryGenerationSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        return Response(QueryGenerationSerializer(query_generations(project), many=True,
                                                  context={"request": request}).data)

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
        return Response(QueryGenerationSerializer(job, context={"request": request}).data, status=202)


class QueryGenerationDetailView(APIView):
    """One generation job: its status, progress, tokens and the units that gave no query (members)."""

    @extend_schema(responses={200: QueryGenerationSerializer})
    def get(self, request: Request, slug: str, generation_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        job = query_generation_of_project(project=project, job_id=generation_id)
        return Response(QueryGenerationSerializer(job, context={"request": request}).data)


class QueryGenerationCancelView(APIView):
    """POST stops a queued or running generation (project admins): 200 with the job, cancelled; a running worker
    stops before its next unit and the queries it wrote stay. A finished job is answered as it is (its status says
    so)."""

    @extend_schema(request=None, responses={200: QueryGenerationSerializer})
    def post(self, request: Request, slug: str, generation_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("cancel a query generation"))
        job = query_generation_cancel(job=query_generation_of_project(project=project, job_id=generation_id))
        return Response(QueryGenerationSerializer(job, context={"request": request}).data)

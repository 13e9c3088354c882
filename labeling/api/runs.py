"""The API's write side of retrieval systems: a project's runs (list, upload a TREC run file, delete), its
retrieval jobs (list, start a built-in retriever) and pooling from runs (preview or add). The same services as
the Systems page and the import_run, retrieve and pool commands."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.bundles import BundleImportJobSerializer
from labeling.api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from labeling.exceptions import FieldsRefused, TooLarge
from labeling.models import BundleImportJob, Membership, Project, Run
from labeling.runs_upload import run_import_upload, upload_refusal
from labeling.selectors.disclosure import job_row
from labeling.selectors.lookups import judge_by_name, run_of_project
from labeling.selectors.projects import admin_to, project_for_user, project_role
from labeling.selectors.retrieval_jobs import retrieval_jobs
from labeling.selectors.runs import project_runs, run_by_name
from labeling.services.pooling import PoolPreview, pool_add, pool_preview
from labeling.services.retrieval import (
    DEFAULT_DEPTH,
    DEFAULT_FIRST_DEPTH,
    DEFAULT_KEEP,
    MAX_DEPTH,
    RETRIEVERS,
    retrieval_request,
)
from labeling.services.runs import RunImportError, run_delete

RUN_ADMIN = admin_to("change the project's runs")


class RunSerializer(serializers.ModelSerializer):
    created_by = StrictCharField(source="created_by.username", allow_null=True, default=None)

    class Meta:
        model = Run
        fields = ("id", "name", "kind", "description", "parameters", "source", "created_at", "created_by", "queries",
                  "entries", "depth")


class RunUploadSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200)
    description = StrictCharField(required=False, allow_blank=True, default="")
    file = serializers.FileField(help_text="TREC run file: qid Q0 docid rank score tag per line; .gz is gunzipped")


class RetrievalJobSerializer(serializers.Serializer):
    id = StrictIntegerField(source="job.id")
    retriever = StrictCharField(source="job.retriever")
    name = StrictCharField(source="job.name", help_text="the run it writes")
    parameters = serializers.JSONField(source="job.parameters")
    status = StrictCharField(source="job.status")
    total = StrictIntegerField(source="job.total")
    done = StrictIntegerField(source="job.done")
    progress = StrictFloatField(source="job.progress", help_text="0 to 1")
    error = StrictCharField(help_text="why it failed: for project admins; others a generic text")
    attempts = StrictIntegerField(source="job.attempts")
    created_at = serializers.DateTimeField(source="job.created_at")
    started_at = serializers.DateTimeField(source="job.started_at", allow_null=True)
    finished_at = serializers.DateTimeField(source="job.finished_at", allow_null=True)
    run = StrictCharField(source="job.run.name", allow_null=True, default=None,
                          help_text="the run written (null until done, or once deleted)")


class RerankStageSerializer(serializers.Serializer):
    judge = StrictCharField(help_text="a judge of the project whose model scores pairs here: crossencoder, embedding "
                                      "or hf (openai refused)")
    keep = StrictIntegerField(min_value=1, max_value=MAX_DEPTH,
                              help_text="passages per query kept, by the judge's P; at most the previous stage's")


class CrisisSerializer(serializers.Serializer):
    judge = StrictCharField(help_text="the judge of both re-rankings (crossencoder, embedding or hf)")
    dense_depth = StrictIntegerField(min_value=1, max_value=MAX_DEPTH, required=False,
                                     help_text="passages per query dense retrieval ranks over the filtered corpus "
                                               "(default 200), or dense_fraction of it when smaller")
    dense_fraction = StrictFloatField(required=False, help_text="share of the filtered corpus (default 0.1)")
    final_fraction = StrictFloatField(required=False,
                                      help_text="share of the dense ranking the final re-ranking keeps (default 0.1)")


class RetrievalCreateSerializer(serializers.Serializer):
    retriever = serializers.ChoiceField(choices=RETRIEVERS)
    name = StrictCharField(max_length=200, help_text="the run it writes, new in the project")
    depth = StrictIntegerField(min_value=1, max_value=MAX_DEPTH, required=False, allow_null=True, default=None,
                               help_text=f"bm25, dense: passages per query (default {DEFAULT_DEPTH}); a cascade "
                                         "refuses it")
    use_definition = StrictBooleanField(default=False,
                                        help_text="the query text is the question and its current definition")
    k1 = StrictFloatField(required=False, allow_null=True, default=None,
                          help_text="bm25, cascade: BM25's k1 (default 1.5); dense refuses it")
    b = StrictFloatField(required=False, allow_null=True, default=None,
                         help_text="bm25, cascade: BM25's b (default 0.75); dense refuses it")
    first_depth = StrictIntegerField(min_value=1, max_value=MAX_DEPTH, required=False, allow_null=True, default=None,
                                     help_text=f"cascade: BM25's candidates per query (default {DEFAULT_FIRST_DEPTH}); "
                                               "bm25 and dense refuse it")
    keep = StrictIntegerField(min_value=1, max_value=MAX_DEPTH, required=False, allow_null=True, default=None,
                              help_text=f"cascade: passages per query after dense re-ranking (default {DEFAULT_KEEP}); "
                                        "bm25 and dense refuse it")
    model = StrictCharField(required=False, allow_blank=True, default="",
                            help_text="dense, cascade: an encoder folder under a model root (default MiniLM); bm25 "
                                      "refuses it")
    rerank = serializers.ListField(
        child=RerankStageSerializer(), required=False, default=list,
        help_text="re-ranking stages after the retriever, in order: each scores the previous stage's ranking per query "
                  "with the judge and keeps the `keep` best by P (the run's score: the last stage's P)")
    crisis = CrisisSerializer(
        required=False, allow_null=True, default=None,
        help_text="cascade: run it as the crisis paper's double cascade (preset crisis-double-cascade): BM25's "
                  "first_depth re-ranked by the judge keeping `keep`, the kept passages of all queries searched "
                  "densely, re-ranked by the judge again; each stage's time is recorded in the run's parameters")


class PoolSerializer(serializers.Serializer):
    runs = serializers.ListField(child=StrictCharField(), min_length=1, help_text="run names")
    depth = StrictIntegerField(min_value=1, default=10, help_text="each run's top k per query")
    dry_run = StrictBooleanField(default=False, help_text="preview only: write nothing")
    judge = StrictCharField(required=False, allow_blank=True, default="",
                            help_text="dry run: the judge whose prices give the cost of judging the new pairs; "
                                      "refused without dry_run")


def _is_admin(request: Request, project: Project) -> bool:
    return project_role(user=request.user, project=project) == Membership.Role.ADMIN


class RunListView(APIView):
    """GET the project's runs (any member). POST uploads a TREC run file as a new run (project admins; multipart:
    `name`, `description`, `file`): 201 with the run, or 422 listing each problem as `file:line: what is wrong`
    with nothing stored. A file larger than RUN_UPLOAD_INLINE_MAX_BYTES (a .gz once decompressed) is stored by a
    worker: 202 with its import job (poll its `url`: done with the rows written, or failed with the problems). A
    request over RUN_UPLOAD_MAX_BYTES is refused with 413 before it is read."""

    parser_classes = (MultiPartParser,)

    def initial(self, request: Request, *args, **kwargs) -> None:
        # Before authentication: a session's CSRF check reads the form, and with it the whole file.
        if request.method == "POST" and (refusal := upload_refusal(request._request)):
            raise TooLarge(refusal)
        super().initial(request, *args, **kwargs)

    @extend_schema(responses={200: RunSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        return Response(RunSerializer(project_runs(project).select_related("created_by"), many=True).data)

    @extend_schema(request={"multipart/form-data": RunUploadSerializer},
                   responses={201: RunSerializer, 202: BundleImportJobSerializer,
                              413: OpenApiResponse(description="Over RUN_UPLOAD_MAX_BYTES.")})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=RUN_ADMIN)
        body = RunUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            run = run_import_upload(project=project, upload=data["file"], name=data["name"],
                                    description=data["description"], user=request.user)
        except RunImportError as exc:
            shown, total = exc.problems.shown, exc.problems.total
            raise FieldsRefused({"detail": f"the run file has {total} problem(s)"
                                             + (f"; the first {len(shown)} are listed" if total > len(shown) else ""),
                                   "file": shown}) from None
        if isinstance(run, BundleImportJob):
            run.refresh_from_db()  # an eager worker (tests, CELERY_TASK_ALWAYS_EAGER) may have finished it already
            return Response(BundleImportJobSerializer(run, context={"request": request}).data, status=202)
        return Response(RunSerializer(run).data, status=201)


class RunDetailView(APIView):
    """GET one run (any member). DELETE removes it and its entries (project admins); the pool keeps the pairs
    it brought and their sources."""

    @extend_schema(responses={200: RunSerializer})
    def get(self, request: Request, slug: str, run_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        return Response(RunSerializer(run_of_project(project=project, run_id=run_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str, run_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        run = run_of_project(project=project, run_id=run_id)
        # After the run: a run the project does not have is a 404 for every member.
        project_for_user(user=request.user, slug=slug, need=RUN_ADMIN)
        run_delete(run=run)
        return Response(status=204)


class RetrievalJobListView(APIView):
    """GET the project's retrieval jobs, newest first (any member). POST starts a built-in retriever (project
    admins): 202 with the job, which workers run and which writes the run `name` when done."""

    @extend_schema(responses={200: RetrievalJobSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        rows = retrieval_jobs(project, show_errors=_is_admin(request, project))
        return Response(RetrievalJobSerializer(rows, many=True).data)

    @extend_schema(request=RetrievalCreateSerializer, responses={202: RetrievalJobSerializer})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("start a retriever"))
        body = RetrievalCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        options = {**body.validated_data, "model": body.validated_data["model"] or None,
                   "rerank": [dict(stage) for stage in body.validated_data["rerank"]],
                   "crisis": dict(body.validated_data["crisis"]) if body.validated_data["crisis"] else None}
        job = retrieval_request(project=project, user=request.user, **options)
        return Response(RetrievalJobSerializer(job_row(job, show_errors=True)).data, status=202)


class PoolView(APIView):
    """Pool the union of the named runs' top `depth` per query into the project's pool (project admins). With
    `dry_run`, 200 with the preview (new and existing pairs per query, sources; with `judge`, the cost of judging
    the new pairs) and nothing written; else 201 with the counts written (`pairs`, `pool sources`)."""

    @extend_schema(request=PoolSerializer, responses={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("pool runs"))
        body = PoolSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data["judge"] and not data["dry_run"]:
            # Here, not in a service: only this endpoint answers either a preview or the counts written, so only
            # here would the judge be dropped (manage.py pool prints the priced preview before it writes).
            raise FieldsRefused({"detail": "judge prices the preview of a dry run: pooling answers the counts "
                                           "written, with no cost; ask with dry_run true first, or leave judge out",
                                 "judge": ["goes with dry_run true only"]})
        runs = [run_by_name(project=project, name=name) for name in data["runs"]]
        if not data["dry_run"]:
            written = pool_add(project=project, runs=runs, depth=data["depth"])
            return Response({"dry_run": False, **written}, status=201)
        # A run or judge the project lacks is a 404 (labeling.api.exceptions).
        judge = judge_by_name(project=project, name=data["judge"]) if data["judge"] else None
        preview = pool_preview(project=project, runs=runs, depth=data["depth"], judge=judge)
        return Response({"dry_run": True, **_preview_json(preview)})


def _preview_json(preview: PoolPreview) -> dict:
    cost = preview.cost
    return {
        "new_pairs": preview.new_pairs, "existing": preview.existing, "sources": preview.sources,
        "per_query": [{"query": row.query, "new": row.new, "existing": row.existing} for row in preview.per_query],
        "cost": None if cost is None else {
            "judge": cost.judge.name, "pairs": cost.tokens.pairs, "calls": cost.tokens.calls,
            "prompt_tokens": cost.tokens.prompt_tokens, "completion_tokens": cost.tokens.completion_tokens,
            "cost_usd": cost.cost_usd, "wall_s": cost.wall_s,
            "speed": None if cost.throughput is None else cost.throughput.text,
        },
    }

"""The API's bundle imports: upload a bundle archive into a project (202 with the job and the URL to poll), list
and read the jobs. The same services as the Import page; a worker runs the same import as `import_bundle`."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from labeling.api.fields import StrictBooleanField, StrictCharField
from labeling.exceptions import FieldsRefused, TooLarge
from labeling.models import BundleImportJob
from labeling.names import NameRefused
from labeling.selectors.bundle_imports import bundle_import_of_project, bundle_imports
from labeling.selectors.job_states import job_state
from labeling.selectors.projects import admin_to, project_for_user
from labeling.selectors.query_sets import MAX_SET_CHARS
from labeling.services.bundle_upload import (
    BundleUploadError,
    bundle_import_cancel,
    bundle_import_request,
    bundle_upload_refusal,
)

IMPORT_ADMIN = admin_to("import bundles")


class BundleImportJobSerializer(serializers.ModelSerializer):
    requested_by = StrictCharField(source="requested_by.username", allow_null=True, default=None)
    url = serializers.SerializerMethodField(help_text="this job: poll it until finished_at is set")
    problems = serializers.ListField(child=StrictCharField(),
                                     help_text="'file:line: what is wrong', the first of problems_total")
    state = serializers.SerializerMethodField(help_text="queued (N ahead) while it waits its turn, running, stalled "
                                                        "(no heartbeat for JOB_STALL_SECONDS), or how it ended")

    class Meta:
        model = BundleImportJob
        fields = ("id", "url", "file_name", "size", "all_pairs", "query_set", "run_name", "training_set_name", "status",
                  "state", "stage", "members", "unpacked_bytes", "written", "problems", "problems_total", "error",
                  "attempts", "requested_by",
                  "created_at", "started_at", "heartbeat_at", "finished_at")

    def get_state(self, job: BundleImportJob) -> str:
        return job_state(job).text

    def get_url(self, job: BundleImportJob) -> str:
        return reverse("api:bundle-detail", kwargs={"slug": job.project.slug, "bundle_job_id": job.id},
                       request=self.context.get("request"))


class BundleUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="a .zip or .tar.gz of a bundle folder (docs/bundle-format.md)")
    all_pairs = StrictBooleanField(default=False, help_text="complete the pool to every query x passage")
    query_set = StrictCharField(required=False, default="", allow_blank=True, max_length=MAX_SET_CHARS,
                                help_text="the query set (LVHQ) of the bundle's queries whose metadata names none "
                                          "(import_bundle --query-set); empty: none")


class BundleListView(APIView):
    """GET the project's bundle imports, newest first. POST uploads a bundle archive (multipart: `file`,
    `all_pairs`, `query_set`): 202 with the job, whose `url` to poll says how it ends: done with the rows `written`, or failed
    with each problem as `file:line: what is wrong` and nothing stored. A request over BUNDLE_UPLOAD_MAX_BYTES is
    refused with 413 before it is read. Project admins only."""

    parser_classes = (MultiPartParser,)

    def initial(self, request: Request, *args, **kwargs) -> None:
        # Before authentication: a session's CSRF check reads the form, and with it the whole file.
        if request.method == "POST" and (
            refusal := bundle_upload_refusal(content_length=request._request.META.get("CONTENT_LENGTH"))
        ):
            raise TooLarge(refusal)
        super().initial(request, *args, **kwargs)

    @extend_schema(responses={200: BundleImportJobSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=IMPORT_ADMIN)
        return Response(BundleImportJobSerializer(bundle_imports(project), many=True,
                                                  context={"request": request}).data)

    @extend_schema(request={"multipart/form-data": BundleUploadSerializer},
                   responses={202: BundleImportJobSerializer, 400: OpenApiTypes.OBJECT, 413: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=IMPORT_ADMIN)
        body = BundleUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            job = bundle_import_request(project=project, upload=body.validated_data["file"],
                                        all_pairs=body.validated_data["all_pairs"],
                                        query_set=body.validated_data["query_set"], user=request.user)
        except NameRefused as exc:
            # A set name the schema's string admits but the rule of names refuses: 422, as every refused name.
            raise FieldsRefused({"query_set": [str(exc)]}) from None
        except BundleUploadError as exc:
            if isinstance(exc, TooLarge):
                raise
            raise FieldsRefused({"file": [str(exc)]}) from None  # not a bundle archive: its content is refused
        job.refresh_from_db()  # an eager worker (tests, CELERY_TASK_ALWAYS_EAGER) may have finished it already
        return Response(BundleImportJobSerializer(job, context={"request": request}).data, status=202)


class BundleDetailView(APIView):
    """GET one bundle import: its status and stage, then the rows written or the problems. Project admins only."""

    @extend_schema(responses={200: BundleImportJobSerializer})
    def get(self, request: Request, slug: str, bundle_job_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=IMPORT_ADMIN)
        job = bundle_import_of_project(project=project, job_id=bundle_job_id)
        return Response(BundleImportJobSerializer(job, context={"request": request}).data)


class BundleCancelView(APIView):
    """POST cancels an unfinished bundle import: cancelled, nothing of it stored, the upload removed (a running
    worker stops at its next progress report, or rolls its import back before it commits). 200 with the job; 409
    when it had finished already. Project admins only."""

    @extend_schema(request=None, responses={200: BundleImportJobSerializer})
    def post(self, request: Request, slug: str, bundle_job_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=IMPORT_ADMIN)
        # A finished import is a 409 (BundleImportFinished, labeling.api.exceptions).
        job = bundle_import_cancel(job=bundle_import_of_project(project=project, job_id=bundle_job_id))
        return Response(BundleImportJobSerializer(job, context={"request": request}).data)

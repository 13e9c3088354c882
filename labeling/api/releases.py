"""API of frozen qrels releases (#34): list and freeze (`GET`/`POST /api/projects/S/releases/`), export one byte
for byte as frozen (`GET .../releases/NAME/export/?format=`) and diff it against another (`GET
.../releases/NAME/diff/?against=EARLIER`). Reads follow the qrels export's blind-first rule; freezing is an admin's."""
from __future__ import annotations

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.export import FormatIsTheQrelsFormat
from labeling.api.fields import StrictCharField, StrictFloatField
from labeling.models import QrelsRelease
from labeling.selectors.degenerate import qrels_warning
from labeling.selectors.export import READ_QRELS, QrelsFormat, export_source_parse, utf8_chunks
from labeling.selectors.projects import admin_to, project_for_user
from labeling.selectors.releases import (
    release_before,
    release_by_name,
    release_diff,
    release_file_name,
    release_lines,
    release_verify,
    releases_of,
)
from labeling.services.releases import release_create


def release_json(release: QrelsRelease) -> dict:
    return {"name": release.name, "description": release.description, "source": release.source,
            "threshold": release.threshold, "rule": release.rule or None, "judge": release.judge_name or None,
            "calibrator": release.calibrator,
            "definitions": release.definitions, "relevant_from": release.relevant_from, "pairs": release.pairs,
            "graded": release.graded, "relevant": release.relevant, "queries": release.queries,
            "sha256": release.sha256, "created_at": release.created_at.isoformat(),
            "created_by": release.created_by.get_username() if release.created_by else None}


class ReleaseCreateSerializer(serializers.Serializer):
    name = StrictCharField(help_text="the release's name, unique in the project; a release is never replaced")
    source = StrictCharField(required=False, default="human", help_text="human, judge:NAME or combined:NAME")
    threshold = StrictFloatField(required=False, allow_null=True, default=None,
                                 help_text="judge sources: the P from which a pair is relevant (default 0.5)")
    description = StrictCharField(required=False, default="", allow_blank=True)


class ReleaseListView(APIView):
    """GET: the project's releases, newest first. POST: a project admin freezes the current qrels of a source
    (409: the name is taken); its answer's `warning` says when the source's judge is degenerate (null: it is not)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_QRELS)
        return Response({"releases": [release_json(release) for release in releases_of(project)]})

    @extend_schema(request=ReleaseCreateSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("freeze qrels"))
        body = ReleaseCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        made = release_create(project=project, by=request.user, **body.validated_data)
        frozen = export_source_parse(project=project, source=body.validated_data["source"],
                                     threshold=body.validated_data["threshold"])
        return Response({**release_json(made), "warning": qrels_warning(frozen)}, status=201)


class ReleaseExportView(APIView):
    """The release as TREC, BEIR or JSONL: the bytes it had when it was frozen, checked against its SHA-256."""

    renderer_classes = (JSONRenderer,)
    content_negotiation_class = FormatIsTheQrelsFormat

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=list(QrelsFormat), description="default trec")],
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="trec: the release's lines"),
            (200, "text/tab-separated-values"): OpenApiResponse(OpenApiTypes.STR, description="beir"),
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="jsonl: the stored records"),
        },
    )
    def get(self, request: Request, slug: str, release: str) -> StreamingHttpResponse:
        project = project_for_user(user=request.user, slug=slug, need=READ_QRELS)
        asked = request.query_params.get("format", "trec")
        if asked not in list(QrelsFormat):
            raise ValidationError({"format": [f"one of {', '.join(QrelsFormat)}, got {asked!r}"]})
        found, fmt = release_by_name(project=project, name=release), QrelsFormat(asked)
        release_verify(found)  # before the first byte: a damaged release is an error, not a truncated download
        response = StreamingHttpResponse(utf8_chunks(release_lines(found, fmt, verify=False)),
                                         content_type=fmt.media_type)
        response["Content-Disposition"] = content_disposition_header(True, release_file_name(found, fmt))
        return response


class ReleaseDiffView(APIView):
    """The graded pairs added, removed and whose grade changed from release `against` (default: the one frozen
    just before NAME; 409 for the first) to release NAME, and per query."""

    @extend_schema(parameters=[OpenApiParameter("against", str, description="the earlier release (default: the "
                                                                           "one frozen just before)")],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str, release: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_QRELS)
        later = release_by_name(project=project, name=release)
        other = request.query_params.get("against", "")
        earlier = release_by_name(project=project, name=other) if other else release_before(later)
        return Response(release_diff(earlier, later).as_json())

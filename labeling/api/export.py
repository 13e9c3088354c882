"""The API's qrels download: `GET /api/projects/{slug}/qrels/?format=&source=&threshold=`, the same streamed bytes
as export_qrels and the project page's download."""
from __future__ import annotations

import re

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from labeling.selectors.export import READ_QRELS, QrelsFormat, qrels_request_parse
from labeling.selectors.projects import project_for_user
from labeling.views.export import qrels_download
from models_llm.relevance_rule import is_probability


class FormatIsTheQrelsFormat(DefaultContentNegotiation):
    """`?format=` names the qrels format here, not one of DRF's renderers (which would answer 404 to `trec`): the
    body is the export, and an error is JSON."""

    def select_renderer(self, request: Request, renderers: list[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        return renderers[0], renderers[0].media_type


class QrelsView(APIView):
    """The project's qrels from a grade source, streamed as an attachment named for the project, the source and
    the day. Admins and viewers only: the qrels are the gold grades and judges' P of items experts have not
    labelled (blind first). 400 says what is wrong with `format`, `source` or `threshold`; 422 refuses a
    `threshold` with the human source, which has nothing to apply it to."""

    renderer_classes = (JSONRenderer,)
    content_negotiation_class = FormatIsTheQrelsFormat

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=list(QrelsFormat),
                             description="trec (`qid 0 docid grade`), beir (tsv with a header) or jsonl (every "
                                         "label and judgment per pair); default trec"),
            OpenApiParameter("source", {"type": "string", "pattern": r"^(human|(judge|combined):[^\x00]+)$"},
                             description="human (the gold grades; default), judge:NAME (the judge's "
                                                        "P, calibrated when it has a calibrator, against the "
                                                        "threshold) or combined:NAME (the gold grade where there is "
                                                        "one, else the judge's)"),
            OpenApiParameter("threshold", {"type": "number", "minimum": 0, "maximum": 1},
                             description="judge sources: the P from which a pair is relevant (default 0.5); "
                                         "refused with human (422)"),
        ],
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="trec: the export's lines"),
            (200, "text/tab-separated-values"): OpenApiResponse(OpenApiTypes.STR, description="beir"),
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="jsonl"),
        },
    )
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        project = project_for_user(user=request.user, slug=slug, need=READ_QRELS)
        params = request.query_params
        source, threshold = params.get("source", "human"), params.get("threshold", "")
        # What the schema states is checked here (400); a judge the project lacks is a 404 (ExportSourceNotFound).
        refused = {}
        if params.get("format", "trec") not in list(QrelsFormat):
            refused["format"] = [f"one of {', '.join(QrelsFormat)}, got {params.get('format')!r}"]
        if not re.fullmatch(r"human|(judge|combined):[^\x00]+", source):
            refused["source"] = [f"'human', 'judge:NAME' or 'combined:NAME', got {source!r}"]
        if threshold.strip() and not is_probability(threshold):
            refused["threshold"] = [f"a number from 0 to 1, got {threshold!r}"]
        if refused:
            raise ValidationError(refused)
        # A threshold with the human source is the selector's refusal (422), as on the page and in export_qrels.
        asked = qrels_request_parse(project=project, format=params.get("format", "trec"), source=source,
                                    threshold=threshold)
        return qrels_download(project=project, asked=asked)

"""HTML download of a project's qrels (TREC, BEIR or JSONL from any grade source), streamed: the same lines as
export_qrels and the API, for the members blind first lets read them."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET

from labeling.models import Project
from labeling.selectors.degenerate import qrels_warning
from labeling.selectors.export import (
    READ_QRELS,
    ExportError,
    QrelsRequest,
    qrels_lines,
    qrels_request_parse,
    utf8_chunks,
)
from labeling.views.access import project_view

WARNING_HEADER = "X-Qrels-Warning"


def qrels_download(*, project: Project, asked: QrelsRequest) -> StreamingHttpResponse:
    """The export as a streamed attachment named for the project, the source and today: the page's and the API's
    response alike; from a degenerate judge, with WARNING_HEADER saying so (a file has no other place for it)."""
    lines = qrels_lines(project=project, format=asked.format, source=asked.source)
    response = StreamingHttpResponse(utf8_chunks(lines), content_type=asked.format.media_type)
    name = asked.file_name(project=project, day=timezone.localdate())
    response["Content-Disposition"] = content_disposition_header(True, name)
    warning = qrels_warning(asked.source)
    if warning is not None:
        response[WARNING_HEADER] = warning
    return response


@login_required
@require_GET
@project_view(READ_QRELS)
def qrels_export(request: HttpRequest, project: Project) -> HttpResponse:
    params = request.GET
    try:
        asked = qrels_request_parse(project=project, format=params.get("format", "trec"),
                                    source=params.get("source", "human"), threshold=params.get("threshold", ""))
    except ExportError as exc:
        # Back to the form, which is where the choice was made.
        messages.error(request, f"Export: {exc}")
        return redirect(f"{reverse('labeling:project_detail', args=[project.slug])}#export")
    return qrels_download(project=project, asked=asked)

"""API views of system evaluation: the project's runs under its qrels sources, as `evaluate_runs --json` prints it."""
from __future__ import annotations

import re

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.fields import query_flag
from labeling.selectors.coverage import INCLUDE_PARTIAL
from labeling.selectors.projects import READ_REPORTS, project_for_user
from labeling.selectors.systems import systems_report, systems_report_json
from models_llm.retrieval.evaluation import MEASURES

QRELS_PATTERN = r"(human|(judge|combined|expected):[^\x00]+)"


class SystemsEvaluationView(APIView):
    """Every run of the project under each qrels source (`human`, `judge:NAME`, `combined:NAME`,
    `expected:NAME`): mean and bootstrap interval of each measure, the share of each run the source judged, and
    the agreement of the sources on the ranking of the runs (Kendall's tau, tau_AP, Spearman; partial sources only
    with `include_partial`, and no agreement with fewer than three runs). Admins and viewers
    only: every source is made of gold grades or judges' P of items experts have not labelled (blind first)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("qrels", {"type": "array", "items": {
                "type": "string", "pattern": f"^{QRELS_PATTERN}$"}},
                description="qrels source (repeat; default: all)"),
            OpenApiParameter("measure", str, many=True, enum=list(MEASURES),
                             description="measure (repeat; default: all; judged@10 is always given)"),
            OpenApiParameter("group_by", str, description="query metadata key to break the results down by"),
            OpenApiParameter(INCLUDE_PARTIAL, bool, description="true: compare partial sources too (a judge without "
                             "an ok judgment of every pool pair the runs retrieve to the depth a measure reads, "
                             "see `coverage_by_measure`); by default each is left out of the agreement on the "
                             "measures it is partial on (`left_out_by_measure`; `left_out` for `agreement`)"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        params = request.query_params
        # What the schema states is checked here (400); a judge the project lacks is a 404 (SystemsSourceNotFound).
        refused = {}
        bad = [key for key in params.getlist("qrels") if not re.fullmatch(QRELS_PATTERN, key)]
        if bad:
            refused["qrels"] = [f"'human', 'judge:NAME', 'combined:NAME' or 'expected:NAME', got {bad[0]!r}"]
        unknown = [name for name in params.getlist("measure") if name not in MEASURES]
        if unknown:
            refused["measure"] = [f"unknown measure {unknown[0]!r}: one of {', '.join(MEASURES)}"]
        if refused:
            raise ValidationError(refused)
        include_partial = query_flag(params, INCLUDE_PARTIAL)
        report = systems_report(project=project, sources=params.getlist("qrels") or None,
                                measures=params.getlist("measure") or None, group_by=params.get("group_by") or None,
                                include_partial=include_partial)
        return Response(systems_report_json(report))

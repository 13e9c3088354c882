"""API view of how complete the qrels are (#33), as `manage.py completeness --json` prints it."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.selectors.completeness import completeness_compute, completeness_options
from labeling.selectors.projects import READ_REPORTS, project_for_user


class CompletenessView(APIView):
    """The number of relevant pairs in the pool and in each query, estimated from the judge's calibrated P
    (`model`) and from the random validation sample alone (`design`, Horvitz-Thompson), each with its interval;
    the recall of the expert-verified qrels under each; `drift` where the two intervals do not overlap; and the
    stopping target (P(recall >= target) against 1 - alpha) with the knee rule beside it. Admins and viewers only:
    the estimates are made of gold grades and judges' P (blind first)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("judge", str, description="the judge whose P the model-based estimate sums (default: "
                             "the project's queue judge)"),
            OpenApiParameter("level", float, description="the intervals' level, 0.5 to 0.999 (default 0.9)"),
            OpenApiParameter("target", float, description="the recall target of the stopping rule (default: the project's, else 0.9)"),
            OpenApiParameter("alpha", float, description="the stopping rule's alpha: the target is met when "
                             "P(recall >= target) >= 1 - alpha (default: the project's, 0.1 unless set)"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        params = request.query_params
        options = completeness_options(project=project, judge=params.get("judge"), level=params.get("level"),
                                       target=params.get("target"), alpha=params.get("alpha"))
        return Response(completeness_compute(project=project, options=options).to_dict())

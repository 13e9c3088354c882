"""API view of DIRAS App. M: a judge's re-annotation sample per confusion cell, query and confidence band, and its
agreement-vs-confidence-threshold curves, as `reannotation_sample --json` prints them."""
from __future__ import annotations

import re

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.fields import query_flag
from labeling.selectors.projects import READ_REPORTS, project_for_user
from labeling.selectors.reannotation import (
    DEFAULT_PER_BAND,
    default_reannotation_judge,
    reannotation_json,
    reannotation_report,
)
from models_llm.metrics.reannotation import CELLS

MAX_PER_BAND = 100_000
MAX_SEED = 2**32 - 1


def _unit_number(text: str) -> float | None:
    """`text` as a number strictly between 0 and 1, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 < value < 1.0 else None


class ReannotationView(APIView):
    """DIRAS App. M for judge `judge` (default: the project's first judge with judgments): within each cell of the
    judge-vs-human confusion matrix (judge Yes from P >= `threshold`), per query and confidence band (> 0.9,
    0.7-0.9, < 0.7), `per_band` pairs drawn with `seed`; each cell's size; and the share of agreement and of data
    remaining as the judge's confidence threshold rises (`curves`: judge_yes, judge_no, all, the last with Cohen's
    kappa). Admins and viewers only (judges' P of items experts have not labelled). 400 says what is wrong with a
    parameter; 404 names a judge the project lacks; 422 a threshold outside (0, 1) or a project without judges."""

    @extend_schema(
        parameters=[
            OpenApiParameter("judge", str, description="the judge (default: the first with judgments)"),
            OpenApiParameter("per_band", {"type": "integer", "minimum": 1, "maximum": MAX_PER_BAND},
                             description=f"pairs per cell, query and band (default {DEFAULT_PER_BAND})"),
            OpenApiParameter("seed", {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
                             description="the draw's seed (default 0)"),
            OpenApiParameter("threshold", {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMinimum": True,
                                           "exclusiveMaximum": True},
                             description="the judge says Yes from this P (default 0.5)"),
            OpenApiParameter("cell", str, many=True, enum=list(CELLS.values()), description="only these cells"),
            OpenApiParameter("all_pairs", bool, description="pool pairs nobody graded count as human No"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        params = request.query_params
        refused = {}
        per_band, seed = params.get("per_band", str(DEFAULT_PER_BAND)), params.get("seed", "0")
        threshold = params.get("threshold", "0.5")
        cells = params.getlist("cell")
        if not re.fullmatch(r"[0-9]{1,7}", per_band) or not 1 <= int(per_band) <= MAX_PER_BAND:
            refused["per_band"] = [f"a whole number from 1 to {MAX_PER_BAND}, got {per_band!r}"]
        if not re.fullmatch(r"[0-9]{1,10}", seed) or int(seed) > MAX_SEED:
            refused["seed"] = [f"a whole number from 0 to {MAX_SEED}, got {seed!r}"]
        if _unit_number(threshold) is None:
            refused["threshold"] = [f"a number between 0 and 1 (exclusive), got {threshold!r}"]
        unknown = [cell for cell in cells if cell not in CELLS.values()]
        if unknown:
            refused["cell"] = [f"one of {', '.join(CELLS.values())}, got {unknown[0]!r}"]
        all_pairs = query_flag(params, "all_pairs")
        if refused:
            raise ValidationError(refused)
        judge = params.get("judge") or default_reannotation_judge(project=project)
        found = reannotation_report(project=project, judge=judge, threshold=float(threshold), per_band=int(per_band),
                                    seed=int(seed), cells=tuple(cells) or None, all_pairs=all_pairs)
        return Response(reannotation_json(found))

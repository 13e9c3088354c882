"""API of labelling rounds (#33): the project's rounds with what each bought; admins start the next one."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from labeling.models import LabellingRound
from labeling.selectors.projects import READ_REPORTS, admin_to, project_for_user
from labeling.selectors.rounds import refit_outlook, round_row, round_rows
from labeling.services.rounds import ROUND_RANDOM_FLOOR, ROUND_SHARE_MAX, round_request


class RoundStartSerializer(serializers.Serializer):
    judge = StrictCharField(help_text="the judge whose P orders the uncertain queue (refitted or retrained)")
    budget = StrictIntegerField(help_text="expert labels the round waits for")
    mix = serializers.DictField(child=StrictFloatField(min_value=0, max_value=ROUND_SHARE_MAX), required=False,
                                help_text="targeted strategies and their shares, e.g. {\"uncertain\": 1} (default)")
    random_share = StrictFloatField(required=False, default=ROUND_RANDOM_FLOOR,
                                    help_text=f"the random validation share, at least {ROUND_RANDOM_FLOOR:g}")
    after = serializers.ChoiceField(choices=LabellingRound.After.choices, default=LabellingRound.After.CALIBRATE,
                                    help_text="calibrate: refit the judge's calibrator; student: retrain the judge's "
                                              "cross-encoder student with the experts' labels, then score the pool")
    graded = StrictBooleanField(required=False, default=False,
                                help_text="the round's queues may serve pairs whose gold grade is known already "
                                          "(re-annotation); default: only pairs whose gold is unknown")


class RoundListView(APIView):
    """GET: the project's rounds, oldest first, each with its state and the numbers it measured when its batch was
    in, before and after its refit or retrain (verified relevant, model- and design-based estimates, the verified
    qrels' recall, the judge's AUROC, ECE, kappa and F1 on the random validation sample, the stopping state; the
    reason when it refitted nothing), and `outlook`: what a round can do with each judge before it starts (the
    gold pairs a refit needs and has). Admins and viewers (experts label blind). POST: a project admin starts the
    next round (409 while one is open)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        return Response({"rounds": round_rows(project=project),
                         "outlook": [outlook.as_dict() for outlook in refit_outlook(project=project)]})

    @extend_schema(request=RoundStartSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("start a labelling round"))
        body = RoundStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        started = round_request(project=project, by=request.user, **body.validated_data)
        return Response(round_row(started), status=201)

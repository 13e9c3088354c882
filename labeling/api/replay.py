"""The API of replays (#50): the labelling loop run again on a project whose truth is known, to see what it would
have cost. A project's replays (list; ask for one), one replay with its summary once done (and its runs' states on
request), cancelling and deleting one. The same services as the Replay page and `manage.py replay`. Project admins
only on every route: a replay reads the truth, which experts and viewers never see (blind first)."""
from __future__ import annotations

from collections.abc import Mapping

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from labeling.api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField, query_flag
from labeling.models import ReplayJob
from labeling.selectors.lookups import replay_of_project, replays_of_project
from labeling.selectors.projects import admin_to, project_for_user
from labeling.selectors.replay import REPLAY_TRUTHS
from labeling.services.replay import (
    REPLAY_ALPHA_BOUNDS,
    REPLAY_BATCH_MAX,
    REPLAY_DEFAULT_BATCH,
    REPLAY_DEFAULT_MIXES,
    REPLAY_DEFAULT_ROUNDS,
    REPLAY_DEFAULT_SEEDS,
    REPLAY_MIXES_MAX,
    REPLAY_ROUNDS_MAX,
    REPLAY_SEEDS_MAX,
    REPLAY_SHARE_MAX,
    REPLAY_TARGET_BOUNDS,
    replay_cancel,
    replay_delete,
    replay_request,
)
from models_llm.replay.selection import SELECTION_STRATEGIES

REPLAY_ADMIN = admin_to("replay the labelling loop (a replay reads the truth)")
# labeling.selectors.replay.replay_truth's forms; a release the project lacks is the service's 409.
TRUTH_PATTERN = rf"^({'|'.join(REPLAY_TRUTHS)}|release(-trec)?:[^\x00]+)$"


class ReplayMixSerializer(serializers.Serializer):
    """A queue mix as a round sets it: {strategy: share}, the shares relative to each other."""

    refuses_unknown_fields = True  # to_internal_value below; the schema says additionalProperties: false
    uncertain = StrictFloatField(required=False, min_value=0, max_value=REPLAY_SHARE_MAX,
                                 help_text="the judge's P closest to 0.5 first")
    disagreement = StrictFloatField(required=False, min_value=0, max_value=REPLAY_SHARE_MAX,
                                    help_text="the pairs the project's judges disagree on most first")
    random = StrictFloatField(required=False, min_value=0, max_value=REPLAY_SHARE_MAX,
                              help_text="the project's random order (seed 0) or a seed's")
    stratified = StrictFloatField(required=False, min_value=0, max_value=REPLAY_SHARE_MAX,
                                  help_text="the decile of P with the fewest stratified labels first")

    def to_internal_value(self, data: object) -> dict[str, float]:
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in self.fields)
            if unknown:
                raise serializers.ValidationError(
                    {name: [f"not a strategy: the strategies are {', '.join(SELECTION_STRATEGIES)}"]
                     for name in unknown})
        shares = super().to_internal_value(data)
        return {name: shares[name] for name in data if name in shares}  # in the order asked


class ReplayStartSerializer(serializers.Serializer):
    refuses_unknown_fields = True  # validate() below; the schema says additionalProperties: false
    judges = serializers.ListField(child=StrictCharField(), min_length=1,
                                   help_text="the queue judges replayed, each already scored on the pool")
    mixes = serializers.ListField(child=ReplayMixSerializer(), min_length=1, max_length=REPLAY_MIXES_MAX,
                                  default=lambda: [dict(mix) for mix in REPLAY_DEFAULT_MIXES],
                                  help_text='queue mixes to compare (default [{"uncertain": 80, "random": 20}, '
                                            '{"random": 100}])')
    batch = StrictIntegerField(default=REPLAY_DEFAULT_BATCH, min_value=1, max_value=REPLAY_BATCH_MAX,
                               help_text="labels per round")
    rounds = StrictIntegerField(default=REPLAY_DEFAULT_ROUNDS, min_value=1, max_value=REPLAY_ROUNDS_MAX)
    seeds = StrictIntegerField(default=REPLAY_DEFAULT_SEEDS, min_value=1, max_value=REPLAY_SEEDS_MAX,
                               help_text="seeds 0 to seeds - 1; seed 0 keeps the project's own random order")
    truth = serializers.RegexField(TRUTH_PATTERN, default="reference",
                                   help_text="reference: the reference grades, every pair needing one; trec: pairs "
                                             "without one count as irrelevant; release:NAME, release-trec:NAME: a "
                                             "frozen release's grades, the same two ways")
    refit = StrictBooleanField(default=True, help_text="refit the judge's calibrator after each round, as a round "
                                                       "does (false: keep its raw P)")
    target = StrictFloatField(default=0.9, min_value=REPLAY_TARGET_BOUNDS[0], max_value=REPLAY_TARGET_BOUNDS[1],
                              help_text="the stopping rule's recall target")
    alpha = StrictFloatField(default=0.1, min_value=REPLAY_ALPHA_BOUNDS[0], max_value=REPLAY_ALPHA_BOUNDS[1],
                             help_text="the stopping rule stops when the target is met with probability 1 - alpha")

    def validate(self, attrs: dict) -> dict:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["not a replay field"] for name in unknown})
        return attrs


class ReplaySerializer(serializers.Serializer):
    id = StrictIntegerField()
    url = serializers.SerializerMethodField(help_text="this replay: poll it until finished_at is set")
    status = StrictCharField()
    total = StrictIntegerField(help_text="runs to replay: mixes x judges x seeds")
    done = StrictIntegerField(help_text="runs replayed")
    progress = StrictFloatField(help_text="0 to 1")
    parameters = serializers.JSONField(help_text="judges, mixes, batch, rounds, seeds, truth, refit, target, alpha "
                                                 "as the service checked them")
    error = StrictCharField(help_text="why it failed (empty: it did not)")
    attempts = StrictIntegerField()
    requested_by = StrictCharField(source="requested_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_url(self, job: ReplayJob) -> str:
        return reverse("api:replay-detail", kwargs={"slug": job.project.slug, "replay_id": job.id},
                       request=self.context.get("request"))


class ReplayBandSerializer(serializers.Serializer):
    mean = StrictFloatField(allow_null=True)
    low = StrictFloatField(allow_null=True, help_text="the 10th percentile over the seeds")
    high = StrictFloatField(allow_null=True, help_text="the 90th percentile over the seeds")
    seeds = StrictIntegerField(help_text="seeds that had the measure at this point")


class ReplayReachedSerializer(serializers.Serializer):
    target = StrictFloatField()
    per_seed = serializers.ListField(child=StrictIntegerField(allow_null=True),
                                     help_text="labels spent when it first reached the target (null: not reached)")


class ReplayStopSerializer(serializers.Serializer):
    labels = serializers.ListField(child=StrictIntegerField(allow_null=True),
                                   help_text="per seed, labels spent when the stopping rule first stopped (null: it "
                                             "did not)")
    true_recall = serializers.ListField(child=StrictFloatField(allow_null=True),
                                        help_text="per seed, the verified qrels' true recall there")


class ReplayArmSerializer(serializers.Serializer):
    """One mix and judge over its seeds (models_llm.replay.summary.ArmSummary, as arm_to_dict writes it)."""

    mix = serializers.DictField(child=StrictFloatField())
    judge = StrictCharField()
    seeds = serializers.ListField(child=StrictIntegerField())
    labels = serializers.ListField(child=StrictIntegerField(), help_text="labels spent at each point (mean over seeds)")
    curves = serializers.DictField(child=serializers.ListField(child=ReplayBandSerializer()),
                                   help_text="each measure's band at each point (docs/validation.md)")
    reached = serializers.DictField(child=ReplayReachedSerializer(),
                                    help_text="verified_recall, exported_recall, kappa, kendall_tau: labels to the "
                                              "target")
    stop = ReplayStopSerializer()
    coverage = serializers.DictField(child=StrictFloatField(allow_null=True),
                                     help_text="model, design: the share of points whose interval covered the true R")
    wss95 = StrictFloatField(allow_null=True, help_text="work saved over random order at 95 % recall (null: a seed "
                                                        "did not reach it)")
    pool = StrictIntegerField()


class ReplayDetailSerializer(ReplaySerializer):
    notes = serializers.ListField(child=StrictCharField(), source="result.notes", default=list,
                                  help_text="what the replay leaves out (partial truth, partial judges, runs); empty "
                                            "until the worker has read the project")
    arms = ReplayArmSerializer(many=True, source="result.arms", allow_null=True, default=None,
                               help_text="the summary per mix and judge, once done (null before)")
    runs_compared = serializers.ListField(child=StrictCharField(), source="result.runs_compared", allow_null=True,
                                          default=None, help_text="the runs whose ranking by nDCG@10 the systems "
                                                                  "measures compare, once done (null before)")
    pool = StrictIntegerField(source="result.pool", allow_null=True, default=None,
                              help_text="pairs replayed, once done (null before)")
    runs = serializers.SerializerMethodField(help_text="with ?runs=true, each (mix, judge, seed) run stored so far "
                                                       "with its states round by round (large); else null")

    @extend_schema_field({"type": "array", "items": {"type": "object"}, "nullable": True})
    def get_runs(self, job: ReplayJob) -> list[dict] | None:
        return list(job.result.get("runs", [])) if self.context.get("runs") else None


class ReplayListView(APIView):
    """GET the project's replays, newest first. POST asks for one (project admins): 201 with the replay, queued for a
    bulk worker; poll its `url`. Refused with nothing stored: 400 naming the field the schema refuses, 404 when a
    judge is not the project's, 409 when the project cannot be replayed as asked (a judge that scored none of the
    pool, reference grades missing, a release it lacks: the message says what to do), 422 when the replay would be
    too large, or a mix's shares are all 0 or the same as another mix's."""

    @extend_schema(responses={200: ReplaySerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=REPLAY_ADMIN)
        return Response(ReplaySerializer(replays_of_project(project), many=True, context={"request": request}).data)

    @extend_schema(request=ReplayStartSerializer, responses={201: ReplayDetailSerializer})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=REPLAY_ADMIN)
        body = ReplayStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = replay_request(project=project, by=request.user, **body.validated_data)
        job.refresh_from_db()  # an eager worker (CELERY_TASK_ALWAYS_EAGER) may have finished it already
        return Response(ReplayDetailSerializer(job, context={"request": request}).data, status=201)


class ReplayDetailView(APIView):
    """GET one replay: its status and progress; its notes once the worker has read the project, and its summary once
    done (`arms`: per mix and judge, the curves, the labels to each target, the stop, the coverage, WSS@95); with
    ?runs=true, the stored runs' states too. DELETE removes it (a running one is stopped first); the project is left
    as it was. Project admins only."""

    @extend_schema(parameters=[OpenApiParameter("runs", bool, description="add each run's states (large)")],
                   responses={200: ReplayDetailSerializer})
    def get(self, request: Request, slug: str, replay_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=REPLAY_ADMIN)
        runs = query_flag(request.query_params, "runs")
        job = replay_of_project(project=project, replay_id=replay_id)
        return Response(ReplayDetailSerializer(job, context={"request": request, "runs": runs}).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str, replay_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("delete a replay"))
        replay_delete(job=replay_of_project(project=project, replay_id=replay_id), by=request.user)
        return Response(status=204)


class ReplayCancelView(APIView):
    """POST stops an unfinished replay (project admins): 200 with the replay, cancelled; its worker stops after the
    run it is on, and the runs stored stay (no summary). A finished replay is answered as it is (its status says
    so)."""

    @extend_schema(request=None, responses={200: ReplayDetailSerializer})
    def post(self, request: Request, slug: str, replay_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("cancel a replay"))
        job = replay_cancel(job=replay_of_project(project=project, replay_id=replay_id))
        return Response(ReplayDetailSerializer(job, context={"request": request}).data)

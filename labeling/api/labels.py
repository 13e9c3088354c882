"""API for experts: claim the next item from a queue, submit labels (idempotent by a client key), skip, undo,
and list labels. Experts see only their own labels (blind first); admins and viewers see all."""
from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.fields import (
    IdField,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    query_flag,
)
from labeling.api.views import ProjectScopedListView
from labeling.models import Label, Project
from labeling.models.project import QUEUE_STRATEGIES
from labeling.selectors.disclosure import item_disclosure
from labeling.selectors.labels import label_list
from labeling.selectors.projects import ANNOTATE, project_for_user, project_role, role_require
from labeling.services.labels import (
    MAX_CLIENT_KEY_CHARS,
    MAX_NOTE_CHARS,
    MAX_TIME_SPENT_SECONDS,
    Claim,
    LabelError,
    QueueForbidden,
    item_skip,
    label_submit,
    label_undo,
    queue_next_for_annotator,
)


class ItemQuerySerializer(serializers.Serializer):
    external_id = StrictCharField()
    text = StrictCharField()


class ItemPassageSerializer(serializers.Serializer):
    external_id = StrictCharField()
    title = StrictCharField()
    text = StrictCharField()


class ItemDefinitionSerializer(serializers.Serializer):
    id = StrictIntegerField()
    version = StrictIntegerField()
    text = StrictCharField()


class ItemSerializer(serializers.Serializer):
    """A leased item: what the expert reads, and the lease. `disclosure` in the context: the queue that served it
    only for those blind first lets see it (labeling.selectors.disclosure)."""

    pair_id = StrictIntegerField(source="pair.id")
    queue = serializers.SerializerMethodField(help_text="the queue that served it; null for experts (it tells "
                                                        "where the judge's P lies or that experts disagree)")
    validation_sample = serializers.SerializerMethodField(help_text="served by the random queue; null for experts")
    lease_expires_at = serializers.DateTimeField(source="lease.expires_at")
    query = ItemQuerySerializer(source="pair.query")
    passage = ItemPassageSerializer(source="pair.passage")
    definition = ItemDefinitionSerializer(allow_null=True, help_text="the query's current relevance definition, "
                                          "null when it has none")

    @extend_schema_field(StrictCharField(allow_null=True))
    def get_queue(self, claim: Claim) -> str | None:
        return claim.queue if self.context["disclosure"].queue else None

    @extend_schema_field(StrictBooleanField(allow_null=True))
    def get_validation_sample(self, claim: Claim) -> bool | None:
        return claim.queue == "random" if self.context["disclosure"].queue else None


class LabelInSerializer(serializers.Serializer):
    pair_id = IdField()
    grade = StrictIntegerField()
    note = StrictCharField(required=False, allow_blank=True, default="", trim_whitespace=True,
                           max_length=MAX_NOTE_CHARS)
    unsure = StrictBooleanField(required=False, default=False)
    time_spent_seconds = StrictFloatField(required=False, allow_null=True, default=None, min_value=0,
                                          max_value=MAX_TIME_SPENT_SECONDS)
    client_key = StrictCharField(required=False, allow_blank=True, default="", max_length=MAX_CLIENT_KEY_CHARS)
    definition_id = IdField(required=False, allow_null=True, default=None)


class LabelSerializer(serializers.ModelSerializer):
    """`disclosure` in the context: the queue that served the item only for those blind first lets see it."""

    annotator = StrictCharField(source="annotator.username")
    definition_version = StrictIntegerField(source="definition.version", allow_null=True, default=None)
    current = serializers.SerializerMethodField()
    queue = serializers.SerializerMethodField(help_text="the queue that served the item (empty: none); null for "
                                                        "experts")

    class Meta:
        model = Label
        fields = ["id", "pair_id", "annotator", "grade", "role", "note", "unsure", "queue", "client_key",
                  "definition_version", "time_spent_seconds", "created_at", "undone", "current"]

    def get_current(self, label: Label) -> bool:
        return label.superseded_at is None

    @extend_schema_field(StrictCharField(allow_null=True, allow_blank=True))
    def get_queue(self, label: Label) -> str | None:
        return label.queue if self.context["disclosure"].queue else None


class SkipSerializer(serializers.Serializer):
    pair_id = IdField()


class LabelFilterSerializer(serializers.Serializer):
    """The query parameters of the label list that need checking before they reach a query."""

    pair = IdField(required=False)


def _project_for_annotating(request: Request, slug: str) -> tuple[Project, str | None]:
    """The project and the caller's role in it, looked up once: the access check's role serves the disclosure."""
    project = project_for_user(user=request.user, slug=slug)
    return project, role_require(user=request.user, project=project, need=ANNOTATE)


def _context(project: Project, role: str | None, *, labelled: bool) -> dict:
    return {"disclosure": item_disclosure(project=project, role=role, labelled=labelled)}


class QueueNextView(APIView):
    """Lease the next item for the caller (an expert or admin) and return it with its current definition. An
    item the caller already holds comes back first. 204 when the queue has nothing left for them. Experts get the
    project's mix; only admins may name one queue."""

    @extend_schema(
        parameters=[OpenApiParameter("strategy", str, enum=list(QUEUE_STRATEGIES),
                                     description="one queue, for project admins previewing it (default: the "
                                                 "project's mix); an expert naming one is refused (403)")],
        responses={200: ItemSerializer, 204: None},
    )
    def get(self, request: Request, slug: str) -> Response:
        project, role = _project_for_annotating(request, slug)
        try:
            claim = queue_next_for_annotator(
                project=project, annotator=request.user, strategy=request.query_params.get("strategy")
            )
        except QueueForbidden:
            raise  # an expert naming a queue: 403 (labeling.api.exceptions)
        except LabelError as exc:
            raise ValidationError({"strategy": str(exc)}) from None
        if claim is None:
            return Response(status=204)
        return Response(ItemSerializer(claim, context=_context(project, role, labelled=False)).data)


class QueueSkipView(APIView):
    """Pass on an item: the caller is not given it again."""

    @extend_schema(request=SkipSerializer, responses={204: None})
    def post(self, request: Request, slug: str) -> Response:
        project, _ = _project_for_annotating(request, slug)
        body = SkipSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        # An item not in the project is a 404 (LabelItemNotFound, labeling.api.exceptions).
        item_skip(project=project, annotator=request.user, pair_id=body.validated_data["pair_id"])
        return Response(status=204)


class LabelListView(ProjectScopedListView):
    """GET lists labels, history included (`current` marks the one in force): an expert sees only their own,
    admins and viewers see everyone's; filter by `pair`, `annotator` or `current=true`. POST stores the
    caller's label; with a `client_key`, the same key again returns the stored label (200) instead of
    writing a second one (201)."""

    serializer_class = LabelSerializer

    @extend_schema(parameters=[
        LabelFilterSerializer, OpenApiParameter("annotator", str), OpenApiParameter("current", bool),
    ])
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    def rows(self, project: Project) -> QuerySet[Label]:
        params = self.request.query_params
        filters = LabelFilterSerializer(data=params)
        filters.is_valid(raise_exception=True)
        return label_list(
            project=project, user=self.request.user, role=project_role(user=self.request.user, project=project),
            pair_id=filters.validated_data.get("pair"), annotator=params.get("annotator") or None,
            current=query_flag(params, "current"),
        )

    @extend_schema(request=LabelInSerializer, responses={
        201: LabelSerializer, 200: LabelSerializer,
        409: OpenApiResponse(description="A grade off the project's scale, or a key used for another item.")})
    def post(self, request: Request, slug: str) -> Response:
        project, role = _project_for_annotating(request, slug)
        body = LabelInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        # An item or definition not in the project is a 404, a grade off the scale or a reused key a 409.
        result = label_submit(project=project, annotator=request.user, **body.validated_data)
        return Response(LabelSerializer(result.label, context=_context(project, role, labelled=True)).data,
                        status=201 if result.created else 200)


class LabelUndoView(APIView):
    """Withdraw the caller's most recent label (kept in the history as undone); its item is leased back to
    them. 204 when there is nothing to undo."""

    @extend_schema(request=None, responses={200: LabelSerializer, 204: None})
    def post(self, request: Request, slug: str) -> Response:
        project, role = _project_for_annotating(request, slug)
        undone = label_undo(project=project, annotator=request.user)
        if undone is None:
            return Response(status=204)
        return Response(LabelSerializer(undone, context=_context(project, role, labelled=True)).data)

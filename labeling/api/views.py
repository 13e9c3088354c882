"""API views. Every project lookup goes through project_for_user (labeling.selectors.projects), so a project the
caller may not see is a 404 on every endpoint and absent from the list; the domain's NotFound and Forbidden answer
404 and 403 through labeling.api.exceptions."""
from __future__ import annotations

from dataclasses import asdict

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.exceptions import api_error
from labeling.api.fields import query_flag
from labeling.api.serializers import (
    DefinitionCreateSerializer,
    DefinitionSerializer,
    JudgeCreateSerializer,
    JudgeSerializer,
    PairSerializer,
    PassageSerializer,
    ProjectCreateSerializer,
    ProjectSerializer,
    QuerySerializer,
    ScoringJobCreateSerializer,
    ScoringJobPrioritySerializer,
    ScoringJobSerializer,
)
from labeling.exceptions import FieldsRefused
from labeling.models import Membership, Pair, Passage, Project, Query
from labeling.scale import LabelScale, ScaleError
from labeling.selectors.definition_metrics import judge_metrics_by_definition
from labeling.selectors.definitions import definition_history
from labeling.selectors.disclosure import item_disclosure
from labeling.selectors.lookups import judge_by_name, query_by_external_id, scoring_job_of_project
from labeling.selectors.projects import (
    READ_REPORTS,
    admin_to,
    pairs_for_project,
    passages_for_project,
    project_for_user,
    project_role,
    project_summaries,
    projects_visible_to,
    queries_with_current_definition,
    role_require,
)
from labeling.selectors.scoring import job_progress, jobs_for_project, judge_summary, judges_for_project
from labeling.selectors.validation import (
    ReportOptions,
    ReportOptionsError,
    UnitKeyNotFound,
    report_options,
)
from labeling.selectors.validation_report import validation_cached
from labeling.services.definitions import DefinitionError, definition_save
from labeling.services.judges import judge_create
from labeling.services.projects import (
    PROJECT_CREATE_REFUSED,
    ProjectCreateError,
    ProjectCreateForbidden,
    ProjectTaken,
    may_create_projects,
    project_create,
)
from labeling.services.scoring import scoring_job_priority_set, scoring_request
from labeling.services.validation import validation_compute, validation_result_ensure
from models_llm.metrics.ranking import MAX_CUTOFF


class SlugCursorPagination(CursorPagination):
    ordering = "slug"


class IdCursorPagination(CursorPagination):
    # Ids only grow, so a cursor stays valid while rows are imported; for pairs it is also the pool order.
    ordering = "id"


class ProjectListView(generics.ListAPIView):
    """GET the projects the caller may see (a member's projects; all of them for a superuser), with counts. POST
    creates an empty project (staff; the caller becomes its admin), as the project list's form does: a slug or a
    name another project has (names whatever their case) is a 409 naming it."""

    serializer_class = ProjectSerializer
    pagination_class = SlugCursorPagination

    def get_queryset(self) -> QuerySet[Project]:
        return projects_visible_to(user=self.request.user)

    def list(self, request: Request, *args, **kwargs) -> Response:
        # Counts are computed for the page only, with one grouped query per table.
        page = self.paginate_queryset(self.get_queryset())
        serializer = self.get_serializer(project_summaries(projects=page), many=True)
        return self.get_paginated_response(serializer.data)

    @extend_schema(request=ProjectCreateSerializer, responses={201: ProjectSerializer})
    def post(self, request: Request) -> Response:
        if not may_create_projects(request.user):
            # Before the body: whoever may not create a project is told so, whatever they sent.
            raise ProjectCreateForbidden(PROJECT_CREATE_REFUSED)
        body = ProjectCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            scale = LabelScale.from_json(data["scale"]) if "scale" in data else None
        except ScaleError as exc:
            raise FieldsRefused({"scale": [str(exc)]}) from None
        try:
            project = project_create(by=request.user, name=data["name"], slug=data["slug"], scale=scale,
                                     description=data["description"])
        except ProjectTaken as exc:
            raise api_error(409, "conflict", {field: [message] for field, message in exc.errors.items()}) from None
        except ProjectCreateError as exc:
            raise FieldsRefused({field: [message] for field, message in exc.errors.items()}) from None
        (summary,) = project_summaries(projects=[project])
        return Response(self.get_serializer(summary).data, status=201)


class ProjectDetailView(generics.RetrieveAPIView):
    """One project: its label scale and row counts."""

    serializer_class = ProjectSerializer
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Project]:
        # Read by drf-spectacular for the type of the slug; the request itself goes through get_object.
        return projects_visible_to(user=self.request.user)

    def get_object(self) -> Project:
        return project_for_user(user=self.request.user, slug=self.kwargs["slug"])

    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        (summary,) = project_summaries(projects=[self.get_object()])
        return Response(self.get_serializer(summary).data)


# Base of the lists nested under /projects/<slug>/ (a comment, not a docstring: drf-spectacular would
# copy a docstring into every subclass's description).
class ProjectScopedListView(generics.ListAPIView):
    pagination_class = IdCursorPagination

    def get_project(self) -> Project:
        # Looked up once per request: the queryset and the serializer context both need it.
        if not hasattr(self, "_project"):
            self._project = project_for_user(user=self.request.user, slug=self.kwargs["slug"])
        return self._project

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):
            # Schema generation has no user, so no project: an empty queryset of the listed model, never run.
            return self.get_serializer_class().Meta.model._default_manager.none()
        return self.rows(self.get_project())

    def get_serializer_context(self) -> dict:
        if getattr(self, "swagger_fake_view", False):
            return super().get_serializer_context()
        project = self.get_project()
        role = project_role(user=self.request.user, project=project)
        # A list spans items the caller has not labelled: what the serializers show follows what blind first lets
        # a member see of those.
        return {**super().get_serializer_context(),
                "disclosure": item_disclosure(project=project, role=role, labelled=False)}

    def rows(self, project: Project) -> QuerySet:
        raise NotImplementedError


class QueryListView(ProjectScopedListView):
    """The project's queries, each with its current (newest) relevance definition or null."""

    serializer_class = QuerySerializer

    def rows(self, project: Project) -> QuerySet[Query]:
        return queries_with_current_definition(project=project)


class PassageListView(ProjectScopedListView):
    """The project's passages."""

    serializer_class = PassageSerializer

    def rows(self, project: Project) -> QuerySet[Passage]:
        return passages_for_project(project=project)


@extend_schema(
    parameters=[
        OpenApiParameter("query", str, description="Only the pairs of the query with this external id."),
    ]
)
class PairListView(ProjectScopedListView):
    """The project's candidate pool in pool order, with reference grades (null for experts: they label blind)
    and the systems that found each pair."""

    serializer_class = PairSerializer

    def rows(self, project: Project) -> QuerySet[Pair]:
        return pairs_for_project(project=project, query_external_id=self.request.query_params.get("query"))


# The report options as query parameters: the validation report and the metrics by definition version take them.
REPORT_OPTION_PARAMETERS = [
    OpenApiParameter("all_pairs", bool, description="true: pool pairs nobody graded count as irrelevant (TREC), and "
                     "a judge's pairs without a judgment rank last in its nDCG/MAP (its other metrics are on the "
                     "pairs it judged)"),
    OpenApiParameter("unit_key", str, description="rank within (query, this passage metadata value) units; a key no "
                     "passage has is a 404"),
    # OpenAPI's form style without explode is exactly `cutoffs=5,10,15`.
    OpenApiParameter("cutoffs", {"type": "array", "minItems": 1,
                                 "items": {"type": "integer", "minimum": 1, "maximum": MAX_CUTOFF}},
                     style="form", explode=False, description="k of nDCG@k and MAP@k (default 10)"),
]


def _report_options(request: Request, project: Project) -> ReportOptions:
    """The report options of the query string; a metadata key no passage has is a 404 (UnitKeyNotFound), cut-offs
    that break the schema's bounds a 400."""
    params = request.query_params
    try:
        return report_options(project=project, all_pairs=query_flag(params, "all_pairs"),
                              unit_key=params.get("unit_key"), cutoffs=params.get("cutoffs"))
    except UnitKeyNotFound:
        raise
    except ReportOptionsError as exc:
        raise ValidationError({"cutoffs": [str(exc)]}) from None


class ValidationView(APIView):
    """The project's validation report (LLM judges vs human labels), as `validation_report --json` prints
    it. With the default options from the cache a worker keeps up to date (`stale` says a recomputation is
    pending; computed on the spot when the project has none yet); with `all_pairs`, `unit_key` or `cutoffs`
    computed for this request (`stale` false). Admins and viewers only (experts label blind)."""

    @extend_schema(
        parameters=[OpenApiParameter("judge", str, many=True, description="judge name (repeat; default: all)"),
                    *REPORT_OPTION_PARAMETERS],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        options = _report_options(request, project)
        names = request.query_params.getlist("judge") or None
        if options.is_default:
            result = validation_result_ensure(project=project)
            report, stale = validation_cached(result), result.is_stale
        else:
            known = {judge.name: judge for judge in project.judges.order_by("name")}
            missing = [name for name in names or [] if name not in known]
            if missing:
                raise NotFound(f"project {slug!r} has no judge {missing[0]!r} (its judges: "
                               f"{', '.join(known) or 'none'})")
            judges = list(known.values()) if names is None else [known[name] for name in names]
            report, stale = validation_compute(project=project, judges=judges, options=options), False
        try:
            body = report.for_judges(names)
        except KeyError as exc:
            known = ", ".join(section.name for section in report.judges) or "none"
            raise NotFound(f"project {slug!r} has no judge {exc.args[0]!r} (its judges: {known})") from None
        return Response({**body, "stale": stale})


class JudgeListView(APIView):
    """GET the project's judges. POST creates one (project admins), checked as the page and `add_judge` check it;
    an openai judge names an `endpoint` the operator declared, and any other field (`base_url`, `api_key_env`)
    is refused with 400."""

    @extend_schema(responses={200: JudgeSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        return Response(JudgeSerializer([judge_summary(judge) for judge in judges_for_project(project)],
                                        many=True).data)

    @extend_schema(request=JudgeCreateSerializer, responses={201: JudgeSerializer})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("create a judge"))
        body = JudgeCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        judge = judge_create(project=project, **body.validated_data)
        return Response(JudgeSerializer(judge_summary(judge)).data, status=201)


class ScoringJobListView(APIView):
    """POST starts a scoring job (project admins): `judge`, `scope` (missing, all or selection) and, for a
    selection, `pair_ids`; a `priority` above 1 only for staff (403). GET lists the project's recent jobs with their
    progress."""

    @extend_schema(responses={200: ScoringJobSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        admin = project_role(user=request.user, project=project) == Membership.Role.ADMIN
        jobs = [job_progress(job, show_errors=admin) for job in jobs_for_project(project)]
        return Response(ScoringJobSerializer(jobs, many=True).data)

    @extend_schema(request=ScoringJobCreateSerializer, responses={201: ScoringJobSerializer, 200: ScoringJobSerializer})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("start a scoring job"))
        body = ScoringJobCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        judge = judge_by_name(project=project, name=body.validated_data["judge"])  # a judge it lacks: 404
        job, created = scoring_request(project=project, judge=judge, scope=body.validated_data["scope"],
                                       pair_ids=body.validated_data.get("pair_ids"), user=request.user,
                                       priority=body.validated_data["priority"])
        # 200 with the running job: the judge had one already, and it was resumed rather than doubled.
        return Response(ScoringJobSerializer(job_progress(job, show_errors=True)).data, status=201 if created else 200)


class ScoringJobDetailView(APIView):
    """One scoring job's status and progress (done, failed, pairs/s, ETA)."""

    @extend_schema(responses={200: ScoringJobSerializer})
    def get(self, request: Request, slug: str, job_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        job = scoring_job_of_project(project=project, job_id=job_id)
        admin = project_role(user=request.user, project=project) == Membership.Role.ADMIN
        return Response(ScoringJobSerializer(job_progress(job, show_errors=admin)).data)


class ScoringJobPriorityView(APIView):
    """POST `priority` (1 to 10) gives a running job another part of its project's share of the workers (project
    admins may set 1, only staff more: 403 naming the rule). 200 with the job; 409 when it has ended."""

    @extend_schema(request=ScoringJobPrioritySerializer, responses={200: ScoringJobSerializer})
    def post(self, request: Request, slug: str, job_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("change a job's priority"))
        job = scoring_job_of_project(project=project, job_id=job_id)
        body = ScoringJobPrioritySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = scoring_job_priority_set(job=job, priority=body.validated_data["priority"], by=request.user)
        return Response(ScoringJobSerializer(job_progress(job, show_errors=True)).data)


class DefinitionListView(APIView):
    """A query's relevance definition versions, newest first, LLM drafts included (any member); the current one is
    the newest that is not a draft. POST `text` saves a new version (project admins); an empty text or one
    unchanged from the current version is refused with 400."""

    def _query(self, request: Request, slug: str, query_external_id: str) -> tuple[Project, Query]:
        project = project_for_user(user=request.user, slug=slug)
        return project, query_by_external_id(project=project, external_id=query_external_id)

    @extend_schema(responses={200: DefinitionSerializer(many=True)})
    def get(self, request: Request, slug: str, query_external_id: str) -> Response:
        _, query = self._query(request, slug, query_external_id)
        history = list(definition_history(query=query))
        # LLM drafts are listed but never current: the current version is the newest that is not a draft.
        context = {"current_version": next((d.version for d in history if not d.is_draft), None)}
        return Response(DefinitionSerializer(history, many=True, context=context).data)

    @extend_schema(request=DefinitionCreateSerializer, responses={201: DefinitionSerializer})
    def post(self, request: Request, slug: str, query_external_id: str) -> Response:
        project, query = self._query(request, slug, query_external_id)
        # After the query: a query the project does not have is a 404 for every member.
        role_require(user=request.user, project=project, need=admin_to("change a definition"))
        body = DefinitionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            definition = definition_save(query=query, text=body.validated_data["text"], author=request.user)
        except DefinitionError as exc:
            raise FieldsRefused({"text": [str(exc)]}) from None
        data = DefinitionSerializer(definition, context={"current_version": definition.version}).data
        return Response(data, status=201)


class JudgeMetricsByDefinitionView(APIView):
    """A judge's kappa, AUROC, Brier, ECE, F1, nDCG, MAP and nDCG@k/MAP@k (`at_cutoffs`) against the gold labels
    per relevance-definition version (`by_version`: v1, v2, ... across queries; "none" without a definition)
    and per definition origin (`by_origin`), each on every gold pair its group judged (`gold`) and on the
    `n_common` gold pairs judged under every group of the grouping (`common`): DIRAS Tables 4, 11 and 12. With
    the default options from the validation report's cache, computed with it (`stale` says a recomputation is
    pending); with `all_pairs`, `unit_key` or `cutoffs` computed for this request. Admins and viewers only
    (experts label blind)."""

    @extend_schema(parameters=REPORT_OPTION_PARAMETERS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str, judge: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        found = judge_by_name(project=project, name=judge)
        options = _report_options(request, project)
        if options.is_default:
            result = validation_result_ensure(project=project)
            comparison = validation_cached(result).metrics_by_definition(found.name)
            stale = result.is_stale
        else:
            comparison, stale = judge_metrics_by_definition(judge=found, options=options), False
        return Response({"project": project.slug, **asdict(comparison), "comparable": comparison.comparable,
                         "options": options.as_json(), "stale": stale})

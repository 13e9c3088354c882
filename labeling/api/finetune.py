"""The API of distillation (DIRAS section 3): a project's training sets (list, sample a run, import a DIRAS-layout
file, delete, the instruction-tuning JSONL) and its fine-tuning jobs (list, start, one with its loss curve and the
side-by-side of base model, student and teacher, cancel, resume, have the student score the pool). The same
services as the Fine-tuning page and the training_set and finetune_judge commands."""
from __future__ import annotations

from itertools import chain

from django.conf import settings
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.bundles import BundleImportJobSerializer
from labeling.api.fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from labeling.api.serializers import ScoringJobSerializer
from labeling.exceptions import TooLarge
from labeling.llm_adapter import model_folder
from labeling.models import BundleImportJob, FineTuneJob, Membership, Project, TrainingSet
from labeling.selectors.disclosure import sees_reports
from labeling.selectors.finetune import STUDENT_NAME_MAX_LENGTH, distill_comparison
from labeling.selectors.finetune_diras_sample import DIRAS_INSIDE, DIRAS_OUTSIDE, DIRAS_TOP
from labeling.selectors.finetune_jobs import FineTuneJobRow, finetune_job_of_project, finetune_job_row, finetune_jobs
from labeling.selectors.finetune_training_sets import training_set_by_name, training_set_jsonl, training_sets_of_project
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.projects import READ_REPORTS, admin_to, project_for_user, project_role
from labeling.selectors.runs import run_by_name
from labeling.selectors.scoring import job_progress
from labeling.services.finetune import finetune_cancel, finetune_request, finetune_resume, score_pool
from labeling.services.finetune_training_set_upload import training_set_import_upload
from labeling.services.finetune_training_sets import (
    MAX_HELD_OUT,
    training_set_create,
    training_set_delete,
    training_set_score,
    training_set_upload_refusal,
)
from models_llm.bundled import BundledModelError, smollm2_folder
from models_llm.tokenizers import load_tokenizer

SETS_ADMIN = admin_to("change the project's training sets")
EXPORT_SPLITS = {"train": "train", "held_out": "held_out", "all": None}


def _bundled_student() -> str:
    """The default base model and student template: the bundled SmolLM2 folder."""
    try:
        return str(smollm2_folder(settings.VAR_DIR))
    except BundledModelError as exc:
        raise ValidationError({"detail": f"name a model folder: {exc}"}) from None


def _is_admin(request: Request, project: Project) -> bool:
    return project_role(user=request.user, project=project) == Membership.Role.ADMIN


# --- Serializers ------------------------------------------------------------------------------------------------

class TrainingSetSerializer(serializers.ModelSerializer):
    created_by = StrictCharField(source="created_by.username", allow_null=True, default=None)
    train_count = StrictIntegerField(help_text="examples in the train split")
    held_out_count = StrictIntegerField(help_text="examples held out (the comparison's pairs)")
    top_count = StrictIntegerField(help_text="examples drawn from within the run's top (origin top)")
    random_count = StrictIntegerField(help_text="examples drawn from outside the run's top (origin random)")
    file_count = StrictIntegerField(help_text="examples imported from a file")

    class Meta:
        model = TrainingSet
        fields = ("name", "source", "parameters", "created_at", "created_by", "train_count", "held_out_count",
                  "top_count", "random_count", "file_count")


class TrainingSetCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200)
    run = StrictCharField(required=False, allow_blank=True, default="",
                          help_text="the run to sample (default: the project's newest dense run)")
    top = StrictIntegerField(min_value=1, required=False,
                             help_text=f"T: the top per query, each report's top T when the passages name their "
                                       f"report (default {DIRAS_TOP}, DIRAS's)")
    inside = StrictIntegerField(min_value=0, required=False,
                                help_text=f"N passages per query drawn at random from within the top (default "
                                          f"{DIRAS_INSIDE})")
    outside = StrictIntegerField(min_value=0, required=False,
                                 help_text=f"M passages per query drawn at random from outside the top (default "
                                           f"{DIRAS_OUTSIDE})")
    seed = StrictIntegerField(min_value=0, required=False, help_text="the draw's and the split's seed")
    held_out = StrictFloatField(min_value=0.0, max_value=MAX_HELD_OUT, required=False,
                                help_text="share of the queries held out (default: DIRAS's 11 of 31 questions when "
                                          "the passages name their report, else 0.2)")

    def validate(self, attrs: dict) -> dict:
        if "random" in self.initial_data:
            raise serializers.ValidationError({"random": "renamed: `inside` (drawn within the top `top`) and "
                                                         "`outside` (drawn outside it)"})
        return attrs


class TrainingSetImportSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200)
    file = serializers.FileField(help_text="DIRAS layout: input,output or question,document,guess,confidence (CSV)")
    held_out = StrictFloatField(min_value=0.0, max_value=MAX_HELD_OUT, default=0.2)
    seed = StrictIntegerField(min_value=0, default=0)
    skip_bad = StrictBooleanField(default=False, help_text="leave bad rows out instead of refusing the file")


class AgreementSerializer(serializers.Serializer):
    n = StrictIntegerField()
    auroc = StrictFloatField(allow_null=True)
    ece = StrictFloatField(allow_null=True)
    brier = StrictFloatField(allow_null=True)
    accuracy = StrictFloatField(allow_null=True, help_text="of P >= 0.5")


class JudgeColumnSerializer(serializers.Serializer):
    role = StrictCharField(help_text="base model, student or teacher")
    judge = StrictCharField(source="judge.name", allow_null=True, default=None)
    versus_teacher = AgreementSerializer(allow_null=True, help_text="against the teacher's guess on held-out pairs")
    versus_gold = AgreementSerializer(help_text="against the experts' gold")


class ComparisonSerializer(serializers.Serializer):
    pairs = StrictIntegerField(help_text="held-out pairs all three judged")
    gold_pairs = StrictIntegerField(help_text="gold pairs all three judged")
    columns = JudgeColumnSerializer(many=True)


class FineTuneJobSerializer(serializers.Serializer):
    id = StrictIntegerField(source="job.id")
    training_set = StrictCharField(source="job.training_set.name")
    teacher = StrictCharField(source="job.teacher.name", allow_null=True, default=None,
                              help_text="null: the set's file answers (or the teacher was deleted)")
    student_kind = serializers.ChoiceField(source="job.student_kind", choices=FineTuneJob.StudentKind.choices,
                                           help_text="what the student is")
    base_model = StrictCharField(source="job.base_model")
    student_name = StrictCharField(source="job.student_name")
    student = StrictCharField(source="job.student.name", allow_null=True, default=None,
                              help_text="the judge it made (null until done)")
    hyperparameters = serializers.JSONField(source="job.hyperparameters")
    status = StrictCharField(source="job.status")
    examples = StrictIntegerField(source="job.examples")
    step = StrictIntegerField(source="job.step")
    total_steps = StrictIntegerField(source="job.total_steps")
    progress = StrictFloatField(source="job.progress", help_text="0 to 1")
    eta_s = StrictFloatField(source="job.eta_s", allow_null=True)
    examples_per_s = StrictFloatField(source="job.examples_per_s", allow_null=True)
    last_loss = StrictFloatField(allow_null=True)
    checkpoint_step = StrictIntegerField(source="job.checkpoint_step")
    resumed_from_step = StrictIntegerField(source="job.resumed_from_step", allow_null=True)
    error = StrictCharField(help_text="why it failed: for project admins; others a generic text")
    attempts = StrictIntegerField(source="job.attempts")
    created_at = serializers.DateTimeField(source="job.created_at")
    started_at = serializers.DateTimeField(source="job.started_at", allow_null=True)
    finished_at = serializers.DateTimeField(source="job.finished_at", allow_null=True)


class FineTuneJobDetailSerializer(FineTuneJobSerializer):
    """A job with its loss curve and, for members who may read the reports, the side-by-side (context
    `comparison`)."""

    loss_history = serializers.ListField(source="job.loss_history", child=serializers.ListField(
        child=StrictFloatField()), help_text="[[step, loss], ...]")
    comparison = serializers.SerializerMethodField()

    @extend_schema_field(ComparisonSerializer(allow_null=True))
    def get_comparison(self, row: FineTuneJobRow) -> dict | None:
        comparison = self.context.get("comparison")
        return None if comparison is None else ComparisonSerializer(comparison).data


class FineTuneCreateSerializer(serializers.Serializer):
    training_set = StrictCharField(max_length=200, help_text="the training set's name")
    teacher = StrictCharField(max_length=200, required=False, allow_blank=True, default="",
                              help_text="the judge whose judgments are the answers; a file's set, which holds "
                                        "its answers, refuses one")
    student = serializers.ChoiceField(choices=FineTuneJob.StudentKind.choices, default=FineTuneJob.StudentKind.LORA,
                                      help_text="what the student is (crossencoder: an encoder with a one-logit head)")
    base_model = StrictCharField(max_length=300, required=False, allow_blank=True, default="",
                                 help_text="the base model's folder under a model root (default: the bundled "
                                           "SmolLM2 for lora, all-MiniLM-L6-v2 for crossencoder)")
    student_name = StrictCharField(max_length=STUDENT_NAME_MAX_LENGTH, help_text="the judge it makes")
    hyperparameters = serializers.DictField(required=False, default=dict,
                                            help_text="the student kind's settings, the rest keeping their defaults: "
                                                      "lora: r, alpha, dropout, learning_rate, batch_size, "
                                                      "micro_batch, epochs, max_steps, source_max_length (2048), "
                                                      "target_max_length (512), ... (DIRAS's values; a job shows "
                                                      "truncated_examples once its worker encoded them); crossencoder: learning_rate, warmup_ratio, scheduler, "
                                                      "weight_decay, batch_size, epochs, max_steps, max_length, "
                                                      "save_steps, seed, expert_weight, use_definition, separator")
    device = StrictCharField(max_length=32, required=False, allow_blank=True, default="",
                             help_text="cpu (default), cuda, cuda:1...")


# --- Training sets ------------------------------------------------------------------------------------------------

def _counted(project: Project, training_set: TrainingSet) -> dict:
    return TrainingSetSerializer(training_sets_of_project(project).get(id=training_set.id)).data


class TrainingSetListView(APIView):
    """GET the project's training sets with their examples per split and origin (any member). POST samples a run
    as a new set (project admins; DIRAS's sample: per query `inside` drawn within the run's top `top`, `outside` drawn
    outside it, the pairs pooled for the teacher; the draw's counts are in `parameters`): 201."""

    @extend_schema(responses={200: TrainingSetSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        return Response(TrainingSetSerializer(training_sets_of_project(project), many=True).data)

    @extend_schema(request=TrainingSetCreateSerializer,
                   responses={201: TrainingSetSerializer, 400: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=SETS_ADMIN)
        body = TrainingSetCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        run_name = data.pop("run")
        run = run_by_name(project=project, name=run_name) if run_name else None
        training_set = training_set_create(project=project, run=run, user=request.user, **data)
        return Response(_counted(project, training_set), status=201)


class TrainingSetImportView(APIView):
    """POST a DIRAS-layout CSV as a new training set (project admins; multipart: `name`, `file`, `held_out`,
    `seed`, `skip_bad`): 201, or 422 naming the bad row as `file:line`. A file larger than
    TRAINING_SET_INLINE_MAX_BYTES is stored by a worker: 202 with its import job (poll its `url`: done with the rows
    written, or failed with each bad row and nothing stored; its name, share and seed are checked at once). A request
    over RUN_UPLOAD_MAX_BYTES is refused with 413 before it is read."""

    parser_classes = (MultiPartParser,)

    def initial(self, request: Request, *args, **kwargs) -> None:
        # Before authentication: a session's CSRF check reads the form, and with it the whole file.
        if request.method == "POST" and (refusal := training_set_upload_refusal(
                content_length=request._request.META.get("CONTENT_LENGTH"))):
            raise TooLarge(refusal)
        super().initial(request, *args, **kwargs)

    @extend_schema(request={"multipart/form-data": TrainingSetImportSerializer},
                   responses={201: TrainingSetSerializer, 202: BundleImportJobSerializer, 400: OpenApiTypes.OBJECT,
                              413: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=SETS_ADMIN)
        body = TrainingSetImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        # TooLarge is a 413, a refused file a 422 naming its line (labeling.api.exceptions).
        stored = training_set_import_upload(
            project=project, name=data["name"], upload=data["file"], held_out=data["held_out"], seed=data["seed"],
            skip_bad=data["skip_bad"], user=request.user)
        if isinstance(stored, BundleImportJob):
            stored.refresh_from_db()  # an eager worker (tests, CELERY_TASK_ALWAYS_EAGER) may have finished it already
            return Response(BundleImportJobSerializer(stored, context={"request": request}).data, status=202)
        return Response(_counted(project, stored), status=201)


class TrainingSetDetailView(APIView):
    """DELETE a training set and its examples (project admins); the pairs it pooled stay. 400 while a fine-tuning
    job uses it."""

    @extend_schema(responses={204: None, 400: OpenApiTypes.OBJECT})
    def delete(self, request: Request, slug: str, training_set: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        found = training_set_by_name(project, training_set)
        # After the set: a set the project does not have is a 404 for every member.
        project_for_user(user=request.user, slug=slug, need=SETS_ADMIN)
        training_set_delete(training_set=found)
        return Response(status=204)


class TrainingSetScoreSerializer(serializers.Serializer):
    judge = StrictCharField(help_text="the teacher: a judge of the project that scores")


class TrainingSetScoreView(APIView):
    """POST {"judge": NAME}: the teacher judges the set's pairs it has not answered, as an ordinary scoring job
    (project admins): 201 with the new job, 200 with the judge's running one (resumed, not doubled); 400 when the
    set holds no pairs or the judge answered them all."""

    @extend_schema(request=TrainingSetScoreSerializer, responses={201: ScoringJobSerializer, 200: ScoringJobSerializer,
                                                                  400: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str, training_set: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        found = training_set_by_name(project, training_set)
        project_for_user(user=request.user, slug=slug, need=SETS_ADMIN)
        body = TrainingSetScoreSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        judge = judge_by_name(project=project, name=body.validated_data["judge"])
        scoring, created = training_set_score(training_set=found, judge=judge, user=request.user)
        return Response(ScoringJobSerializer(job_progress(scoring, show_errors=True)).data,
                        status=201 if created else 200)


def _tokenizer(student: str):
    folder = model_folder(student, label="student model")
    try:
        return load_tokenizer(folder)
    except (OSError, ValueError) as exc:
        raise ValidationError({"student": [f"cannot load the student's tokenizer from {student!r}: {exc}"]}) from None


class TrainingSetExportView(APIView):
    """The set's instruction-tuning JSONL in the student's chat template: one line per example {"input", "output",
    "split", "query", "passage"}, pairs answered by the `teacher` judge (those it has not judged ok are left out).
    Admins and viewers only: the answers are a judge's P of items experts have not labelled (blind first)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("student", str, description="the student model's folder, for its chat template "
                                                         "(default: the bundled SmolLM2)"),
            OpenApiParameter("teacher", str, description="the judge whose answers the pairs learn; a file's set, "
                                                         "which holds its answers, refuses one"),
            OpenApiParameter("split", str, enum=list(EXPORT_SPLITS), description="default train"),
        ],
        responses={(200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="JSON lines"),
                   400: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str, training_set: str) -> StreamingHttpResponse:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        found = training_set_by_name(project, training_set)
        params = request.query_params
        split = params.get("split") or "train"
        if split not in EXPORT_SPLITS:
            raise ValidationError({"split": [f"one of {', '.join(EXPORT_SPLITS)}"]})
        teacher = judge_by_name(project=project, name=params["teacher"]) if params.get("teacher") else None
        tokenizer = _tokenizer(params.get("student") or _bundled_student())
        lines = training_set_jsonl(found, tokenizer=tokenizer, teacher=teacher, split=EXPORT_SPLITS[split])
        # The first line is made here, so that a template that cannot hold the answer is a 400, not a cut stream.
        first = next(lines, None)
        body = (f"{line}\n" for line in chain([] if first is None else [first], lines))
        response = StreamingHttpResponse(body, content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = content_disposition_header(True, f"{found.name}-{split}.jsonl")
        return response


# --- Fine-tuning jobs ---------------------------------------------------------------------------------------------

def _detail(request: Request, project: Project, row: FineTuneJobRow) -> dict:
    reads = sees_reports(project=project, role=project_role(user=request.user, project=project))
    comparison = distill_comparison(row.job) if reads else None
    return FineTuneJobDetailSerializer(row, context={"comparison": comparison}).data


class FineTuneJobListView(APIView):
    """GET the project's fine-tuning jobs, newest first (any member). POST starts one (project admins): 202 with the
    job, which a worker runs; 400 with the reason it is refused."""

    @extend_schema(responses={200: FineTuneJobSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        rows = finetune_jobs(project, show_errors=_is_admin(request, project))
        return Response(FineTuneJobSerializer(rows, many=True).data)

    @extend_schema(request=FineTuneCreateSerializer, responses={202: FineTuneJobSerializer, 400: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=admin_to("start a fine-tuning job"))
        body = FineTuneCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        hyperparameters = dict(data["hyperparameters"])
        # A job's stored settings carry its device: a request copied from one may too.
        device = data["device"] or str(hyperparameters.pop("device", "cpu"))
        # A cross-encoder student given no base: the service's bundled all-MiniLM-L6-v2.
        lora = data["student"] == FineTuneJob.StudentKind.LORA
        job = finetune_request(
            project=project, training_set=training_set_by_name(project, data["training_set"]),
            teacher=judge_by_name(project=project, name=data["teacher"]) if data["teacher"] else None,
            base_model=data["base_model"] or (_bundled_student() if lora else ""), student_name=data["student_name"],
            hyperparameters=hyperparameters, device=device, user=request.user, student=data["student"])
        return Response(FineTuneJobSerializer(finetune_job_row(job, show_errors=True)).data, status=202)


class FineTuneJobDetailView(APIView):
    """One fine-tuning job with its loss history and, once its student exists, the side-by-side of base model,
    student and teacher on the held-out and gold pairs (null for members who may not read the reports: blind
    first)."""

    @extend_schema(responses={200: FineTuneJobDetailSerializer})
    def get(self, request: Request, slug: str, finetune_job_id: int) -> Response:
        project = project_for_user(user=request.user, slug=slug)
        job = finetune_job_of_project(project=project, job_id=finetune_job_id)
        return Response(_detail(request, project, finetune_job_row(job, show_errors=_is_admin(request, project))))


def _admin_job(request: Request, slug: str, job_id: int, to: str):
    project = project_for_user(user=request.user, slug=slug)
    job = finetune_job_of_project(project=project, job_id=job_id)
    # After the job: a job the project does not have is a 404 for every member.
    project_for_user(user=request.user, slug=slug, need=admin_to(to))
    return job


class FineTuneCancelView(APIView):
    """Cancel an unfinished job (project admins): its worker stops after the current step and writes nothing. A
    finished job is returned as it is."""

    @extend_schema(request=None, responses={200: FineTuneJobSerializer})
    def post(self, request: Request, slug: str, finetune_job_id: int) -> Response:
        job = _admin_job(request, slug, finetune_job_id, "cancel a fine-tuning job")
        job = finetune_cancel(job=job)
        return Response(FineTuneJobSerializer(finetune_job_row(job, show_errors=True)).data)


class FineTuneResumeView(APIView):
    """Queue an unfinished job again after its worker died (project admins): the next worker goes on from its last
    checkpoint. 400 while its worker still reports, or once it is finished."""

    @extend_schema(request=None, responses={202: FineTuneJobSerializer, 400: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str, finetune_job_id: int) -> Response:
        job = _admin_job(request, slug, finetune_job_id, "resume a fine-tuning job")
        job = finetune_resume(job=job)
        return Response(FineTuneJobSerializer(finetune_job_row(job, show_errors=True)).data, status=202)


class FineTuneScorePoolView(APIView):
    """Have a done job's student score every pair of the pool it has not judged (project admins): 201 with the new
    scoring job, 200 with the student's running one (resumed, not doubled), 400 when there is no student."""

    @extend_schema(request=None, responses={201: ScoringJobSerializer, 200: ScoringJobSerializer,
                                            400: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str, finetune_job_id: int) -> Response:
        job = _admin_job(request, slug, finetune_job_id, "score the pool with a student")
        scoring, created = score_pool(job=job, user=request.user)
        return Response(ScoringJobSerializer(job_progress(scoring, show_errors=True)).data,
                        status=201 if created else 200)


"""Fine-tuning jobs (DIRAS section 3): a worker teaches a base model the teacher's answers on a training set's
train split, keeping checkpoints in Django's storage so that another worker goes on from the last one when this one
dies, and on success stores the student, makes it a judge and a judge of the bare base model, and has both score
the held-out pairs and the gold pairs for the side-by-side with the teacher. Two kinds of student:

- `lora` (DIRAS's): a LoRA adapter of a causal LM (models_llm.finetune.lora); the judge is hf, base + adapter,
  Tok without CoT (DIRAS's best setting).
- `crossencoder` (#32, a CPU's): an encoder with a one-logit head learns the teacher's P as soft targets, and the
  experts' answer where they labelled a pair (models_llm.finetune.crossencoder_student); the judge is crossencoder,
  the stored model folder. Its base judge is the base folder's own head, or for a plain encoder the untrained head
  the student started from (stored too)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError, NotFound
from labeling.llm_adapter import JudgeConfigError, model_folder
from labeling.models import FineTuneJob, Judge, Pair, Project, TrainingExample, TrainingSet
from labeling.names import NameRefused, clean_name
from labeling.selectors.finetune import STUDENT_NAME_MAX_LENGTH, base_judge_name, student_pairs, teacher_examples
from labeling.selectors.finetune_training_sets import teacher_refusal
from labeling.selectors.throughput import Throughput, finetune_throughput
from labeling.selectors.validation import gold_set
from labeling.services.jobs import job_fail, job_free, job_heartbeat, job_scratch, job_take
from labeling.services.judges import judge_create
from labeling.services.rounds_wake import round_wake
from labeling.services.scoring import scoring_request
from labeling.storage_folders import ADAPTER_PREFIX, CHECKPOINT_PREFIX, folder_delete, folder_download, folder_upload
from labeling.tasks import finetune_task
from models_llm.backends.crossencoder import head_problem
from models_llm.bundled import BundledModelError, minilm_folder
from models_llm.finetune.crossencoder_student import (
    CrossEncoderSettings,
    crossencoder_finetune,
    crossencoder_probe,
)
from models_llm.finetune.lora import (
    FinetuneError,
    FinetuneStopped,
    LoraSettings,
    Progress,
    finetune,
    training_probe,
)

# Loss points kept on the job for the curve (the oldest are thinned out beyond this).
MAX_LOSS_POINTS = 2000
# The count of a LoRA job's training examples whose passage was cut to fit the source max length, kept with the
# job's hyperparameters (the worker writes it once the examples are encoded).
TRUNCATED_KEY = "truncated_examples"


class FinetuneJobError(DomainError):
    """A fine-tuning job that cannot be asked for, resumed or cancelled as given (the reason)."""


class FinetuneJobConflict(FinetuneJobError, Conflict):
    """Well formed, but the project's state refuses it (409): a name taken, a finished job resumed, a set with
    nothing to learn, a job with no student yet."""


class BaseModelNotFound(FinetuneJobError, NotFound):
    """No model folder by that name under the operator's model roots (404)."""


def stall_seconds() -> int:
    """A running job whose worker has not reported for this long is taken to be dead: it may be resumed."""
    return settings.FINETUNE_STALL_SECONDS


@transaction.atomic
def finetune_create(
    *, project: Project, training_set: TrainingSet, teacher: Judge | None, base_model: str, student_name: str,
    hyperparameters: dict | None = None, device: str = "cpu", user: AbstractBaseUser | None = None,
    student: str = FineTuneJob.StudentKind.LORA, parent: FineTuneJob | None = None, score_pool: bool = False,
) -> FineTuneJob:
    """Record a fine-tuning request without running it (finetune_run does). `student`: lora or crossencoder
    (`base_model` empty: the bundled all-MiniLM-L6-v2). FinetuneJobError names what is refused: a training set or
    teacher of another project, a teacher for a set imported with its answers, a base folder outside the model
    roots, settings out of range, a student name taken by a judge or by an unfinished job, a train split with no
    answer to learn. `parent`: a done cross-encoder job of the project whose stored student this one goes on from
    (its base model is then the parent's); `score_pool`: when done, the student scores the whole pool."""
    if parent is not None:
        if (parent.project_id != project.id or parent.status != FineTuneJob.Status.DONE or not parent.adapter
                or parent.student_kind != FineTuneJob.StudentKind.CROSSENCODER
                or student != FineTuneJob.StudentKind.CROSSENCODER):
            raise FinetuneJobConflict(f"fine-tuning job {parent.id} has no stored cross-encoder student of this "
                                      "project to go on from")
        base_model = parent.base_model
    if training_set.project_id != project.id or (teacher is not None and teacher.project_id != project.id):
        raise FinetuneJobError("the training set and the teacher must be of this project")
    if (refusal := teacher_refusal(training_set, teacher)) is not None:
        raise FinetuneJobError(refusal)
    try:
        student_name = clean_name(student_name, what="student name", max_length=STUDENT_NAME_MAX_LENGTH)
    except NameRefused as exc:
        raise FinetuneJobError(str(exc)) from None
    base_model = _base_model(student, base_model)
    try:
        folder = model_folder(base_model, label="base model")
    except JudgeConfigError as exc:
        raise BaseModelNotFound(str(exc)) from None
    if not (Path(folder) / "config.json").is_file():
        raise BaseModelNotFound(f"the base model folder {base_model!r} holds no config.json")
    recipe = _settings(student, hyperparameters)
    Project.objects.select_for_update().only("id").get(id=project.id)
    for name in (student_name, base_judge_name(student_name)):
        if Judge.objects.filter(project=project, name=name).exists():
            raise FinetuneJobConflict(f"project {project.slug!r} has a judge named {name!r} already")
    if FineTuneJob.objects.filter(project=project, student_name=student_name, finished_at__isnull=True).exists():
        raise FinetuneJobConflict(f"a fine-tuning job is making a student named {student_name!r} already")
    if teacher is not None and teacher.is_ensemble:
        raise FinetuneJobConflict("the teacher must be a judge with judgments of its own, not a judges ensemble")
    examples = _examples(student, training_set, teacher, recipe)
    if not examples:
        has_pairs = TrainingExample.objects.filter(training_set=training_set, pair__isnull=False).exists()
        hint = (f": score it with {teacher.name!r} first (manage.py score --judge {teacher.name!r} ...)"
                if teacher is not None and has_pairs else ": choose a teacher whose judgments are the answers"
                if has_pairs else "")
        raise FinetuneJobConflict(f"training set {training_set.name!r} has no train example with a teacher's answer"
                               + hint)
    return FineTuneJob.objects.create(
        project=project, training_set=training_set, teacher=teacher, base_model=base_model, requested_by=user,
        student_kind=student, student_name=student_name, hyperparameters={**recipe.as_dict(), "device": device},
        examples=len(examples), total_steps=recipe.total_steps(len(examples)), parent=parent, score_pool=score_pool,
    )


def _base_model(student: str, base_model: str) -> str:
    """The base folder as given; for a cross-encoder student given none, the bundled all-MiniLM-L6-v2."""
    if student not in FineTuneJob.StudentKind.values:
        raise FinetuneJobError(f"unknown student kind {student!r}; one of {', '.join(FineTuneJob.StudentKind.values)}")
    if base_model or student != FineTuneJob.StudentKind.CROSSENCODER:
        if not base_model:
            raise FinetuneJobError("a lora student needs a base model folder")
        return base_model
    try:
        return str(minilm_folder())
    except BundledModelError as exc:
        raise BaseModelNotFound(str(exc)) from None


def _settings(student: str, hyperparameters: dict | None) -> LoraSettings | CrossEncoderSettings:
    """The student kind's settings from the request (FinetuneJobError names one out of range or unknown)."""
    kind = CrossEncoderSettings if student == FineTuneJob.StudentKind.CROSSENCODER else LoraSettings
    try:
        return kind.from_dict(hyperparameters or {})
    except FinetuneError as exc:
        raise FinetuneJobError(str(exc)) from None


def _examples(student: str, training_set: TrainingSet, teacher: Judge | None, recipe) -> list:
    """What the student learns from the train split: chat examples (lora) or soft pairs (crossencoder)."""
    if student == FineTuneJob.StudentKind.CROSSENCODER:
        try:
            return student_pairs(training_set, teacher=teacher, settings=recipe).pairs
        except FinetuneError as exc:
            raise FinetuneJobError(str(exc)) from None
    return teacher_examples(training_set, teacher=teacher).examples


@dataclass(frozen=True)
class FinetuneEstimate:
    """What a fine-tuning would take on this deployment before it starts: its steps and the training examples they
    go through (about examples x epochs), and the wall time on one worker from the base model's measured training
    speed here (labeling/selectors/throughput.py) or, when it never trained here, a timed probe of a few micro
    batches (models_llm.finetune.lora.training_probe)."""

    examples: int
    steps: int
    processed: int  # examples gone through: steps x batch size
    wall_s: float
    throughput: Throughput


def finetune_estimate(
    *, project: Project, training_set: TrainingSet, teacher: Judge | None, base_model: str,
    hyperparameters: dict | None = None, device: str = "cpu", student: str = FineTuneJob.StudentKind.LORA,
) -> FinetuneEstimate:
    """The time `finetune_create` with these arguments would take, before anything is stored or queued."""
    if training_set.project_id != project.id or (teacher is not None and teacher.project_id != project.id):
        raise FinetuneJobError("the training set and the teacher must be of this project")
    if (refusal := teacher_refusal(training_set, teacher)) is not None:
        raise FinetuneJobError(refusal)
    base_model = _base_model(student, base_model)
    try:
        folder = model_folder(base_model, label="base model")
    except JudgeConfigError as exc:
        raise BaseModelNotFound(str(exc)) from None
    recipe = _settings(student, hyperparameters)
    examples = _examples(student, training_set, teacher, recipe)
    if not examples:
        raise FinetuneJobConflict(f"training set {training_set.name!r} has no train example with a teacher's answer")
    steps = recipe.total_steps(len(examples))
    processed = steps * recipe.batch_size
    throughput = finetune_throughput(base_model=base_model, device=device, student_kind=student)
    if throughput is None:
        cross = student == FineTuneJob.StudentKind.CROSSENCODER
        try:
            per_s = (crossencoder_probe(folder, examples, recipe, device) if cross
                     else training_probe(folder, examples, recipe, device))
        except (FinetuneError, OSError, ValueError, RuntimeError) as exc:
            raise FinetuneJobError(f"the base model could not be timed: {type(exc).__name__}: {exc}"[:500]) from None
        throughput = Throughput(per_s=per_s, items=recipe.batch_size * 2 if cross else recipe.micro_batch * 2,
                                device=device, basis="probe training")
    return FinetuneEstimate(examples=len(examples), steps=steps, processed=processed,
                            wall_s=throughput.seconds(processed), throughput=throughput)


@transaction.atomic
def finetune_request(**kwargs) -> FineTuneJob:
    """finetune_create, then a worker runs the job once this commits."""
    job = finetune_create(**kwargs)
    transaction.on_commit(lambda: finetune_task.delay(job.id))
    return job


def finetune_cancel(*, job: FineTuneJob) -> FineTuneJob:
    """Stop a pending or running job: cancelled and finished (a running worker stops after its current step,
    writing no adapter and no judge). A finished job is returned as it is."""
    FineTuneJob.objects.filter(id=job.id, finished_at__isnull=True).update(
        status=FineTuneJob.Status.CANCELLED, finished_at=timezone.now())
    job.refresh_from_db()
    round_wake(finetune_id=job.id)
    return job


def finetune_resume(*, job: FineTuneJob) -> FineTuneJob:
    """Queue an unfinished job again after its worker died: the next worker goes on from its last checkpoint.
    FinetuneJobError while its worker still reports, or when the job is finished."""
    free = job_free(timezone.now(), stall_seconds=stall_seconds())
    if not FineTuneJob.objects.filter(free, id=job.id, finished_at__isnull=True).exists():
        job.refresh_from_db()
        state = "finished" if job.finished_at else f"running (its worker reported at {job.heartbeat_at:%H:%M:%S})"
        raise FinetuneJobConflict(f"fine-tuning job {job.id} is {state}: nothing to resume")
    transaction.on_commit(lambda: finetune_task.delay(job.id))
    return job


# A fine-tuning job whose worker was lost is resumed from its checkpoint until it has been taken this many times.
FINETUNE_MAX_ATTEMPTS = 3


def finetune_resume_lost(*, job: FineTuneJob) -> bool:
    """The sweep's way on for a job whose worker was lost: queued again (finetune_resume), at most
    FINETUNE_MAX_ATTEMPTS times in all; False: give up."""
    if job.attempts >= FINETUNE_MAX_ATTEMPTS:
        return False
    try:
        finetune_resume(job=job)
    except FinetuneJobError:
        return False
    # Released, as a worker leaving it would (no heartbeat): the task just queued may take it (a fresh heartbeat here
    # made the job look held, and the worker left it alone), and the sweep does not queue it again while the GPU
    # queue is busy (the time limit bounds it).
    FineTuneJob.objects.filter(id=job.id).update(heartbeat_at=None)
    return True


def finetune_fail(*, job_id: int, error: str) -> FineTuneJob | None:
    """Give up on a job: failed with the error; its checkpoints are dropped."""
    if job_fail(FineTuneJob.objects.filter(id=job_id), error=error):
        folder_delete(f"{CHECKPOINT_PREFIX}{job_id}/")
        round_wake(finetune_id=job_id)
    return FineTuneJob.objects.filter(id=job_id).first()


def finetune_run(*, job_id: int) -> FineTuneJob | None:
    """Run the job on this worker: from its last stored checkpoint when there is one, reporting step, loss and
    ETA on the row after every step (the row's status is the cancel signal). A finished job, or one another worker
    still runs, is returned as it is (None: it is gone)."""
    taken = job_take(FineTuneJob.objects.filter(id=job_id, finished_at__isnull=True), stall_seconds=stall_seconds())
    job = FineTuneJob.objects.select_related("project", "training_set", "teacher", "parent").filter(
        id=job_id).first()
    if job is None or not taken:
        return job
    with job_heartbeat(FineTuneJob.objects.filter(id=job_id)), job_scratch("finetune", job_id) as scratch:
        try:
            return _train(job, scratch)
        except FinetuneStopped:
            return FineTuneJob.objects.filter(id=job_id).first()
        except (FinetuneError, FinetuneJobError, JudgeConfigError) as exc:
            return finetune_fail(job_id=job_id, error=str(exc))


def _train(job: FineTuneJob, scratch: Path) -> FineTuneJob | None:
    values = dict(job.hyperparameters)
    device = values.pop("device", "cpu")
    values.pop(TRUNCATED_KEY, None)  # what a run found, not a setting
    recipe = _settings(job.student_kind, values)
    examples = _examples(job.student_kind, job.training_set, job.teacher, recipe)
    if not examples:
        raise FinetuneJobConflict("the training set has no train example with a teacher's answer any more")
    resume_from = None
    if job.checkpoint:
        resume_from = str(folder_download(job.checkpoint, scratch / "work" / f"checkpoint-{job.checkpoint_step}"))
        FineTuneJob.objects.filter(id=job.id).update(resumed_from_step=job.checkpoint_step)
    history = [list(point) for point in job.loss_history if point[0] <= job.checkpoint_step]

    def on_progress(progress: Progress) -> bool:
        if progress.loss is not None and (not history or history[-1][0] != progress.step):
            history.append([progress.step, round(progress.loss, 5)])
            del history[:-MAX_LOSS_POINTS]
        running = FineTuneJob.objects.filter(id=job.id, status=FineTuneJob.Status.RUNNING)
        return bool(running.update(step=progress.step, total_steps=progress.total_steps, loss_history=history,
                                   eta_s=progress.eta_s, examples_per_s=progress.examples_per_s,
                                   heartbeat_at=timezone.now()))

    def on_encoded(encoded: int, truncated: int) -> None:
        # DIRAS App. F's source max length: the examples whose passage was cut to fit, on the job as it runs.
        FineTuneJob.objects.filter(id=job.id).update(
            hyperparameters={**job.hyperparameters, TRUNCATED_KEY: truncated}, heartbeat_at=timezone.now())

    def on_checkpoint(step: int, folder: Path) -> None:
        prefix = f"{CHECKPOINT_PREFIX}{job.id}/checkpoint-{step}/"
        folder_upload(folder, prefix)
        old = FineTuneJob.objects.get(id=job.id).checkpoint
        FineTuneJob.objects.filter(id=job.id).update(checkpoint=prefix, checkpoint_step=step, loss_history=history)
        if old and old != prefix:
            folder_delete(old)

    base_folder = model_folder(job.base_model, label="base model")
    parent = job.parent.adapter if job.parent_id and job.parent else ""
    if job.parent_id and not parent:
        raise FinetuneJobConflict("the student this job goes on from is gone")
    if parent:  # a round's retrain: the parent's stored student is the start, and the base judge
        base_folder = str(folder_download(parent, scratch / "parent"))
    if job.student_kind == FineTuneJob.StudentKind.CROSSENCODER:
        # A plain encoder's base judge is the untrained head the student starts from (drawn from the seed, so a
        # resumed job draws the same one).
        initial = scratch / "initial" if head_problem(Path(base_folder)) else None
        result = crossencoder_finetune(
            base_folder=base_folder, pairs=examples, work_dir=str(scratch / "work"), model_dir=str(scratch / "model"),
            settings=recipe, device=device, resume_from=resume_from, on_progress=on_progress,
            on_checkpoint=on_checkpoint, initial_dir=str(initial) if initial else None,
        )
        base_stored = _store(job, initial) if initial else parent
        judge = {"backend": Judge.Backend.CROSSENCODER, "model": job.base_model, "device": device,
                 "max_length": recipe.max_length, "separator": recipe.separator,
                 "use_definition": recipe.use_definition}
    else:
        result = finetune(
            base_folder=base_folder, examples=examples, work_dir=str(scratch / "work"),
            adapter_dir=str(scratch / "adapter"), settings=recipe, device=device, resume_from=resume_from,
            on_progress=on_progress, on_checkpoint=on_checkpoint, on_encoded=on_encoded,
        )
        base_stored = ""
        judge = {"backend": Judge.Backend.HF, "model": job.base_model, "method": "tok", "cot": False,
                 "device": device}
    return _finish(job, _store(job, Path(result.adapter_dir)), result.examples_per_s, history, judge, base_stored)


def _store(job: FineTuneJob, folder: Path) -> str:
    """Upload a finished adapter or model folder under a new storage prefix of the project's."""
    return folder_upload(folder, f"{ADAPTER_PREFIX}{job.project_id}/{job.id}-{uuid.uuid4().hex}/")


@transaction.atomic
def _finish(job: FineTuneJob, adapter: str, examples_per_s: float, history: list, judge: dict,
            base_stored: str) -> FineTuneJob:
    """The job done: the student judge (`judge`'s settings with the stored `adapter`) and the base judge (the
    same settings without it, or on `base_stored`, the stored untrained head), both to score the compared pairs."""
    locked = FineTuneJob.objects.select_for_update(of=("self",)).get(id=job.id)
    if locked.status != FineTuneJob.Status.RUNNING:
        return locked  # cancelled while the adapter was stored
    student = judge_create(project=job.project, name=job.student_name, adapter_storage=adapter, **judge)
    base = judge_create(project=job.project, name=base_judge_name(job.student_name),
                        adapter_storage=base_stored or None, **judge)
    FineTuneJob.objects.filter(id=job.id).update(
        status=FineTuneJob.Status.DONE, finished_at=timezone.now(), adapter=adapter, student=student,
        loss_history=history, examples_per_s=examples_per_s, eta_s=0.0,
    )
    folder_delete(f"{CHECKPOINT_PREFIX}{job.id}/")
    pairs = comparison_pairs(job)
    whole_pool = locked.score_pool and Pair.objects.filter(project=job.project).exists()
    if whole_pool:  # the compared pairs are pairs of the pool: one job scores them all (a judge runs one job)
        scoring_request(project=job.project, judge=student, user=job.requested_by)
    if pairs:
        for made in (base,) if whole_pool else (student, base):
            scoring_request(project=job.project, judge=made, scope="selection", pair_ids=pairs)
    locked.refresh_from_db()
    return locked


def comparison_pairs(job: FineTuneJob) -> list[int]:
    """The pairs base model, student and teacher are compared on: the held-out pairs and the gold pairs."""
    held_out = TrainingExample.objects.filter(training_set=job.training_set, split=TrainingExample.Split.HELD_OUT,
                                              pair__isnull=False).values_list("pair_id", flat=True)
    gold = [int(pair_id) for pair_id in gold_set(job.project).pair_ids]
    return sorted(set(held_out) | set(gold))


def score_pool(*, job: FineTuneJob, user: AbstractBaseUser | None = None):
    """Score every pair of the pool with the job's student (the pairs it has no judgment of): the one click."""
    if job.student is None:
        raise FinetuneJobConflict(f"fine-tuning job {job.id} has no student judge")
    if not Pair.objects.filter(project=job.project).exists():
        raise FinetuneJobConflict("the project's pool has no pairs")
    return scoring_request(project=job.project, judge=job.student, user=user)

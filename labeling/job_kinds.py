"""Every kind of background work, declared once: its job rows, its Celery task, its services, the settings that bound
it, what the sweep does with a job whose worker was lost, and what a member who may not read its error sees.
labeling/tasks.py, the sweep (labeling/services/job_sweep.py), the job pages' selectors and docs/architecture.md's
table read these declarations; a new kind is one JobKind here, its services and its task.

Services are named by their dotted path and imported when called: every service module that queues work imports
labeling.tasks, which reads this module, so this module cannot import them."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Q
from django.utils.module_loading import import_string

from labeling.models import (
    AuditJob,
    BundleImportJob,
    DefinitionDraft,
    Estimate,
    FineTuneJob,
    Job,
    LabellingRound,
    QueryGenerationJob,
    ReplayJob,
    RetrievalJob,
    ScoringJob,
    SystemsResult,
    ValidationResult,
)

_SERVICES = "labeling.services."


@dataclass(frozen=True)
class JobKind:
    """A kind of background work. Its services follow one verb pair: `<kind>_request` creates the row and queues the
    task (or, for a cached result, marks it asked for), `<kind>_run(**{key: id})` is the worker's side and
    `<kind>_fail(**{key: id}, error=...)` records a job given up; tasks run the pair one way (labeling/tasks.py)."""

    name: str  # the sweep's name of the kind, and the prefix of its scratch folders
    model: type[Job]
    task: str  # its task in labeling/tasks.py, routed to `queue` by settings.CELERY_TASK_ROUTES
    queue: str  # the setting naming its queue
    request: str  # dotted paths, below labeling.services, of its services
    run: str
    fail: str
    limit_setting: str  # the hard time limit of a job, in seconds from its start
    key: str = "job_id"  # the keyword under which the task, run and fail take the row's id
    key_field: str = "id"  # the row's field holding it (a validation report is asked for by its project)
    max_retries: int = 2  # of a transient error, with backoff
    # Whether the broker gives back the message of a worker that died: right for work that may start over and does
    # not kill its worker itself (the kinds without it would come straight back, forever).
    reject_on_worker_lost: bool = False
    stall_setting: str | None = "JOB_STALL_SECONDS"  # None: the kind sweeps its own stalls (scoring's chunks)
    resume: str | None = None  # resume(job=...) -> bool: a lost worker's job goes on (False: give it up)
    cancel: str | None = None  # cancel(job=...): the page's and the API's Cancel
    # give_up(job=..., error=...): the sweep's end of a lost job where it is not `fail` (scoring's fails a chunk).
    give_up: str | None = None
    # Running rows that wait on other work, not on a worker (a round waiting for its retrain): neither stalled nor
    # past the limit; the work they wait on has its own, and its end wakes them.
    waits: Q | None = None
    # What a member who may not read the error sees instead (labeling.selectors.disclosure.job_error_shown): an error
    # can name the server's folders and files, or quote a remote model's server.
    failed_text: str = "the job failed"
    # A cached result recomputed when asked: at most one computation per this many seconds after the last.
    debounce_setting: str | None = None

    @property
    def time_limit(self) -> int:
        return getattr(settings, self.limit_setting)

    @property
    def stall_seconds(self) -> int | None:
        return None if self.stall_setting is None else getattr(settings, self.stall_setting)

    @property
    def debounce_seconds(self) -> int:
        return getattr(settings, self.debounce_setting)

    def service(self, role: str) -> Callable[..., object]:
        """The service declared as `role` ("request", "run", "fail", "resume", "cancel", "give_up")."""
        return import_string(_SERVICES + getattr(self, role))


SCORING = JobKind(
    name="scoring", model=ScoringJob, task="score_chunk_task", queue="BULK_QUEUE",
    request="scoring.scoring_request", run="scoring_chunks.scoring_chunk_run", fail="scoring_chunks.scoring_chunk_fail",
    key="chunk_id", limit_setting="SCORING_TIME_LIMIT", max_retries=3, stall_setting=None,
    cancel="scoring.scoring_job_cancel", give_up="scoring.scoring_job_give_up",
    failed_text="scoring failed for some pairs")
RETRIEVAL = JobKind(
    name="retrieval", model=RetrievalJob, task="retrieval_task", queue="BULK_QUEUE",
    request="retrieval.retrieval_request", run="retrieval.retrieval_run", fail="retrieval.retrieval_fail",
    limit_setting="RETRIEVAL_TIME_LIMIT", reject_on_worker_lost=True, cancel="retrieval.retrieval_cancel",
    failed_text="the retriever failed")
FINETUNE = JobKind(
    name="finetune", model=FineTuneJob, task="finetune_task", queue="FINETUNE_QUEUE",
    request="finetune.finetune_request", run="finetune.finetune_run", fail="finetune.finetune_fail",
    limit_setting="FINETUNE_TIME_LIMIT", stall_setting="FINETUNE_STALL_SECONDS",
    resume="finetune.finetune_resume_lost", cancel="finetune.finetune_cancel", failed_text="the fine-tuning failed")
AUDIT = JobKind(
    name="audit", model=AuditJob, task="audit_task", queue="BULK_QUEUE",
    request="audit.audit_request", run="audit.audit_run", fail="audit.audit_fail",
    limit_setting="AUDIT_TIME_LIMIT", cancel="audit.audit_cancel", failed_text="the audit failed")
BUNDLE_IMPORT = JobKind(
    name="bundle-import", model=BundleImportJob, task="bundle_import_task", queue="INTERACTIVE_QUEUE",
    request="bundle_upload.bundle_import_request", run="bundle_upload.bundle_import_run",
    fail="bundle_upload.bundle_import_fail", limit_setting="BUNDLE_IMPORT_TIME_LIMIT", reject_on_worker_lost=True,
    cancel="bundle_upload.bundle_import_cancel")
VALIDATION = JobKind(
    name="validation", model=ValidationResult, task="validation_refresh_task", queue="INTERACTIVE_QUEUE",
    request="validation.validation_request", run="gold_scoring.validation_run", fail="validation.validation_fail",
    key="project_id", key_field="project_id", limit_setting="VALIDATION_TIME_LIMIT",
    debounce_setting="VALIDATION_REFRESH_MIN_SECONDS")
DRAFT = JobKind(
    name="draft", model=DefinitionDraft, task="definition_draft_task", queue="INTERACTIVE_QUEUE",
    request="drafting.definition_draft_request", run="drafting.definition_draft_run",
    fail="drafting.definition_draft_fail", key="draft_id", limit_setting="DRAFT_TIME_LIMIT", max_retries=3,
    reject_on_worker_lost=True)
ROUND = JobKind(
    name="round", model=LabellingRound, task="round_finish_task", queue="INTERACTIVE_QUEUE",
    request="rounds.round_request", run="rounds.round_run", fail="rounds.round_fail", key="round_id",
    limit_setting="ROUND_TIME_LIMIT", resume="rounds.round_resume", waits=Q(waiting_since__isnull=False))
SYSTEMS = JobKind(
    name="systems", model=SystemsResult, task="systems_refresh_task", queue="INTERACTIVE_QUEUE",
    request="systems_cache.systems_request", run="systems_cache.systems_run", fail="systems_cache.systems_fail",
    key="result_id", limit_setting="SYSTEMS_TIME_LIMIT", debounce_setting="SYSTEMS_REFRESH_MIN_SECONDS")
QUERY_GENERATION = JobKind(
    name="query-generation", model=QueryGenerationJob, task="query_generation_task", queue="BULK_QUEUE",
    request="query_generation.query_generation_request", run="query_generation.query_generation_run",
    fail="query_generation.query_generation_fail", limit_setting="QUERY_GENERATION_TIME_LIMIT",
    cancel="query_generation.query_generation_cancel", failed_text="the query generation failed")
# Routed to the bulk queue unless its request names the queue of the job it estimates.
ESTIMATE = JobKind(
    name="estimate", model=Estimate, task="estimate_task", queue="BULK_QUEUE",
    request="estimates.estimate_request", run="estimates.estimate_run", fail="estimates.estimate_fail",
    key="estimate_id", limit_setting="ESTIMATE_TIME_LIMIT")

REPLAY = JobKind(
    name="replay", model=ReplayJob, task="replay_task", queue="BULK_QUEUE",
    request="replay.replay_request", run="replay.replay_run", fail="replay.replay_fail",
    limit_setting="REPLAY_TIME_LIMIT", resume="replay.replay_resume", cancel="replay.replay_cancel",
    failed_text="the replay failed")

JOB_KINDS = (SCORING, RETRIEVAL, FINETUNE, AUDIT, BUNDLE_IMPORT, VALIDATION, DRAFT, ROUND, SYSTEMS, QUERY_GENERATION,
             ESTIMATE, REPLAY)
_BY_MODEL = {kind.model: kind for kind in JOB_KINDS}


def kind_of(job: Job) -> JobKind:
    """The kind a job row belongs to."""
    return _BY_MODEL[type(job)]

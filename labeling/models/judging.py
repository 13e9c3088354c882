"""LLM judges, their judgments and calibrations, scoring jobs and the cached validation report."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Abs
from django.utils import timezone

from labeling.models.jobs import Job, MeteredJob


class JudgeBackend(models.TextChoices):
    """The kinds of judge (Judge.Backend). models_llm.types.Backend holds the four that load a model."""

    HF = "hf", "hf: local transformers model"
    OPENAI = "openai", "openai: OpenAI-compatible API"
    EMBEDDING = "embedding", "embedding: cosine similarity baseline"
    CROSSENCODER = "crossencoder", "crossencoder: a re-ranker reads query and passage together"
    ENSEMBLE = "ensemble", "ensemble: the mean P of other judges"
    IMPORT = "import", "import: the judgments of an imported bundle"

    @classmethod
    def creatable(cls) -> tuple[JudgeBackend, ...]:
        """The backends a judge is created with (an imported judge comes with its bundle's judgments)."""
        return (cls.HF, cls.OPENAI, cls.EMBEDDING, cls.CROSSENCODER, cls.ENSEMBLE)

    @classmethod
    def generative(cls) -> tuple[JudgeBackend, ...]:
        """The backends whose model writes text: they draft definitions and their prompts cost tokens."""
        return (cls.HF, cls.OPENAI)

    @classmethod
    def local_model(cls) -> tuple[JudgeBackend, ...]:
        """The backends whose `model` is a folder under a model root (openai names a model of its endpoint)."""
        return (cls.HF, cls.EMBEDDING, cls.CROSSENCODER)

    @classmethod
    def promptless(cls) -> tuple[JudgeBackend, ...]:
        """The backends whose model reads query and passage and gives a score: no prompt, no text, no token
        bought; each has a method of its own name."""
        return (cls.EMBEDDING, cls.CROSSENCODER)

    @classmethod
    def scoring(cls) -> tuple[JudgeBackend, ...]:
        """The backends whose P is a score squeezed into [0, 1], not a probability: an embedding's rescaled cosine, a
        re-ranker's head through a sigmoid. It orders pairs but says nothing of how many are relevant until a
        calibrator maps it to P."""
        return (cls.EMBEDDING, cls.CROSSENCODER)


class JudgeMethod(models.TextChoices):
    """How a judge turns its model's answer into P (Judge.Method), recorded on each judgment; models_llm.types.Method
    is the same set."""

    TOK = "tok", "Tok: P from the Yes/No next-token logits"
    ASK = "ask", "Ask: parse the stated confidence"
    EMBEDDING = "embedding", "Embedding: cosine similarity of query and passage"
    CROSSENCODER = "crossencoder", "Cross-encoder: P from a re-ranker's head"
    ENSEMBLE = "ensemble", "Ensemble: DisastIR prompt strategies, JSON scores averaged"

    @classmethod
    def prompting(cls) -> tuple[JudgeMethod, ...]:
        """The methods a generative judge is created with."""
        return (cls.TOK, cls.ASK, cls.ENSEMBLE)

    @classmethod
    def default_for(cls, backend: str) -> JudgeMethod:
        """The method a new judge of `backend` scores with when none is chosen."""
        if backend in JudgeBackend.promptless():
            return cls(backend)  # the backend's own method, of the same name
        return cls.TOK


class Judge(models.Model):
    """An LLM judging configuration. Imported judgments get a judge with backend `import`."""

    Backend = JudgeBackend
    Method = JudgeMethod

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="judges", db_index=False)
    name = models.CharField(max_length=200)
    backend = models.CharField(max_length=64, choices=Backend.choices)
    model = models.CharField(max_length=300, blank=True)
    prompt = models.TextField(blank=True)
    calibration = models.CharField(max_length=64, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    price_in = models.FloatField(
        null=True, blank=True, help_text="USD per million prompt tokens (API judges), for cost figures"
    )
    price_out = models.FloatField(null=True, blank=True, help_text="USD per million completion tokens")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="judge_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="judge_name_not_empty"),
            models.CheckConstraint(
                condition=(Q(price_in__isnull=True) | Q(price_in__gte=0))
                & (Q(price_out__isnull=True) | Q(price_out__gte=0)),
                name="judge_prices_not_negative",
            ),
            models.CheckConstraint(condition=Q(backend__in=JudgeBackend.values), name="judge_backend_valid"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_imported(self) -> bool:
        return self.backend == self.Backend.IMPORT

    @property
    def is_ensemble(self) -> bool:
        """A judges ensemble: its P is the mean of its member judges' P; it has no model of its own."""
        return self.backend == self.Backend.ENSEMBLE

    @property
    def is_generative(self) -> bool:
        return self.backend in self.Backend.generative()


class Judgment(models.Model):
    """One LLM judgment of a pair under one definition version. A parse failure is stored as such, never
    turned into a label: p_relevant is set exactly when the status is ok."""

    class Status(models.TextChoices):
        OK = "ok", "ok"
        PARSE_ERROR = "parse_error", "parse error"
        FAILED = "failed", "failed"

    pair = models.ForeignKey("labeling.Pair", on_delete=models.CASCADE, related_name="judgments", db_index=False)
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="judgments", db_index=False)
    definition = models.ForeignKey(
        "labeling.RelevanceDefinition", null=True, blank=True, on_delete=models.PROTECT, related_name="judgments"
    )
    p_relevant = models.FloatField(null=True, blank=True)
    guess = models.BooleanField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    raw_output = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OK)
    error = models.TextField(blank=True)
    method = models.CharField(
        max_length=16, blank=True, default="", db_default="", help_text="tok, ask, embedding, or empty when imported"
    )
    yes_no_mass = models.FloatField(
        null=True, blank=True, help_text="Tok: P(Yes) + P(No) before normalising; below 0.5 the answer is suspect"
    )
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    score = models.FloatField(
        null=True, blank=True, help_text="ensemble: the mean of the members' scores on the intent's scale"
    )
    spread = models.FloatField(
        null=True, blank=True, help_text="ensemble: max - min of the members' P (0 when they agree)"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["pair", "judge", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "judge", "definition"],
                condition=Q(definition__isnull=False),
                name="judgment_unique_per_definition",
            ),
            models.UniqueConstraint(
                fields=["pair", "judge"], condition=Q(definition__isnull=True), name="judgment_unique_no_definition"
            ),
            models.CheckConstraint(
                condition=Q(p_relevant__isnull=True) | Q(p_relevant__gte=0, p_relevant__lte=1),
                name="judgment_p_in_unit_interval",
            ),
            models.CheckConstraint(
                condition=Q(confidence__isnull=True) | Q(confidence__gte=0, confidence__lte=1),
                name="judgment_confidence_in_unit_interval",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["ok", "parse_error", "failed"]), name="judgment_status_valid"
            ),
            models.CheckConstraint(
                condition=(Q(status="ok") & Q(p_relevant__isnull=False))
                | (~Q(status="ok") & Q(p_relevant__isnull=True)),
                name="judgment_p_iff_ok",
            ),
        ]
        indexes = [
            models.Index(fields=["judge", "pair"], name="judgment_judge_pair"),
            # The unique indexes on pair are partial: deleting a pair needs a plain one for its FK check.
            models.Index(fields=["pair"], name="judgment_pair"),
            # The uncertain queue walks a judge's P from 0.5 outwards; the stratified one by range of P.
            models.Index(
                F("judge"), Abs(F("p_relevant") - Value(0.5)), F("pair"),
                name="judgment_judge_uncertainty", condition=Q(status="ok"),
            ),
            models.Index(fields=["judge", "p_relevant"], name="judgment_judge_p", condition=Q(status="ok")),
        ]

    def __str__(self) -> str:
        return f"{self.judge_id}:{self.pair_id}={self.p_relevant}"


class MemberOutput(models.Model):
    """What one prompt strategy of an ensemble judge answered on one pair under one definition version: every
    model call (raw text, parsed value, tokens) and the strategy's final score or the parse error that stopped
    it. Stored as soon as the strategy has run, so a re-run (a killed worker, a resumed job) calls no LLM twice."""

    pair = models.ForeignKey("labeling.Pair", on_delete=models.CASCADE, related_name="+", db_index=False)
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="member_outputs", db_index=False)
    definition = models.ForeignKey(
        "labeling.RelevanceDefinition", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    member = models.CharField(max_length=32, help_text="the prompt strategy: direct, cot or multi")
    intent = models.CharField(max_length=16)
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    max_score = models.PositiveSmallIntegerField()
    error = models.TextField(blank=True)
    steps = models.JSONField(help_text="one entry per model call: step, raw, value, prompt_tokens, completion_tokens")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    calls = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pair", "judge", "member"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "judge", "definition", "member"], condition=Q(definition__isnull=False),
                name="member_output_unique_per_definition",
            ),
            models.UniqueConstraint(
                fields=["pair", "judge", "member"], condition=Q(definition__isnull=True),
                name="member_output_unique_no_definition",
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__lte=F("max_score")), name="member_output_score_in_scale"
            ),
        ]
        indexes = [
            models.Index(fields=["judge", "pair"], name="member_output_judge_pair"),
            models.Index(fields=["pair"], name="member_output_pair"),
        ]

    def __str__(self) -> str:
        return f"{self.judge_id}:{self.pair_id}:{self.member}={self.score}"


class DefinitionDraft(MeteredJob):
    """A request to a generative judge to draft (or, with `refine`, to improve from the passages experts
    labelled relevant) a query's relevance definition; a worker writes the result as a draft version (done) or
    stores why it could not (failed)."""

    query = models.ForeignKey("labeling.Query", on_delete=models.CASCADE, related_name="definition_drafts")
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="+")
    refine = models.BooleanField(default=False)
    raw_output = models.TextField(blank=True)
    definition = models.ForeignKey(
        "labeling.RelevanceDefinition", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"draft of {self.query} by {self.judge}"


class JudgeCalibration(models.Model):
    """A calibrator fitted to a judge's P on the gold pairs; the newest one per judge is the one in use.
    `fitted_on` keeps the data (pair ids, raw P, binary gold) so a fit can be checked and repeated."""

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="calibrations")
    method = models.CharField(max_length=32)
    params = models.JSONField()
    cv = models.JSONField(help_text="out-of-fold ECE and Brier before and after, per method")
    n = models.PositiveIntegerField()
    n_relevant = models.PositiveIntegerField()
    fitted_on = models.JSONField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["judge", "-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(method__in=["isotonic", "platt"]), name="calibration_method_valid"),
            models.CheckConstraint(condition=Q(n_relevant__lte=F("n")), name="calibration_relevant_within_n"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} {self.method} ({self.created_at:%Y-%m-%d %H:%M})"


class ValidationResult(Job):
    """The validation report of a project, cached: recomputed by a worker after labels or judgments change
    (`requested_at` later than `computed_at` means a newer one is on its way). One row per project, asked for
    again and again: each request that finds no recomputation pending makes the job pending once more, with
    its attempts counted afresh."""

    project = models.OneToOneField("labeling.Project", on_delete=models.CASCADE, related_name="validation_result")
    data = models.JSONField(null=True, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True, help_text="when the stored report's run started")
    requested_at = models.DateTimeField(null=True, blank=True, help_text="the latest request")

    def __str__(self) -> str:
        return f"validation of {self.project}"

    @property
    def is_stale(self) -> bool:
        return self.computed_at is None or (self.requested_at is not None and self.requested_at > self.computed_at)


class ScoringJob(Job):
    """One run of a judge over a project's pairs, split into chunks of one query's pairs that workers score
    independently; progress is the sum of finished chunks. A chunk that fails marks its pairs failed and the
    job goes on: the job ends done (with the last chunk's error) or cancelled, never failed. Its attempts are
    its chunks' claims; its calls and tokens are its chunks' (job_usage)."""

    class Scope(models.TextChoices):
        ALL = "all", "all pairs"
        MISSING = "missing", "pairs not yet judged under the current definition"
        SELECTION = "selection", "selected pairs"

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="scoring_jobs")
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="scoring_jobs")
    scope = models.CharField(max_length=16, choices=Scope.choices)
    # Running from the start: its chunks are queued with it, and any worker may take any of them.
    status = models.CharField(max_length=16, choices=Job.Status.choices, default=Job.Status.RUNNING)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    first_result_at = models.DateTimeField(
        null=True, blank=True, help_text="the first part written: speed counts from here, model loading excluded"
    )
    # The job's part of its project's share of the bulk workers, among the project's running jobs; the highest
    # among them also widens the project's share (labeling/services/scoring_dispatch.py). Only staff may raise it.
    priority = models.PositiveSmallIntegerField(default=1, db_default=1,
                                                help_text="share of the workers among running jobs (1 to 10)")

    class Meta(Job.Meta):
        constraints = [
            *Job.Meta.constraints,
            models.CheckConstraint(condition=Q(priority__gte=1, priority__lte=10), name="job_priority_range"),
            models.CheckConstraint(condition=Q(done__lte=F("total")), name="job_done_within_total"),
            models.CheckConstraint(condition=Q(failed__lte=F("done")), name="job_failed_within_done"),
        ]

    def __str__(self) -> str:
        return f"job {self.id}: {self.judge} on {self.project} ({self.status})"

    @property
    def progress(self) -> float:
        return self.done / self.total if self.total else 1.0

    # The names a scoring job had before it took the shape of every job, for the readers that still use them.
    @property
    def created_by(self):
        return self.requested_by

    @created_by.setter
    def created_by(self, user) -> None:
        self.requested_by = user

    @property
    def last_error(self) -> str:
        return self.error

    @last_error.setter
    def last_error(self, error: str) -> None:
        self.error = error


class ScoringChunk(models.Model):
    """Pairs of one query that one task scores and writes in one transaction; `finished_at` makes a re-run
    (a redelivered message, a resumed job) write nothing twice."""

    job = models.ForeignKey(ScoringJob, on_delete=models.CASCADE, related_name="chunks")
    query = models.ForeignKey("labeling.Query", on_delete=models.CASCADE, related_name="+")
    pair_ids = models.JSONField()
    size = models.PositiveIntegerField()
    attempts = models.PositiveIntegerField(default=0, help_text="times a worker claimed this chunk")
    # Claimed by one worker before it calls a model, so a second delivery of the message skips the chunk;
    # `claimed_at` moves with every part written: a claim that stops moving belongs to a lost worker.
    claimed_by = models.CharField(max_length=255, blank=True, default="", db_default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    lost_workers = models.PositiveIntegerField(default=0, db_default=0,
                                               help_text="claims taken back after their worker stopped moving")
    written = models.PositiveIntegerField(default=0, db_default=0,
                                          help_text="pairs of pair_ids written so far, in order")
    failed_pairs = models.PositiveIntegerField(default=0, db_default=0)
    # LLM calls this chunk made and their tokens, over all its attempts (cached ensemble members cost nothing).
    calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    # Pairs sent to the model whose answer has not come back yet; when their worker is lost they become
    # `lost_calls`: paid for (at least one call each), never answered.
    in_flight = models.PositiveIntegerField(default=0, db_default=0)
    lost_calls = models.PositiveIntegerField(default=0, db_default=0)
    failed = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Sent to the workers (a job keeps only a window of its chunks in the queue, so jobs share the workers).
    dispatched_at = models.DateTimeField(null=True, blank=True)
    # Seconds the model spent on this chunk's written parts (loading excluded), and where: the judge's measured
    # throughput per device, which estimates read.
    busy_seconds = models.FloatField(default=0.0, db_default=0.0)
    timed_pairs = models.PositiveIntegerField(default=0, db_default=0, help_text="pairs busy_seconds covers")
    device = models.CharField(max_length=64, blank=True, default="", db_default="")

    class Meta:
        ordering = ["job", "id"]
        indexes = [
            models.Index(fields=["job", "finished_at"], name="chunk_job_finished"),
            # The chunks waiting in the queue (sent, not written): how many are ahead of a job.
            models.Index(fields=["dispatched_at"], condition=Q(finished_at__isnull=True), name="chunk_open_dispatched"),
        ]
        constraints = [models.CheckConstraint(condition=Q(written__lte=F("size")), name="chunk_written_within_size")]

    def __str__(self) -> str:
        return f"chunk {self.id} of job {self.job_id} ({self.size} pairs)"

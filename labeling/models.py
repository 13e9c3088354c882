"""The domain's tables: projects, queries with versioned relevance definitions, passages, the candidate pool
(pairs), human labels and LLM judgments. Constraints live in the database; writes live in services."""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from labeling.scale import LabelScale, ScaleError, default_scale_json


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    scale = models.JSONField(default=default_scale_json)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def label_scale(self) -> LabelScale:
        return LabelScale.from_json(self.scale)

    def clean(self) -> None:
        try:
            LabelScale.from_json(self.scale)
        except ScaleError as exc:
            raise ValidationError({"scale": str(exc)}) from exc


class Membership(models.Model):
    class Role(models.TextChoices):
        ADMIN = "admin", "admin"
        EXPERT = "expert", "expert"
        VIEWER = "viewer", "viewer"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user"),
            models.CheckConstraint(condition=Q(role__in=["admin", "expert", "viewer"]), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.project}"


class Query(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="queries", db_index=False)
    external_id = models.CharField(max_length=200)
    text = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project", "id"]
        verbose_name_plural = "queries"
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="query_unique_external_id"),
            models.CheckConstraint(condition=~Q(external_id=""), name="query_external_id_not_empty"),
        ]

    def __str__(self) -> str:
        return self.external_id


class RelevanceDefinition(models.Model):
    """One version of a query's relevance definition. Versions are only ever added; the newest is current."""

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="definitions", db_index=False)
    version = models.PositiveIntegerField()
    text = models.TextField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["query", "version"]
        constraints = [
            models.UniqueConstraint(fields=["query", "version"], name="definition_unique_version"),
            models.CheckConstraint(condition=Q(version__gte=1), name="definition_version_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.query} v{self.version}"


class Passage(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="passages", db_index=False)
    external_id = models.CharField(max_length=200)
    title = models.TextField(blank=True)
    text = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="passage_unique_external_id"),
            models.CheckConstraint(condition=~Q(external_id=""), name="passage_external_id_not_empty"),
        ]

    def __str__(self) -> str:
        return self.external_id


class Pair(models.Model):
    """A (query, passage) pair in the candidate pool. The id order is the pool order (import order)."""

    # A copy of query.project for per-project scans (index pair_project_order). No database FK: the query's FK
    # already guarantees the project exists, and a second per-row check costs ~5 us on every bulk insert.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="pairs", db_index=False, db_constraint=False
    )
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="pairs", db_index=False)
    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="pairs")
    # The grade from imported reference qrels (qrels/*.tsv), and the file it came from.
    reference_grade = models.SmallIntegerField(null=True, blank=True)
    reference_source = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["query", "passage"], name="pair_unique_query_passage"),
            models.CheckConstraint(
                condition=Q(reference_grade__isnull=True) | Q(reference_grade__gte=0), name="pair_reference_grade_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["project", "id"], name="pair_project_order"),
            models.Index(
                fields=["project", "id"], condition=Q(reference_grade__isnull=False), name="pair_project_referenced"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.query_id}/{self.passage_id}"


class PairSource(models.Model):
    """Pool provenance: a retrieval system that found the pair, and the rank it gave it."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="sources", db_index=False)
    system = models.CharField(max_length=200)
    rank = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["pair", "id"]
        constraints = [models.UniqueConstraint(fields=["pair", "system"], name="pairsource_unique_system")]

    def __str__(self) -> str:
        return f"{self.system}@{self.rank}"


class Label(models.Model):
    """One human judgment. A change adds a row and marks the old one superseded, so history is kept and
    exactly one label per (pair, annotator) is current."""

    class Role(models.TextChoices):
        ANNOTATOR = "annotator", "annotator"
        ADJUDICATOR = "adjudicator", "adjudicator"

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="labels", db_index=False)
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="labels")
    grade = models.SmallIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANNOTATOR)
    definition = models.ForeignKey(
        RelevanceDefinition, null=True, blank=True, on_delete=models.PROTECT, related_name="labels"
    )
    note = models.TextField(blank=True)
    time_spent_seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField()
    superseded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pair", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "annotator"], condition=Q(superseded_at__isnull=True), name="label_one_current"
            ),
            models.CheckConstraint(condition=Q(grade__gte=0), name="label_grade_nonnegative"),
            models.CheckConstraint(condition=Q(role__in=["annotator", "adjudicator"]), name="label_role_valid"),
            models.CheckConstraint(
                condition=Q(time_spent_seconds__isnull=True) | Q(time_spent_seconds__gte=0),
                name="label_time_spent_nonnegative",
            ),
        ]
        indexes = [models.Index(fields=["pair", "annotator", "id"], name="label_pair_history")]

    def __str__(self) -> str:
        return f"{self.annotator} -> {self.grade}"


class Judge(models.Model):
    """An LLM judging configuration. Imported judgments get a judge with backend 'import'."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="judges", db_index=False)
    name = models.CharField(max_length=200)
    backend = models.CharField(max_length=64)
    model = models.CharField(max_length=300, blank=True)
    prompt = models.TextField(blank=True)
    calibration = models.CharField(max_length=64, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="judge_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="judge_name_not_empty"),
        ]

    def __str__(self) -> str:
        return self.name


class Judgment(models.Model):
    """One LLM judgment of a pair under one definition version. A parse failure is stored as such, never
    turned into a label: p_relevant is set exactly when the status is ok."""

    class Status(models.TextChoices):
        OK = "ok", "ok"
        PARSE_ERROR = "parse_error", "parse error"
        FAILED = "failed", "failed"

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="judgments", db_index=False)
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="judgments", db_index=False)
    definition = models.ForeignKey(
        RelevanceDefinition, null=True, blank=True, on_delete=models.PROTECT, related_name="judgments"
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
        ]

    def __str__(self) -> str:
        return f"{self.judge_id}:{self.pair_id}={self.p_relevant}"


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


class ValidationResult(models.Model):
    """The validation report of a project, cached: recomputed by a worker after labels or judgments change
    (`requested_at` later than `computed_at` means a newer one is on its way)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="validation_result")
    data = models.JSONField(null=True, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True)
    requested_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"validation of {self.project}"

    @property
    def is_stale(self) -> bool:
        return self.computed_at is None or (self.requested_at is not None and self.requested_at > self.computed_at)


class ScoringJob(models.Model):
    """One run of a judge over a project's pairs, split into chunks of one query's pairs that workers score
    independently; progress is the sum of finished chunks."""

    class Scope(models.TextChoices):
        ALL = "all", "all pairs"
        MISSING = "missing", "pairs not yet judged under the current definition"
        SELECTION = "selection", "selected pairs"

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        CANCELLED = "cancelled", "cancelled"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="scoring_jobs")
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="scoring_jobs")
    scope = models.CharField(max_length=16, choices=Scope.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    first_result_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(done__lte=F("total")), name="job_done_within_total"),
            models.CheckConstraint(condition=Q(failed__lte=F("done")), name="job_failed_within_done"),
        ]

    def __str__(self) -> str:
        return f"job {self.id}: {self.judge} on {self.project} ({self.status})"


class ScoringChunk(models.Model):
    """Pairs of one query that one task scores and writes in one transaction; `finished_at` makes a re-run
    (a redelivered message, a resumed job) write nothing twice."""

    job = models.ForeignKey(ScoringJob, on_delete=models.CASCADE, related_name="chunks")
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="+")
    pair_ids = models.JSONField()
    size = models.PositiveIntegerField()
    attempts = models.PositiveIntegerField(default=0)
    failed = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "id"]
        indexes = [models.Index(fields=["job", "finished_at"], name="chunk_job_finished")]

    def __str__(self) -> str:
        return f"chunk {self.id} of job {self.job_id} ({self.size} pairs)"

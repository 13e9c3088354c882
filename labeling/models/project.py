"""Projects and their members, queries with versioned relevance definitions, passages and the candidate pool
(pairs). Constraints live in the database; writes live in services."""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from labeling.scale import LabelScale, ScaleError, default_scale_json

QUEUE_STRATEGIES = ("uncertain", "disagreement", "conflict", "random", "stratified", "sequential")


def default_queue_mix() -> dict[str, int]:
    return {"uncertain": 80, "random": 20}


class RandomUnit(models.Func):
    """A uniform random number in [0, 1), drawn by the database for each new row (so bulk SQL inserts that
    leave the column out get one too)."""

    function = "RANDOM"
    output_field = models.FloatField()

    def as_sqlite(self, compiler, connection, **extra_context):  # noqa: ANN001, ANN003, ANN201
        # SQLite's random() is a signed 64-bit integer.
        return "((RANDOM() / 18446744073709551616.0) + 0.5)", []


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    scale = models.JSONField(default=default_scale_json)
    created_at = models.DateTimeField(auto_now_add=True)
    # How experts' queues are filled (set by the project's admin).
    queue_mix = models.JSONField(
        default=default_queue_mix, help_text="strategy -> share, e.g. {'uncertain': 80, 'random': 20}"
    )
    queue_judge = models.ForeignKey(
        "labeling.Judge", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="the judge whose P the uncertain, conflict and stratified queues use",
    )
    queue_graded = models.BooleanField(
        default=False, db_default=False,
        help_text="the uncertain, disagreement and random queues may serve pairs that have a gold grade already (a "
                  "reference grade or an adjudication): re-annotation, as in DIRAS App. M; off, they serve only "
                  "pairs whose gold is unknown",
    )
    labels_per_item = models.PositiveSmallIntegerField(
        default=1, db_default=1, help_text="k: labels from different experts wanted on an overlap item"
    )
    overlap_share = models.FloatField(
        default=1.0, db_default=1.0, help_text="share of items that want k labels; the others want one"
    )
    lease_minutes = models.PositiveSmallIntegerField(default=10, db_default=10)
    reveal_llm_after_submit = models.BooleanField(
        default=False, db_default=False, help_text="after submitting, show the expert the judge's P"
    )
    # When labelling stops paying (#33; docs/validation.md "How complete are the qrels?"): the target is met when
    # P(recall of the verified qrels >= stop_recall) >= 1 - stop_alpha under the queue judge, when the judge's
    # design-based kappa has its lower bound >= stop_kappa, or when the project holds stop_budget current labels.
    # Experts are then told so and get no more items; admins may go on.
    stop_recall = models.FloatField(null=True, blank=True, help_text="recall target of the verified qrels (none: no "
                                    "recall target)")
    stop_alpha = models.FloatField(default=0.1, db_default=0.1, help_text="the recall target is met at probability "
                                   ">= 1 - alpha")
    stop_budget = models.PositiveIntegerField(null=True, blank=True, help_text="labels after which labelling stops "
                                              "(none: no budget)")
    stop_kappa = models.FloatField(null=True, blank=True, help_text="met when the queue judge's kappa on the random "
                                   "validation sample has its 95 % interval's lower bound at or above this (none: no "
                                   "kappa target)")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(labels_per_item__gte=1), name="project_labels_per_item_positive"),
            models.CheckConstraint(
                condition=Q(overlap_share__gte=0, overlap_share__lte=1), name="project_overlap_share_unit"
            ),
            models.CheckConstraint(condition=Q(lease_minutes__gte=1), name="project_lease_minutes_positive"),
            models.CheckConstraint(condition=Q(stop_recall__isnull=True) | Q(stop_recall__gt=0, stop_recall__lte=1),
                                   name="project_stop_recall_unit"),
            models.CheckConstraint(condition=Q(stop_alpha__gt=0, stop_alpha__lt=1), name="project_stop_alpha_unit"),
            models.CheckConstraint(condition=Q(stop_kappa__isnull=True) | Q(stop_kappa__gt=-1, stop_kappa__lte=1),
                                   name="project_stop_kappa_range"),
            # Two projects a reader cannot tell apart in the list would get each other's data: a name is unique
            # whatever its case (names are stored as labeling.names.clean_name leaves them; migration 0017).
            models.UniqueConstraint(
                Lower("name"), name="project_name_unique_ci",
                violation_error_message="A project of this name exists already (names are compared ignoring case).",
            ),
        ]

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
        mix = self.queue_mix
        if not isinstance(mix, dict) or not mix:
            raise ValidationError({"queue_mix": "give at least one strategy with a share"})
        for name, share in mix.items():
            if name not in QUEUE_STRATEGIES:
                raise ValidationError({"queue_mix": f"unknown strategy {name!r}; one of {', '.join(QUEUE_STRATEGIES)}"})
            if isinstance(share, bool) or not isinstance(share, (int, float)) or share < 0:
                raise ValidationError({"queue_mix": f"the share of {name!r} must be a number >= 0"})
        if sum(mix.values()) <= 0:
            raise ValidationError({"queue_mix": "the shares must not all be 0"})


class Membership(models.Model):
    class Role(models.TextChoices):
        ADMIN = "admin", "admin"
        EXPERT = "expert", "expert"
        VIEWER = "viewer", "viewer"

    # The roles that label items (the workspace, the queue and label API): experts, and the admins who adjudicate.
    ANNOTATING_ROLES = frozenset({Role.ADMIN, Role.EXPERT})

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


# in_use() as a SQL condition on a definition row aliased `d`, for the bundle import's set-based SQL
# (labeling.services.bundle_merge): the same rule, so change both together (tests/test_models.py checks that they
# pick the same rows).
DEFINITION_IN_USE_SQL = "NOT d.is_draft"


class RelevanceDefinitionQuerySet(models.QuerySet):
    def in_use(self) -> RelevanceDefinitionQuerySet:
        """The versions that are not LLM drafts: the newest of a query's is its current definition. In SQL:
        DEFINITION_IN_USE_SQL."""
        return self.filter(is_draft=False)


class RelevanceDefinition(models.Model):
    """One version of a query's relevance definition. Versions are only ever added; the newest one that is not
    a draft is current. An LLM-drafted version is a draft until an admin saves it (edited or not) as a new
    version `based_on` it: nothing an LLM writes becomes current on its own."""

    class Origin(models.TextChoices):
        MANUAL = "manual", "written by a person"
        LLM_DRAFT = "llm_draft", "drafted by an LLM"
        LLM_REFINED = "llm_refined", "drafted by an LLM from expert-labelled examples"

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="definitions", db_index=False)
    version = models.PositiveIntegerField()
    text = models.TextField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    is_draft = models.BooleanField(default=False, db_default=False)
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.MANUAL, db_default="manual")
    drafted_by = models.ForeignKey(
        "labeling.Judge", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="the judge whose LLM wrote this text (or the draft it is based on)",
    )
    based_on = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="the draft an admin reviewed to make this version",
    )

    objects = RelevanceDefinitionQuerySet.as_manager()

    class Meta:
        ordering = ["query", "version"]
        constraints = [
            models.UniqueConstraint(fields=["query", "version"], name="definition_unique_version"),
            models.CheckConstraint(condition=Q(version__gte=1), name="definition_version_positive"),
            models.CheckConstraint(
                condition=Q(is_draft=False) | ~Q(origin="manual"), name="definition_draft_is_from_an_llm"
            ),
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
    # The pair's place in the project's random order: the random queue serves the first unfinished pair in
    # it, a uniform sample of the pool without replacement.
    sample_key = models.FloatField(db_default=RandomUnit())

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
            models.Index(fields=["project", "sample_key"], name="pair_project_sample"),
            models.Index(fields=["project", "query", "id"], name="pair_project_query_order"),
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

"""Retrieval runs: ranked lists of a project's passages per query, imported from TREC run files or produced by
the built-in retrievers (a job), and the passage embeddings a dense retriever keeps for the next run."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from labeling.models.jobs import Job


class RunKind(models.TextChoices):
    IMPORTED = "imported", "imported run file"
    BM25 = "bm25", "BM25"
    DENSE = "dense", "dense"
    CASCADE = "cascade", "cascade (BM25, then dense re-ranking)"


class Run(models.Model):
    """A retrieval system's ranked passages per query. Read-only once stored: entries are written with the row
    and never changed (a new ranking is a new run). `queries`, `entries` and `depth` (the longest ranking) are
    counted when it is written."""

    Kind = RunKind

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=RunKind.choices)
    description = models.TextField(blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=500, blank=True, help_text="the file it came from, or the retrieval job")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    queries = models.PositiveIntegerField(default=0)
    entries = models.PositiveBigIntegerField(default=0)
    depth = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="run_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="run_name_not_empty"),
            models.CheckConstraint(condition=Q(kind__in=RunKind.values), name="run_kind_valid"),
        ]

    def __str__(self) -> str:
        return self.name


class RunEntry(models.Model):
    """One passage of a run's ranking for one query: rank 1 is the best. Ranks are decided when the run is stored
    (score descending, ties as trec_eval breaks them), so readers never sort by score."""

    # No database foreign keys: checking three of them per row cut a run import on PostgreSQL from ~90k to ~25k
    # rows/s, and every writer (labeling.services.runs) resolves the ids against the project first. Deletes still
    # cascade through Django, as for Pair.project.
    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False)
    query = models.ForeignKey(
        "labeling.Query", on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    passage = models.ForeignKey(
        "labeling.Passage", on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    rank = models.PositiveIntegerField()
    score = models.FloatField()

    class Meta:
        # One index serves every read (a run's rankings, a query's top k) and refuses a rank given twice.
        constraints = [
            models.UniqueConstraint(fields=["run", "query", "rank"], name="runentry_unique_rank"),
            models.CheckConstraint(condition=Q(rank__gte=1), name="runentry_rank_positive"),
        ]


class RetrievalJob(Job):
    """A built-in retriever asked to produce the run `name`: it works query batch by batch (`done` of `total`
    queries) and writes the run in one transaction at the end, so a failed or cancelled job leaves no run."""

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="retrieval_jobs")
    retriever = models.CharField(max_length=16, choices=[(k, label) for k, label in RunKind.choices if k != "imported"])
    name = models.CharField(max_length=200, help_text="the run it writes")
    parameters = models.JSONField(default=dict, blank=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta(Job.Meta):
        constraints = [
            *Job.Meta.constraints,
            models.CheckConstraint(condition=Q(done__lte=F("total")), name="retrievaljob_done_within_total"),
        ]

    def __str__(self) -> str:
        return f"{self.retriever} run {self.name!r} on {self.project} ({self.status})"

    @property
    def progress(self) -> float:
        if self.finished_at is not None:
            return 1.0
        return self.done / self.total if self.total else 0.0


class PassageEmbeddings(models.Model):
    """A project's passage embeddings by one encoder, kept in a file of the storage (any worker can read it) so a
    second dense run embeds only passages that are new or changed since."""

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=300, help_text="the encoder's name (DenseEncoder.name)")
    file = models.FileField(upload_to="embeddings/", max_length=500)
    passages = models.PositiveIntegerField(default=0)
    dimension = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "model"], name="passageembeddings_unique_model")]

    def __str__(self) -> str:
        return f"{self.model} embeddings of {self.project}"

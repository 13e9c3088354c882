"""LLM query generation (DisastIR 3.4, #35): a job asks a generative judge to write, for each chosen passage and
search intent, one query and its generated positive; they are stored as a new query set (LVHQ compares it with
another). Every answer that could not be read is kept in the job, never turned into a query."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import MeteredJob

# The marks a generation leaves on what it writes, read back by blind first (labeling.selectors.disclosure) and by
# the next generation. Pool sources: the generated positive (the job's positive_grade is its reference grade) and
# the seed passage it was written from.
GENERATED_POSITIVE = "generated-positive"
SEED_PASSAGE = "seed-passage"
# Query metadata: the passage the query was written from (in QAdoc its positive). Passage metadata of a generated
# positive: GENERATED_KEY true (never a seed passage itself), the query it answers, the seed passage and the intent.
SEED_KEY = "seed_passage"
GENERATED_KEY = "generated"
GENERATED_FOR_KEY = "generated_for"


class QueryGenerationJob(MeteredJob):
    """`parameters`: the intents, the edited prompts, the chosen passages (external ids, resolved when the job was
    asked for), the seed and the grade given to the generated positives (None: pool pairs with no grade). `total`
    units (passage x intent), `done` of them so far; `calls` model calls made; `created` queries written; `problems`
    one entry per unit that gave no query: {"passage", "intent", "stage", "error", "raw"}."""

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="query_generations")
    judge = models.ForeignKey("labeling.Judge", on_delete=models.CASCADE, related_name="+")
    query_set = models.CharField(max_length=100, help_text="the query set the generated queries go into")
    parameters = models.JSONField(default=dict, blank=True)
    total = models.PositiveIntegerField(default=0, help_text="passage x intent units to generate")
    done = models.PositiveIntegerField(default=0, help_text="units generated or given up")
    calls = models.PositiveIntegerField(default=0, help_text="model calls made")
    created = models.PositiveIntegerField(default=0, help_text="queries written")
    problems = models.JSONField(default=list, blank=True)

    class Meta(MeteredJob.Meta):
        pass

    @property
    def progress(self) -> float:
        if self.finished_at is not None:
            return 1.0
        return self.done / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"query generation {self.query_set!r} by {self.judge} ({self.status})"

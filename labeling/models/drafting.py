"""A generative judge's draft of a query's relevance definition, as a job."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import MeteredJob
from labeling.models.judges import Judge


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

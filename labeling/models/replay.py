"""Replays (#50): the labelling loop run again on a project whose truth is known. A replay's state is its own row:
what was asked (`parameters`), the runs replayed so far (`result["runs"]`, one per mix, judge and seed, in the order
they are run, so that a replay whose worker was lost goes on from the next) and, once done, the summary
(`result["arms"]`). It writes nothing else: deleting it leaves the project as it was."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import Job


class ReplayJob(Job):
    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="replays")
    parameters = models.JSONField(default=dict, blank=True, help_text="judges, mixes, batch, rounds, seeds, truth...")
    total = models.PositiveIntegerField(default=0, help_text="runs to replay: mixes x judges x seeds")
    done = models.PositiveIntegerField(default=0, help_text="runs replayed")
    result = models.JSONField(default=dict, blank=True, help_text="notes, the runs' states, the summary")

    @property
    def progress(self) -> float:
        if self.finished_at is not None:
            return 1.0
        return self.done / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"replay {self.id} of {self.project} ({self.status})"

"""Bundle archives (and run files or training files too large to read in a web request) uploaded through the pages
or the API, imported into a project by a worker: the job's row keeps where it stands, what it wrote or every
`file:line` problem that stopped it."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import Job


class BundleImportStage(models.TextChoices):
    QUEUED = "queued", "waiting for a worker"
    UNPACKING = "unpacking", "unpacking the archive"
    IMPORTING = "importing", "checking every line and importing"
    FINISHED = "finished", "finished"


class BundleImportJob(Job):
    """An uploaded bundle archive for `project`, kept in the storage under `upload` (any worker can read it) until
    the job ends; then `upload` is emptied. Done: `written` counts the rows it stored. Failed: nothing was stored,
    and `problems` lists the first problems found (`problems_total` of them in all). With a `run_name`, the upload
    is a TREC run file too large to read in a web request, stored as that run; with a `training_set_name`, a
    DIRAS-layout training file, stored as that training set with `training_set_options` (held_out, seed, skip_bad)."""

    Stage = BundleImportStage

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="bundle_imports")
    file_name = models.CharField(max_length=255, help_text="the uploaded file's name")
    size = models.PositiveBigIntegerField(default=0, help_text="bytes uploaded")
    upload = models.CharField(max_length=500, blank=True, help_text="its name in the storage; empty once removed")
    all_pairs = models.BooleanField(default=False, help_text="complete the pool to every query x passage")
    query_set = models.CharField(max_length=100, blank=True,
                                 help_text="the query set (LVHQ) of the bundle's queries whose metadata names none; "
                                           "empty: they stay in none")
    run_name = models.CharField(max_length=200, blank=True,
                                help_text="a TREC run file stored as this run; empty: a bundle archive")
    run_description = models.TextField(blank=True)
    training_set_name = models.CharField(max_length=200, blank=True,
                                         help_text="a training file stored as this training set; empty: not one")
    training_set_options = models.JSONField(default=dict, blank=True,
                                            help_text="the training set import's held_out, seed and skip_bad")
    stage = models.CharField(max_length=16, choices=BundleImportStage.choices, default=BundleImportStage.QUEUED)
    members = models.PositiveIntegerField(default=0, help_text="files and folders unpacked so far")
    unpacked_bytes = models.PositiveBigIntegerField(default=0)
    written = models.JSONField(default=dict, blank=True, help_text="rows stored, by kind")
    problems = models.JSONField(default=list, blank=True, help_text="'file:line: what is wrong', the first ones")
    problems_total = models.PositiveIntegerField(default=0)

    class Meta(Job.Meta):
        constraints = [
            *Job.Meta.constraints,
            models.CheckConstraint(condition=models.Q(stage__in=BundleImportStage.values),
                                   name="bundleimportjob_stage_valid"),
        ]

    def __str__(self) -> str:
        return f"bundle {self.file_name} into {self.project} ({self.status})"

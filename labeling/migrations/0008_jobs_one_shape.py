"""Scoring jobs, definition drafts and validation refreshes take the shape of every background job
(labeling.models.jobs.Job): requester, created/started/finished, status, error and attempts.

Existing rows keep what they had: a scoring job's `created_by` and `last_error` are renamed, not copied; a
draft's and a report's status is derived from the fields that held it before (finished with an error: failed;
finished: done; else pending; a report is pending exactly when the old debounce rule said a recomputation
was); a scoring job's attempts are its chunks' claims. What was never recorded stays empty: when a worker
first took a job, and the attempts of drafts and reports."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.db.models import F, Q, Sum

STATUS_CHOICES = [
    ("pending", "pending"), ("running", "running"), ("done", "done"), ("failed", "failed"), ("cancelled", "cancelled"),
]
REQUESTED_BY_HELP = "who asked; empty when the command line or a change of data did"


def status_valid(model_name: str) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=Q(status__in=[value for value, _ in STATUS_CHOICES]), name=f"{model_name}_status_valid"
    )


def requested_by() -> models.ForeignKey:
    return models.ForeignKey(
        blank=True, help_text=REQUESTED_BY_HELP, null=True, on_delete=django.db.models.deletion.SET_NULL,
        related_name="+", to=settings.AUTH_USER_MODEL,
    )


def derive(apps, schema_editor):
    DefinitionDraft = apps.get_model("labeling", "DefinitionDraft")
    finished = DefinitionDraft.objects.filter(finished_at__isnull=False)
    finished.exclude(error="").update(status="failed")
    finished.filter(error="").update(status="done")

    ValidationResult = apps.get_model("labeling", "ValidationResult")
    for result in ValidationResult.objects.all():
        known = [moment for moment in (result.computed_at, result.requested_at) if moment is not None]
        none_pending = result.requested_at is None or (
            result.computed_at is not None and result.requested_at <= result.computed_at
        )
        if result.error:
            # The failed run served the latest request: it finished after that, when exactly was not recorded.
            result.status, result.finished_at = "failed", result.requested_at
        elif none_pending:
            result.status, result.finished_at = "done", result.computed_at
        result.created_at = min(known, default=result.created_at)
        result.save(update_fields=["status", "finished_at", "created_at"])

    ScoringJob = apps.get_model("labeling", "ScoringJob")
    claims = ScoringJob.objects.annotate(claims=Sum("chunks__attempts")).filter(claims__gt=0)
    for job_id, count in claims.values_list("id", "claims"):
        ScoringJob.objects.filter(id=job_id).update(attempts=F("attempts") + count)


class Migration(migrations.Migration):

    dependencies = [
        ("labeling", "0007_judge_backend_choices"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Scoring jobs: two fields renamed to the shared names, two added, the shared status choices.
        migrations.RenameField(model_name="scoringjob", old_name="last_error", new_name="error"),
        migrations.RenameField(model_name="scoringjob", old_name="created_by", new_name="requested_by"),
        migrations.AlterField(model_name="scoringjob", name="requested_by", field=requested_by()),
        migrations.AddField(
            model_name="scoringjob", name="started_at", field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="scoringjob", name="attempts",
            field=models.PositiveIntegerField(default=0, help_text="times a worker took this job"),
        ),
        migrations.AlterField(
            model_name="scoringjob", name="status",
            field=models.CharField(choices=STATUS_CHOICES, default="running", max_length=16),
        ),
        migrations.AlterField(
            model_name="scoringjob", name="first_result_at",
            field=models.DateTimeField(
                blank=True, null=True,
                help_text="the first part written: speed counts from here, model loading excluded",
            ),
        ),
        # Definition drafts: a status, when a worker first took it, how often.
        migrations.AlterField(model_name="definitiondraft", name="requested_by", field=requested_by()),
        migrations.AddField(
            model_name="definitiondraft", name="started_at", field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="definitiondraft", name="status",
            field=models.CharField(choices=STATUS_CHOICES, default="pending", max_length=16),
        ),
        migrations.AddField(
            model_name="definitiondraft", name="attempts",
            field=models.PositiveIntegerField(default=0, help_text="times a worker took this job"),
        ),
        # Validation reports: every field of a job but the error they had.
        migrations.AlterModelOptions(name="validationresult", options={"ordering": ["-created_at", "-id"]}),
        migrations.AddField(model_name="validationresult", name="requested_by", field=requested_by()),
        migrations.AddField(
            model_name="validationresult", name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddField(
            model_name="validationresult", name="started_at", field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="validationresult", name="finished_at", field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="validationresult", name="status",
            field=models.CharField(choices=STATUS_CHOICES, default="pending", max_length=16),
        ),
        migrations.AddField(
            model_name="validationresult", name="attempts",
            field=models.PositiveIntegerField(default=0, help_text="times a worker took this job"),
        ),
        migrations.AlterField(
            model_name="validationresult", name="computed_at",
            field=models.DateTimeField(blank=True, help_text="when the stored report's run started", null=True),
        ),
        migrations.AlterField(
            model_name="validationresult", name="requested_at",
            field=models.DateTimeField(blank=True, help_text="the latest request", null=True),
        ),
        migrations.AddConstraint(model_name="scoringjob", constraint=status_valid("scoringjob")),
        migrations.AddConstraint(model_name="definitiondraft", constraint=status_valid("definitiondraft")),
        migrations.AddConstraint(model_name="validationresult", constraint=status_valid("validationresult")),
        # Last: PostgreSQL refuses to alter a table with updates of this transaction still to check.
        migrations.RunPython(derive, migrations.RunPython.noop),
    ]

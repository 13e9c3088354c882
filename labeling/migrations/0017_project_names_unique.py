"""Project names become unique whatever their case: the projects that share a name with an older one (compared as
the database lowers them, the comparison the constraint makes) are renamed "NAME (2)", "NAME (3)"... first, the
oldest keeping its name; then the constraint is added. The way back drops the constraint and keeps the names."""
from django.db import migrations, models
from django.db.models import Count, Value
from django.db.models.functions import Lower


def _taken(project_model, name: str) -> bool:
    return project_model.objects.alias(key=Lower("name")).filter(key=Lower(Value(name))).exists()


def _free_name(project_model, name: str, max_length: int) -> str:
    number = 2
    while True:
        suffix = f" ({number})"
        candidate = name[:max_length - len(suffix)].rstrip() + suffix
        if not _taken(project_model, candidate):
            return candidate
        number += 1


def duplicates_renamed(apps, schema_editor) -> None:
    project_model = apps.get_model("labeling", "Project")
    max_length = project_model._meta.get_field("name").max_length
    keys = (project_model.objects.annotate(key=Lower("name")).values("key").annotate(n=Count("id"))
            .filter(n__gt=1).values_list("key", flat=True))
    for key in list(keys):
        same = project_model.objects.alias(key=Lower("name")).filter(key=key).order_by("id")
        for project in list(same)[1:]:
            # One at a time, each new name checked against every name stored by then (the renamed ones too).
            project.name = _free_name(project_model, project.name, max_length)
            project.save(update_fields=["name"])


class Migration(migrations.Migration):

    dependencies = [
        ("labeling", "0016_scoring_fair_dispatch"),
    ]

    operations = [
        migrations.RunPython(duplicates_renamed, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="project",
            constraint=models.UniqueConstraint(
                Lower("name"), name="project_name_unique_ci",
                violation_error_message="A project of this name exists already (names are compared ignoring case).",
            ),
        ),
    ]

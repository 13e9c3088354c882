"""Names stored before labeling.names decided what a name is get renamed, so that each can be opened and deleted
again: a judge, run or training set with a line break in its name broke the page listing it for every member.

A name the rule refuses or changes is repaired (labeling.names.name_repaired: NFKC, invisible and line-breaking
characters as spaces, spaces collapsed and stripped, cut to the field), made unique in its project with " (2)",
" (3)"... where the name is unique there, and is "renamed-<id>" when nothing is left. Ensembles list their members
by name: they follow their members' new names. Jobs keep the name of what they write repaired the same way. An
open invitation whose user name the rule changes is revoked: its link would make an account under a name that is
not the one the admin saw (or one that looks like an existing account); the admin invites again. Accounts are not
renamed. The way back keeps the new names."""
from collections import defaultdict

from django.db import migrations
from django.utils import timezone

from labeling.names import NameRefused, clean_name, name_repaired
from labeling.selectors.finetune import STUDENT_NAME_MAX_LENGTH


def _breaks_rule(name: str, max_length: int) -> bool:
    try:
        return clean_name(name, what="name", max_length=max_length) != name
    except NameRefused:
        return True


def _unique(name: str, taken: set[str], max_length: int) -> str:
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        suffix = f" ({number})"
        candidate = name[:max_length - len(suffix)].rstrip() + suffix
    return candidate


def _rename(model, field: str = "name", *, max_length: int | None = None,
            unique_in_project: bool) -> dict[tuple[int, str], str]:
    """Repair `field` of each row of `model` that breaks the rule; {(project id, old name): new name}."""
    max_length = max_length or model._meta.get_field(field).max_length
    rows = list(model.objects.order_by("id").values_list("id", "project_id", field))
    taken: dict[int, set[str]] = defaultdict(set)
    for _, project_id, name in rows:
        taken[project_id].add(name)
    renamed = {}
    for row_id, project_id, name in rows:
        if not _breaks_rule(name, max_length):
            continue
        new = name_repaired(name, max_length=max_length) or f"renamed-{row_id}"
        if unique_in_project:
            taken[project_id].discard(name)
            new = _unique(new, taken[project_id], max_length)
            taken[project_id].add(new)
        model.objects.filter(id=row_id).update(**{field: new})
        renamed[project_id, name] = new
    return renamed


def _follow_members(judge_model, renamed: dict[tuple[int, str], str]) -> None:
    projects = {project_id for project_id, _ in renamed}
    for ensemble in judge_model.objects.filter(project_id__in=projects, backend="ensemble"):
        members = (ensemble.parameters or {}).get("members")
        if not isinstance(members, list):
            continue
        followed = [renamed.get((ensemble.project_id, member), member) for member in members]
        if followed != members:
            ensemble.parameters = {**ensemble.parameters, "members": followed}
            ensemble.save(update_fields=["parameters"])


def _rename_projects(project_model) -> None:
    max_length = project_model._meta.get_field("name").max_length
    for project in project_model.objects.only("id", "name"):
        if _breaks_rule(project.name, max_length):
            project.name = name_repaired(project.name, max_length=max_length) or f"renamed-{project.id}"
            project.save(update_fields=["name"])


def _revoke_invitations(invitation_model) -> None:
    # The rule's NFKC is Django's normalize_username, the one invitation_create applies now.
    max_length = invitation_model._meta.get_field("username").max_length
    open_ones = invitation_model.objects.filter(used_at__isnull=True, revoked_at__isnull=True)
    changed = [invitation.id for invitation in open_ones.only("id", "username")
               if _breaks_rule(invitation.username, max_length)]
    invitation_model.objects.filter(id__in=changed).update(revoked_at=timezone.now())


def names_normalised(apps, schema_editor) -> None:
    get = apps.get_model
    judge = get("labeling", "Judge")
    _follow_members(judge, _rename(judge, unique_in_project=True))
    _rename(get("labeling", "Run"), unique_in_project=True)
    _rename(get("labeling", "TrainingSet"), unique_in_project=True)
    _rename(get("labeling", "RetrievalJob"), unique_in_project=False)
    # A student and its base model become judges: the student's name leaves room for the base model's suffix.
    _rename(get("labeling", "FineTuneJob"), "student_name", max_length=STUDENT_NAME_MAX_LENGTH,
            unique_in_project=False)
    _rename_projects(get("labeling", "Project"))
    _revoke_invitations(get("labeling", "Invitation"))


class Migration(migrations.Migration):

    dependencies = [
        ("labeling", "0013_invitations"),
    ]

    operations = [
        migrations.RunPython(names_normalised, migrations.RunPython.noop),
    ]

"""Rows named on a management command's line: a missing one is a CommandError naming it (and, for a judge,
the project's judges)."""
from __future__ import annotations

from django.core.management.base import CommandError

from labeling.models import Judge, Project


def command_project(slug: str) -> Project:
    found = Project.objects.filter(slug=slug).first()
    if found is None:
        raise CommandError(f"no project {slug!r}")
    return found


def command_judge(project: Project, name: str) -> Judge:
    found = Judge.objects.filter(project=project, name=name).first()
    if found is None:
        names = ", ".join(project.judges.values_list("name", flat=True)) or "none"
        raise CommandError(f"project {project.slug!r} has no judge {name!r} (its judges: {names})")
    return found

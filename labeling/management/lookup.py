"""Rows named on a management command's line, found by the selectors the pages and the API use: a missing one is
a CommandError naming it (and, for a judge, the project's judges)."""
from __future__ import annotations

from django.core.management.base import CommandError

from labeling.exceptions import NotFound
from labeling.models import Judge, Project
from labeling.selectors.lookups import JudgeNotFound, judge_by_name, project_by_slug


def command_project(slug: str) -> Project:
    try:
        return project_by_slug(slug=slug)
    except NotFound as exc:
        raise CommandError(str(exc)) from None


def command_judge(project: Project, name: str) -> Judge:
    try:
        return judge_by_name(project=project, name=name)
    except JudgeNotFound as exc:
        raise CommandError(f"{exc} (its judges: {', '.join(exc.known) or 'none'})") from None

"""`manage.py draft_definitions --project SLUG --judge NAME [--refine] [--query EXTERNAL_ID ...]`: ask a judge to
draft relevance definitions here, in this process (no workers), one query after the other."""
from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_judge, command_project
from labeling.models import Judge, Query
from labeling.selectors.projects import queries_for_project
from labeling.services.drafting import (
    DraftingError,
    definition_draft_create,
    definition_draft_fail,
    definition_draft_judge_check,
    definition_draft_run,
)


class Command(BaseCommand):
    help = ("Ask a generative judge to draft each query's relevance definition (DIRAS), or with --refine to improve "
            "it from the passages experts labelled relevant. Drafts are stored as draft versions that an admin "
            "reviews on the definition page; none becomes current on its own.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--judge", required=True, help="a judge with backend hf or openai")
        parser.add_argument("--refine", action="store_true",
                            help="improve the current definition from the passages experts labelled relevant")
        parser.add_argument("--query", nargs="+", default=None, metavar="EXTERNAL_ID",
                            help="only these queries (default: every query of the project)")

    def handle(self, *args, project: str, judge: str, refine: bool, query: list[str] | None, **options) -> None:
        found = command_project(project)
        item = command_judge(found, judge)
        try:
            definition_draft_judge_check(judge=item)
        except DraftingError as exc:
            raise CommandError(str(exc)) from None
        queries = list(queries_for_project(project=found))
        if query is not None:
            by_id = {q.external_id: q for q in queries}
            missing = [external_id for external_id in query if external_id not in by_id]
            if missing:
                raise CommandError(f"project {project!r} has no query {', '.join(map(repr, missing))}")
            queries = [by_id[external_id] for external_id in dict.fromkeys(query)]
        for one in queries:
            self.stdout.write(f"{one.external_id}: {self._draft(one, item, refine)}")

    def _draft(self, query: Query, judge: Judge, refine: bool) -> str:
        try:
            draft = definition_draft_create(query=query, judge=judge, refine=refine, user=None)
        except DraftingError as exc:
            return f"error: {exc}"
        try:
            draft = definition_draft_run(draft_id=draft.id)
        except Exception as exc:  # noqa: BLE001 - no worker retries here: record the error and go on
            draft = definition_draft_fail(draft_id=draft.id, error=f"{type(exc).__name__}: {exc}")
        if draft.definition is not None:
            return f"draft version {draft.definition.version}"
        return f"error: {draft.error}"

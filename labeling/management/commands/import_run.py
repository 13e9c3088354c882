"""`manage.py import_run FILE --project SLUG --name NAME`: store a TREC run file as a run of a project."""
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_project
from labeling.services.runs import RunImportError, run_import


class Command(BaseCommand):
    help = ("Store a TREC run file (qid Q0 docid rank score tag; gzip when FILE ends in .gz) as a run of the "
            "project. Ids are the project's external ids; ranks are decided by score as trec_eval does (the rank "
            "column is ignored). Any bad line stores nothing and is reported as file:line.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="the run file (.trec, .txt, .gz...)")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--name", required=True, help="the run's name in the project (unique)")
        parser.add_argument("--description", default="", help="what the system is")

    def handle(self, *args, path: Path, project: str, name: str, description: str, **options) -> None:
        found = command_project(project)
        started = time.monotonic()
        try:
            run = run_import(project=found, path=path, name=name, description=description)
        except RunImportError as exc:
            raise CommandError(str(exc)) from None
        seconds = time.monotonic() - started
        self.stdout.write(self.style.SUCCESS(
            f"Stored run {run.name!r} in {found.slug!r}: {run.entries:,} entries for {run.queries:,} queries "
            f"(depth {run.depth:,}) in {seconds:.1f}s."
        ))

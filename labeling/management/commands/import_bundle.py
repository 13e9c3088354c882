"""`manage.py import_bundle PATH --project SLUG [--admin USER] [--query-set NAME]`: import a bundle folder (see docs/bundle-format.md)."""
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.services.bundle_import import BundleImportError, bundle_import


class Command(BaseCommand):
    help = "Import a bundle folder (queries, corpus, pool, qrels, labels, judgments) into a project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="the bundle folder")
        parser.add_argument("--project", required=True, help="project slug (created when missing)")
        parser.add_argument("--all-pairs", action="store_true", help="make the pool every query x passage")
        parser.add_argument("--admin", metavar="USER",
                            help="make this account an admin of the project (a project this command creates has no "
                                 "member otherwise)")
        parser.add_argument("--query-set", metavar="NAME",
                            help="put the bundle's queries whose metadata names no query_set in this query set "
                                 "(human, llm, ...: LVHQ compares two sets)")

    def handle(self, *args, path: Path, project: str, all_pairs: bool, admin: str | None, query_set: str | None,
               **options) -> None:
        started = time.monotonic()
        try:
            report = bundle_import(path=path, project_slug=project, all_pairs=all_pairs, admin=admin,
                                   query_set=query_set)
        except BundleImportError as exc:
            raise CommandError(str(exc)) from None
        seconds = time.monotonic() - started
        if not report.changed:
            self.stdout.write(f"Project {report.project_slug!r} already holds this bundle: nothing changed.")
            return
        verb = "Created" if report.project_created else "Updated"
        written = ", ".join(f"{count:,} {what}" for what, count in report.written.items() if count)
        self.stdout.write(
            self.style.SUCCESS(f"{verb} project {report.project_slug!r} in {seconds:.1f}s: {written or 'no rows'}.")
        )

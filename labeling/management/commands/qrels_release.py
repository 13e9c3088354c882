"""`manage.py qrels_release create|list|export|diff`: freeze a project's qrels under a name, list the releases,
export one (byte-identical forever: TREC, BEIR or JSONL) and diff two (pairs added, removed, grade changed)."""
import json
import os
import tempfile
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.lookup import command_project
from labeling.selectors.degenerate import qrels_warning
from labeling.selectors.export import QrelsFormat, export_source_parse
from labeling.selectors.releases import release_by_name, release_diff, release_lines, releases_of
from labeling.services.releases import release_create


class Command(BaseCommand):
    help = "Freeze, list, export and diff a project's qrels releases."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="freeze the current qrels of a source under a name")
        create.add_argument("--project", required=True)
        create.add_argument("--name", required=True)
        create.add_argument("--by", required=True, help="the project admin freezing them (a username)")
        create.add_argument("--source", default="human", help="human (default), judge:NAME or combined:NAME")
        create.add_argument("--threshold", type=float, help="a judge's P from which a pair is relevant")
        create.add_argument("--description", default="")
        listing = sub.add_parser("list", help="the project's releases, newest first")
        listing.add_argument("--project", required=True)
        listing.add_argument("--json", dest="as_json", action="store_true")
        export = sub.add_parser("export", help="a release as TREC, BEIR or JSONL")
        export.add_argument("--project", required=True)
        export.add_argument("--name", required=True)
        export.add_argument("--format", required=True, choices=list(QrelsFormat))
        export.add_argument("-o", "--output", required=True, help="output file")
        diff = sub.add_parser("diff", help="what changed from release A to release B")
        diff.add_argument("--project", required=True)
        diff.add_argument("a")
        diff.add_argument("b")
        diff.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args, action: str, project: str, **options) -> None:
        found = command_project(project)
        try:
            getattr(self, f"_{action}")(found, **options)
        except DomainError as exc:
            raise CommandError(str(exc)) from None

    def _create(self, project, *, name: str, by: str, source: str, threshold: float | None, description: str,
                **options) -> None:
        user = get_user_model().objects.filter(username=by).first()
        if user is None:
            raise CommandError(f"no user {by!r}")
        made = release_create(project=project, by=user, name=name, source=source, threshold=threshold,
                              description=description)
        self.stdout.write(f"Release {made.name!r} frozen: {made.graded:,} graded pairs ({made.relevant:,} relevant) "
                          f"in {made.queries:,} queries from {made.source}; SHA-256 {made.sha256}")
        warning = qrels_warning(export_source_parse(project=project, source=source, threshold=threshold))
        if warning is not None:
            self.stderr.write(f"Warning: {warning}")

    def _list(self, project, *, as_json: bool, **options) -> None:
        rows = [{"name": r.name, "source": r.source, "threshold": r.threshold, "rule": r.rule, "graded": r.graded,
                 "relevant": r.relevant, "queries": r.queries, "pairs": r.pairs, "sha256": r.sha256,
                 "created_at": r.created_at.isoformat(),
                 "created_by": r.created_by.get_username() if r.created_by else None} for r in releases_of(project)]
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False))
            return
        for row in rows:
            self.stdout.write(f"{row['name']}: {row['source']}, {row['graded']:,} graded ({row['relevant']:,} "
                              f"relevant), {row['queries']:,} queries, frozen {row['created_at']} by "
                              f"{row['created_by'] or '-'}")

    def _export(self, project, *, name: str, format: str, output: str, **options) -> None:
        release = release_by_name(project=project, name=name)
        path = Path(output)
        directory = path.resolve().parent
        if not directory.is_dir():
            raise CommandError(f"{path}: folder {directory} does not exist")
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".part")
        count = 0
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
                for line in release_lines(release, QrelsFormat(format)):
                    stream.write(line)
                    count += 1
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self.stderr.write(f"Exported {count:,} lines of {format} from release {name!r}.")

    def _diff(self, project, *, a: str, b: str, as_json: bool, **options) -> None:
        found = release_diff(release_by_name(project=project, name=a), release_by_name(project=project, name=b))
        if as_json:
            self.stdout.write(json.dumps(found.as_json(), indent=2, ensure_ascii=False))
            return
        self.stdout.write(f"{a} -> {b}: {len(found.added):,} added, {len(found.removed):,} removed, "
                          f"{len(found.changed):,} grade changed")
        for query, counts in found.per_query().items():
            self.stdout.write(f"  {query}: +{counts['added']} -{counts['removed']} ~{counts['changed']}")

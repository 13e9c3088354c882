"""`manage.py export_qrels --project SLUG --format trec|beir|jsonl -o FILE`: stream qrels out of a project."""
import os
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_project
from labeling.models import Project
from labeling.selectors.degenerate import qrels_warning
from labeling.selectors.export import ExportError, ExportSource, QrelsFormat, export_source_parse, qrels_lines


class Command(BaseCommand):
    help = "Export a project's qrels: TREC, BEIR tsv, or JSONL with every label and judgment."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--format", required=True, choices=list(QrelsFormat))
        parser.add_argument("--source", default="human", help="'human' (gold grades, default), 'judge:NAME' or "
                            "'combined:NAME' (the gold grade where there is one, else the judge's)")
        parser.add_argument("--threshold", type=float, help="a judge's P(relevant) from which a pair is relevant")
        parser.add_argument("-o", "--output", required=True, help="output file, or - for standard output")

    def handle(self, *args, project: str, format: str, source: str, threshold: float | None, output: str, **options):
        found = command_project(project)
        qrels_format = QrelsFormat(format)
        try:
            export_source = export_source_parse(project=found, source=source, threshold=threshold)
        except ExportError as exc:
            raise CommandError(str(exc)) from None
        warning = qrels_warning(export_source)
        if warning is not None:
            self.stderr.write(f"Warning: {warning}")
        if output == "-":
            try:
                count = self._write(sys.stdout, found, qrels_format, export_source)
                sys.stdout.flush()
            except BrokenPipeError:
                # The reader stopped early (`| head`): not an error. Point stdout at devnull so the
                # interpreter's final flush does not complain.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return
        else:
            count = self._write_file(Path(output), found, qrels_format, export_source)
        self.stderr.write(f"Exported {count:,} lines of {format} from project {project!r}.")

    def _write_file(self, path: Path, project: Project, format: QrelsFormat, export_source: ExportSource) -> int:
        # Write beside the target and rename at the end: a failed export never leaves a truncated file.
        directory = path.resolve().parent
        if not directory.is_dir():
            raise CommandError(f"{path}: folder {directory} does not exist")
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".part")
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as stream:
                count = self._write(stream, project, format, export_source)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return count

    def _write(self, stream: TextIO, project: Project, format: QrelsFormat, export_source: ExportSource) -> int:
        count = 0
        for line in qrels_lines(project=project, format=format, source=export_source):
            stream.write(line)
            count += 1
        return count
